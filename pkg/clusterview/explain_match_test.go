package clusterview

import (
	"context"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"

	"github.com/progress-planner/planner/api/v1alpha1"
	"github.com/progress-planner/planner/pkg/jobframework"
	"github.com/progress-planner/planner/pkg/kueueext"
	"github.com/progress-planner/planner/pkg/workloads"
)

// TestExplainPicksTheControllersWorkload: for the cases where the two used
// to differ, `planner explain` (ExplainInput) names exactly the Workload the
// controller's lookup (jobframework.FindWorkload) acts on, or none when the
// controller has none — with the TrainJob's UID, and without it (the UID
// then comes from the job's ProgressForecast).
func TestExplainPicksTheControllersWorkload(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	tj := &trainer.TrainJob{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "job", UID: "new"}}
	type wlOpt func(*kueue.Workload)
	ownedBy := func(apiVersion, kind, name string, uid types.UID) wlOpt {
		return func(w *kueue.Workload) {
			w.OwnerReferences = []metav1.OwnerReference{{APIVersion: apiVersion, Kind: kind, Name: name, UID: uid, Controller: ptr.To(true)}}
			w.Labels = map[string]string{workloads.LabelJobUID: string(uid)}
		}
	}
	byNew := ownedBy(trainer.GroupVersion.String(), trainer.TrainJobKind, "job", "new")
	byOld := ownedBy(trainer.GroupVersion.String(), trainer.TrainJobKind, "job", "old")
	finished := func(w *kueue.Workload) {
		w.Status.Conditions = []metav1.Condition{{Type: kueue.WorkloadFinished, Status: metav1.ConditionTrue, Reason: "Succeeded", LastTransitionTime: metav1.NewTime(t0)}}
	}
	deleting := func(w *kueue.Workload) {
		now := metav1.NewTime(t0)
		w.DeletionTimestamp, w.Finalizers = &now, []string{"kueue.x-k8s.io/resource-in-use"}
	}
	labelOnly := func(w *kueue.Workload) { w.Labels = map[string]string{workloads.LabelJobUID: "new"} }
	wl := func(name string, age time.Duration, opts ...wlOpt) *kueue.Workload {
		w := &kueue.Workload{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: name, CreationTimestamp: metav1.NewTime(t0.Add(age))},
			Spec: kueue.WorkloadSpec{QueueName: "lq"}}
		for _, o := range opts {
			o(w)
		}
		return w
	}
	tests := []struct {
		name string
		wls  []*kueue.Workload
		want string // "" = none
	}{
		{"one finished and one live", []*kueue.Workload{wl("trainjob-job-f", time.Hour, byNew, finished), wl("trainjob-job-a", 0, byNew)}, "trainjob-job-a"},
		{"two live", []*kueue.Workload{wl("trainjob-job-a", 0, byNew), wl("trainjob-job-b", time.Second, byNew)}, ""},
		{"two finished", []*kueue.Workload{wl("trainjob-job-f1", 0, byNew, finished), wl("trainjob-job-f2", time.Hour, byNew, finished)}, "trainjob-job-f2"},
		{"one being deleted and one live", []*kueue.Workload{wl("trainjob-job-d", time.Hour, byNew, deleting), wl("trainjob-job-a", 0, byNew)}, "trainjob-job-a"},
		{"only one being deleted", []*kueue.Workload{wl("trainjob-job-d", 0, byNew, deleting)}, ""},
		{"recreated job, the old one's Workload still there", []*kueue.Workload{wl("trainjob-job-old", 0, byOld), wl("trainjob-job-new", time.Minute, byNew)}, "trainjob-job-new"},
		{"recreated job, only the old one's Workload", []*kueue.Workload{wl("trainjob-job-old", 0, byOld)}, ""},
		{"no owner", []*kueue.Workload{wl("trainjob-job-x", 0, labelOnly)}, ""},
		{"wrong kind", []*kueue.Workload{wl("job-x", 0, ownedBy("batch/v1", "Job", "job", "j"))}, ""},
		{"wrong kind with the job's label", []*kueue.Workload{wl("job-x", 0, ownedBy("batch/v1", "Job", "job", "j"), labelOnly)}, ""},
	}
	pf := &v1alpha1.ProgressForecast{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "job",
		OwnerReferences: []metav1.OwnerReference{{APIVersion: trainer.GroupVersion.String(), Kind: trainer.TrainJobKind, Name: "job", UID: "new", Controller: ptr.To(true)}}},
		Spec: v1alpha1.ProgressForecastSpec{JobRef: v1alpha1.JobRef{APIVersion: "trainer.kubeflow.org/v1alpha1", Kind: "TrainJob", Name: "job"}}}
	ctx := context.Background()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			objs := []client.Object{pf.DeepCopy()}
			for _, w := range tt.wls {
				objs = append(objs, w)
			}
			c := fake.NewClientBuilder().WithScheme(kueueext.NewScheme()).WithObjects(objs...).Build()
			m, err := jobframework.FindWorkload(ctx, c, jobframework.RefOf(jobframework.TrainJob{}, tj))
			if err != nil {
				t.Fatal(err)
			}
			controller := ""
			if m.Workload != nil {
				controller = m.Workload.Name
			}
			if controller != tt.want {
				t.Errorf("controller's lookup: %q, want %q (%s)", controller, tt.want, m.Reason)
			}
			snap, err := Read(ctx, c, "")
			if err != nil {
				t.Fatal(err)
			}
			for _, uid := range []types.UID{tj.UID, ""} {
				explained := ""
				in, err := snap.ExplainInput("team", "job", uid, Options{Now: t0})
				if err == nil {
					explained = in.Target.Name
				}
				if explained != controller {
					t.Errorf("uid %q: explain picks %q (err %v), the controller %q", uid, explained, err, controller)
				}
				if err == nil && !in.Planner.Found {
					t.Errorf("uid %q: explain did not find the job's ProgressForecast", uid)
				}
			}
		})
	}
}

// `planner explain ns/name` of a job of another kind (a batch/v1 Job, no
// TrainJob of that name): the job comes from its ProgressForecast
// (spec.jobRef and owner), and explain names the Workload the controller
// acts on for it; a Workload of a same-named TrainJob is not the Job's.
func TestExplainAJobOfAnotherKind(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "sweep", UID: "j1"}}
	owned := func(name, apiVersion, kind string, uid types.UID) *kueue.Workload {
		return &kueue.Workload{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: name, CreationTimestamp: metav1.NewTime(t0),
			OwnerReferences: []metav1.OwnerReference{{APIVersion: apiVersion, Kind: kind, Name: "sweep", UID: uid, Controller: ptr.To(true)}},
			Labels:          map[string]string{workloads.LabelJobUID: string(uid)}},
			Spec: kueue.WorkloadSpec{QueueName: "lq"}}
	}
	pf := &v1alpha1.ProgressForecast{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "sweep",
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: "sweep", UID: "j1", Controller: ptr.To(true)}}},
		Spec: v1alpha1.ProgressForecastSpec{JobRef: v1alpha1.JobRef{APIVersion: "batch/v1", Kind: "Job", Name: "sweep", UID: "j1"}}}
	c := fake.NewClientBuilder().WithScheme(kueueext.NewScheme()).WithObjects(pf,
		owned("job-sweep-x", "batch/v1", "Job", "j1"),
		owned("trainjob-sweep-y", trainer.GroupVersion.String(), trainer.TrainJobKind, "t1")).Build()
	ctx := context.Background()
	m, err := jobframework.FindWorkload(ctx, c, jobframework.RefOf(jobframework.BatchJob{}, job))
	if err != nil || m.Workload == nil || m.Workload.Name != "job-sweep-x" {
		t.Fatalf("controller's lookup: %+v, %v", m, err)
	}
	snap, err := Read(ctx, c, "")
	if err != nil {
		t.Fatal(err)
	}
	in, err := snap.ExplainInput("team", "sweep", "", Options{Now: t0})
	if err != nil || in.Target.Name != "job-sweep-x" || !in.Planner.Found {
		t.Fatalf("explain: target %q, forecast found %v, err %v; want the Job's Workload job-sweep-x", in.Target.Name, in.Planner.Found, err)
	}
	// A TrainJob named sweep exists (explain read its UID): its Workload,
	// not the Job's, and not the Job's forecast.
	in, err = snap.ExplainInput("team", "sweep", "t1", Options{Now: t0})
	if err != nil || in.Target.Name != "trainjob-sweep-y" || in.Planner.Found {
		t.Fatalf("explain with the TrainJob's UID: target %q, forecast found %v, err %v", in.Target.Name, in.Planner.Found, err)
	}
}
