package main

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/progress-planner/planner/pkg/admission"
	"github.com/progress-planner/planner/pkg/admissionstatus"
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

// publishedCalibrationMaxAge: a published calibration older than this is
// not used (the longest admissionEstimates.interval).
const publishedCalibrationMaxAge = time.Hour

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
	// explain keeps no earlier estimates: the range is calibrated as the
	// planner's own published estimates are, when it publishes them.
	cal := admissionstatus.PublishedCalibration(snap.Forecasts, now, publishedCalibrationMaxAge)
	est, err := admission.ForWaiting(snap, clustersnap.Options{GPUResource: gpuName(gpu), Now: now, DefaultDuration: dd, Horizon: h},
		admission.Settings{Runs: f.runs, Policy: f.policy, Options: simulator.DefaultOptions(), Calibration: cal})
	if err != nil {
		return fmt.Errorf("admission estimate: %w", err)
	}
	e.Admission = est[e.Workload]
	return nil
}
