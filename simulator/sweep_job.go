package simulator

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// A sweep too big for one machine runs as a Kubernetes Indexed Job: one
// completion index per unit (point × seed). Every pod gets the scenario
// and a SweepConfig, runs its unit (SweepConfig.RunUnit) and prints a
// UnitResult; CollectSweep merges them into the Sweep an in-process run
// would have given.

// SweepConfig is what every pod of a sweep Job needs besides the scenario.
type SweepConfig struct {
	Spec    SweepSpec       `json:"spec"`
	Options PortableOptions `json:"options"`
}

// PortableOptions are run Options as JSON: the callbacks (Progress,
// Observe), which a pod cannot receive, are shadowed by nil fields of the
// same name, so every other option, present or future, travels.
type PortableOptions struct {
	Options
	Progress *struct{} `json:"Progress,omitempty"`
	Observe  *struct{} `json:"Observe,omitempty"`
}

// UnitResult is one pod's output.
type UnitResult struct {
	Of   SweepOf   `json:"of"`
	Spec SweepSpec `json:"spec"`
	Run  SweepRun  `json:"run"`
}

// RunUnit resolves sc under the unit's seed and runs unit u.
func (c SweepConfig) RunUnit(sc *Scenario, u int) (*UnitResult, error) {
	if err := c.Spec.Validate(); err != nil {
		return nil, err
	}
	if u < 0 || u >= c.Spec.Units() {
		return nil, fmt.Errorf("completion index %d: the sweep has units 0..%d", u, c.Spec.Units()-1)
	}
	in, err := sc.ResolveSeed(c.Spec.Seeds[u%len(c.Spec.Seeds)])
	if err != nil {
		return nil, err
	}
	r, err := c.Spec.RunUnit(in, c.Options.Options, u)
	if err != nil {
		return nil, err
	}
	// Name, source and job count do not depend on the seed (RunSweep takes
	// them from the first seed's Input).
	return &UnitResult{Of: SweepOf{Scenario: in.Name, Source: in.Source, Jobs: len(in.Jobs)}, Spec: c.Spec, Run: r}, nil
}

// CollectSweep merges the pods' results. They must all come from one
// sweep (the same spec and scenario) and cover every unit once.
func CollectSweep(results []UnitResult) (*Sweep, error) {
	if len(results) == 0 {
		return nil, fmt.Errorf("no unit results")
	}
	spec0, err := json.Marshal(results[0].Spec)
	if err != nil {
		return nil, err
	}
	runs := make([]SweepRun, 0, len(results))
	for _, r := range results {
		b, err := json.Marshal(r.Spec)
		if err != nil {
			return nil, err
		}
		if !bytes.Equal(b, spec0) || r.Of != results[0].Of {
			return nil, fmt.Errorf("unit %d comes from another sweep (%s, %s) than unit %d (%s, %s)",
				r.Run.Unit, r.Of.Scenario, b, results[0].Run.Unit, results[0].Of.Scenario, spec0)
		}
		runs = append(runs, r.Run)
	}
	return NewSweep(results[0].Of, results[0].Spec, runs)
}
