package jobframework

import (
	"context"
	"slices"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	jobset "sigs.k8s.io/jobset/api/jobset/v1alpha2"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	mpi "github.com/kubeflow/mpi-operator/pkg/apis/kubeflow/v2beta1"
	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	kftraining "github.com/kubeflow/training-operator/pkg/apis/kubeflow.org/v1"

	"github.com/progress-planner/planner/pkg/gang"
	"github.com/progress-planner/planner/pkg/progress"
	"github.com/progress-planner/planner/pkg/workloads"
)

var t0 = time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)

func meta(name string, uid types.UID, labels map[string]string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Namespace: "ml", Name: name, UID: uid, Labels: labels}
}

var queuedLabels = map[string]string{QueueNameLabel: "lq"}

// Each kind's finished rule, on the conditions its controller sets.
func TestFinished(t *testing.T) {
	tj := func(typ string, st metav1.ConditionStatus) client.Object {
		o := &trainer.TrainJob{ObjectMeta: meta("a", "u", nil)}
		if typ != "" {
			o.Status.Conditions = []metav1.Condition{{Type: typ, Status: st}}
		}
		return o
	}
	job := func(typ batchv1.JobConditionType, st corev1.ConditionStatus) client.Object {
		o := &batchv1.Job{ObjectMeta: meta("a", "u", nil)}
		if typ != "" {
			o.Status.Conditions = []batchv1.JobCondition{{Type: typ, Status: st}}
		}
		return o
	}
	js := func(typ jobset.JobSetConditionType, st metav1.ConditionStatus) client.Object {
		o := &jobset.JobSet{ObjectMeta: meta("a", "u", nil)}
		if typ != "" {
			o.Status.Conditions = []metav1.Condition{{Type: string(typ), Status: st}}
		}
		return o
	}
	pt := func(typ kftraining.JobConditionType, st corev1.ConditionStatus) client.Object {
		o := &kftraining.PyTorchJob{ObjectMeta: meta("a", "u", nil)}
		if typ != "" {
			o.Status.Conditions = []kftraining.JobCondition{{Type: typ, Status: st}}
		}
		return o
	}
	tests := []struct {
		name string
		a    Adapter
		obj  client.Object
		want bool
	}{
		{"PyTorchJob running", KubeflowJob{Kind: PyTorchJobKind}, pt(kftraining.JobRunning, corev1.ConditionTrue), false},
		{"PyTorchJob succeeded", KubeflowJob{Kind: PyTorchJobKind}, pt(kftraining.JobSucceeded, corev1.ConditionTrue), true},
		{"PyTorchJob failed", KubeflowJob{Kind: PyTorchJobKind}, pt(kftraining.JobFailed, corev1.ConditionTrue), true},
		{"PyTorchJob suspended", KubeflowJob{Kind: PyTorchJobKind}, pt(kftraining.JobSuspended, corev1.ConditionTrue), false},
		{"TrainJob running", TrainJob{}, tj("", ""), false},
		{"TrainJob complete", TrainJob{}, tj(trainer.TrainJobComplete, metav1.ConditionTrue), true},
		{"TrainJob failed", TrainJob{}, tj(trainer.TrainJobFailed, metav1.ConditionTrue), true},
		{"TrainJob suspended is not finished", TrainJob{}, tj(trainer.TrainJobSuspended, metav1.ConditionTrue), false},
		{"Job running", BatchJob{}, job("", ""), false},
		{"Job complete", BatchJob{}, job(batchv1.JobComplete, corev1.ConditionTrue), true},
		{"Job failed", BatchJob{}, job(batchv1.JobFailed, corev1.ConditionTrue), true},
		{"Job failure target only: not yet", BatchJob{}, job(batchv1.JobFailureTarget, corev1.ConditionTrue), false},
		{"Job complete False", BatchJob{}, job(batchv1.JobComplete, corev1.ConditionFalse), false},
		{"JobSet running", JobSet{}, js("", ""), false},
		{"JobSet completed", JobSet{}, js(jobset.JobSetCompleted, metav1.ConditionTrue), true},
		{"JobSet failed", JobSet{}, js(jobset.JobSetFailed, metav1.ConditionTrue), true},
		{"JobSet suspended", JobSet{}, js(jobset.JobSetSuspended, metav1.ConditionTrue), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.a.Finished(tt.obj); got != tt.want {
				t.Errorf("Finished = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestSuspended(t *testing.T) {
	for _, tt := range []struct {
		a       Adapter
		obj     client.Object
		want    bool
		caption string
	}{
		{TrainJob{}, &trainer.TrainJob{Spec: trainer.TrainJobSpec{Suspend: ptr.To(true)}}, true, "TrainJob"},
		{TrainJob{}, &trainer.TrainJob{}, false, "TrainJob unset"},
		{BatchJob{}, &batchv1.Job{Spec: batchv1.JobSpec{Suspend: ptr.To(true)}}, true, "Job"},
		{BatchJob{}, &batchv1.Job{}, false, "Job unset"},
		{JobSet{}, &jobset.JobSet{Spec: jobset.JobSetSpec{Suspend: ptr.To(true)}}, true, "JobSet"},
		{JobSet{}, &jobset.JobSet{Spec: jobset.JobSetSpec{Suspend: ptr.To(false)}}, false, "JobSet false"},
		{KubeflowJob{Kind: PyTorchJobKind}, &kftraining.PyTorchJob{Spec: kftraining.PyTorchJobSpec{RunPolicy: kftraining.RunPolicy{Suspend: ptr.To(true)}}}, true, "PyTorchJob"},
		{KubeflowJob{Kind: PyTorchJobKind}, &kftraining.PyTorchJob{}, false, "PyTorchJob unset"},
	} {
		if got := tt.a.Suspended(tt.obj); got != tt.want {
			t.Errorf("%s: Suspended = %v, want %v", tt.caption, got, tt.want)
		}
	}
}

// Only top-level jobs are tracked: a TrainJob's JobSet and a JobSet's Jobs
// have no Workload of their own; Jobs and JobSets only when queued.
func TestTracks(t *testing.T) {
	owned := func(m metav1.ObjectMeta, kind string) metav1.ObjectMeta {
		m.OwnerReferences = []metav1.OwnerReference{{APIVersion: "x/v1", Kind: kind, Name: "p", UID: "p", Controller: ptr.To(true)}}
		return m
	}
	tests := []struct {
		name string
		a    Adapter
		obj  client.Object
		want bool
	}{
		{"any TrainJob", TrainJob{}, &trainer.TrainJob{ObjectMeta: meta("a", "u", nil)}, true},
		{"queued Job", BatchJob{}, &batchv1.Job{ObjectMeta: meta("a", "u", queuedLabels)}, true},
		{"unqueued Job", BatchJob{}, &batchv1.Job{ObjectMeta: meta("a", "u", nil)}, false},
		{"a JobSet's Job", BatchJob{}, &batchv1.Job{ObjectMeta: owned(meta("a", "u", queuedLabels), "JobSet")}, false},
		{"queued JobSet", JobSet{}, &jobset.JobSet{ObjectMeta: meta("a", "u", queuedLabels)}, true},
		{"a TrainJob's JobSet", JobSet{}, &jobset.JobSet{ObjectMeta: owned(meta("a", "u", queuedLabels), "TrainJob")}, false},
		{"queued PyTorchJob", KubeflowJob{Kind: PyTorchJobKind}, &kftraining.PyTorchJob{ObjectMeta: meta("a", "u", queuedLabels)}, true},
		{"unqueued PyTorchJob", KubeflowJob{Kind: PyTorchJobKind}, &kftraining.PyTorchJob{ObjectMeta: meta("a", "u", nil)}, false},
	}
	for _, tt := range tests {
		if got := tt.a.Tracks(tt.obj); got != tt.want {
			t.Errorf("%s: Tracks = %v, want %v", tt.name, got, tt.want)
		}
	}
}

// An adapter's gang is the one pkg/gang gives each of the job's pods, as
// the pods' controllers label them.
func TestGangMatchesPods(t *testing.T) {
	tests := []struct {
		name string
		a    Adapter
		obj  client.Object
		pod  map[string]string // the labels the job's controllers put on its pods
	}{
		{"TrainJob: its JobSet's pods", TrainJob{}, &trainer.TrainJob{ObjectMeta: meta("llama", "u", nil)},
			map[string]string{gang.JobSetNameLabel: "llama", gang.JobNameLabel: "llama-node-0"}},
		{"Job", BatchJob{}, &batchv1.Job{ObjectMeta: meta("sweep", "u", nil)},
			map[string]string{gang.JobNameLabel: "sweep", "batch.kubernetes.io/controller-uid": "u"}},
		{"JobSet", JobSet{}, &jobset.JobSet{ObjectMeta: meta("pretrain", "u", nil)},
			map[string]string{gang.JobSetNameLabel: "pretrain", gang.JobNameLabel: "pretrain-workers-0"}},
		{"PyTorchJob", KubeflowJob{Kind: PyTorchJobKind}, &kftraining.PyTorchJob{ObjectMeta: meta("bert", "u", nil)},
			map[string]string{kftraining.JobNameLabel: "bert", kftraining.ReplicaTypeLabel: "master", kftraining.OperatorNameLabel: "pytorchjob-controller"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want := tt.a.Gang(tt.obj)
			got, ok := gang.Of(&metav1.ObjectMeta{Namespace: "ml", Name: "p-0", Labels: tt.pod}, nil)
			if !ok || got.Key() != want.Key() || got.Job != tt.obj.GetName() {
				t.Errorf("pod's gang %+v (%v), adapter's %+v", got, ok, want)
			}
			for k, v := range want.MemberLabels() {
				if tt.pod[k] != v {
					t.Errorf("member label %s=%s not on the pod", k, v)
				}
			}
		})
	}
}

// JobOfPod names the job whose controller labelled the pod: a TrainJob's
// pods name its JobSet; a PodGroup alone names no job.
func TestJobOfPod(t *testing.T) {
	tests := []struct {
		name     string
		pod      map[string]string
		wantKind schema.GroupVersionKind
		wantName string
	}{
		{"JobSet (of a TrainJob) over its Job", map[string]string{gang.JobSetNameLabel: "llama", gang.JobNameLabel: "llama-node-0"}, JobSet{}.GVK(), "llama"},
		{"PodGroup and JobSet", map[string]string{gang.PodGroupLabel: "llama", gang.JobSetNameLabel: "llama"}, JobSet{}.GVK(), "llama"},
		{"PyTorchJob", map[string]string{kftraining.JobNameLabel: "bert", kftraining.OperatorNameLabel: "pytorchjob-controller"}, KubeflowJob{Kind: PyTorchJobKind}.GVK(), "bert"},
		{"TFJob", map[string]string{kftraining.JobNameLabel: "mnist", kftraining.OperatorNameLabel: "tfjob-controller"}, KubeflowJob{Kind: TFJobKind}.GVK(), "mnist"},
		{"Training Operator without its name", map[string]string{kftraining.JobNameLabel: "bert"}, schema.GroupVersionKind{}, ""},
		{"MPIJob", map[string]string{kftraining.JobNameLabel: "pi", kftraining.OperatorNameLabel: "mpi-operator"}, KubeflowJob{Kind: MPIJobKind}.GVK(), "pi"},
		{"Training Operator, an operator not built", map[string]string{kftraining.JobNameLabel: "pi", kftraining.OperatorNameLabel: "mpijob-controller"}, schema.GroupVersionKind{}, ""},
		{"Job", map[string]string{gang.JobNameLabel: "sweep"}, BatchJob{}.GVK(), "sweep"},
		{"PodGroup only", map[string]string{gang.PodGroupLabel: "pg"}, schema.GroupVersionKind{}, ""},
		{"no job", map[string]string{"app": "web"}, schema.GroupVersionKind{}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			kind, name, ok := JobOfPod(&metav1.ObjectMeta{Namespace: "ml", Name: "p-0", Labels: tt.pod})
			if kind != tt.wantKind || name != tt.wantName || ok != (tt.wantName != "") {
				t.Errorf("JobOfPod = %v %q %v, want %v %q", kind, name, ok, tt.wantKind, tt.wantName)
			}
		})
	}
}

// Report-fed kinds read the source; a job of the same name with another
// UID does not get the old job's report.
func TestReportFedLatest(t *testing.T) {
	src := NewMemorySource()
	job := &batchv1.Job{ObjectMeta: meta("sweep", "u1", queuedLabels)}
	a := BatchJob{Reports: src}
	if _, ok := a.Latest(job); ok {
		t.Fatal("a report before any was put")
	}
	s := progress.TrainerStatus{ProgressPercentage: ptr.To(40.0), Metrics: []progress.MetricValue{{Name: "loss", Value: "0.5"}}}
	src.Put(RefOf(a, job), s, t0)
	r, ok := a.Latest(job)
	if !ok || *r.Status.ProgressPercentage != 40 || !r.ReceivedAt.Equal(t0) || r.Hash == "" {
		t.Fatalf("Latest = %+v, %v", r, ok)
	}
	recreated := job.DeepCopy()
	recreated.UID = "u2"
	if _, ok := a.Latest(recreated); ok {
		t.Error("a recreated Job got its predecessor's report")
	}
	if _, ok := (JobSet{Reports: src}).Latest(&jobset.JobSet{ObjectMeta: meta("sweep", "u1", nil)}); ok {
		t.Error("a JobSet of the Job's name got the Job's report")
	}
	if _, ok := (BatchJob{}).Latest(job); ok {
		t.Error("no source, yet a report")
	}
	s2 := s
	s2.ProgressPercentage = ptr.To(41.0)
	src.Put(RefOf(a, job), s2, t0.Add(time.Minute))
	if r2, _ := a.Latest(job); r2.Hash == r.Hash || *r2.Status.ProgressPercentage != 41 {
		t.Errorf("a new report kept the old hash or value: %+v", r2)
	}
}

func TestTrainJobLatest(t *testing.T) {
	tj := &trainer.TrainJob{ObjectMeta: meta("a", "u", nil)}
	if _, ok := (TrainJob{}).Latest(tj); ok {
		t.Fatal("a report without trainerStatus")
	}
	tj.Status.TrainerStatus = &trainer.TrainerStatus{
		ProgressPercentage: ptr.To[int32](45), EstimatedRemainingSeconds: ptr.To[int32](3600),
		Metrics:         []trainer.Metric{{Name: "loss", Value: "0.42"}, {Name: "current_step", Value: "450"}},
		LastUpdatedTime: metav1.NewTime(t0),
	}
	r := latest(t, tj)
	fs := r.Status
	if *fs.ProgressPercentage != 45 || *fs.EstimatedRemainingSeconds != 3600 || len(fs.Metrics) != 2 ||
		fs.Metrics[0] != (progress.MetricValue{Name: "loss", Value: "0.42"}) || !fs.LastUpdatedTime.Equal(t0) || !r.ReceivedAt.IsZero() {
		t.Errorf("Latest: %+v", r)
	}
	// A heartbeat (only lastUpdatedTime changes) is a new observation.
	b := tj.DeepCopy()
	b.Status.TrainerStatus.LastUpdatedTime = metav1.NewTime(t0.Add(5 * time.Second))
	if latest(t, b).Hash == r.Hash {
		t.Error("a new lastUpdatedTime did not change the hash")
	}
	if latest(t, tj.DeepCopy()).Hash != r.Hash {
		t.Error("equal statuses hash differently")
	}
}

// FindWorkload lists by the job's UID label and applies workloads.For, for
// every kind alike; FindWorkloadIndexed finds the same through the cache's
// index, also for a job whose UID is unknown (matched by name).
func TestFindWorkload(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := kueue.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	wl := func(name string, owner workloads.Ref) *kueue.Workload {
		return &kueue.Workload{ObjectMeta: metav1.ObjectMeta{Namespace: "ml", Name: name,
			Labels:          map[string]string{workloads.LabelJobUID: string(owner.UID)},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: owner.APIVersion, Kind: owner.Kind, Name: owner.Name, UID: owner.UID, Controller: ptr.To(true)}}}}
	}
	job := &batchv1.Job{ObjectMeta: meta("sweep", "uj", queuedLabels)}
	js := &jobset.JobSet{ObjectMeta: meta("sweep", "us", queuedLabels)}
	jobRef, jsRef := RefOf(BatchJob{}, job), RefOf(JobSet{}, js)
	noUID := jobRef
	noUID.UID = ""
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(wl("job-sweep-1", jobRef), wl("jobset-sweep-1", jsRef)).
		WithIndex(&kueue.Workload{}, WorkloadJobUIDIndex, WorkloadJobUID).Build()
	for name, find := range map[string]func(context.Context, client.Reader, workloads.Ref) (workloads.Match, error){
		"FindWorkload": FindWorkload, "FindWorkloadIndexed": FindWorkloadIndexed} {
		for _, tt := range []struct {
			ref  workloads.Ref
			want string
		}{{jobRef, "job-sweep-1"}, {jsRef, "jobset-sweep-1"}, {noUID, "job-sweep-1"}} {
			m, err := find(context.Background(), c, tt.ref)
			if err != nil {
				t.Fatal(err)
			}
			if m.Workload == nil || m.Workload.Name != tt.want {
				t.Errorf("%s %s: Workload %v (%s), want %s", name, tt.ref, m.Workload, m.Reason, tt.want)
			}
		}
		m, err := find(context.Background(), c, RefOf(BatchJob{}, &batchv1.Job{ObjectMeta: meta("other", "uo", nil)}))
		if err != nil || m.Workload != nil {
			t.Errorf("%s, a job without a Workload: %+v, %v", name, m, err)
		}
	}
}

// The table: TrainJob always; the report-fed kinds only with a source.
func TestBuilt(t *testing.T) {
	kinds := func(ks []Kind) (out []string) {
		for _, k := range ks {
			out = append(out, k.GVK().Kind)
		}
		return out
	}
	if got := kinds(Built(nil)); len(got) != 1 || got[0] != "TrainJob" {
		t.Errorf("Built(nil) = %v", got)
	}
	got := Built(NewMemorySource())
	if k := kinds(got); !slices.Equal(k, []string{"TrainJob", "Job", "JobSet", "PyTorchJob", "TFJob", "XGBoostJob", "PaddleJob", "JAXJob", "MPIJob"}) {
		t.Errorf("Built(src) = %v", k)
	}
	for _, k := range got {
		if k.NeedsReports == (k.GVK().Kind == "TrainJob") || k.Resource == "" {
			t.Errorf("%s: NeedsReports %v, resource %q", k.GVK().Kind, k.NeedsReports, k.Resource)
		}
	}
}

// Every Training Operator kind is served by the one adapter: its object is
// of its kind, suspend and the end conditions are read from the fields its
// API names spec.runPolicy.suspend and status.conditions, and its pods
// (labelled as the operator labels them) name it.
func TestTrainingOperatorKinds(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := kftraining.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := mpi.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, k := range Built(NewMemorySource()) {
		a, ok := k.Adapter.(KubeflowJob)
		if !ok {
			continue
		}
		names = append(names, a.GVK().Kind)
		t.Run(a.GVK().Kind, func(t *testing.T) {
			obj := a.NewObject()
			if gvks, _, err := scheme.ObjectKinds(obj); err != nil || len(gvks) != 1 || gvks[0] != a.GVK() {
				t.Fatalf("NewObject is %v (%v), GVK %v", gvks, err, a.GVK())
			}
			if k.Resource != a.Kind.Resource {
				t.Errorf("resource %q, kind's %q", k.Resource, a.Kind.Resource)
			}
			obj.SetName("j")
			obj.SetLabels(queuedLabels)
			if !a.Tracks(obj) || a.Suspended(obj) || a.Finished(obj) {
				t.Fatalf("a new queued job: tracked %v, suspended %v, finished %v", a.Tracks(obj), a.Suspended(obj), a.Finished(obj))
			}
			// Set both through the API's JSON, as Kueue and the operator do.
			u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
			if err != nil {
				t.Fatal(err)
			}
			_ = unstructured.SetNestedField(u, true, "spec", "runPolicy", "suspend")
			_ = unstructured.SetNestedSlice(u, []any{map[string]any{"type": "Succeeded", "status": "True"}}, "status", "conditions")
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u, obj); err != nil {
				t.Fatal(err)
			}
			if !a.Suspended(obj) || !a.Finished(obj) {
				t.Errorf("suspended %v, finished %v after setting both", a.Suspended(obj), a.Finished(obj))
			}
			pod := &metav1.ObjectMeta{Labels: map[string]string{kftraining.JobNameLabel: "j", kftraining.OperatorNameLabel: a.Kind.OperatorName}}
			if gvk, name, ok := JobOfPod(pod); !ok || gvk != a.GVK() || name != "j" {
				t.Errorf("JobOfPod = %v %q %v", gvk, name, ok)
			}
		})
	}
	if want := []string{"PyTorchJob", "TFJob", "XGBoostJob", "PaddleJob", "JAXJob", "MPIJob"}; !slices.Equal(names, want) {
		t.Errorf("Training Operator kinds built: %v, want %v", names, want)
	}
}
