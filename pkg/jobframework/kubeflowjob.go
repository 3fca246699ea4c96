package jobframework

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	mpi "github.com/kubeflow/mpi-operator/pkg/apis/kubeflow/v2beta1"
	kftraining "github.com/kubeflow/training-operator/pkg/apis/kubeflow.org/v1"

	"github.com/progress-planner/planner/pkg/gang"
)

// KubeflowJob is the adapter of the Kubeflow Training Operator kinds
// (kubeflow.org: the v1 PyTorchJob, TFJob, XGBoostJob, PaddleJob and
// JAXJob, and the MPI Operator's v2beta1 MPIJob), the kinds of Kueue's
// kubeflow.org/* integrations. The operators give them one shape:
// spec.runPolicy.suspend, which Kueue sets, conditions Succeeded and
// Failed, and the same pod labels. One adapter serves them all, told
// apart by Kind; none carries progress of its own: reports come from
// Reports.
type KubeflowJob struct {
	Kind    TrainingOperatorKind
	Reports ReportSource
}

// TrainingOperatorKind is one Training Operator kind: its names, and how
// to read the two parts of its object the adapter needs.
type TrainingOperatorKind struct {
	GVK      schema.GroupVersionKind
	Resource string // pytorchjobs
	// OperatorName is the operator's controller name, which it puts on the
	// kind's pods (training.kubeflow.org/operator-name): the only label
	// telling a TFJob's pods from a PyTorchJob's.
	OperatorName string
	New          func() client.Object
	// Suspend is obj's spec.runPolicy.suspend; Ended: a condition
	// Succeeded or Failed is True (obj is of New's type).
	Suspend func(obj client.Object) *bool
	Ended   func(obj client.Object) bool
}

// The Training Operator kinds (rows of builtins).
var (
	PyTorchJobKind = operatorV1(kftraining.PyTorchJobKind, kftraining.PyTorchJobPlural, "pytorchjob-controller",
		func() client.Object { return &kftraining.PyTorchJob{} },
		func(o client.Object) (*kftraining.RunPolicy, *kftraining.JobStatus) {
			j := o.(*kftraining.PyTorchJob)
			return &j.Spec.RunPolicy, &j.Status
		})
	TFJobKind = operatorV1(kftraining.TFJobKind, kftraining.TFJobPlural, "tfjob-controller",
		func() client.Object { return &kftraining.TFJob{} },
		func(o client.Object) (*kftraining.RunPolicy, *kftraining.JobStatus) {
			j := o.(*kftraining.TFJob)
			return &j.Spec.RunPolicy, &j.Status
		})
	XGBoostJobKind = operatorV1(kftraining.XGBoostJobKind, kftraining.XGBoostJobPlural, "xgboostjob-controller",
		func() client.Object { return &kftraining.XGBoostJob{} },
		func(o client.Object) (*kftraining.RunPolicy, *kftraining.JobStatus) {
			j := o.(*kftraining.XGBoostJob)
			return &j.Spec.RunPolicy, &j.Status
		})
	PaddleJobKind = operatorV1(kftraining.PaddleJobKind, kftraining.PaddleJobPlural, "paddlejob-controller",
		func() client.Object { return &kftraining.PaddleJob{} },
		func(o client.Object) (*kftraining.RunPolicy, *kftraining.JobStatus) {
			j := o.(*kftraining.PaddleJob)
			return &j.Spec.RunPolicy, &j.Status
		})
	JAXJobKind = operatorV1(kftraining.JAXJobKind, kftraining.JAXJobPlural, "jaxjob-controller",
		func() client.Object { return &kftraining.JAXJob{} },
		func(o client.Object) (*kftraining.RunPolicy, *kftraining.JobStatus) {
			j := o.(*kftraining.JAXJob)
			return &j.Spec.RunPolicy, &j.Status
		})
	// MPIJobKind: the MPI Operator's own types (kubeflow.org/v2beta1),
	// the same shape. Its launcher runs as a batch/v1 Job it controls; the
	// launcher's pods carry the kind's labels too.
	MPIJobKind = TrainingOperatorKind{GVK: mpi.SchemeGroupVersionKind, Resource: "mpijobs", OperatorName: mpi.OperatorName,
		New:     func() client.Object { return &mpi.MPIJob{} },
		Suspend: func(o client.Object) *bool { return o.(*mpi.MPIJob).Spec.RunPolicy.Suspend },
		Ended: func(o client.Object) bool {
			for _, c := range o.(*mpi.MPIJob).Status.Conditions {
				if (c.Type == mpi.JobSucceeded || c.Type == mpi.JobFailed) && c.Status == corev1.ConditionTrue {
					return true
				}
			}
			return false
		}}
)

// operatorV1 is a Training Operator v1 kind (kubeflow.org/v1, the
// operator's common RunPolicy and JobStatus) read through parts.
func operatorV1(kind, resource, operator string, newObj func() client.Object,
	parts func(client.Object) (*kftraining.RunPolicy, *kftraining.JobStatus)) TrainingOperatorKind {
	return TrainingOperatorKind{GVK: kftraining.SchemeGroupVersion.WithKind(kind), Resource: resource, OperatorName: operator, New: newObj,
		Suspend: func(o client.Object) *bool { rp, _ := parts(o); return rp.Suspend },
		Ended: func(o client.Object) bool {
			_, st := parts(o)
			for _, c := range st.Conditions {
				if (c.Type == kftraining.JobSucceeded || c.Type == kftraining.JobFailed) && c.Status == corev1.ConditionTrue {
					return true
				}
			}
			return false
		}}
}

var _ Adapter = KubeflowJob{}

// GVK implements Adapter.
func (a KubeflowJob) GVK() schema.GroupVersionKind { return a.Kind.GVK }

// NewObject implements Adapter.
func (a KubeflowJob) NewObject() client.Object { return a.Kind.New() }

// Tracks implements Adapter: a job queued in Kueue and run by no other
// object.
func (KubeflowJob) Tracks(obj client.Object) bool { return topLevel(obj) && queued(obj) }

// Latest implements Adapter: the report source's latest report.
func (a KubeflowJob) Latest(obj client.Object) (Report, bool) { return latestFrom(a.Reports, a, obj) }

// Suspended implements Adapter: spec.runPolicy.suspend, which Kueue sets.
func (a KubeflowJob) Suspended(obj client.Object) bool { return ptr.Deref(a.Kind.Suspend(obj), false) }

// Finished implements Adapter: condition Succeeded or Failed, as Kueue's
// integrations decide it.
func (a KubeflowJob) Finished(obj client.Object) bool { return a.Kind.Ended(obj) }

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
	if name == "" {
		return nil, false
	}
	for _, b := range builtins {
		if a, ok := b.New(nil).(KubeflowJob); ok && a.Kind.OperatorName == name {
			return a, true
		}
	}
	return nil, false
}
