package main

import (
	"github.com/spf13/cobra"

	"github.com/progress-planner/planner/pkg/admission"
	"github.com/progress-planner/planner/simulator"
)

// admissionBacktestFlags: planner simulate --admission-backtest scores
// the admission estimates (explain, the live page) on the simulated
// cluster instead of comparing policies.
type admissionBacktestFlags struct {
	enabled bool
	samples int
	runs    int
}

func (a *admissionBacktestFlags) add(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.BoolVar(&a.enabled, "admission-backtest", false, "score the admission estimates of explain and the live page: capture the cluster when sampled jobs arrive, estimate, and compare with how long they waited (planner policy)")
	fl.IntVar(&a.samples, "admission-samples", 200, "with --admission-backtest: arrivals captured, evenly over the run")
	fl.IntVar(&a.runs, "admission-runs", admission.DefaultRuns, "with --admission-backtest: simulated futures per estimate")
}

func runAdmissionBacktest(cmd *cobra.Command, in *simulator.Input, opt simulator.Options, a admissionBacktestFlags) error {
	if a.samples < 1 || a.runs < 1 {
		return usageErrorf("--admission-samples %d and --admission-runs %d: want positive numbers", a.samples, a.runs)
	}
	opt.Progress = nil
	est := func(sc *simulator.Scenario, jobs []string) ([]simulator.AdmissionInterval, error) {
		es, err := admission.Estimates(sc, jobs, admission.Settings{Runs: a.runs, Policy: simulator.PolicyPlanner, Options: opt})
		if err != nil {
			return nil, err
		}
		out := make([]simulator.AdmissionInterval, len(es))
		for i, e := range es {
			out[i] = simulator.AdmissionInterval{P10: e.P10, Median: e.Median, P90: e.P90}
		}
		return out, nil
	}
	cal := func(past []simulator.AdmissionOutcome, horizon float64, iv simulator.AdmissionInterval) (float64, float64, int) {
		c := admission.CalibrateWithin(past, horizon)
		lo, hi := c.Apply(iv.P10, iv.Median, iv.P90)
		return lo, hi, c.Outcomes
	}
	r, err := simulator.AdmissionBacktest(in, opt, simulator.AdmissionBacktestOptions{Samples: a.samples}, est, cal)
	if err != nil {
		return err
	}
	return writeTableOrJSON(cmd, r)
}
