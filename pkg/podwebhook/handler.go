package podwebhook

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/progress-planner/planner/pkg/jobframework"
)

// The kinds the handler treats apart: a JobSet's pods report on its
// TrainJob's path when a TrainJob runs the JobSet.
var (
	jobSetGVK   = jobframework.JobSet{}.GVK()
	trainJobGVK = jobframework.TrainJob{}.GVK()
)

// Handler is the admission.Handler for pod CREATE. It never denies: a
// pod it cannot place is admitted unchanged, as with the webhook down.
type Handler struct {
	// Reader reads namespaces and JobSets (uncached: admission is rare
	// next to a cluster-wide informer's cost).
	Reader  client.Reader
	Decoder admission.Decoder
	// Options for every pod but their CABundle, which is CA's.
	Options Options
	// CA returns the endpoint's current CA bundle (it may be replaced
	// while the planner runs; nil until it is loaded). Without it no pod
	// is changed.
	CA  func() []byte
	Log logr.Logger
}

// Handle implements admission.Handler.
func (h *Handler) Handle(ctx context.Context, req admission.Request) admission.Response {
	// Errored would deny the pod (failurePolicy covers only a webhook that
	// does not answer), so every failure here admits it unchanged.
	var pod corev1.Pod
	ns := req.Namespace
	if err := h.Decoder.Decode(req, &pod); err != nil {
		h.Log.Error(err, "pod admitted without progress endpoint settings: undecodable", "namespace", ns)
		return admission.Allowed("undecodable pod")
	}
	log := h.Log.WithValues("namespace", ns, "pod", podName(&pod))
	job, ok := jobOfPod(&pod)
	if !ok {
		return admission.Allowed("not a job's pod")
	}
	in, err := h.optedIn(ctx, ns, &pod)
	if err != nil {
		log.Error(err, "pod admitted without progress endpoint settings")
		return admission.Allowed("namespace unreadable")
	}
	if !in {
		return admission.Allowed("neither the job nor the namespace opted in")
	}
	if job.GroupKind == jobSetGVK.GroupKind() {
		job = h.trainJobOf(ctx, ns, job, log)
	}
	opts := h.Options
	opts.CABundle = nil
	if h.CA != nil {
		opts.CABundle = h.CA()
	}
	if _, err := Mutate(&pod, ns, job, opts); err != nil {
		log.Error(err, "pod admitted without progress endpoint settings")
		return admission.Allowed("no status path")
	}
	raw, err := json.Marshal(&pod)
	if err != nil {
		log.Error(fmt.Errorf("encode pod: %w", err), "pod admitted without progress endpoint settings")
		return admission.Allowed("unencodable pod")
	}
	log.V(1).Info("pod pointed at the progress endpoint", "kind", job.GroupKind.String(), "job", job.Name)
	return admission.PatchResponseFromRaw(req.Object.Raw, raw)
}

// jobOfPod is the job of the pod's labels (jobframework.JobOfPod).
func jobOfPod(pod *corev1.Pod) (Job, bool) {
	gvk, name, ok := jobframework.JobOfPod(pod)
	return Job{GroupKind: gvk.GroupKind(), Name: name}, ok
}

// optedIn: the job opted in (its pod template's label, so the pod's), or
// its namespace did.
func (h *Handler) optedIn(ctx context.Context, ns string, pod *corev1.Pod) (bool, error) {
	if pod.Labels[OptInLabel] == OptInValue {
		return true, nil
	}
	var n corev1.Namespace
	if err := h.Reader.Get(ctx, client.ObjectKey{Name: ns}, &n); err != nil {
		return false, fmt.Errorf("get namespace %s: %w", ns, err)
	}
	return n.Labels[OptInLabel] == OptInValue, nil
}

// trainJobOf returns the TrainJob controlling the JobSet, if one does (a
// TrainJob reports on its own path, where the Trainer's clients post), else
// the JobSet. An unreadable JobSet leaves the JobSet's path.
func (h *Handler) trainJobOf(ctx context.Context, ns string, js Job, log logr.Logger) Job {
	var m metav1.PartialObjectMetadata
	m.SetGroupVersionKind(jobSetGVK)
	if err := h.Reader.Get(ctx, client.ObjectKey{Namespace: ns, Name: js.Name}, &m); err != nil {
		log.V(1).Info("JobSet unreadable; using its own path", "jobset", js.Name, "error", err.Error())
		return js
	}
	if o := metav1.GetControllerOf(&m); o != nil && o.Kind == trainJobGVK.Kind {
		if gv, err := schema.ParseGroupVersion(o.APIVersion); err == nil && gv.Group == trainJobGVK.Group {
			return Job{GroupKind: trainJobGVK.GroupKind(), Name: o.Name}
		}
	}
	return js
}

// podName: at CREATE a pod may have only generateName.
func podName(p *corev1.Pod) string {
	if p.Name != "" {
		return p.Name
	}
	return p.GenerateName
}
