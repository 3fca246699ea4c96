package progress

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Direction says whether a smaller or a larger objective value is better.
type Direction string

const (
	Minimize Direction = "minimize"
	Maximize Direction = "maximize"
)

// Objective names the metric a job optimizes, its direction and an optional
// quality target (e.g. MLPerf's stop criterion).
type Objective struct {
	Metric    string    `json:"metric"`
	Direction Direction `json:"direction"`
	Target    *float64  `json:"target,omitempty"`
}

// Sign maps the objective so that smaller is always better: +1 for
// Minimize, -1 for Maximize.
func (o Objective) Sign() float64 {
	if o.Direction == Maximize {
		return -1
	}
	return 1
}

// Validate reports a malformed objective.
func (o Objective) Validate() error {
	if strings.TrimSpace(o.Metric) == "" {
		return fmt.Errorf("objective: metric name is empty")
	}
	if o.Direction != Minimize && o.Direction != Maximize {
		return fmt.Errorf("objective %q: direction %q is neither %q nor %q", o.Metric, o.Direction, Minimize, Maximize)
	}
	if o.Target != nil && (math.IsNaN(*o.Target) || math.IsInf(*o.Target, 0)) {
		return fmt.Errorf("objective %q: target is not finite", o.Metric)
	}
	return nil
}

// String renders the objective in the form ParseObjective accepts.
func (o Objective) String() string {
	s := o.Metric + "," + string(o.Direction)
	if o.Target != nil {
		s += ",target=" + strconv.FormatFloat(*o.Target, 'g', -1, 64)
	}
	return s
}

// ParseObjective parses "METRIC[,minimize|maximize][,target=X]", the form
// used by the CLI flag and the TrainJob annotation. The direction defaults
// to minimize.
func ParseObjective(s string) (Objective, error) {
	parts := strings.Split(s, ",")
	o := Objective{Metric: strings.TrimSpace(parts[0]), Direction: Minimize}
	for _, p := range parts[1:] {
		p = strings.TrimSpace(p)
		switch {
		case p == string(Minimize) || p == string(Maximize):
			o.Direction = Direction(p)
		case strings.HasPrefix(p, "target="):
			v, err := strconv.ParseFloat(strings.TrimPrefix(p, "target="), 64)
			if err != nil {
				return Objective{}, fmt.Errorf("objective %q: target: %w", s, err)
			}
			o.Target = &v
		default:
			return Objective{}, fmt.Errorf("objective %q: unknown part %q (want minimize, maximize or target=X)", s, p)
		}
	}
	if err := o.Validate(); err != nil {
		return Objective{}, err
	}
	return o, nil
}

// DefaultObjective is eval_loss when the job reports it, else loss, both
// minimized; ok is false when neither is reported.
func DefaultObjective(h *History) (Objective, bool) {
	for _, m := range []string{"eval_loss", "loss"} {
		if h.HasMetric(m) {
			return Objective{Metric: m, Direction: Minimize}, true
		}
	}
	return Objective{}, false
}
