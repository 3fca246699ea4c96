package jobframework

import (
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobset "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	"github.com/progress-planner/planner/pkg/gang"
)

// JobSet is the adapter of JobSets (jobset.x-k8s.io/v1alpha2). A JobSet
// carries no progress of its own: its reports come from Reports.
type JobSet struct {
	Reports ReportSource
}

var _ Adapter = JobSet{}

// GVK implements Adapter.
func (JobSet) GVK() schema.GroupVersionKind { return jobset.GroupVersion.WithKind("JobSet") }

// NewObject implements Adapter.
func (JobSet) NewObject() client.Object { return &jobset.JobSet{} }

// Tracks implements Adapter: a JobSet queued in Kueue and run by no other
// object (a TrainJob's JobSet is tracked as the TrainJob).
func (JobSet) Tracks(obj client.Object) bool { return topLevel(obj) && queued(obj) }

// Latest implements Adapter: the report source's latest report.
func (a JobSet) Latest(obj client.Object) (Report, bool) { return latestFrom(a.Reports, a, obj) }

// Suspended implements Adapter.
func (JobSet) Suspended(obj client.Object) bool {
	return ptr.Deref(obj.(*jobset.JobSet).Spec.Suspend, false)
}

// Finished implements Adapter: condition Completed or Failed.
func (JobSet) Finished(obj client.Object) bool {
	c := obj.(*jobset.JobSet).Status.Conditions
	return apimeta.IsStatusConditionTrue(c, string(jobset.JobSetCompleted)) || apimeta.IsStatusConditionTrue(c, string(jobset.JobSetFailed))
}

// Gang implements Adapter: the JobSet's pods carry its name label.
func (JobSet) Gang(obj client.Object) gang.Gang {
	return gang.Gang{Kind: gang.KindJobSet, Namespace: obj.GetNamespace(), Name: obj.GetName(), Job: obj.GetName()}
}
