package admission

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/progress-planner/planner/pkg/clustersnap"
	"github.com/progress-planner/planner/pkg/clusterview"
	"github.com/progress-planner/planner/pkg/kueueext"
	"github.com/progress-planner/planner/pkg/report"
)

// Estimator estimates a cluster's waiting Workloads again and again (the
// live page at every rebuild, the controller's publisher on its
// interval), each new range calibrated on how its own earlier estimates
// turned out (its Tracker).
type Estimator struct {
	// Settings of every estimate (Settings.Calibration is the tracker's).
	Settings Settings
	Tracker  Tracker
}

// Estimated is one pass of an Estimator: the estimates (keyed as
// ForWaiting keys them), the waiting Workloads' ClusterQueues (keyed the
// same way), the earlier estimates this pass saw admitted, and the
// calibration the new ranges carry.
type Estimated struct {
	Estimates   map[string]*report.AdmissionEstimate
	Queues      map[string]string
	Scored      Scored
	Calibration Calibration
}

// Estimate estimates snap's waiting Workloads as of o.Now and records the
// new estimates and the admissions since in the tracker.
func (e *Estimator) Estimate(snap *clusterview.Snapshot, o clustersnap.Options) (Estimated, error) {
	set := e.Settings
	set.Calibration = e.Tracker.Calibration(o.Now)
	est, err := ForWaiting(snap, o, set)
	if err != nil {
		return Estimated{Calibration: set.Calibration}, err
	}
	viewOf := snap.ViewOf(o.GPUResource)
	views := make([]report.WorkloadView, len(snap.Workloads))
	queues := map[string]string{}
	for i := range snap.Workloads {
		views[i] = viewOf(&snap.Workloads[i])
		if views[i].State == report.Waiting {
			for _, k := range EstimateKeys(views[i]) {
				queues[k] = views[i].ClusterQueue
			}
		}
	}
	return Estimated{Estimates: est, Queues: queues, Scored: e.Tracker.Observe(o.Now, views, est), Calibration: set.Calibration}, nil
}

// The cluster defaults of the estimates the planner makes by itself (the
// live page, the published ones), as explain's flags default them: a job
// without an ETA runs 1 h, the last 24 h of Workloads arrive again.
const (
	DefaultRunSeconds      = 3600
	DefaultArrivalsSeconds = 24 * 3600
)

// PlannerOptions are the scenario options of the estimates the planner
// makes by itself as of now: the defaults above, and, when latest is set,
// the controller's latest forecasts instead of refits
// (clustersnap.Options.Latest).
func PlannerOptions(gpu corev1.ResourceName, now time.Time, latest func() map[types.NamespacedName]kueueext.LatestForecast) clustersnap.Options {
	o := clustersnap.Options{GPUResource: gpu, Now: now, DefaultDuration: DefaultRunSeconds, Horizon: DefaultArrivalsSeconds}
	if latest != nil {
		o.Latest = latest()
	}
	return o
}
