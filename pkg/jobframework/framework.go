package jobframework

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/progress-planner/planner/pkg/gang"
	"github.com/progress-planner/planner/pkg/progress"
	"github.com/progress-planner/planner/pkg/workloads"
)

// QueueNameLabel is Kueue's label naming a job's LocalQueue. Kinds whose
// objects are common outside Kueue (batch/v1 Jobs) are tracked only with
// it, so that the planner does not keep a ProgressForecast for every Job
// of a cluster.
const QueueNameLabel = "kueue.x-k8s.io/queue-name"

// Report is a job's latest progress report as the planner observes it.
type Report struct {
	// Status is the report, untrusted: pkg/progress validates it.
	Status progress.TrainerStatus
	// Hash fingerprints the report: the same hash is the same report,
	// observed once even across planner restarts.
	Hash string
	// ReceivedAt is when the planner received the report (its clock);
	// zero when the watch's delivery time is the receipt (a TrainJob's
	// status arrives with the object).
	ReceivedAt time.Time
}

// Adapter is what the planner needs to know about one kind of job. Its
// methods are pure functions of obj, which is always of the adapter's kind
// (NewObject's type).
type Adapter interface {
	// GVK is the kind's group, version and kind.
	GVK() schema.GroupVersionKind
	// NewObject is an empty object of the kind (watches, gets).
	NewObject() client.Object
	// Tracks reports whether the planner tracks obj: false for jobs run
	// by another tracked job (a TrainJob's JobSet, a JobSet's Jobs), which
	// have no Workload of their own.
	Tracks(obj client.Object) bool
	// Latest is obj's latest progress report; ok is false when it has
	// none (yet).
	Latest(obj client.Object) (r Report, ok bool)
	// Suspended reports whether obj is suspended (it makes no progress by
	// design; used when no Workload says whether it runs).
	Suspended(obj client.Object) bool
	// Finished reports whether obj completed or failed.
	Finished(obj client.Object) bool
	// Gang is the gang of obj's pods: the key pkg/gang gives each of
	// them, so that the scheduler plugin groups them as the planner does.
	Gang(obj client.Object) gang.Gang
}

// RefOf names obj, a job of a's kind, for pkg/workloads.
func RefOf(a Adapter, obj metav1.Object) workloads.Ref { return workloads.RefTo(a.GVK(), obj) }

// FindWorkload is the Workload lookup for a job of any kind: it lists the
// job's Workloads by Kueue's job-uid label (workloads.Selector) and lets
// workloads.For choose, the rule `planner explain` applies too.
func FindWorkload(ctx context.Context, c client.Reader, job workloads.Ref) (workloads.Match, error) {
	return findWorkload(ctx, c, job, client.MatchingLabels(workloads.Selector(job)))
}

// WorkloadJobUIDIndex is the cache field index of Workloads by Kueue's
// job-uid label (WorkloadJobUID extracts it). A label selector on an
// informer cache matches every Workload of the namespace, so at thousands
// of jobs in a namespace FindWorkload's list was most of a reconcile's
// CPU; the index reads only the job's own.
const WorkloadJobUIDIndex = "metadata.labels[" + workloads.LabelJobUID + "]"

// WorkloadJobUID is WorkloadJobUIDIndex's extractor.
func WorkloadJobUID(o client.Object) []string {
	if uid := o.GetLabels()[workloads.LabelJobUID]; uid != "" {
		return []string{uid}
	}
	return nil
}

// FindWorkloadIndexed is FindWorkload for the controller's cache, which
// indexes Workloads by WorkloadJobUIDIndex. A job without a UID is
// matched by name among the namespace's Workloads, as FindWorkload does.
func FindWorkloadIndexed(ctx context.Context, c client.Reader, job workloads.Ref) (workloads.Match, error) {
	if job.UID == "" {
		return FindWorkload(ctx, c, job)
	}
	return findWorkload(ctx, c, job, client.MatchingFields{WorkloadJobUIDIndex: string(job.UID)})
}

func findWorkload(ctx context.Context, c client.Reader, job workloads.Ref, sel client.ListOption) (workloads.Match, error) {
	var list kueue.WorkloadList
	if err := c.List(ctx, &list, client.InNamespace(job.Namespace), sel); err != nil {
		return workloads.Match{}, fmt.Errorf("list Workloads of %s: %w", job, err)
	}
	return workloads.For(job, list.Items), nil
}

// topLevel reports whether obj is run by no other object (its Workload, if
// any, is its own), the tracking rule of the kinds that can be children of
// another tracked kind.
func topLevel(obj metav1.Object) bool { return metav1.GetControllerOf(obj) == nil }

// queued reports whether obj names a Kueue LocalQueue.
func queued(obj metav1.Object) bool { return obj.GetLabels()[QueueNameLabel] != "" }

// hashJSON fingerprints v's JSON encoding ("" when it cannot be encoded).
func hashJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return ""
	}
	h := fnv.New64a()
	_, _ = h.Write(b)
	return hex.EncodeToString(h.Sum(nil))
}

// builtin is one row of the table of built kinds.
type builtin struct {
	// Resource is the kind's plural resource name (API discovery).
	Resource string
	// NeedsReports: the kind carries no progress of its own; it is built
	// only with a ReportSource.
	NeedsReports bool
	New          func(ReportSource) Adapter
}

// builtins is the table of built kinds, in the order their controllers
// start. A new kind is one adapter file and one row here.
var builtins = []builtin{
	{Resource: "trainjobs", New: func(s ReportSource) Adapter { return TrainJob{Reports: s} }},
	{Resource: "jobs", NeedsReports: true, New: func(s ReportSource) Adapter { return BatchJob{Reports: s} }},
	{Resource: "jobsets", NeedsReports: true, New: func(s ReportSource) Adapter { return JobSet{Reports: s} }},
	trainingOperator(PyTorchJobKind),
	trainingOperator(TFJobKind),
	trainingOperator(XGBoostJobKind),
	trainingOperator(PaddleJobKind),
	trainingOperator(JAXJobKind),
	trainingOperator(MPIJobKind),
}

// trainingOperator is the row of a Training Operator kind.
func trainingOperator(k TrainingOperatorKind) builtin {
	return builtin{Resource: k.Resource, NeedsReports: true, New: func(s ReportSource) Adapter { return KubeflowJob{Kind: k, Reports: s} }}
}

// Resource names a built kind as the API server serves it.
type Resource struct {
	schema.GroupVersionKind
	// Resource is the plural resource name in the GVK's group-version.
	Resource string
}

// Resources lists every built kind, with or without a report source: the
// progress endpoint serves a report path for each (pkg/progressendpoint).
func Resources() []Resource {
	out := make([]Resource, 0, len(builtins))
	for _, b := range builtins {
		// The adapters' GVK is a constant of the kind; no source needed.
		out = append(out, Resource{GroupVersionKind: b.New(nil).GVK(), Resource: b.Resource})
	}
	return out
}

// Kind is a built kind ready to use: its adapter and its API resource.
type Kind struct {
	Adapter
	// Resource is the plural resource name the API server serves the kind
	// as, in GVK's group-version.
	Resource string
	// NeedsReports: the kind's progress comes from the ReportSource.
	NeedsReports bool
}

// Built returns the kinds the planner can track with reports from src:
// every kind whose progress it can read. A nil src builds only the kinds
// that carry their own progress (TrainJob).
func Built(src ReportSource) []Kind {
	var out []Kind
	for _, b := range builtins {
		if b.NeedsReports && src == nil {
			continue
		}
		out = append(out, Kind{Adapter: b.New(src), Resource: b.Resource, NeedsReports: b.NeedsReports})
	}
	return out
}

// podLabellers maps the gang kinds whose label names a job (pkg/gang) to
// the built kind whose controller puts that label on the job's pods. A
// TrainJob's pods carry its JobSet's label: the TrainJob is found from the
// JobSet (its controller). The Training Operator's label is shared by its
// kinds; its operator-name label tells which. A PodGroup names no kind and
// is not here.
var podLabellers = map[gang.Kind]func(pod metav1.Object) (Adapter, bool){
	gang.KindJobSet:      always(JobSet{}),
	gang.KindKubeflowJob: kubeflowJobOfPod,
	gang.KindJob:         always(BatchJob{}),
}

func always(a Adapter) func(metav1.Object) (Adapter, bool) {
	return func(metav1.Object) (Adapter, bool) { return a, true }
}

// JobOfPod returns the kind and name of the job a pod belongs to, read
// from its labels by pkg/gang's rules in their order (a JobSet's pods
// carry their Job's label too; the JobSet wins), so the progress endpoint
// and the scheduler plugin agree on a pod's job. A pod known only by its
// PodGroup has none, and so does a Training Operator pod without the
// operator's name.
func JobOfPod(pod metav1.Object) (gvk schema.GroupVersionKind, name string, ok bool) {
	for _, r := range gang.Rules {
		g, matched := r.Match(pod, nil)
		if !matched {
			continue
		}
		if of, known := podLabellers[g.Kind]; known {
			if a, ok := of(pod); ok {
				return a.GVK(), g.Name, true
			}
			return schema.GroupVersionKind{}, "", false
		}
	}
	return schema.GroupVersionKind{}, "", false
}
