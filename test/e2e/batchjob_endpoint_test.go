//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/progress-planner/planner/api/v1alpha1"
	"github.com/progress-planner/planner/pkg/jobframework"
	"github.com/progress-planner/planner/pkg/kueueext"
	"github.com/progress-planner/planner/pkg/preempt"
	"github.com/progress-planner/planner/pkg/progress"
	"github.com/progress-planner/planner/pkg/progressendpoint"
	"github.com/progress-planner/planner/pkg/report"
	"github.com/progress-planner/planner/test/framework"
)

// TestBatchJobYieldsThroughEndpoint is scenario 1 for a Kueue-managed
// batch/v1 Job whose progress arrives through the planner's HTTPS progress
// endpoint, wired as `planner run` wires it (progressendpoint.ToSource of
// the controllers' jobframework.MemorySource): the reporter posts what the
// Kubeflow SDK and the Hugging Face callback post (the Trainer's path
// shape, a bearer token bound to the job's pod with the planner's
// audience, `{"trainerStatus": …}`), over TLS from the planner's own CA.
// The Job plateaus, its Workload's boost goes to -100, and a waiting Job
// of the same priority is admitted in its place.
func TestBatchJobYieldsThroughEndpoint(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	env := framework.Start(t, framework.Options{ExtraCRDPaths: []string{crdDir},
		Frameworks: []string{framework.TrainJobFramework, framework.JobSetFramework, framework.BatchJobFramework}})
	const ns, queue = endpointNS, "gpus"
	if _, _, err := env.CreateGPUQueue(ctx, ns, queue, 8); err != nil {
		t.Fatal(err)
	}
	if err := env.CreateNamespace(ctx, "planner-system"); err != nil {
		t.Fatal(err)
	}
	mustCreate(t, env.Client, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "reporter"}})
	kind := jobframework.BatchJob{}

	// job-a runs (no kubelet: its pod is created as the Job controller
	// would, run by the reporter ServiceAccount); job-b waits for its GPUs.
	a := gpuJob(ns, "job-a", queue, 8)
	a.Spec.Template.Spec.ServiceAccountName = "reporter"
	mustCreate(t, env.Client, a)
	wlA := waitJobWorkload(ctx, t, env, jobframework.RefOf(kind, a))
	if _, err := env.WaitFor(ctx, wlA, bound, func() bool { return framework.WorkloadAdmitted(wlA) }); err != nil {
		t.Fatalf("job-a's Workload not admitted: %v; conditions %+v", err, wlA.Status.Conditions)
	}
	podA := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "job-a-0", OwnerReferences: []metav1.OwnerReference{{
			APIVersion: "batch/v1", Kind: "Job", Name: a.Name, UID: a.UID, Controller: ptr.To(true)}}},
		Spec: reporterPodSpec(),
	}
	mustCreate(t, env.Client, podA)
	b := gpuJob(ns, "job-b", queue, 8)
	mustCreate(t, env.Client, b)
	wlB := waitJobWorkload(ctx, t, env, jobframework.RefOf(kind, b))
	if err := env.HoldsFor(ctx, wlB, 2*time.Second, func() bool { return !framework.WorkloadQuotaReserved(wlB) }); err != nil {
		t.Fatalf("job-b was admitted beside job-a: %v", err)
	}

	// The planner with its endpoint, as `planner run --progress-endpoint-bind-address` wires them.
	src := jobframework.NewMemorySource()
	c, _ := runPlannerWith(ctx, t, env.Config, env.Config, kueueext.Options{Config: testConfig(), SkipNameValidation: true, Reports: src}, 30*time.Second)
	cs, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	w := &endpointWorld{env: env, cs: cs, ns: ns, pods: map[string]*corev1.Pod{a.Name: podA}, to: progressendpoint.ToSource(src)}
	// Reports come 50× faster than recorded (every 0.2 s): the per-job
	// limit is raised to match; the default (1/s, burst 20) is tested in
	// TestProgressEndpointRateLimitPerJob.
	w.serve(t, ctx, progressendpoint.RateLimit{QPS: 20, Burst: 20})
	token := w.token(t, a.Name, progressendpoint.DefaultAudience)

	replayStart := time.Now()
	posted := make(chan error, 1)
	reports := prefix(history(t, "synth__early-plateau").Reports, 0.9)
	go func() { posted <- postReports(ctx, w, a.Name, token, reports, replaySpeed) }()
	pf := waitPF(ctx, t, c, a, plannerBound, "verdict Plateaued", func(pf *v1alpha1.ProgressForecast) bool {
		return pf.Status.Verdict == string(preempt.Plateaued)
	})
	if r := pf.Spec.JobRef; r.Kind != "Job" || r.UID != a.UID {
		t.Errorf("spec.jobRef %+v", r)
	}
	detectable := time.Unix(0, int64(decisionOf(t, pf).VerdictSince*1e9))
	t.Logf("job-a: Plateaued %v into the replay (%d observations, all through the endpoint): %s",
		detectable.Sub(replayStart).Round(time.Millisecond), pf.Status.Observations, pf.Status.Reason)
	if _, err := env.WaitFor(ctx, wlA, framework.DefaultWait, func() bool { v, _ := boostOf(wlA); return v == "-100" }); err != nil {
		t.Fatalf("job-a's Workload boost not -100: %v (annotations %v)", err, wlA.Annotations)
	}
	boosted := time.Now()
	evicted, admitted := waitYield(ctx, t, env, wlA, wlB)
	t.Logf("plateau detectable → boost written %v → job-a evicted %v → job-b admitted %v; plateau detectable → job-b admitted: %v",
		boosted.Sub(detectable).Round(time.Millisecond), evicted.Sub(boosted).Round(time.Millisecond),
		admitted.Sub(evicted).Round(time.Millisecond), admitted.Sub(detectable).Round(time.Millisecond))
	// `planner explain` (the built binary) names the Workload the
	// controller acted on for the Job, and its verdict.
	var e report.Explanation
	out := runCLI(ctx, t, plannerBinary(t), "explain", ns+"/"+a.Name, "--kubeconfig", writeKubeconfig(t, env.Config), "-o", "json")
	if err := json.Unmarshal([]byte(out), &e); err != nil {
		t.Fatalf("explain -o json: %v\n%s", err, out)
	}
	if e.Workload != ns+"/"+wlA.Name || e.Verdict != string(preempt.Plateaued) {
		t.Errorf("explain %s/%s: Workload %q verdict %q; the controller acted on %q (Plateaued)", ns, a.Name, e.Workload, e.Verdict, wlA.Name)
	}
	cancel()
	if err := <-posted; err != nil && ctx.Err() == nil {
		t.Errorf("posting reports: %v", err)
	}
	var got v1alpha1.ProgressForecast
	if err := c.Get(context.Background(), client.ObjectKeyFromObject(a), &got); err == nil && got.Status.Rejections != nil {
		t.Logf("rejections in job-a's history: %v", got.Status.Rejections)
	}
}

// postReports posts reports for job at speed× their recorded pace, each
// stamped with the time it is sent, as a reporter does; it stops at the
// first refusal.
func postReports(ctx context.Context, w *endpointWorld, job, token string, reports []progress.FileReport, speed float64) error {
	start := time.Now()
	for _, r := range reports {
		at := start.Add(time.Duration((r.T - reports[0].T) / speed * float64(time.Second)))
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(time.Until(at)):
		}
		s := r.TrainerStatus
		now := time.Now().UTC().Truncate(time.Second)
		s.LastUpdatedTime = &now
		body, err := json.Marshal(map[string]any{"trainerStatus": s})
		if err != nil {
			return err
		}
		code, st, _, err := w.postCtx(ctx, job, token, string(body))
		if err != nil {
			return err
		}
		if code != http.StatusOK {
			return fmt.Errorf("report at t=%g: %d %s", r.T, code, st.Message)
		}
	}
	return nil
}
