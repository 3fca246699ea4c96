package admissionstatus

import (
	"context"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/progress-planner/planner/api/v1alpha1"
	"github.com/progress-planner/planner/pkg/clusterview"
	"github.com/progress-planner/planner/pkg/kueueext"
	"github.com/progress-planner/planner/pkg/progress"
)

// BenchmarkPublish is one publisher pass over a ClusterQueue of N GPUs
// held by N running one-GPU jobs, each with a 512-report history on its
// ProgressForecast (refit for its ETA), and 10 jobs waiting: the cost of
// one pass per admissionEstimates.interval. The fake client deep-copies
// what it lists, as the manager's cache does.
//
//	go test -run '^$' -bench BenchmarkPublish -benchmem -count 6 ./pkg/admissionstatus/
//
// latest=true gives the publisher the controller's latest forecasts, as
// planner run does (Publisher.Latest): no refits.
func BenchmarkPublish(b *testing.B) {
	for _, n := range []int{100, 1000} {
		for _, latest := range []bool{false, true} {
			b.Run(fmt.Sprintf("running=%d/latest=%v", n, latest), func(b *testing.B) {
				benchPublish(b, n, latest)
			})
		}
	}
}

func benchPublish(b *testing.B, n int, latest bool) {
	t0 := time.Unix(1_700_000_000, 0)
	objs := benchCluster(b, n, 10, t0)
	c := fake.NewClientBuilder().WithScheme(kueueext.NewScheme()).WithObjects(objs...).
		WithStatusSubresource(&kueue.Workload{}, &v1alpha1.ProgressForecast{}).Build()
	clk := clocktesting.NewFakeClock(t0.Add(2 * time.Hour))
	p := New(publishing(), c, c, c, clk, logr.Discard())
	if latest {
		m := map[types.NamespacedName]kueueext.LatestForecast{}
		for _, o := range objs {
			if pf, ok := o.(*v1alpha1.ProgressForecast); ok && pf.Status.History != nil {
				// The forecast the refit makes, so that both variants
				// simulate the same futures.
				fc, _, _, err := clusterview.ForecastOf(pf, clk.Now())
				if err != nil || fc == nil {
					b.Fatalf("forecast %s: %v", pf.Name, err)
				}
				m[client.ObjectKeyFromObject(pf)] = kueueext.LatestForecast{ForecastUID: pf.UID, At: clk.Now(), ETA: fc.ETA, Plateaued: fc.Plateaued}
			}
		}
		p.Latest = func() map[types.NamespacedName]kueueext.LatestForecast { return m }
	}
	ctx := context.Background()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		// Each pass a minute later: the estimates move little, so
		// most passes patch nothing, as in a steady cluster.
		clk.Step(time.Minute)
		if _, err := p.Publish(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

func benchCluster(b *testing.B, running, waiting int, t0 time.Time) []client.Object {
	b.Helper()
	cq := &kueue.ClusterQueue{ObjectMeta: metav1.ObjectMeta{Name: "cq"}, Spec: kueue.ClusterQueueSpec{
		ResourceGroups: []kueue.ResourceGroup{{CoveredResources: []corev1.ResourceName{gpu}, Flavors: []kueue.FlavorQuotas{{Name: "f",
			Resources: []kueue.ResourceQuota{{Name: gpu, NominalQuota: *resource.NewQuantity(int64(running), resource.DecimalSI)}}}}}}}}
	lq := &kueue.LocalQueue{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "lq"}, Spec: kueue.LocalQueueSpec{ClusterQueue: "cq"}}
	objs := []client.Object{cq, lq}
	hist := benchHistory(b, float64(t0.Unix()))
	for i := range running + waiting {
		job := fmt.Sprintf("job-%05d", i)
		wl := &kueue.Workload{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "trainjob-" + job, CreationTimestamp: metav1.NewTime(t0),
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "trainer.kubeflow.org/v1alpha1", Kind: "TrainJob", Name: job,
				UID: types.UID("uid-" + job), Controller: ptr.To(true)}}},
			Spec: kueue.WorkloadSpec{QueueName: "lq", PodSets: []kueue.PodSet{{Name: "node", Count: 1, Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{gpu: resource.MustParse("1")}}}}}}}}}}
		pf := &v1alpha1.ProgressForecast{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: job, UID: types.UID("pf-" + job),
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "trainer.kubeflow.org/v1alpha1", Kind: "TrainJob", Name: job,
				UID: types.UID("uid-" + job), Controller: ptr.To(true)}}},
			Spec: v1alpha1.ProgressForecastSpec{JobRef: v1alpha1.JobRef{APIVersion: "trainer.kubeflow.org/v1alpha1", Kind: "TrainJob", Name: job, UID: types.UID("uid-" + job)}}}
		if i < running {
			admit(wl, t0)
			pf.Status = v1alpha1.ProgressForecastStatus{Objective: "loss,minimize", ObjectiveSource: "default",
				Workload: wl.Name, History: &runtime.RawExtension{Raw: hist}}
		}
		objs = append(objs, wl, pf)
	}
	return objs
}

// benchHistory is a 512-report history of a run at 40 % of 10,000 steps,
// its loss still falling.
func benchHistory(b *testing.B, t0 float64) []byte {
	b.Helper()
	h := progress.NewHistory(progress.DefaultLimits())
	for i := range 512 {
		step := i * 8
		loss := 1 + 3/(1+float64(step)/2000)
		pct := math.Floor(100 * float64(step) / 10000)
		h.Observe(t0+float64(i)*10, progress.TrainerStatus{ProgressPercentage: &pct, Metrics: []progress.MetricValue{
			{Name: "loss", Value: fmt.Sprintf("%.5g", loss)}, {Name: "current_step", Value: fmt.Sprint(step)},
			{Name: "total_steps", Value: "10000"}}})
	}
	raw, err := h.MarshalJSON()
	if err != nil {
		b.Fatal(err)
	}
	return raw
}
