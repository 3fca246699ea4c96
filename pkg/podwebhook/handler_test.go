package podwebhook

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/go-logr/logr/testr"
	admissionv1 "k8s.io/api/admission/v1"
	admissionregv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
	jobset "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	"github.com/progress-planner/planner/pkg/gang"
	"github.com/progress-planner/planner/pkg/kueueext"
)

func namespace(name string, in bool) *corev1.Namespace {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if in {
		ns.Labels = map[string]string{OptInLabel: OptInValue}
	}
	return ns
}

func newHandler(t *testing.T, objs ...client.Object) *Handler {
	s := kueueext.NewScheme()
	c := fake.NewClientBuilder().WithScheme(s).WithObjects(objs...).Build()
	return &Handler{Reader: c, Decoder: admission.NewDecoder(s), Options: testOpts, CA: func() []byte { return testOpts.CABundle }, Log: testr.New(t)}
}

// admit sends pod through the handler and applies nothing: it returns
// the response and the URL the patch sets on the first container, if any.
func admit(t *testing.T, h *Handler, ns string, labels map[string]string) (admission.Response, string) {
	t.Helper()
	pod := trainPod()
	pod.Labels = labels
	raw, err := json.Marshal(pod)
	if err != nil {
		t.Fatal(err)
	}
	resp := h.Handle(context.Background(), admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
		Namespace: ns, Operation: admissionv1.Create, Object: runtime.RawExtension{Raw: raw},
	}})
	if !resp.Allowed {
		t.Fatalf("pod denied: %+v", resp.Result)
	}
	for _, p := range resp.Patches {
		if p.Path == "/spec/containers/0/env" {
			for _, e := range p.Value.([]any) {
				if m := e.(map[string]any); m["name"] == EnvURL {
					return resp, m["value"].(string)
				}
			}
		}
	}
	return resp, ""
}

func TestHandlerOptedInNamespace(t *testing.T) {
	h := newHandler(t, namespace("in", true))
	resp, url := admit(t, h, "in", map[string]string{gang.JobNameLabel: "sweep"})
	if !strings.HasSuffix(url, "/apis/batch/v1/namespaces/in/jobs/sweep/status") {
		t.Errorf("URL = %q; patches %+v", url, resp.Patches)
	}
}

// A Training Operator job's pods carry its job-name label and the
// operator's name, which tells the kind: a PyTorchJob's and a TFJob's pods
// report on their own kind's path; without the operator's name the pod is
// left as it is.
func TestHandlerTrainingOperatorJobs(t *testing.T) {
	h := newHandler(t, namespace("in", true))
	for operator, want := range map[string]string{
		"pytorchjob-controller": "/apis/kubeflow.org/v1/namespaces/in/pytorchjobs/bert/status",
		"tfjob-controller":      "/apis/kubeflow.org/v1/namespaces/in/tfjobs/bert/status",
		"":                      "",
	} {
		labels := map[string]string{gang.KubeflowJobNameLabel: "bert", "training.kubeflow.org/replica-type": "worker"}
		if operator != "" {
			labels["training.kubeflow.org/operator-name"] = operator
		}
		if _, url := admit(t, h, "in", labels); !strings.HasSuffix(url, want) || (want == "") != (url == "") {
			t.Errorf("operator %q: URL = %q, want %q", operator, url, want)
		}
	}
}

// A job opts in alone with the label on its pod template (so on its pods),
// in a namespace that did not.
func TestHandlerOptedInJob(t *testing.T) {
	h := newHandler(t, namespace("out", false))
	resp, url := admit(t, h, "out", map[string]string{gang.JobNameLabel: "sweep", OptInLabel: OptInValue})
	if !strings.HasSuffix(url, "/apis/batch/v1/namespaces/out/jobs/sweep/status") {
		t.Errorf("URL = %q; patches %+v", url, resp.Patches)
	}
}

// Until the CA is loaded the pod is admitted as it is: a pod pointed at an
// endpoint it cannot trust would only fail later.
func TestHandlerWithoutCA(t *testing.T) {
	h := newHandler(t, namespace("in", true))
	h.CA = func() []byte { return nil }
	if resp, _ := admit(t, h, "in", map[string]string{gang.JobNameLabel: "sweep"}); len(resp.Patches) != 0 {
		t.Errorf("patched without a CA: %+v", resp.Patches)
	}
}

func TestHandlerLeavesOthersUntouched(t *testing.T) {
	h := newHandler(t, namespace("in", true), namespace("out", false))
	for name, c := range map[string]struct {
		ns     string
		labels map[string]string
	}{
		"namespace not opted in":      {"out", map[string]string{gang.JobNameLabel: "sweep"}},
		"not a job's pod":             {"in", map[string]string{"app": "web"}},
		"a label that is not enabled": {"out", map[string]string{gang.JobNameLabel: "sweep", OptInLabel: "yes"}},
		"namespace unreadable":        {"gone", map[string]string{gang.JobNameLabel: "sweep"}},
	} {
		if resp, _ := admit(t, h, c.ns, c.labels); len(resp.Patches) != 0 {
			t.Errorf("%s: patched: %+v", name, resp.Patches)
		}
	}
}

func TestHandlerNeverDenies(t *testing.T) {
	h := newHandler(t, namespace("in", true))
	resp := h.Handle(context.Background(), admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
		Namespace: "in", Operation: admissionv1.Create, Object: runtime.RawExtension{Raw: []byte("{not json")},
	}})
	if !resp.Allowed || len(resp.Patches) != 0 {
		t.Errorf("undecodable pod: allowed %v, patches %v", resp.Allowed, resp.Patches)
	}
}

func TestHandlerTrainJobsJobSet(t *testing.T) {
	js := &jobset.JobSet{ObjectMeta: metav1.ObjectMeta{Namespace: "in", Name: "llama", OwnerReferences: []metav1.OwnerReference{{
		APIVersion: "trainer.kubeflow.org/v1alpha1", Kind: "TrainJob", Name: "llama-tj", UID: "u", Controller: ptr.To(true),
	}}}}
	plain := js.DeepCopy()
	plain.Name, plain.OwnerReferences = "pretrain", nil
	h := newHandler(t, namespace("in", true), js, plain)
	for jobset, want := range map[string]string{
		"llama":    "/apis/trainer.kubeflow.org/v1alpha1/namespaces/in/trainjobs/llama-tj/status",
		"pretrain": "/apis/jobset.x-k8s.io/v1alpha2/namespaces/in/jobsets/pretrain/status",
		"missing":  "/apis/jobset.x-k8s.io/v1alpha2/namespaces/in/jobsets/missing/status",
	} {
		_, url := admit(t, h, "in", map[string]string{gang.JobSetNameLabel: jobset, gang.JobNameLabel: jobset + "-node-0"})
		if !strings.HasSuffix(url, want) {
			t.Errorf("JobSet %s: URL %q, want suffix %q", jobset, url, want)
		}
	}
}

func TestCAInjectorSync(t *testing.T) {
	wc := Configuration("pods", admissionregv1.WebhookClientConfig{})
	c := fake.NewClientBuilder().WithScheme(kueueext.NewScheme()).WithObjects(wc).Build()
	ca := []byte("PEM")
	inj := &CAInjector{Client: c, CA: func() []byte { return ca }, WebhookConfiguration: "pods", Log: testr.New(t)}
	for range 2 { // the second is a no-op
		if err := inj.Sync(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	var got admissionregv1.MutatingWebhookConfiguration
	if err := c.Get(context.Background(), client.ObjectKey{Name: "pods"}, &got); err != nil || len(got.Webhooks) != 2 {
		t.Fatalf("configuration = %+v (%v)", got.Webhooks, err)
	}
	for _, w := range got.Webhooks {
		if string(w.ClientConfig.CABundle) != "PEM" {
			t.Errorf("%s: caBundle = %q", w.Name, w.ClientConfig.CABundle)
		}
	}
	inj.CA = func() []byte { return nil }
	if err := inj.Sync(context.Background()); err == nil {
		t.Error("no error before the CA is loaded")
	}
}

// A handler without a CA source, and a CA in the options, changes no pod:
// the options' bundle is not a second way in.
func TestHandlerCAOnlyFromItsSource(t *testing.T) {
	h := newHandler(t, namespace("in", true))
	h.CA = nil
	if resp, _ := admit(t, h, "in", map[string]string{gang.JobNameLabel: "sweep"}); len(resp.Patches) != 0 || !resp.Allowed {
		t.Errorf("patched without a CA source: %+v", resp)
	}
}
