//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	admissionregv1 "k8s.io/api/admissionregistration/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
	jobset "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	"github.com/progress-planner/planner/pkg/gang"
	"github.com/progress-planner/planner/pkg/podwebhook"
	"github.com/progress-planner/planner/pkg/progressendpoint"
	"github.com/progress-planner/planner/test/framework"
)

// TestPodWebhook registers the webhook's configuration (podwebhook.
// Configuration, with the caBundle CAInjector sets) on the real
// kube-apiserver, pointed at a webhook server in the test process, and
// creates pods the way the Job controller does (its label, its owner
// reference). No kubelet runs: the pod specs are what is checked.
func TestPodWebhook(t *testing.T) {
	env := framework.Start(t)
	c := env.Client
	for _, ns := range []*corev1.Namespace{
		{ObjectMeta: metav1.ObjectMeta{Name: "planner-system"}},
		{ObjectMeta: metav1.ObjectMeta{Name: "opted-in", Labels: map[string]string{podwebhook.OptInLabel: podwebhook.OptInValue}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "not-opted-in"}},
	} {
		mustCreate(t, c, ns)
		// No controller-manager runs: the pods' ServiceAccount by hand.
		mustCreate(t, c, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: "default"}})
	}
	// The apiserver reaches the webhook at https://localhost:PORT: the
	// certificate is for that name, from the planner's managed CA.
	certs, err := progressendpoint.NewCertManager(c, progressendpoint.CertOptions{
		Namespace: "planner-system", SecretName: "progress-tls", DNSNames: []string{"localhost"}, Log: testr.New(t),
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := certs.Ensure(t.Context()); err != nil {
		t.Fatal(err)
	}
	opts := podwebhook.Options{BaseURL: "https://progress.planner-system.svc:443", Audience: "progress-planner", TokenExpirationSeconds: 1800}
	stop := startPodWebhook(t, certs, &podwebhook.Handler{Reader: c, Decoder: admission.NewDecoder(env.Scheme), Options: opts, CA: certs.CABundle, Log: testr.New(t)})
	opts.CABundle = certs.CABundle() // what the pods must carry
	// The apiserver reaches it through an ordinary configuration object.
	port := stop.port
	wc := podwebhook.Configuration("progress-planner-pods", admissionregv1.WebhookClientConfig{
		URL: ptr.To(fmt.Sprintf("https://localhost:%d%s", port, podwebhook.Path)),
	})
	mustCreate(t, c, wc)
	inj := &podwebhook.CAInjector{Client: c, CA: certs.CABundle, WebhookConfiguration: wc.Name, Log: testr.New(t)}
	if err := inj.Sync(t.Context()); err != nil {
		t.Fatal(err)
	}
	assertCAInjected(t, c, certs.CABundle())

	t.Run("opted-in Job's pod gets the endpoint", func(t *testing.T) {
		pod := createJobPod(t, c, "opted-in", "sweep")
		assertPointed(t, pod, opts, "https://progress.planner-system.svc:443/apis/batch/v1/namespaces/opted-in/jobs/sweep/status")
	})
	t.Run("a TrainJob's JobSet pod gets the TrainJob's path", func(t *testing.T) {
		pod := createJobSetPod(t, env, "opted-in", "llama")
		assertPointed(t, pod, opts, "https://progress.planner-system.svc:443/apis/trainer.kubeflow.org/v1alpha1/namespaces/opted-in/trainjobs/llama/status")
	})
	// The Training Operator labels its pods with the job's name and its own
	// controller's name, which tells the kinds of its one API group apart.
	for _, k := range []struct{ operator, resource string }{{"pytorchjob-controller", "pytorchjobs"}, {"tfjob-controller", "tfjobs"}} {
		t.Run("a "+k.resource+" pod gets its kind's path", func(t *testing.T) {
			pod := createAndRead(t, c, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "opted-in", Name: "bert-" + k.resource + "-0",
				Labels: map[string]string{gang.KubeflowJobNameLabel: "bert", "training.kubeflow.org/replica-type": "master",
					"training.kubeflow.org/operator-name": k.operator}}, Spec: testPodSpec()})
			assertPointed(t, pod, opts, "https://progress.planner-system.svc:443/apis/kubeflow.org/v1/namespaces/opted-in/"+k.resource+"/bert/status")
		})
	}
	t.Run("a pod of no job in an opted-in namespace is untouched", func(t *testing.T) {
		assertUntouched(t, createAndRead(t, c, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "opted-in", Name: "web"}, Spec: testPodSpec()}))
	})
	t.Run("a pod of a namespace not opted in is untouched", func(t *testing.T) {
		assertUntouched(t, createJobPod(t, c, "not-opted-in", "sweep"))
	})
	t.Run("an opted-in job's pod in a namespace not opted in gets the endpoint", func(t *testing.T) {
		pod := createJobPod(t, c, "not-opted-in", "own-choice", podwebhook.OptInLabel, podwebhook.OptInValue)
		assertPointed(t, pod, opts, "https://progress.planner-system.svc:443/apis/batch/v1/namespaces/not-opted-in/jobs/own-choice/status")
	})
	t.Run("webhook down: the pod is admitted untouched", func(t *testing.T) {
		stop.stop(t)
		start := time.Now()
		pod := createJobPod(t, c, "opted-in", "after-stop")
		assertUntouched(t, pod)
		t.Logf("admitted %v after the webhook stopped (failurePolicy Ignore)", time.Since(start).Round(time.Millisecond))
	})
}

type runningWebhook struct {
	port   int
	cancel context.CancelFunc
	done   chan error
}

func (r *runningWebhook) stop(t *testing.T) {
	t.Helper()
	if r.cancel == nil {
		return
	}
	r.cancel()
	r.cancel = nil
	if err := <-r.done; err != nil {
		t.Errorf("webhook server: %v", err)
	}
}

// startPodWebhook serves h with podwebhook.NewServer (as `planner run`
// does) on a free loopback port and waits until it accepts connections.
func startPodWebhook(t *testing.T, certs *progressendpoint.CertManager, h *podwebhook.Handler) *runningWebhook {
	t.Helper()
	port := freeLoopbackPort(t)
	srv := podwebhook.NewServer("127.0.0.1", port, certs.GetCertificate, h)
	ctx, cancel := context.WithCancel(t.Context())
	r := &runningWebhook{port: port, cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- srv.Start(ctx) }()
	t.Cleanup(func() { r.stop(t) })
	deadline := time.Now().Add(10 * time.Second)
	for srv.StartedChecker()(nil) != nil {
		if time.Now().After(deadline) {
			t.Fatal("webhook server did not start")
		}
		time.Sleep(20 * time.Millisecond)
	}
	return r
}

func assertCAInjected(t *testing.T, c client.Client, ca []byte) {
	t.Helper()
	var wc admissionregv1.MutatingWebhookConfiguration
	if err := c.Get(t.Context(), client.ObjectKey{Name: "progress-planner-pods"}, &wc); err != nil {
		t.Fatal(err)
	}
	for _, w := range wc.Webhooks {
		if string(w.ClientConfig.CABundle) != string(ca) {
			t.Fatalf("%s: caBundle not set from the planner's CA", w.Name)
		}
	}
}

// createJobPod creates a Job and a pod as its controller would: the
// job-name label, the pod template's labels (label, value pairs) and a
// controller owner reference.
func createJobPod(t *testing.T, c client.Client, ns, name string, templateLabels ...string) *corev1.Pod {
	t.Helper()
	spec := testPodSpec()
	labels := map[string]string{}
	for i := 0; i+1 < len(templateLabels); i += 2 {
		labels[templateLabels[i]] = templateLabels[i+1]
	}
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       batchv1.JobSpec{Suspend: ptr.To(true), Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: spec}},
	}
	mustCreate(t, c, job)
	podLabels := map[string]string{gang.JobNameLabel: name}
	for k, v := range labels {
		podLabels[k] = v
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name + "-0", Labels: podLabels,
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: name, UID: job.UID, Controller: ptr.To(true)}}},
		Spec: spec,
	}
	return createAndRead(t, c, pod)
}

// createJobSetPod creates a TrainJob, the JobSet it controls (by hand: no
// Trainer controller runs) and a pod of the JobSet's Job, with the labels
// the JobSet and Job controllers set.
func createJobSetPod(t *testing.T, env *framework.Env, ns, name string) *corev1.Pod {
	t.Helper()
	c := env.Client
	if _, err := env.InstallTorchRuntime(t.Context()); err != nil {
		t.Fatal(err)
	}
	tj, err := env.CreateTrainJob(t.Context(), ns, name, "lq", 1, "")
	if err != nil {
		t.Fatal(err)
	}
	spec := testPodSpec()
	js := &jobset.JobSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, OwnerReferences: []metav1.OwnerReference{{
			APIVersion: "trainer.kubeflow.org/v1alpha1", Kind: "TrainJob", Name: name, UID: tj.UID, Controller: ptr.To(true),
		}}},
		Spec: jobset.JobSetSpec{Suspend: ptr.To(true), ReplicatedJobs: []jobset.ReplicatedJob{{
			Name: "node", Replicas: 1, Template: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: spec}}},
		}}},
	}
	mustCreateOwned(t, c, js)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name + "-node-0-0", Labels: map[string]string{
			gang.JobSetNameLabel: name, gang.JobNameLabel: name + "-node-0",
		}},
		Spec: spec,
	}
	return createAndRead(t, c, pod)
}

func createAndRead(t *testing.T, c client.Client, pod *corev1.Pod) *corev1.Pod {
	t.Helper()
	mustCreate(t, c, pod)
	// What the apiserver stored, not what the client sent.
	var got corev1.Pod
	if err := c.Get(t.Context(), client.ObjectKeyFromObject(pod), &got); err != nil {
		t.Fatal(err)
	}
	return &got
}

func testPodSpec() corev1.PodSpec {
	return corev1.PodSpec{
		RestartPolicy:                corev1.RestartPolicyNever,
		AutomountServiceAccountToken: ptr.To(false),
		Containers: []corev1.Container{
			{Name: "train", Image: "registry.invalid/train:1"},
			{Name: "own", Image: "registry.invalid/train:1", Env: []corev1.EnvVar{{Name: podwebhook.EnvURL, Value: "https://mine"}}},
		},
	}
}

func assertPointed(t *testing.T, pod *corev1.Pod, opts podwebhook.Options, url string) {
	t.Helper()
	vols := map[string]corev1.Volume{}
	for _, v := range pod.Spec.Volumes {
		vols[v.Name] = v
	}
	tok := vols[podwebhook.TokenVolume].Projected
	if tok == nil || tok.Sources[0].ServiceAccountToken == nil || tok.Sources[0].ServiceAccountToken.Audience != opts.Audience ||
		*tok.Sources[0].ServiceAccountToken.ExpirationSeconds != opts.TokenExpirationSeconds {
		t.Errorf("token volume = %+v", vols[podwebhook.TokenVolume])
	}
	if d := vols[podwebhook.CAVolume].DownwardAPI; d == nil || len(d.Items) != 1 || d.Items[0].Path != progressendpoint.KeyCACert ||
		d.Items[0].FieldRef == nil || !strings.Contains(d.Items[0].FieldRef.FieldPath, podwebhook.CAAnnotation) {
		t.Errorf("CA volume = %+v", vols[podwebhook.CAVolume])
	}
	if pod.Annotations[podwebhook.CAAnnotation] != string(opts.CABundle) {
		t.Errorf("CA annotation = %q, want the planner's CA", pod.Annotations[podwebhook.CAAnnotation])
	}
	for _, ctr := range pod.Spec.Containers {
		env := map[string]string{}
		for _, e := range ctr.Env {
			env[e.Name] = e.Value
		}
		want := url
		if ctr.Name == "own" {
			want = "https://mine" // the container's own setting wins
		}
		if env[podwebhook.EnvURL] != want || !strings.HasSuffix(env[podwebhook.EnvCACert], "/ca.crt") || !strings.HasSuffix(env[podwebhook.EnvToken], "/token") {
			t.Errorf("container %s env = %v", ctr.Name, env)
		}
		if len(ctr.VolumeMounts) != 2 {
			t.Errorf("container %s mounts = %+v", ctr.Name, ctr.VolumeMounts)
		}
	}
}

func assertUntouched(t *testing.T, pod *corev1.Pod) {
	t.Helper()
	for _, v := range pod.Spec.Volumes {
		if v.Name == podwebhook.TokenVolume || v.Name == podwebhook.CAVolume {
			t.Errorf("volume %s injected", v.Name)
		}
	}
	for _, ctr := range pod.Spec.Containers {
		for _, e := range ctr.Env {
			if e.Name != podwebhook.EnvURL || ctr.Name != "own" {
				t.Errorf("container %s: env %s injected", ctr.Name, e.Name)
			}
		}
	}
}
