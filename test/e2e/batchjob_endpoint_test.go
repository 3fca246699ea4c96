//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetapi "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	mpi "github.com/kubeflow/mpi-operator/pkg/apis/kubeflow/v2beta1"
	kftraining "github.com/kubeflow/training-operator/pkg/apis/kubeflow.org/v1"

	"github.com/progress-planner/planner/api/v1alpha1"
	"github.com/progress-planner/planner/pkg/gang"
	"github.com/progress-planner/planner/pkg/jobframework"
	"github.com/progress-planner/planner/pkg/kueueext"
	"github.com/progress-planner/planner/pkg/preempt"
	"github.com/progress-planner/planner/pkg/progress"
	"github.com/progress-planner/planner/pkg/progressendpoint"
	"github.com/progress-planner/planner/pkg/report"
	"github.com/progress-planner/planner/test/framework"
)

// endpointKind is a kind of job whose reports arrive through the
// endpoint in the yield tests: its adapter (which names its status
// path's kind), a queued job of it asking for gpus GPUs, and the pod that runs it
// (no controller runs here: the pod, and any Job between it and the job,
// are created as the kind's controller would).
type endpointKind struct {
	adapter jobframework.Adapter
	newJob  func(ns, name, queue string, gpus int64) client.Object
	podOf   func(t *testing.T, c client.Client, job client.Object) *corev1.Pod
}

var (
	batchJobKind = endpointKind{
		adapter: jobframework.BatchJob{},
		newJob:  func(ns, name, queue string, gpus int64) client.Object { return gpuJob(ns, name, queue, gpus) },
		podOf: func(t *testing.T, c client.Client, job client.Object) *corev1.Pod {
			return reporterPod(t, c, job, "batch/v1", "Job")
		},
	}
	jobSetKind = endpointKind{
		adapter: jobframework.JobSet{},
		newJob:  gpuJobSet,
		podOf: func(t *testing.T, c client.Client, js client.Object) *corev1.Pod {
			// The JobSet controller's child Job, then its pod: the owner
			// chain pod → Job → JobSet the endpoint follows.
			return podUnderJob(t, c, js, jobsetapi.GroupVersion.String(), "JobSet", js.GetName()+"-train-0",
				map[string]string{jobsetapi.JobSetNameKey: js.GetName()})
		},
	}
	pyTorchJobKind = trainingOperatorKind(jobframework.PyTorchJobKind, gpuPyTorchJob)
	tfJobKind      = trainingOperatorKind(jobframework.TFJobKind, gpuTFJob)
	mpiJobKind     = endpointKind{
		adapter: jobframework.KubeflowJob{Kind: jobframework.MPIJobKind},
		newJob:  gpuMPIJob,
		podOf: func(t *testing.T, c client.Client, mj client.Object) *corev1.Pod {
			// The MPI Operator runs the launcher as a batch/v1 Job it
			// controls: the owner chain pod → Job → MPIJob.
			return podUnderJob(t, c, mj, mpi.SchemeGroupVersion.String(), mpi.Kind, mj.GetName()+"-launcher",
				map[string]string{gang.KubeflowJobNameLabel: mj.GetName()})
		},
	}
)

// podUnderJob creates the suspended batch/v1 Job named name, with labels,
// that owner (of kind apiVersion/kind) controls, as owner's controller
// would, then the pod that Job runs.
func podUnderJob(t *testing.T, c client.Client, owner client.Object, apiVersion, kind, name string, labels map[string]string) *corev1.Pod {
	t.Helper()
	child := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: owner.GetNamespace(), Name: name, Labels: labels,
		OwnerReferences: []metav1.OwnerReference{{APIVersion: apiVersion, Kind: kind,
			Name: owner.GetName(), UID: owner.GetUID(), Controller: ptr.To(true)}}},
		Spec: batchv1.JobSpec{Suspend: ptr.To(true), Template: corev1.PodTemplateSpec{Spec: reporterPodSpec()}}}
	mustCreate(t, c, child)
	return reporterPod(t, c, child, "batch/v1", "Job")
}

// trainingOperatorKind is a Training Operator v1 kind whose one pod is
// controlled by the job, as the operator creates it.
func trainingOperatorKind(k jobframework.TrainingOperatorKind, newJob func(ns, name, queue string, gpus int64) client.Object) endpointKind {
	return endpointKind{
		adapter: jobframework.KubeflowJob{Kind: k},
		newJob:  newJob,
		podOf: func(t *testing.T, c client.Client, job client.Object) *corev1.Pod {
			return reporterPod(t, c, job, k.GVK.GroupVersion().String(), k.GVK.Kind)
		},
	}
}

// gpuPyTorchJob is a PyTorchJob of one master pod asking for gpus GPUs,
// queued in LocalQueue queue.
func gpuPyTorchJob(ns, name, queue string, gpus int64) client.Object {
	tmpl := gpuJob(ns, "", queue, gpus).Spec.Template
	tmpl.Spec.Containers[0].Name = kftraining.PyTorchJobDefaultContainerName
	return &kftraining.PyTorchJob{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{jobframework.QueueNameLabel: queue}},
		Spec: kftraining.PyTorchJobSpec{PyTorchReplicaSpecs: map[kftraining.ReplicaType]*kftraining.ReplicaSpec{
			kftraining.PyTorchJobReplicaTypeMaster: {Replicas: ptr.To[int32](1), Template: tmpl},
		}},
	}
}

// gpuTFJob is a TFJob of one worker pod asking for gpus GPUs, queued in
// LocalQueue queue.
func gpuTFJob(ns, name, queue string, gpus int64) client.Object {
	tmpl := gpuJob(ns, "", queue, gpus).Spec.Template
	tmpl.Spec.Containers[0].Name = kftraining.TFJobDefaultContainerName
	return &kftraining.TFJob{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{jobframework.QueueNameLabel: queue}},
		Spec: kftraining.TFJobSpec{TFReplicaSpecs: map[kftraining.ReplicaType]*kftraining.ReplicaSpec{
			kftraining.TFJobReplicaTypeWorker: {Replicas: ptr.To[int32](1), Template: tmpl},
		}},
	}
}

// gpuMPIJob is an MPIJob of one launcher asking for gpus GPUs, queued in
// LocalQueue queue. Kueue's integration needs the launcher; a worker set
// of none keeps the job one pod.
func gpuMPIJob(ns, name, queue string, gpus int64) client.Object {
	tmpl := gpuJob(ns, "", queue, gpus).Spec.Template
	return &mpi.MPIJob{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{jobframework.QueueNameLabel: queue}},
		Spec: mpi.MPIJobSpec{MPIReplicaSpecs: map[mpi.MPIReplicaType]*mpi.ReplicaSpec{
			mpi.MPIReplicaTypeLauncher: {Replicas: ptr.To[int32](1), Template: tmpl},
		}},
	}
}

// reporterPod creates the pod owner (of kind apiVersion/kind) runs, run by
// the reporter ServiceAccount.
func reporterPod(t *testing.T, c client.Client, owner client.Object, apiVersion, kind string) *corev1.Pod {
	t.Helper()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: owner.GetNamespace(), Name: owner.GetName() + "-0", OwnerReferences: []metav1.OwnerReference{{
			APIVersion: apiVersion, Kind: kind, Name: owner.GetName(), UID: owner.GetUID(), Controller: ptr.To(true)}}},
		Spec: reporterPodSpec(),
	}
	mustCreate(t, c, pod)
	return pod
}

// gpuJobSet is a JobSet of one Job of one pod asking for gpus GPUs, queued
// in LocalQueue queue.
func gpuJobSet(ns, name, queue string, gpus int64) client.Object {
	job := gpuJob(ns, "", queue, gpus)
	return &jobsetapi.JobSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{jobframework.QueueNameLabel: queue}},
		Spec: jobsetapi.JobSetSpec{ReplicatedJobs: []jobsetapi.ReplicatedJob{{Name: "train", Replicas: 1,
			Template: batchv1.JobTemplateSpec{Spec: job.Spec}}}},
	}
}

// TestBatchJobYieldsThroughEndpoint and TestJobSetYieldsThroughEndpoint
// are scenario 1 for a Kueue-managed batch/v1 Job and JobSet whose progress
// arrives through the planner's HTTPS progress endpoint, wired as
// `planner run` wires it (progressendpoint.ToSource of the controllers'
// jobframework.MemorySource): the reporter posts what the Kubeflow SDK and
// the Hugging Face callback post (the Trainer's path shape, a bearer token
// bound to the job's pod with the planner's audience, `{"trainerStatus":
// …}`), over TLS from the planner's own CA. The job plateaus, its
// Workload's boost goes to -100, a waiting job of the same kind and
// priority is admitted in its place, and the built `planner explain` names
// the Workload the controller acted on.
func TestBatchJobYieldsThroughEndpoint(t *testing.T) { yieldThroughEndpoint(t, batchJobKind) }

func TestJobSetYieldsThroughEndpoint(t *testing.T) { yieldThroughEndpoint(t, jobSetKind) }

// TestPyTorchJobYieldsThroughEndpoint: the same for a Kubeflow Training
// Operator v1 PyTorchJob (Kueue's kubeflow.org/pytorchjob integration).
func TestPyTorchJobYieldsThroughEndpoint(t *testing.T) { yieldThroughEndpoint(t, pyTorchJobKind) }

// TestTFJobYieldsThroughEndpoint: the same for a TFJob (Kueue's
// kubeflow.org/tfjob integration), the Training Operator kind that shares
// PyTorchJob's API group: its reports go to its own kind's path.
func TestTFJobYieldsThroughEndpoint(t *testing.T) { yieldThroughEndpoint(t, tfJobKind) }

// TestMPIJobYieldsThroughEndpoint: the same for an MPI Operator v2beta1
// MPIJob (Kueue's kubeflow.org/mpijob integration), the kind of the same
// API group at another version with its own Go types.
func TestMPIJobYieldsThroughEndpoint(t *testing.T) { yieldThroughEndpoint(t, mpiJobKind) }

func yieldThroughEndpoint(t *testing.T, k endpointKind) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	env := framework.Start(t, framework.Options{ExtraCRDPaths: []string{crdDir},
		Frameworks: []string{framework.TrainJobFramework, framework.JobSetFramework, framework.BatchJobFramework,
			framework.PyTorchJobFramework, framework.TFJobFramework, framework.MPIJobFramework}})
	const ns, queue = endpointNS, "gpus"
	if _, _, err := env.CreateGPUQueue(ctx, ns, queue, 8); err != nil {
		t.Fatal(err)
	}
	if err := env.CreateNamespace(ctx, "planner-system"); err != nil {
		t.Fatal(err)
	}
	mustCreate(t, env.Client, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "reporter"}})

	// job-a runs; job-b waits for its GPUs.
	a := k.newJob(ns, "job-a", queue, 8)
	mustCreate(t, env.Client, a)
	wlA := waitJobWorkload(ctx, t, env, jobframework.RefOf(k.adapter, a))
	if _, err := env.WaitFor(ctx, wlA, bound, func() bool { return framework.WorkloadAdmitted(wlA) }); err != nil {
		t.Fatalf("job-a's Workload not admitted: %v; conditions %+v", err, wlA.Status.Conditions)
	}
	podA := k.podOf(t, env.Client, a)
	b := k.newJob(ns, "job-b", queue, 8)
	mustCreate(t, env.Client, b)
	wlB := waitJobWorkload(ctx, t, env, jobframework.RefOf(k.adapter, b))
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
	w := &endpointWorld{env: env, cs: cs, ns: ns, kind: k.adapter.GVK().GroupKind(), pods: map[string]*corev1.Pod{a.GetName(): podA}, to: progressendpoint.ToSource(src)}
	// Reports come 50× faster than recorded (every 0.2 s): the per-job
	// limit is raised to match; the default (1/s, burst 20) is tested in
	// TestProgressEndpointRateLimitPerJob.
	w.serve(t, ctx, progressendpoint.RateLimit{QPS: 20, Burst: 20})
	token := w.token(t, a.GetName(), progressendpoint.DefaultAudience)

	replayStart := time.Now()
	posted := make(chan error, 1)
	reports := prefix(history(t, "synth__early-plateau").Reports, 0.9)
	postCtx, stopPosting := context.WithCancel(ctx)
	defer stopPosting()
	go func() { posted <- postReports(postCtx, w, a.GetName(), token, reports, replaySpeed) }()
	pf := waitPF(ctx, t, c, a, plannerBound, "verdict Plateaued", func(pf *v1alpha1.ProgressForecast) bool {
		return pf.Status.Verdict == string(preempt.Plateaued)
	})
	if r := pf.Spec.JobRef; r.Kind != k.adapter.GVK().Kind || r.UID != a.GetUID() {
		t.Errorf("spec.jobRef %+v", r)
	}
	detectable := time.Unix(0, int64(decisionOf(t, pf).VerdictSince*1e9))
	t.Logf("%s job-a: Plateaued %v into the replay (%d observations, all through the endpoint): %s", k.adapter.GVK().Kind,
		detectable.Sub(replayStart).Round(time.Millisecond), pf.Status.Observations, pf.Status.Reason)
	if _, err := env.WaitFor(ctx, wlA, framework.DefaultWait, func() bool { v, _ := boostOf(wlA); return v == "-100" }); err != nil {
		t.Fatalf("job-a's Workload boost not -100: %v (annotations %v)", err, wlA.Annotations)
	}
	boosted := time.Now()
	evicted, admitted := waitYield(ctx, t, env, wlA, wlB)
	t.Logf("plateau detectable → boost written %v → job-a evicted %v → job-b admitted %v; plateau detectable → job-b admitted: %v",
		boosted.Sub(detectable).Round(time.Millisecond), evicted.Sub(boosted).Round(time.Millisecond),
		admitted.Sub(evicted).Round(time.Millisecond), admitted.Sub(detectable).Round(time.Millisecond))
	stopPosting()
	if err := <-posted; err != nil {
		t.Errorf("posting reports: %v", err)
	}
	// `planner explain` (the built binary) names the Workload the
	// controller acted on for the job, and its latest verdict (the job
	// kept reporting after the plateau: by now it may be NearDone).
	pf = waitPF(ctx, t, c, a, bound, "a verdict", func(*v1alpha1.ProgressForecast) bool { return true })
	var e report.Explanation
	out := runCLI(ctx, t, plannerBinary(t), "explain", ns+"/"+a.GetName(), "--kubeconfig", writeKubeconfig(t, env.Config), "-o", "json")
	if err := json.Unmarshal([]byte(out), &e); err != nil {
		t.Fatalf("explain -o json: %v\n%s", err, out)
	}
	if e.Workload != ns+"/"+wlA.Name || e.Verdict != pf.Status.Verdict {
		t.Errorf("explain %s/%s: Workload %q verdict %q; the controller acted on %q, verdict %q", ns, a.GetName(), e.Workload, e.Verdict, wlA.Name, pf.Status.Verdict)
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
		if ctx.Err() != nil {
			return nil // stopped by the caller, possibly mid-request
		}
		if err != nil {
			return err
		}
		if code != http.StatusOK {
			return fmt.Errorf("report at t=%g: %d %s", r.T, code, st.Message)
		}
	}
	return nil
}
