package jobframework

import (
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/progress-planner/planner/pkg/gang"
)

// BatchJob is the adapter of batch/v1 Jobs. A Job carries no progress of
// its own: its reports come from Reports.
type BatchJob struct {
	Reports ReportSource
}

var _ Adapter = BatchJob{}

// GVK implements Adapter.
func (BatchJob) GVK() schema.GroupVersionKind { return batchv1.SchemeGroupVersion.WithKind("Job") }

// NewObject implements Adapter.
func (BatchJob) NewObject() client.Object { return &batchv1.Job{} }

// Tracks implements Adapter: a Job queued in Kueue (kueue.x-k8s.io/queue-name)
// and run by no other object (a JobSet's or a CronJob's Jobs are not; a
// JobSet is tracked as a whole).
func (BatchJob) Tracks(obj client.Object) bool { return topLevel(obj) && queued(obj) }

// Latest implements Adapter: the report source's latest report.
func (a BatchJob) Latest(obj client.Object) (Report, bool) { return latestFrom(a.Reports, a, obj) }

// Suspended implements Adapter.
func (BatchJob) Suspended(obj client.Object) bool {
	return ptr.Deref(obj.(*batchv1.Job).Spec.Suspend, false)
}

// Finished implements Adapter: condition Complete or Failed, as Kueue's
// Job integration decides it.
func (BatchJob) Finished(obj client.Object) bool {
	for _, c := range obj.(*batchv1.Job).Status.Conditions {
		if (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed) && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

// Gang implements Adapter: the Job's pods carry batch.kubernetes.io/job-name.
func (BatchJob) Gang(obj client.Object) gang.Gang {
	return gang.Gang{Kind: gang.KindJob, Namespace: obj.GetNamespace(), Name: obj.GetName(), Job: obj.GetName()}
}

// latestFrom is a report-fed kind's Latest: nil src has none.
func latestFrom(src ReportSource, a Adapter, obj client.Object) (Report, bool) {
	if src == nil {
		return Report{}, false
	}
	return src.Latest(RefOf(a, obj))
}
