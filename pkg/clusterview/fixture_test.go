package clusterview

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/progress-planner/planner/api/v1alpha1"
)

// fixture: ClusterQueue cq (8 GPUs, LowerPriority), job-a's Workload
// admitted with 8 GPUs and boost -100 (plateaued), job-b's waiting.
func fixture() []client.Object {
	t0 := metav1.NewTime(time.Unix(1_700_000_000, 0))
	wl := func(name, job string, admitted bool, boost string, created int64) *kueue.Workload {
		w := &kueue.Workload{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: name, CreationTimestamp: metav1.NewTime(time.Unix(created, 0)),
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "trainer.kubeflow.org/v1alpha1", Kind: "TrainJob", Name: job, UID: types.UID("u-" + job), Controller: ptr.To(true)}}},
			Spec: kueue.WorkloadSpec{QueueName: "lq", PodSets: []kueue.PodSet{{Name: "node", Count: 1, Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("8")}}}}}}}}}}
		if boost != "" {
			w.Annotations = map[string]string{"kueue.x-k8s.io/priority-boost": boost}
		}
		if admitted {
			w.Status.Admission = &kueue.Admission{ClusterQueue: "cq"}
			w.Status.Conditions = []metav1.Condition{{Type: kueue.WorkloadQuotaReserved, Status: metav1.ConditionTrue, Reason: "x", LastTransitionTime: t0},
				{Type: kueue.WorkloadAdmitted, Status: metav1.ConditionTrue, Reason: "x", LastTransitionTime: t0}}
		}
		return w
	}
	cq := &kueue.ClusterQueue{ObjectMeta: metav1.ObjectMeta{Name: "cq"}, Spec: kueue.ClusterQueueSpec{
		Preemption: &kueue.ClusterQueuePreemption{WithinClusterQueue: kueue.PreemptionPolicyLowerPriority},
		ResourceGroups: []kueue.ResourceGroup{{CoveredResources: []corev1.ResourceName{"nvidia.com/gpu"}, Flavors: []kueue.FlavorQuotas{{Name: "f",
			Resources: []kueue.ResourceQuota{{Name: "nvidia.com/gpu", NominalQuota: resource.MustParse("8")}}}}}}}}
	lq := &kueue.LocalQueue{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "lq"}, Spec: kueue.LocalQueueSpec{ClusterQueue: "cq"}}
	pf := &v1alpha1.ProgressForecast{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "job-a"}, Spec: v1alpha1.ProgressForecastSpec{JobRef: v1alpha1.JobRef{APIVersion: "trainer.kubeflow.org/v1alpha1", Kind: "TrainJob", Name: "job-a"}},
		Status: v1alpha1.ProgressForecastStatus{Workload: "trainjob-job-a-1", ClusterQueue: "cq", Verdict: "Plateaued", Boost: -100, AdvisedBoost: -100,
			Mode: "enforce", Reason: "Plateaued: plateau probability 97%", Objective: "eval_loss,minimize",
			Forecast: &v1alpha1.ForecastSummary{Time: t0, Reports: 40, Progress: "60%", PlateauProbability: "97%"}}}
	return []client.Object{cq, lq, pf, wl("trainjob-job-a-1", "job-a", true, "-100", 1_700_000_000), wl("trainjob-job-b-1", "job-b", false, "", 1_700_000_100)}
}
