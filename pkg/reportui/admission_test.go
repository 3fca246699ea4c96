package reportui

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/progress-planner/planner/pkg/admission"
	"github.com/progress-planner/planner/pkg/kueueext"
	"github.com/progress-planner/planner/pkg/report"
	"github.com/progress-planner/planner/simulator"
)

// TestLivePageCalibratesAdmissions: the page keeps each waiting
// Workload's first estimate; once ten of them are known misses (still
// waiting past their P90, then seen admitted), a new waiting job's range
// is calibrated on them (and says so), with the futures' own range kept
// beside it; estimates past the 24 h horizon are forgotten.
func TestLivePageCalibratesAdmissions(t *testing.T) {
	const gpu = "nvidia.com/gpu"
	one := resource.MustParse("1")
	cq := &kueue.ClusterQueue{ObjectMeta: metav1.ObjectMeta{Name: "cq"}, Spec: kueue.ClusterQueueSpec{
		ResourceGroups: []kueue.ResourceGroup{{CoveredResources: []corev1.ResourceName{gpu}, Flavors: []kueue.FlavorQuotas{{Name: "f",
			Resources: []kueue.ResourceQuota{{Name: gpu, NominalQuota: resource.MustParse("11")}}}}}}}}
	lq := &kueue.LocalQueue{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "lq"}, Spec: kueue.LocalQueueSpec{ClusterQueue: "cq"}}
	t0 := time.Unix(1_700_000_000, 0)
	workload := func(name string, created time.Time) *kueue.Workload {
		return &kueue.Workload{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: name, CreationTimestamp: metav1.NewTime(created)},
			Spec: kueue.WorkloadSpec{QueueName: "lq", PodSets: []kueue.PodSet{{Name: "main", Count: 1, Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{gpu: one}}}}}}}}}}
	}
	admit := func(wl *kueue.Workload, at time.Time) {
		wl.Status = kueue.WorkloadStatus{Admission: &kueue.Admission{ClusterQueue: "cq"}, Conditions: []metav1.Condition{
			{Type: kueue.WorkloadQuotaReserved, Status: metav1.ConditionTrue, Reason: "x", LastTransitionTime: metav1.NewTime(at)},
			{Type: kueue.WorkloadAdmitted, Status: metav1.ConditionTrue, Reason: "x", LastTransitionTime: metav1.NewTime(at)}}}
	}
	run := workload("run", t0)
	admit(run, t0)
	objs := []client.Object{cq, lq, run}
	var waiting []*kueue.Workload
	for i := range admission.MinOutcomes {
		w := workload(fmt.Sprintf("w%d", i), t0.Add(time.Duration(i+1)*time.Second))
		waiting, objs = append(waiting, w), append(objs, w)
	}
	c := fake.NewClientBuilder().WithScheme(kueueext.NewScheme()).WithObjects(objs...).WithStatusSubresource(&kueue.Workload{}).Build()
	now := t0.Add(time.Minute)
	var scored admission.Scored
	s := New(c, c, Options{Refresh: time.Minute, Log: logr.Discard(), GPUResource: gpu, Now: func() time.Time { return now },
		Admission:    &admission.Settings{Runs: 5, Policy: simulator.PolicyKueue, Options: simulator.DefaultOptions()},
		OnAdmissions: func(sc admission.Scored, _ admission.Calibration) { scored = sc }})
	ctx := context.Background()
	rebuild := func() map[string]*report.AdmissionEstimate {
		t.Helper()
		if err := s.Rebuild(ctx); err != nil {
			t.Fatal(err)
		}
		var r report.Report
		if err := json.Unmarshal(s.json, &r); err != nil {
			t.Fatal(err)
		}
		out := map[string]*report.AdmissionEstimate{}
		for _, j := range r.Jobs {
			if j.Admission != nil {
				out[j.Name] = j.Admission
			}
		}
		return out
	}
	first := rebuild()
	if a := first["w0"]; a == nil || a.CalibratedOn != 0 || a.FuturesP90 == nil || a.P90 == nil || *a.P90 != *a.FuturesP90 {
		t.Fatalf("w0's first estimate %+v, want the futures' range, uncalibrated", a)
	}

	// Two hours later all ten run, admitted past their P90s (the quota
	// fits them: they were expected at once), and "late" waits for a GPU.
	now = t0.Add(2 * time.Hour)
	for _, w := range waiting {
		admit(w, now)
		if err := c.Status().Update(ctx, w); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Create(ctx, workload("late", now.Add(-time.Second))); err != nil {
		t.Fatal(err)
	}
	a := rebuild()["late"]
	if a == nil || a.CalibratedOn != admission.MinOutcomes || a.FuturesP90 == nil || a.P90 == nil || !(*a.P90 > *a.FuturesP90) {
		t.Fatalf("late: %+v, want its range widened on the ten misses", a)
	}
	if scored != (admission.Scored{Above: admission.MinOutcomes}) {
		t.Errorf("scored %+v at their admission, want all ten above the range shown", scored)
	}
	if txt := a.Text(); !strings.Contains(txt, fmt.Sprintf("calibrated on how %d earlier estimates turned out", admission.MinOutcomes)) {
		t.Errorf("late's line %q does not say it is calibrated", txt)
	}

	// Two days on, the estimates are past the 24 h horizon, and nothing
	// newer is known: the ten older ones still calibrate
	// (admission.CalibrateWithin).
	now = t0.Add(48 * time.Hour)
	if a := rebuild()["late"]; a == nil || a.CalibratedOn != admission.MinOutcomes {
		t.Errorf("late two days on: %+v, want calibrated on the ten older outcomes", a)
	}
}
