package main

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/progress-planner/planner/pkg/admission"
	"github.com/progress-planner/planner/pkg/clustersnap"
	"github.com/progress-planner/planner/pkg/clusterview"
	"github.com/progress-planner/planner/pkg/report"
	"github.com/progress-planner/planner/simulator"
)

// admissionFlags: explain's estimate of when a waiting job is admitted,
// from forward simulations of the cluster it has just read.
type admissionFlags struct {
	runs            int
	policy          string
	defaultDuration string
	horizon         string
}

func (f *admissionFlags) add(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.IntVar(&f.runs, "admission-runs", admission.DefaultRuns, "for a waiting job: simulated futures behind the admission estimate (0: no estimate)")
	fl.StringVar(&f.policy, "admission-policy", simulator.PolicyPlanner, "the policy the futures run: planner (the planner enforces) or kueue (it only advises)")
	fl.StringVar(&f.defaultDuration, "default-duration", "1h", "admission estimate: run time of a job whose forecast gives no ETA")
	fl.StringVar(&f.horizon, "arrivals-horizon", "24h", "admission estimate: the Workloads created in this window before now arrive again, as far apart (0: no new arrivals)")
}

// estimate fills e.Admission for a waiting Workload: the cluster snapshot
// as a simulator scenario (the one `planner simulate --from-cluster`
// builds), run f.runs times.
func (f *admissionFlags) estimate(snap *clusterview.Snapshot, gpu string, now time.Time, e *report.Explanation) error {
	if e.State != report.Waiting || f.runs == 0 {
		return nil
	}
	if f.policy != simulator.PolicyPlanner && f.policy != simulator.PolicyKueue {
		return usageErrorf("--admission-policy %q: want planner or kueue", f.policy)
	}
	dd, err := simulator.ParseSeconds(f.defaultDuration)
	if err != nil || dd <= 0 {
		return usageErrorf("--default-duration %q: want a duration > 0", f.defaultDuration)
	}
	h, err := simulator.ParseSeconds(f.horizon)
	if err != nil || h < 0 {
		return usageErrorf("--arrivals-horizon %q: want a duration >= 0", f.horizon)
	}
	e.Admission = &report.AdmissionEstimate{Runs: f.runs, Policy: f.policy}
	sc, _, err := clustersnap.Scenario(snap, clustersnap.Options{GPUResource: gpuName(gpu), Now: now, DefaultDuration: dd, Horizon: h})
	if err != nil {
		return fmt.Errorf("admission estimate: %w", err)
	}
	job := simulatedName(e)
	if !slices.ContainsFunc(sc.Jobs, func(j simulator.JobSpec) bool { return j.Name == job }) {
		e.Admission.Note = "no estimate: the Workload is not in the simulated cluster (no " + gpu + " request, or its ClusterQueue has no " + gpu + " quota)"
		return nil
	}
	es, err := admission.Estimates(sc, []string{job}, admission.Settings{Runs: f.runs, Policy: f.policy, Options: simulator.DefaultOptions()})
	if err != nil {
		return err
	}
	fillAdmission(e.Admission, es[0])
	return nil
}

// simulatedName is the job's name in a clustersnap scenario: NS/JOB for a
// Workload owned by a job, NS/WORKLOAD otherwise.
func simulatedName(e *report.Explanation) string {
	ns, wl, _ := strings.Cut(e.Workload, "/")
	if e.TrainJob != "" {
		return ns + "/" + e.TrainJob
	}
	return ns + "/" + wl
}

// fillAdmission copies an estimate into the explanation's model: +Inf
// (never within the simulated future) becomes nil, causes most frequent
// first.
func fillAdmission(a *report.AdmissionEstimate, est admission.Estimate) {
	finite := func(x float64) *float64 {
		if math.IsInf(x, 0) || math.IsNaN(x) {
			return nil
		}
		return &x
	}
	a.Admitted, a.P10, a.Median, a.P90 = est.Admitted, finite(est.P10), finite(est.Median), finite(est.P90)
	for c, n := range est.Causes {
		a.Causes = append(a.Causes, report.CauseCount{Cause: c, Runs: n})
	}
	slices.SortFunc(a.Causes, func(x, y report.CauseCount) int {
		return cmp.Or(cmp.Compare(y.Runs, x.Runs), cmp.Compare(x.Cause, y.Cause))
	})
}
