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
	return &Handler{Reader: c, Decoder: admission.NewDecoder(s), Options: testOpts, Log: testr.New(t)}
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

func TestHandlerLeavesOthersUntouched(t *testing.T) {
	h := newHandler(t, namespace("in", true), namespace("out", false))
	for name, c := range map[string]struct {
		ns     string
		labels map[string]string
	}{
		"namespace not opted in": {"out", map[string]string{gang.JobNameLabel: "sweep"}},
		"not a job's pod":        {"in", map[string]string{"app": "web"}},
		"namespace unreadable":   {"gone", map[string]string{gang.JobNameLabel: "sweep"}},
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
	wc := &admissionregv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "pods"}, Webhooks: []admissionregv1.MutatingWebhook{{Name: "pods.planner.progress.io"}}}
	stale := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "b", Name: CAConfigMapName}, Data: map[string]string{"ca.crt": "old", "other": "kept"}}
	c := fake.NewClientBuilder().WithScheme(kueueext.NewScheme()).
		WithObjects(wc, stale, namespace("a", true), namespace("b", true), namespace("c", false)).Build()
	ca := []byte("PEM")
	inj := &CAInjector{Client: c, CA: func() []byte { return ca }, WebhookConfiguration: "pods", Log: testr.New(t)}
	for range 2 { // the second is a no-op
		if err := inj.Sync(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	var got admissionregv1.MutatingWebhookConfiguration
	if err := c.Get(context.Background(), client.ObjectKey{Name: "pods"}, &got); err != nil || string(got.Webhooks[0].ClientConfig.CABundle) != "PEM" {
		t.Errorf("caBundle = %q (%v)", got.Webhooks[0].ClientConfig.CABundle, err)
	}
	for ns, want := range map[string]string{"a": "PEM", "b": "PEM", "c": ""} {
		var cm corev1.ConfigMap
		_ = c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: CAConfigMapName}, &cm)
		if cm.Data["ca.crt"] != want {
			t.Errorf("namespace %s: ca.crt = %q, want %q", ns, cm.Data["ca.crt"], want)
		}
	}
	if stale.Data["other"] != "kept" {
		t.Error("test object changed")
	}
	inj.CA = func() []byte { return nil }
	if err := inj.Sync(context.Background()); err == nil {
		t.Error("no error before the CA is loaded")
	}
}
