package jobframework

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kftraining "github.com/kubeflow/training-operator/pkg/apis/kubeflow.org/v1"

	"github.com/progress-planner/planner/pkg/gang"
)

// KubeflowJob is the adapter of the Kubeflow Training Operator v1 kinds
// (kubeflow.org/v1: PyTorchJob, TFJob, XGBoostJob, PaddleJob, JAXJob), the
// kinds of Kueue's kubeflow.org/* integrations. The operator gives them
// one shape: spec.runPolicy.suspend, which Kueue sets, a common JobStatus,
// and the same pod labels. One adapter serves them all, told apart by
// Kind; none carries progress of its own: reports come from Reports.
type KubeflowJob struct {
	Kind    TrainingOperatorKind
	Reports ReportSource
}

// TrainingOperatorKind is one kubeflow.org/v1 kind: its names and the two
// parts of its object the adapter reads.
type TrainingOperatorKind struct {
	Kind     string // PyTorchJob
	Resource string // pytorchjobs
	// OperatorName is the operator's controller name, which it puts on the
	// kind's pods (training.kubeflow.org/operator-name): the only label
	// telling a TFJob's pods from a PyTorchJob's.
	OperatorName string
	New          func() client.Object
	// Parts are obj's run policy and status (obj is of New's type).
	Parts func(obj client.Object) (*kftraining.RunPolicy, *kftraining.JobStatus)
}

// The Training Operator kinds (rows of builtins).
var (
	PyTorchJobKind = TrainingOperatorKind{Kind: kftraining.PyTorchJobKind, Resource: kftraining.PyTorchJobPlural, OperatorName: "pytorchjob-controller",
		New: func() client.Object { return &kftraining.PyTorchJob{} },
		Parts: func(o client.Object) (*kftraining.RunPolicy, *kftraining.JobStatus) {
			j := o.(*kftraining.PyTorchJob)
			return &j.Spec.RunPolicy, &j.Status
		}}
	TFJobKind = TrainingOperatorKind{Kind: kftraining.TFJobKind, Resource: kftraining.TFJobPlural, OperatorName: "tfjob-controller",
		New: func() client.Object { return &kftraining.TFJob{} },
		Parts: func(o client.Object) (*kftraining.RunPolicy, *kftraining.JobStatus) {
			j := o.(*kftraining.TFJob)
			return &j.Spec.RunPolicy, &j.Status
		}}
	XGBoostJobKind = TrainingOperatorKind{Kind: kftraining.XGBoostJobKind, Resource: kftraining.XGBoostJobPlural, OperatorName: "xgboostjob-controller",
		New: func() client.Object { return &kftraining.XGBoostJob{} },
		Parts: func(o client.Object) (*kftraining.RunPolicy, *kftraining.JobStatus) {
			j := o.(*kftraining.XGBoostJob)
			return &j.Spec.RunPolicy, &j.Status
		}}
	PaddleJobKind = TrainingOperatorKind{Kind: kftraining.PaddleJobKind, Resource: kftraining.PaddleJobPlural, OperatorName: "paddlejob-controller",
		New: func() client.Object { return &kftraining.PaddleJob{} },
		Parts: func(o client.Object) (*kftraining.RunPolicy, *kftraining.JobStatus) {
			j := o.(*kftraining.PaddleJob)
			return &j.Spec.RunPolicy, &j.Status
		}}
	JAXJobKind = TrainingOperatorKind{Kind: kftraining.JAXJobKind, Resource: kftraining.JAXJobPlural, OperatorName: "jaxjob-controller",
		New: func() client.Object { return &kftraining.JAXJob{} },
		Parts: func(o client.Object) (*kftraining.RunPolicy, *kftraining.JobStatus) {
			j := o.(*kftraining.JAXJob)
			return &j.Spec.RunPolicy, &j.Status
		}}
)

var _ Adapter = KubeflowJob{}

// GVK implements Adapter.
func (a KubeflowJob) GVK() schema.GroupVersionKind {
	return kftraining.SchemeGroupVersion.WithKind(a.Kind.Kind)
}

// NewObject implements Adapter.
func (a KubeflowJob) NewObject() client.Object { return a.Kind.New() }

// Tracks implements Adapter: a job queued in Kueue and run by no other
// object.
func (KubeflowJob) Tracks(obj client.Object) bool { return topLevel(obj) && queued(obj) }

// Latest implements Adapter: the report source's latest report.
func (a KubeflowJob) Latest(obj client.Object) (Report, bool) { return latestFrom(a.Reports, a, obj) }

// Suspended implements Adapter: spec.runPolicy.suspend, which Kueue sets.
func (a KubeflowJob) Suspended(obj client.Object) bool {
	rp, _ := a.Kind.Parts(obj)
	return ptr.Deref(rp.Suspend, false)
}

// Finished implements Adapter: condition Succeeded or Failed, as Kueue's
// integrations decide it.
func (a KubeflowJob) Finished(obj client.Object) bool {
	_, st := a.Kind.Parts(obj)
	for _, c := range st.Conditions {
		if (c.Type == kftraining.JobSucceeded || c.Type == kftraining.JobFailed) && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

// Gang implements Adapter: the operator labels every pod of the job with
// its name (training.kubeflow.org/job-name).
func (KubeflowJob) Gang(obj client.Object) gang.Gang {
	return gang.Gang{Kind: gang.KindKubeflowJob, Namespace: obj.GetNamespace(), Name: obj.GetName(), Job: obj.GetName()}
}

// kubeflowJobOfPod is the Training Operator kind whose controller created
// a pod, by the operator-name label: a pod without it, or with a name no
// built kind has, names none.
func kubeflowJobOfPod(pod metav1.Object) (Adapter, bool) {
	name := pod.GetLabels()[kftraining.OperatorNameLabel]
	for _, b := range builtins {
		if a, ok := b.New(nil).(KubeflowJob); ok && name != "" && a.Kind.OperatorName == name {
			return a, true
		}
	}
	return nil, false
}
