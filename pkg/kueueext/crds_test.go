package kueueext

import (
	"errors"
	"slices"
	"testing"

	"github.com/go-logr/logr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	discoveryfake "k8s.io/client-go/discovery/fake"
	clienttesting "k8s.io/client-go/testing"

	"github.com/progress-planner/planner/pkg/jobframework"
)

func fakeDiscovery(groups map[string][]string) *discoveryfake.FakeDiscovery {
	d := &discoveryfake.FakeDiscovery{Fake: &clienttesting.Fake{}}
	for gv, names := range groups {
		l := &metav1.APIResourceList{GroupVersion: gv}
		for _, n := range names {
			l.APIResources = append(l.APIResources, metav1.APIResource{Name: n})
		}
		d.Resources = append(d.Resources, l)
	}
	return d
}

var (
	trainerAPI = map[string][]string{"trainer.kubeflow.org/v1alpha1": {"trainjobs", "trainjobs/status", "trainingruntimes"}}
	kueueAPI   = map[string][]string{"kueue.x-k8s.io/v1beta2": {"workloads", "workloads/status", "localqueues", "clusterqueues"}}
	plannerAPI = map[string][]string{"planner.progress.io/v1alpha1": {"progressforecasts", "progressforecasts/status"}}
)

func merge(ms ...map[string][]string) map[string][]string {
	out := map[string][]string{}
	for _, m := range ms {
		for k, v := range m {
			out[k] = v
		}
	}
	return out
}

func TestProbeAPIs(t *testing.T) {
	tests := []struct {
		name   string
		groups map[string][]string
		want   APIStatus
	}{
		{"nothing", nil, APIStatus{}},
		{"all", merge(trainerAPI, kueueAPI, plannerAPI), APIStatus{TrainJobs: true, Workloads: true, ProgressForecasts: true}},
		{"no kueue", merge(trainerAPI, plannerAPI), APIStatus{TrainJobs: true, ProgressForecasts: true}},
		{"kueue without localqueues", merge(trainerAPI, plannerAPI, map[string][]string{"kueue.x-k8s.io/v1beta2": {"workloads"}}),
			APIStatus{TrainJobs: true, ProgressForecasts: true}},
		{"old kueue version only", merge(trainerAPI, plannerAPI, map[string][]string{"kueue.x-k8s.io/v1beta1": {"workloads", "localqueues"}}),
			APIStatus{TrainJobs: true, ProgressForecasts: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ProbeAPIs(fakeDiscovery(tt.groups))
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
			if got.Trackable() != (tt.want.TrainJobs && tt.want.ProgressForecasts) {
				t.Error("Trackable")
			}
		})
	}
	if m := (APIStatus{TrainJobs: true}).Missing(); len(m) != 2 {
		t.Errorf("Missing %v", m)
	}
}

// The watcher keeps running while APIs are missing and reports each change
// once: the controller starts when TrainJobs and ProgressForecasts appear,
// the Workload watch when Kueue does.
func TestAPIWatcher(t *testing.T) {
	groups := merge(plannerAPI)
	var probeErr error
	var changes []APIStatus
	w := &apiWatcher{
		probe: func() (APIStatus, error) {
			if probeErr != nil {
				return APIStatus{}, probeErr
			}
			return ProbeAPIs(fakeDiscovery(groups))
		},
		onChange: func(s APIStatus) error { changes = append(changes, s); return nil },
		log:      logr.Discard(),
	}
	w.check()
	w.check()
	groups = merge(plannerAPI, trainerAPI)
	w.check()
	probeErr = errors.New("apiserver away")
	w.check()
	probeErr = nil
	groups = merge(plannerAPI, trainerAPI, kueueAPI)
	w.check()
	want := []APIStatus{
		{ProgressForecasts: true},
		{ProgressForecasts: true, TrainJobs: true},
		{ProgressForecasts: true, TrainJobs: true, Workloads: true},
	}
	if len(changes) != len(want) {
		t.Fatalf("changes %+v, want %+v", changes, want)
	}
	for i := range want {
		if changes[i] != want[i] {
			t.Errorf("change %d: %+v, want %+v", i, changes[i], want[i])
		}
	}
	if s, ok := w.Status(); !ok || s != want[2] {
		t.Errorf("Status %+v %v", s, ok)
	}
	// A failed onChange is retried at the next check.
	fail := true
	w.onChange = func(APIStatus) error {
		if fail {
			fail = false
			return errors.New("boom")
		}
		return nil
	}
	groups = merge(plannerAPI, trainerAPI)
	w.check()
	called := false
	w.onChange = func(APIStatus) error { called = true; return nil }
	w.check()
	if !called {
		t.Error("onChange not retried after an error")
	}
}

// Each report-fed kind is probed on its own group-version: a cluster with
// PyTorchJobs and no JobSets runs the PyTorchJob controller only.
func TestProbeAPIsJobKinds(t *testing.T) {
	got, err := ProbeAPIs(fakeDiscovery(merge(trainerAPI, plannerAPI, map[string][]string{
		"batch/v1": {"jobs", "jobs/status"}, "kubeflow.org/v1": {"pytorchjobs", "tfjobs"},
	})))
	if err != nil {
		t.Fatal(err)
	}
	for res, want := range map[string]bool{"trainjobs": true, "jobs": true, "jobsets": false, "pytorchjobs": true, "cronjobs": false} {
		if got.Serves(res) != want {
			t.Errorf("Serves(%s) = %v, want %v", res, !want, want)
		}
	}
}

// The manager's scheme knows every built kind's object: a kind missing
// from it would fail its controller's start.
func TestSchemeHasEveryBuiltKind(t *testing.T) {
	s := NewScheme()
	for _, k := range jobframework.Built(jobframework.NewMemorySource()) {
		gvks, _, err := s.ObjectKinds(k.NewObject())
		if err != nil || !slices.Contains(gvks, k.GVK()) {
			t.Errorf("%s: scheme kinds %v (%v)", k.GVK(), gvks, err)
		}
	}
}
