package jobframework

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kftraining "github.com/kubeflow/training-operator/pkg/apis/kubeflow.org/v1"

	"github.com/progress-planner/planner/pkg/gang"
)

// PyTorchJob is the adapter of Kubeflow Training Operator v1 PyTorchJobs
// (kubeflow.org/v1), the kind Kueue's kubeflow.org/pytorchjob integration
// queues. A PyTorchJob carries no progress of its own: its reports come
// from Reports.
type PyTorchJob struct {
	Reports ReportSource
}

var _ Adapter = PyTorchJob{}

// GVK implements Adapter.
func (PyTorchJob) GVK() schema.GroupVersionKind {
	return kftraining.SchemeGroupVersion.WithKind(kftraining.PyTorchJobKind)
}

// NewObject implements Adapter.
func (PyTorchJob) NewObject() client.Object { return &kftraining.PyTorchJob{} }

// Tracks implements Adapter: a PyTorchJob queued in Kueue and run by no
// other object.
func (PyTorchJob) Tracks(obj client.Object) bool { return topLevel(obj) && queued(obj) }

// Latest implements Adapter: the report source's latest report.
func (a PyTorchJob) Latest(obj client.Object) (Report, bool) { return latestFrom(a.Reports, a, obj) }

// Suspended implements Adapter: spec.runPolicy.suspend, which Kueue sets.
func (PyTorchJob) Suspended(obj client.Object) bool {
	return ptr.Deref(obj.(*kftraining.PyTorchJob).Spec.RunPolicy.Suspend, false)
}

// Finished implements Adapter: condition Succeeded or Failed, as Kueue's
// integration decides it.
func (PyTorchJob) Finished(obj client.Object) bool {
	for _, c := range obj.(*kftraining.PyTorchJob).Status.Conditions {
		if (c.Type == kftraining.JobSucceeded || c.Type == kftraining.JobFailed) && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

// Gang implements Adapter: the operator labels every pod of the job with
// its name (training.kubeflow.org/job-name).
func (PyTorchJob) Gang(obj client.Object) gang.Gang {
	return gang.Gang{Kind: gang.KindKubeflowJob, Namespace: obj.GetNamespace(), Name: obj.GetName(), Job: obj.GetName()}
}
