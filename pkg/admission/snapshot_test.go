package admission

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/progress-planner/planner/pkg/clustersnap"
	"github.com/progress-planner/planner/pkg/clusterview"
	"github.com/progress-planner/planner/simulator"
)

// ForWaiting answers for every waiting Workload, under its own key and its
// job's, from one set of futures: here the queue's only admitted Workload
// (no forecast: --default-duration 1h) must end first.
func TestForWaiting(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	gpu := corev1.ResourceName("nvidia.com/gpu")
	wl := func(name, lq string, admittedTo string, owner string) kueue.Workload {
		w := kueue.Workload{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: name, CreationTimestamp: metav1.NewTime(now.Add(-time.Hour))},
			Spec: kueue.WorkloadSpec{QueueName: kueue.LocalQueueName(lq), PodSets: []kueue.PodSet{{Name: "p", Count: 1, Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{gpu: resource.MustParse("8")}}}}}}}}}}
		if owner != "" {
			w.OwnerReferences = []metav1.OwnerReference{{APIVersion: "trainer.kubeflow.org/v1alpha1", Kind: "TrainJob", Name: owner, UID: "u-owner", Controller: ptr.To(true)}}
		}
		if admittedTo != "" {
			w.Status.Admission = &kueue.Admission{ClusterQueue: kueue.ClusterQueueReference(admittedTo)}
			w.Status.Conditions = []metav1.Condition{{Type: kueue.WorkloadQuotaReserved, Status: metav1.ConditionTrue, Reason: "x", LastTransitionTime: metav1.NewTime(now.Add(-time.Hour))}}
		}
		return w
	}
	snap := &clusterview.Snapshot{
		ClusterQueues: []kueue.ClusterQueue{{ObjectMeta: metav1.ObjectMeta{Name: "q"}, Spec: kueue.ClusterQueueSpec{
			ResourceGroups: []kueue.ResourceGroup{{CoveredResources: []corev1.ResourceName{gpu},
				Flavors: []kueue.FlavorQuotas{{Name: "f", Resources: []kueue.ResourceQuota{{Name: gpu, NominalQuota: resource.MustParse("8")}}}}}}}}},
		LocalQueues: []kueue.LocalQueue{{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "lq"}, Spec: kueue.LocalQueueSpec{ClusterQueue: "q"}}},
		Workloads: []kueue.Workload{
			wl("w-run", "lq", "q", ""),
			wl("w-wait", "lq", "", "llama"),
			wl("w-lost", "nowhere", "", ""),
		},
	}
	got, err := ForWaiting(snap, clustersnap.Options{GPUResource: gpu, Now: now, DefaultDuration: 3600},
		Settings{Runs: 3, Policy: simulator.PolicyKueue, Options: simulator.DefaultOptions()})
	if err != nil {
		t.Fatal(err)
	}
	a := got["team/w-wait"]
	if a == nil || a != got["team/llama"] {
		t.Fatalf("estimates %v: want the same one under team/w-wait and its job team/llama", got)
	}
	if a.Runs != 3 || a.Admitted != 3 || a.Median == nil || *a.Median != 3600 || a.Policy != simulator.PolicyKueue ||
		len(a.Causes) != 1 || a.Causes[0].Cause != CauseFinished || a.Causes[0].Runs != 3 {
		t.Errorf("estimate %+v, want admission at 3600 s after the running job finishes, in 3 of 3 runs", a)
	}
	if !strings.HasPrefix(a.Text(), "expected in 1h") {
		t.Errorf("text %q", a.Text())
	}
	if l := got["team/w-lost"]; l == nil || !strings.Contains(l.Note, "not in the simulated cluster") || l.Text() != l.Note {
		t.Errorf("Workload in no known queue: %+v, want a note", l)
	}
	if _, ok := got["team/w-run"]; ok {
		t.Error("a running Workload got an admission estimate")
	}
}
