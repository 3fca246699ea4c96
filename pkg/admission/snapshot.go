package admission

import (
	"cmp"
	"math"
	"slices"

	"github.com/progress-planner/planner/pkg/clustersnap"
	"github.com/progress-planner/planner/pkg/clusterview"
	"github.com/progress-planner/planner/pkg/report"
)

// ForWaiting estimates the admission of every waiting Workload of snap in
// one set of futures (the runs cost the same for one job or all). The
// result is keyed by NAMESPACE/NAME of both the Workload and the job that
// owns it, as explain and the report name them. A waiting Workload the
// scenario leaves out (no GPUs, an unknown queue) gets a Note instead.
func ForWaiting(snap *clusterview.Snapshot, o clustersnap.Options, s Settings) (map[string]*report.AdmissionEstimate, error) {
	out := map[string]*report.AdmissionEstimate{}
	viewOf := snap.ViewOf(o.GPUResource)
	var waiting []report.WorkloadView
	for i := range snap.Workloads {
		if v := viewOf(&snap.Workloads[i]); v.State == report.Waiting {
			waiting = append(waiting, v)
		}
	}
	if len(waiting) == 0 {
		// Nothing to estimate: the scenario (a forecast refit per running
		// job with a history) is not built.
		return out, nil
	}
	sc, _, err := clustersnap.Scenario(snap, o)
	if err != nil {
		return nil, err
	}
	inScenario := map[string]bool{}
	for _, j := range sc.Jobs {
		inScenario[j.Name] = true
	}
	var names []string
	keys := map[string][]string{} // simulated name → the keys it answers
	for _, v := range waiting {
		name := clustersnap.JobName(v)
		k := EstimateKeys(v)
		if !inScenario[name] {
			for _, key := range k {
				out[key] = &report.AdmissionEstimate{Note: "no estimate: the Workload is not in the simulated cluster (no " + string(o.GPUResource) + " request, or its ClusterQueue has no " + string(o.GPUResource) + " quota)"}
			}
			continue
		}
		if _, dup := keys[name]; !dup {
			names = append(names, name)
		}
		keys[name] = append(keys[name], k...)
	}
	if len(names) == 0 {
		return out, nil
	}
	es, err := Estimates(sc, names, s)
	if err != nil {
		return nil, err
	}
	pol := s.Policy
	if pol == "" {
		pol = defaultPolicy
	}
	for _, e := range es {
		a := reportEstimate(e, pol, s.Calibration)
		for _, key := range keys[e.Job] {
			out[key] = a
		}
	}
	return out, nil
}

// reportEstimate is e in the report's model: +Inf (not admitted within the
// simulated future) becomes nil, the range calibrated by c, causes most
// frequent first.
func reportEstimate(e Estimate, policy string, c Calibration) *report.AdmissionEstimate {
	finite := func(x float64) *float64 {
		if math.IsInf(x, 0) || math.IsNaN(x) {
			return nil
		}
		return &x
	}
	lo, hi := c.Apply(e.P10, e.Median, e.P90)
	a := &report.AdmissionEstimate{Runs: e.Runs, Admitted: e.Admitted, Policy: policy,
		P10: finite(lo), Median: finite(e.Median), P90: finite(hi),
		FuturesP10: finite(e.P10), FuturesP90: finite(e.P90), CalibratedOn: c.Outcomes}
	for c, n := range e.Causes {
		a.Causes = append(a.Causes, report.CauseCount{Cause: c, Runs: n})
	}
	slices.SortFunc(a.Causes, func(x, y report.CauseCount) int {
		return cmp.Or(cmp.Compare(y.Runs, x.Runs), cmp.Compare(x.Cause, y.Cause))
	})
	return a
}

// EstimateKeys are the keys a Workload's estimate is found under:
// NAMESPACE/NAME of the Workload and, when a job owns it, of the job.
func EstimateKeys(v report.WorkloadView) []string {
	if v.Job != "" {
		return []string{v.Key(), v.Namespace + "/" + v.Job}
	}
	return []string{v.Key()}
}
