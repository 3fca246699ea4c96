//go:build e2e

package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/progress-planner/planner/api/v1alpha1"
	"github.com/progress-planner/planner/pkg/jobframework"
	"github.com/progress-planner/planner/pkg/kueueext"
	"github.com/progress-planner/planner/pkg/preempt"
	"github.com/progress-planner/planner/pkg/progress"
	"github.com/progress-planner/planner/pkg/workloads"
	"github.com/progress-planner/planner/test/framework"
)

// A Kueue-managed batch/v1 Job tracked through the job framework: Kueue's
// Job integration queues and admits it, its progress reports are put into
// the in-process planner's in-memory ReportSource (jobframework.MemorySource,
// as the progress endpoint will), and the planner forecasts it, writes its
// ProgressForecast (spec.jobRef kind Job) and lowers its Workload's boost
// when it plateaus. The HTTPS progress endpoint is not part of this test:
// reports enter the source directly.
func TestPlannerBatchJobFromReportSource(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	env := framework.Start(t, framework.Options{ExtraCRDPaths: []string{crdDir},
		Frameworks: []string{framework.TrainJobFramework, framework.JobSetFramework, framework.BatchJobFramework}})
	const ns, queue = "team-a", "gpus"
	if _, _, err := env.CreateGPUQueue(ctx, ns, queue, 8); err != nil {
		t.Fatal(err)
	}
	job := gpuJob(ns, "sweep", queue, 8)
	if err := env.Client.Create(ctx, job); err != nil {
		t.Fatal(err)
	}
	if !ptr.Deref(job.Spec.Suspend, false) {
		t.Fatalf("Job %s was created unsuspended: Kueue's Job webhook did not run", job.Name)
	}
	kind := jobframework.BatchJob{}
	wl := waitJobWorkload(ctx, t, env, jobframework.RefOf(kind, job))
	if _, err := env.WaitFor(ctx, wl, bound, func() bool { return framework.WorkloadAdmitted(wl) }); err != nil {
		t.Fatalf("Workload %s not admitted: %v; conditions %+v", wl.Name, err, wl.Status.Conditions)
	}

	src := jobframework.NewMemorySource()
	cfg := testConfig()
	c, _ := runPlannerWith(ctx, t, env.Config, env.Config, kueueext.Options{Config: cfg, SkipNameValidation: true, Reports: src}, 30*time.Second)

	pf := waitPF(ctx, t, c, job, plannerBound, "created for the Job", func(pf *v1alpha1.ProgressForecast) bool { return pf.Status.Workload == wl.Name })
	if r := pf.Spec.JobRef; r.APIVersion != "batch/v1" || r.Kind != "Job" || r.Name != job.Name || r.UID != job.UID {
		t.Errorf("spec.jobRef %+v", r)
	}

	// Reports as the endpoint would deliver them: at replaySpeed, stamped
	// with the time they arrive.
	ref := jobframework.RefOf(kind, job)
	reports := prefix(history(t, "synth__early-plateau").Reports, 0.9)
	go putReports(ctx, src, ref, reports, replaySpeed)

	pf = waitPF(ctx, t, c, job, plannerBound, "verdict Plateaued", func(pf *v1alpha1.ProgressForecast) bool {
		return pf.Status.Verdict == string(preempt.Plateaued)
	})
	t.Logf("Job %s: Plateaued after %d observations: %s", job.Name, pf.Status.Observations, pf.Status.Reason)
	if _, err := env.WaitFor(ctx, wl, framework.DefaultWait, func() bool { v, _ := boostOf(wl); return v == "-100" }); err != nil {
		t.Fatalf("the Job's Workload boost not -100: %v (annotations %v)", err, wl.Annotations)
	}
	if !kueueext.PlannerOwnsBoost(wl.ManagedFields) {
		t.Errorf("the boost on %s is not owned by field manager %s", wl.Name, kueueext.FieldManager)
	}
	ev := waitEvent(ctx, t, c, ns, "Job", job.Name, kueueext.ReasonBoostChanged)
	if !strings.Contains(ev.Note, "priority boost -100") {
		t.Errorf("boost Event on the Job: %q", ev.Note)
	}
}

// gpuJob is a batch/v1 Job of one pod asking for gpus GPUs, queued in
// LocalQueue queue.
func gpuJob(ns, name, queue string, gpus int64) *batchv1.Job {
	q := *resource.NewQuantity(gpus, resource.DecimalSI)
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{jobframework.QueueNameLabel: queue}},
		Spec: batchv1.JobSpec{
			Parallelism: ptr.To[int32](1), Completions: ptr.To[int32](1),
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				RestartPolicy: corev1.RestartPolicyNever,
				Containers: []corev1.Container{{Name: "train", Image: "busybox",
					Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{framework.GPU: q}, Limits: corev1.ResourceList{framework.GPU: q}}}},
			}},
		},
	}
}

// waitJobWorkload waits for the Workload Kueue creates for job, found as
// the planner finds it.
func waitJobWorkload(ctx context.Context, t *testing.T, env *framework.Env, job workloads.Ref) *kueue.Workload {
	t.Helper()
	var wl *kueue.Workload
	if _, err := framework.Poll(ctx, bound, func(ctx context.Context) (bool, error) {
		m, err := jobframework.FindWorkload(ctx, env.Client, job)
		if err != nil {
			return false, err
		}
		wl = m.Workload
		return wl != nil, nil
	}); err != nil {
		t.Fatalf("no Workload for %s: %v", job, err)
	}
	return wl
}

// putReports puts reports into src as job's at speed× their recorded
// pace, each stamped with its arrival (the reporter's lastUpdatedTime too).
func putReports(ctx context.Context, src *jobframework.MemorySource, job workloads.Ref, reports []progress.FileReport, speed float64) {
	start := time.Now()
	for _, r := range reports {
		at := start.Add(time.Duration((r.T - reports[0].T) / speed * float64(time.Second)))
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Until(at)):
		}
		s := r.TrainerStatus
		now := time.Now()
		s.LastUpdatedTime = &now
		src.Put(job, s, now)
	}
}
