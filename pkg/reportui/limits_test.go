package reportui

import (
	"context"
	"encoding/json"
	"runtime"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/progress-planner/planner/pkg/kueueext"
	"github.com/progress-planner/planner/pkg/report"
)

// TestRebuildWithMemoryAsGPUResource: gpuResource "memory" (the config
// accepts any resource name) counts a Workload asking 64Gi as 6.9e10
// "GPUs". The page must clamp the count (report.MaxGPUs), not allocate per
// unit: before, Rebuild tried a 550 GB allocation and killed the
// controller.
func TestRebuildWithMemoryAsGPUResource(t *testing.T) {
	mem := resource.MustParse("64Gi")
	cq := &kueue.ClusterQueue{ObjectMeta: metav1.ObjectMeta{Name: "cq"}, Spec: kueue.ClusterQueueSpec{
		ResourceGroups: []kueue.ResourceGroup{{CoveredResources: []corev1.ResourceName{"memory"}, Flavors: []kueue.FlavorQuotas{{Name: "f",
			Resources: []kueue.ResourceQuota{{Name: "memory", NominalQuota: mem}}}}}}}}
	t0 := metav1.NewTime(time.Unix(1_700_000_000, 0))
	wl := &kueue.Workload{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "big"},
		Spec: kueue.WorkloadSpec{QueueName: "lq", PodSets: []kueue.PodSet{{Name: "node", Count: 2, Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{"memory": mem}}}}}}}}},
		Status: kueue.WorkloadStatus{Admission: &kueue.Admission{ClusterQueue: "cq"}, Conditions: []metav1.Condition{
			{Type: kueue.WorkloadQuotaReserved, Status: metav1.ConditionTrue, Reason: "x", LastTransitionTime: t0},
			{Type: kueue.WorkloadAdmitted, Status: metav1.ConditionTrue, Reason: "x", LastTransitionTime: t0}}}}
	c := fake.NewClientBuilder().WithScheme(kueueext.NewScheme()).WithObjects(cq, wl).Build()
	s := New(c, c, Options{Refresh: time.Minute, Log: logr.Discard(), GPUResource: "memory"})
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	if err := s.Rebuild(context.Background()); err != nil {
		t.Fatal(err)
	}
	runtime.ReadMemStats(&after)
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 256<<20 {
		t.Errorf("Rebuild allocated %d MiB", alloc>>20)
	}
	s.mu.RLock()
	b := s.json
	s.mu.RUnlock()
	var r report.Report
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	if len(r.Queues) != 1 || r.Queues[0].QuotaGPUs != report.MaxGPUs || r.Queues[0].UsedGPUs != report.MaxGPUs {
		t.Fatalf("queues %+v, want quota and use clamped to %d", r.Queues, report.MaxGPUs)
	}
}
