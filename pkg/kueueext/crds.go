package kueueext

import (
	"context"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/discovery"

	"github.com/progress-planner/planner/pkg/jobframework"
)

// APIStatus says which of the APIs the planner needs are served.
type APIStatus struct {
	// TrainJobs: trainer.kubeflow.org/v1alpha1 trainjobs (required to
	// track anything).
	TrainJobs bool
	// Workloads: kueue.x-k8s.io/v1beta2 workloads and localqueues (without
	// them the planner forecasts but cannot act).
	Workloads bool
	// ProgressForecasts: the planner's own CRD (required).
	ProgressForecasts bool
	// Kinds: the other built job kinds served (batch/v1 jobs, JobSets,
	// the Training Operator kinds: jobframework.Resources), one bit each
	// in that table's order (a set that stays comparable). Only tracked
	// when the planner has a report source (Options.Reports).
	Kinds uint64
}

// Serves reports whether the built job kind of this resource is served
// (a kind not probed is not).
func (s APIStatus) Serves(resource string) bool {
	if resource == trainJobsResource {
		return s.TrainJobs
	}
	for i, r := range jobframework.Resources() {
		if r.Resource == resource {
			return s.Kinds&(1<<i) != 0
		}
	}
	return false
}

const trainJobsResource = "trainjobs"

// Missing names the APIs that are not served.
func (s APIStatus) Missing() []string {
	var out []string
	if !s.TrainJobs {
		out = append(out, "trainer.kubeflow.org/v1alpha1 trainjobs (Kubeflow Trainer v2)")
	}
	if !s.Workloads {
		out = append(out, "kueue.x-k8s.io/v1beta2 workloads and localqueues (Kueue)")
	}
	if !s.ProgressForecasts {
		out = append(out, "planner.progress.io/v1alpha1 progressforecasts (config/crd)")
	}
	return out
}

// Trackable reports whether the controller can run: TrainJobs and
// ProgressForecasts are served.
func (s APIStatus) Trackable() bool { return s.TrainJobs && s.ProgressForecasts }

// ProbeAPIs asks the API server's discovery which of the planner's APIs are
// served. A group-version that is not served is not an error.
func ProbeAPIs(d discovery.DiscoveryInterface) (APIStatus, error) {
	// One discovery request per group-version: the Training Operator's
	// five kinds share kubeflow.org/v1.
	lists := map[string]map[string]bool{}
	served := func(gv string, resources ...string) (bool, error) {
		have, asked := lists[gv]
		if !asked {
			list, err := d.ServerResourcesForGroupVersion(gv)
			if err != nil && !apierrors.IsNotFound(err) {
				return false, err
			}
			have = map[string]bool{}
			if err == nil {
				for _, r := range list.APIResources {
					have[r.Name] = true
				}
			}
			lists[gv] = have
		}
		for _, r := range resources {
			if !have[r] {
				return false, nil
			}
		}
		return true, nil
	}
	var s APIStatus
	var err error
	if s.TrainJobs, err = served("trainer.kubeflow.org/v1alpha1", "trainjobs", "trainjobs/status"); err != nil {
		return s, err
	}
	if s.Workloads, err = served("kueue.x-k8s.io/v1beta2", "workloads", "localqueues"); err != nil {
		return s, err
	}
	if s.ProgressForecasts, err = served("planner.progress.io/v1alpha1", "progressforecasts", "progressforecasts/status"); err != nil {
		return s, err
	}
	for i, r := range jobframework.Resources() {
		if r.Resource == trainJobsResource {
			continue
		}
		ok, err := served(r.GroupVersion().String(), r.Resource)
		if err != nil {
			return s, err
		}
		if ok {
			s.Kinds |= 1 << i
		}
	}
	return s, nil
}

// apiWatcher probes the APIs at start and every interval, logs and
// reports (planner_api_available) what is missing, and calls onChange
// whenever the set changes, so that watches start when CRDs appear. It
// runs on every replica (not only the leader).
type apiWatcher struct {
	probe    func() (APIStatus, error)
	interval time.Duration
	onChange func(APIStatus) error
	log      logr.Logger

	mu     sync.Mutex
	cur    APIStatus
	probed bool
}

func (w *apiWatcher) NeedLeaderElection() bool { return false }

// Start implements manager.Runnable.
func (w *apiWatcher) Start(ctx context.Context) error {
	t := time.NewTicker(w.interval)
	defer t.Stop()
	for {
		w.check()
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// Status is the last probe's result (ok false before the first probe).
func (w *apiWatcher) Status() (s APIStatus, ok bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.cur, w.probed
}

func (w *apiWatcher) check() {
	s, err := w.probe()
	if err != nil {
		w.log.Error(err, "API discovery failed; retrying", "interval", w.interval)
		return
	}
	available := map[string]bool{"workloads": s.Workloads, "progressforecasts": s.ProgressForecasts}
	for _, r := range jobframework.Resources() { // trainjobs among them
		available[r.Resource] = s.Serves(r.Resource)
	}
	for label, ok := range available {
		v := 0.0
		if ok {
			v = 1
		}
		metricAPIAvailable.WithLabelValues(label).Set(v)
	}
	w.mu.Lock()
	changed := !w.probed || s != w.cur
	w.cur, w.probed = s, true
	w.mu.Unlock()
	if !changed {
		return
	}
	switch missing := s.Missing(); {
	case !s.Trackable():
		w.log.Error(nil, "required APIs are not served; the planner keeps running and starts when they appear",
			"missing", strings.Join(missing, "; "), "checkEvery", w.interval)
	case len(missing) > 0:
		w.log.Info("Kueue is not installed: forecasting only, no boosts until it appears",
			"missing", strings.Join(missing, "; "), "checkEvery", w.interval)
	default:
		w.log.Info("all APIs served: TrainJobs, Kueue Workloads, ProgressForecasts")
	}
	if err := w.onChange(s); err != nil {
		w.log.Error(err, "starting watches failed; retrying")
		w.mu.Lock()
		w.probed = false
		w.mu.Unlock()
	}
}
