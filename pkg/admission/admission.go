// Package admission estimates when waiting jobs will be admitted: it runs
// the simulator forward from a cluster scenario (pkg/clustersnap) in
// several futures and reads each job's admission time off every run.
//
// The futures differ in the run times of the jobs ahead: a job whose
// forecast has an ETA interval draws its run time from it in each future
// (simulator.JobSpec.DurationLo/Hi), so the spread of the admission times
// is the spread the forecasts carry, not a guess added on top. Queue
// order, quotas, cohort borrowing, preemption and the planner's own
// yields and stops are the simulator's, the same code as
// `planner simulate`. The estimate is pure: a scenario and settings in,
// the same estimates out.
package admission

import (
	"fmt"
	"math"

	"github.com/progress-planner/planner/internal/stats"
	"github.com/progress-planner/planner/simulator"
)

// Settings of an estimate.
type Settings struct {
	// Runs is the number of futures (seeds 1..Runs); 20 when 0.
	Runs int
	// Policy is the simulator policy that stands for the cluster's
	// behaviour: simulator.PolicyPlanner where the planner enforces,
	// simulator.PolicyKueue where it only advises.
	Policy string
	// Options are the simulator's run options (the scenario's own are
	// applied on top, as `planner simulate` does).
	Options simulator.Options
	// Calibration is applied to the intervals ForWaiting returns (the
	// zero value: none; a Tracker's, where there is one).
	Calibration Calibration
}

// defaultPolicy is the policy when Settings.Policy is empty.
const defaultPolicy = simulator.PolicyPlanner

// DefaultRuns is the number of futures when Settings.Runs is 0: enough for
// a 10 %–90 % interval to move by at most one run's value between
// neighbouring quantiles, and each run of a cluster snapshot takes
// milliseconds.
const DefaultRuns = 20

// Estimate is one waiting job's admission estimate. Times are seconds
// after the snapshot.
type Estimate struct {
	Job string `json:"job"`
	// Runs simulated and, of those, Admitted: runs that admitted the job
	// before their end (every job done or the scenario's horizon).
	Runs     int `json:"runs"`
	Admitted int `json:"admitted"`
	// P10, Median and P90 of the admission time over all runs, a run that
	// never admitted it counting as +Inf: a quantile past the admitted
	// share is +Inf ("not within the simulated horizon").
	P10    float64 `json:"p10Seconds"`
	Median float64 `json:"medianSeconds"`
	P90    float64 `json:"p90Seconds"`
	// Causes counts, over the runs that admitted the job, what freed the
	// GPUs it was admitted into (Cause* names).
	Causes map[string]int `json:"causes,omitempty"`
}

// The causes of an admission, from the run's event log
// (simulator.AdmissionCause).
const (
	CauseFree     = simulator.CauseFree
	CauseFinished = simulator.CauseFinished
	CauseStopped  = simulator.CauseStopped
	CauseYield    = simulator.CauseYield
	CausePreempts = simulator.CausePreempts
)

// Estimates simulates sc forward s.Runs times and returns the estimate
// of each job named in jobs (simulator job names), in that order.
func Estimates(sc *simulator.Scenario, jobs []string, s Settings) ([]Estimate, error) {
	runs := s.Runs
	if runs == 0 {
		runs = DefaultRuns
	}
	if runs < 1 || runs > 1000 {
		return nil, fmt.Errorf("admission: %d runs: want 1 to 1000", runs)
	}
	times := make([][]float64, len(jobs))
	causes := make([]map[string]int, len(jobs))
	for i := range causes {
		causes[i] = map[string]int{}
	}
	for k := 1; k <= runs; k++ {
		res, err := runFuture(sc, uint64(k), jobs, s)
		if err != nil {
			return nil, err
		}
		index := make(map[string]int, len(res.Jobs))
		for i, o := range res.Jobs {
			index[o.Name] = i
		}
		for i, name := range jobs {
			t, cause, err := admissionOf(res, index, name)
			if err != nil {
				return nil, err
			}
			times[i] = append(times[i], t)
			if cause != "" {
				causes[i][cause]++
			}
		}
	}
	out := make([]Estimate, len(jobs))
	for i, name := range jobs {
		e := Estimate{Job: name, Runs: runs, Causes: causes[i],
			P10: stats.Quantile(times[i], 0.1), Median: stats.Quantile(times[i], 0.5), P90: stats.Quantile(times[i], 0.9)}
		for _, t := range times[i] {
			if !math.IsInf(t, 1) {
				e.Admitted++
			}
		}
		out[i] = e
	}
	return out, nil
}

// runFuture runs one future: the scenario under seed, with its event log,
// until the jobs estimated are all admitted (or to its end).
func runFuture(sc *simulator.Scenario, seed uint64, jobs []string, s Settings) (*simulator.Result, error) {
	c := *sc
	c.Seed = seed
	in, err := c.Resolve()
	if err != nil {
		return nil, fmt.Errorf("admission: %w", err)
	}
	opt, err := c.Options(s.Options)
	if err != nil {
		return nil, fmt.Errorf("admission: %w", err)
	}
	opt.RecordEvents, opt.Progress, opt.Observe, opt.StopOnceAdmitted = true, nil, nil, jobs
	pol := s.Policy
	if pol == "" {
		pol = defaultPolicy
	}
	res, err := simulator.Run(in, pol, opt)
	if err != nil {
		return nil, fmt.Errorf("admission: run %d: %w", seed, err)
	}
	return res, nil
}

// admissionOf is job's first admission in res, relative to the snapshot
// (+Inf when never), and what freed its GPUs.
func admissionOf(res *simulator.Result, index map[string]int, job string) (float64, string, error) {
	i, ok := index[job]
	if !ok {
		return 0, "", fmt.Errorf("admission: no job %q in the scenario", job)
	}
	o := res.Jobs[i]
	if math.IsNaN(o.FirstAdmit) {
		return math.Inf(1), "", nil
	}
	return o.FirstAdmit, simulator.AdmissionCause(res.Records, job, o.Queue, o.Arrival, o.FirstAdmit), nil
}
