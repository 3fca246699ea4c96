package kueueext

import (
	"slices"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
)

func gpuContainer(name string, req, lim int64) corev1.Container {
	c := corev1.Container{Name: name}
	if req > 0 {
		c.Resources.Requests = corev1.ResourceList{"nvidia.com/gpu": *resource.NewQuantity(req, resource.DecimalSI)}
	}
	if lim > 0 {
		c.Resources.Limits = corev1.ResourceList{"nvidia.com/gpu": *resource.NewQuantity(lim, resource.DecimalSI)}
	}
	return c
}

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func cond(typ string, status metav1.ConditionStatus, reason string, at time.Time) metav1.Condition {
	return metav1.Condition{Type: typ, Status: status, Reason: reason, LastTransitionTime: metav1.NewTime(at)}
}

func TestReadWorkload(t *testing.T) {
	wl := &kueue.Workload{
		ObjectMeta: metav1.ObjectMeta{Name: "trainjob-a-1f2e3", Namespace: "team", UID: "wl-uid",
			Annotations: map[string]string{AnnotationPriorityBoost: "-100"}},
		Spec: kueue.WorkloadSpec{
			QueueName: "lq",
			Priority:  ptr.To[int32](1000),
			PodSets: []kueue.PodSet{
				{Name: "node", Count: 2, Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
					Containers:     []corev1.Container{gpuContainer("trainer", 4, 4), gpuContainer("sidecar", 0, 0)},
					InitContainers: []corev1.Container{gpuContainer("init", 0, 1)},
				}}},
				{Name: "launcher", Count: 1, Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
					Containers: []corev1.Container{gpuContainer("l", 0, 0)},
				}}},
				{Name: "init-heavy", Count: 1, Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
					Containers: []corev1.Container{gpuContainer("c", 1, 0)},
					InitContainers: []corev1.Container{gpuContainer("big-init", 0, 3), func() corev1.Container {
						c := gpuContainer("gpu-sidecar", 1, 0)
						c.RestartPolicy = ptr.To(corev1.ContainerRestartPolicyAlways)
						return c
					}()},
				}}},
			},
		},
		Status: kueue.WorkloadStatus{
			Conditions: []metav1.Condition{
				cond(kueue.WorkloadQuotaReserved, metav1.ConditionTrue, "QuotaReserved", t0),
				cond(kueue.WorkloadAdmitted, metav1.ConditionTrue, "Admitted", t0.Add(time.Second)),
			},
			Admission: &kueue.Admission{ClusterQueue: "gpu-cq"},
			SchedulingStats: &kueue.SchedulingStats{Evictions: []kueue.WorkloadSchedulingStatsEviction{
				{Reason: "Preempted", Count: 2}, {Reason: "PodsReadyTimeout", Count: 1},
			}},
		},
	}
	f := ReadWorkload(wl, "nvidia.com/gpu")
	// node: 2 pods × 4 (containers 4+0 > init 1); launcher 0; init-heavy: max(1+1 sidecar, 3) = 3.
	if f.GPUs != 11 {
		t.Errorf("GPUs %d, want 11", f.GPUs)
	}
	if f.BasePriority != 1000 || f.ClusterQueue != "gpu-cq" || f.QueueName != "lq" || f.Evictions != 3 {
		t.Errorf("facts %+v", f)
	}
	if !f.Admitted || f.AdmittedAt == nil || !f.AdmittedAt.Equal(t0.Add(time.Second)) || !f.Running() || f.Pending() {
		t.Errorf("admission facts %+v", f)
	}
	if !f.BoostSet || f.Boost != -100 || f.BoostValue != "-100" {
		t.Errorf("boost %+v", f)
	}

	// Evicted by deactivation: not admitted, not running, not pending.
	wl2 := wl.DeepCopy()
	wl2.Spec.Active = ptr.To(false)
	wl2.Spec.Priority = nil
	wl2.Annotations = map[string]string{AnnotationPriorityBoost: "oops"}
	wl2.Status.Conditions = []metav1.Condition{
		cond(kueue.WorkloadQuotaReserved, metav1.ConditionFalse, "Pending", t0),
		cond(kueue.WorkloadEvicted, metav1.ConditionTrue, kueue.WorkloadDeactivated, t0.Add(time.Minute)),
	}
	f2 := ReadWorkload(wl2, "nvidia.com/gpu")
	if f2.Admitted || f2.Running() || f2.Pending() || f2.Active || f2.ClusterQueue != "" || f2.BasePriority != 0 {
		t.Errorf("deactivated facts %+v", f2)
	}
	if f2.Evicted == nil || f2.Evicted.Reason != kueue.WorkloadDeactivated || f2.Boost != 0 || !f2.BoostSet {
		t.Errorf("evicted/boost facts %+v", f2)
	}
	// Pending.
	wl3 := wl.DeepCopy()
	wl3.Status.Conditions = nil
	wl3.Status.Admission = nil
	if f3 := ReadWorkload(wl3, "nvidia.com/gpu"); !f3.Pending() || f3.Running() {
		t.Errorf("pending facts %+v", f3)
	}
	// Other GPU resource name.
	if f4 := ReadWorkload(wl, "amd.com/gpu"); f4.GPUs != 0 {
		t.Errorf("amd GPUs %d", f4.GPUs)
	}
}

func mf(manager string, op metav1.ManagedFieldsOperationType, subresource, fields string) metav1.ManagedFieldsEntry {
	return metav1.ManagedFieldsEntry{Manager: manager, Operation: op, Subresource: subresource,
		FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(fields)}}
}

const (
	boostFields = `{"f:metadata":{"f:annotations":{"f:kueue.x-k8s.io/priority-boost":{}}}}`
	otherFields = `{"f:metadata":{"f:annotations":{"f:other":{}},"f:labels":{"f:kueue.x-k8s.io/job-uid":{}}},"f:spec":{"f:active":{}}}`
)

func TestBoostOwnership(t *testing.T) {
	tests := []struct {
		name    string
		entries []metav1.ManagedFieldsEntry
		owners  []string
		foreign []string
		planner bool
	}{
		{"nobody", []metav1.ManagedFieldsEntry{mf("kueue", metav1.ManagedFieldsOperationUpdate, "", otherFields)}, nil, nil, false},
		{"planner", []metav1.ManagedFieldsEntry{
			mf("kueue", metav1.ManagedFieldsOperationUpdate, "", otherFields),
			mf(FieldManager, metav1.ManagedFieldsOperationApply, "", boostFields),
		}, []string{"progress-planner (Apply)"}, nil, true},
		{"kubectl", []metav1.ManagedFieldsEntry{
			mf("kubectl-annotate", metav1.ManagedFieldsOperationUpdate, "", boostFields),
		}, []string{"kubectl-annotate (Update)"}, []string{"kubectl-annotate"}, false},
		{"shared", []metav1.ManagedFieldsEntry{
			mf(FieldManager, metav1.ManagedFieldsOperationApply, "", boostFields),
			mf("other-controller", metav1.ManagedFieldsOperationApply, "", boostFields),
		}, []string{"other-controller (Apply)", "progress-planner (Apply)"}, []string{"other-controller"}, true},
		{"status subresource ignored", []metav1.ManagedFieldsEntry{
			mf("weird", metav1.ManagedFieldsOperationApply, "status", boostFields),
		}, nil, nil, false},
		{"planner update op is still the planner", []metav1.ManagedFieldsEntry{
			mf(FieldManager, metav1.ManagedFieldsOperationUpdate, "", boostFields),
		}, []string{"progress-planner (Update)"}, nil, true},
		{"garbage fields", []metav1.ManagedFieldsEntry{mf("x", metav1.ManagedFieldsOperationUpdate, "", `not json`)}, nil, nil, false},
		// ownsAnnotation skips entries without the key's last segment
		// before parsing: an escaped '/' is still found, the key as a
		// label is not an annotation.
		{"escaped slash", []metav1.ManagedFieldsEntry{
			mf("tool", metav1.ManagedFieldsOperationApply, "", `{"f:metadata":{"f:annotations":{"f:kueue.x-k8s.io\/priority-boost":{}}}}`),
		}, []string{"tool (Apply)"}, []string{"tool"}, false},
		{"label of that name", []metav1.ManagedFieldsEntry{
			mf("tool", metav1.ManagedFieldsOperationApply, "", `{"f:metadata":{"f:labels":{"f:kueue.x-k8s.io/priority-boost":{}}}}`),
		}, nil, nil, false},
		{"nil fields", []metav1.ManagedFieldsEntry{{Manager: "x"}}, nil, nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := BoostOwners(tt.entries); !slices.Equal(got, tt.owners) {
				t.Errorf("owners %v, want %v", got, tt.owners)
			}
			if got := ForeignBoostOwners(tt.entries); !slices.Equal(got, tt.foreign) {
				t.Errorf("foreign %v, want %v", got, tt.foreign)
			}
			if got := PlannerOwnsBoost(tt.entries); got != tt.planner {
				t.Errorf("planner owns %v, want %v", got, tt.planner)
			}
		})
	}
}

func wlOwned(name string, owner types.UID, created time.Time, finished, deleting bool) kueue.Workload {
	wl := kueue.Workload{ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: metav1.NewTime(created)}}
	if owner != "" {
		wl.OwnerReferences = []metav1.OwnerReference{{APIVersion: "trainer.kubeflow.org/v1alpha1", Kind: "TrainJob",
			Name: "job", UID: owner, Controller: ptr.To(true)}}
	}
	if finished {
		wl.Status.Conditions = []metav1.Condition{cond(kueue.WorkloadFinished, metav1.ConditionTrue, "Succeeded", created)}
	}
	if deleting {
		now := metav1.NewTime(created)
		wl.DeletionTimestamp = &now
	}
	return wl
}

func TestPlannerEviction(t *testing.T) {
	at := t0.Add(10 * time.Minute)
	before, after := t0, t0.Add(20*time.Minute)
	preempted := &metav1.Condition{Type: kueue.WorkloadEvicted, Status: metav1.ConditionTrue, Reason: kueue.WorkloadEvictedByPreemption, LastTransitionTime: metav1.NewTime(at)}
	deactivated := &metav1.Condition{Type: kueue.WorkloadEvicted, Status: metav1.ConditionTrue, Reason: kueue.WorkloadDeactivated, LastTransitionTime: metav1.NewTime(at)}
	tests := []struct {
		name                         string
		cond                         *metav1.Condition
		boost                        int32
		boostChanged, deact, lastRec *time.Time
		want                         bool
	}{
		{"not evicted", nil, -100, &before, nil, nil, false},
		{"preempted while yielding", preempted, -100, &before, nil, nil, true},
		{"same time counts", preempted, -100, &at, nil, nil, true},
		{"preempted without planner boost", preempted, 0, &before, nil, nil, false},
		{"preempted while protected", preempted, 100, &before, nil, nil, false},
		{"boost lowered after the eviction", preempted, -100, &after, nil, nil, false},
		{"already recorded", preempted, -100, &before, nil, &at, false},
		{"newer than recorded", preempted, -100, &before, nil, &before, true},
		{"deactivated by planner", deactivated, 0, nil, &before, nil, true},
		{"deactivated by someone else", deactivated, -100, &before, nil, nil, false},
		{"deactivated before planner's stop", deactivated, 0, nil, &after, nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := PlannerEviction(tt.cond, tt.boost, tt.boostChanged, tt.deact, tt.lastRec)
			if (got != nil) != tt.want {
				t.Fatalf("got %v, want eviction %v", got, tt.want)
			}
			if got != nil && !got.Equal(at) {
				t.Errorf("time %v, want %v", got, at)
			}
		})
	}
}

func TestNudgeValue(t *testing.T) {
	tests := []struct {
		cur  string
		set  bool
		want string
	}{
		{"", false, "0"},
		{"", true, "0"},
		{"0", true, "+0"},
		{"+0", true, "0"},
		{"100", true, "+100"},
		{"+100", true, "100"},
		{"-100", true, "-0100"},
		{"-0100", true, "-100"},
		{"007", true, "7"},
		{"junk", true, "junk"},
	}
	for _, tt := range tests {
		got := nudgeValue(tt.cur, tt.set)
		if got != tt.want {
			t.Errorf("nudgeValue(%q, %v) = %q, want %q", tt.cur, tt.set, got, tt.want)
		}
		if got == tt.cur && tt.cur != "junk" {
			t.Errorf("nudgeValue(%q) did not change the string", tt.cur)
		}
		// The value (what Kueue adds to the priority) never changes.
		if tt.cur != "junk" {
			want := int64(0)
			if tt.cur != "" {
				want, _ = strconv.ParseInt(tt.cur, 10, 32)
			}
			if v, err := strconv.ParseInt(got, 10, 32); err != nil || v != want {
				t.Errorf("nudgeValue(%q) = %q parses to %d, %v; want %d", tt.cur, got, v, err, want)
			}
		}
	}
}

func TestWorkloadApply(t *testing.T) {
	u := workloadApply("wl", "ns", "uid-1", "", "-100")
	if u.GetAPIVersion() != "kueue.x-k8s.io/v1beta2" || u.GetKind() != "Workload" || u.GetUID() != "uid-1" ||
		u.GetAnnotations()[AnnotationPriorityBoost] != "-100" || u.GetResourceVersion() != "" {
		t.Errorf("apply config %v", u.Object)
	}
	if _, hasSpec := u.Object["spec"]; hasSpec {
		t.Error("apply config touches spec")
	}
	u0 := workloadApply("wl", "ns", "uid-1", "42", "")
	if len(u0.GetAnnotations()) != 0 || u0.GetResourceVersion() != "42" {
		t.Errorf("removal config %v", u0.Object)
	}
}
