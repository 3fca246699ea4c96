package jobframework

import (
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"

	"github.com/progress-planner/planner/pkg/gang"
	"github.com/progress-planner/planner/pkg/progress"
)

// TrainJob is the adapter of Kubeflow Trainer v2 TrainJobs
// (trainer.kubeflow.org/v1alpha1). A TrainJob carries its own progress:
// status.trainerStatus, which Trainer's status server writes from the
// job's reports. A TrainJob whose reporter posts to the planner's progress
// endpoint instead has its reports in Reports.
type TrainJob struct {
	// Reports: nil when the planner has no report source.
	Reports ReportSource
}

var _ Adapter = TrainJob{}

// GVK implements Adapter.
func (TrainJob) GVK() schema.GroupVersionKind {
	return trainer.GroupVersion.WithKind(trainer.TrainJobKind)
}

// NewObject implements Adapter.
func (TrainJob) NewObject() client.Object { return &trainer.TrainJob{} }

// Tracks implements Adapter: every TrainJob (Trainer runs them only
// through Kueue when a queue is named, but an unqueued TrainJob is
// forecast too).
func (TrainJob) Tracks(client.Object) bool { return true }

// Latest implements Adapter: the report the job sent to the planner's
// endpoint when it sent one (its reporter points there, so that is the
// job's current source), else status.trainerStatus, its hash the one
// ProgressForecasts written before the job framework stored.
func (a TrainJob) Latest(obj client.Object) (Report, bool) {
	if r, ok := latestFrom(a.Reports, a, obj); ok {
		return r, true
	}
	ts := obj.(*trainer.TrainJob).Status.TrainerStatus
	if ts == nil {
		return Report{}, false
	}
	return Report{Status: ToProgressStatus(ts), Hash: hashJSON(ts)}, true
}

// Suspended implements Adapter.
func (TrainJob) Suspended(obj client.Object) bool {
	return ptr.Deref(obj.(*trainer.TrainJob).Spec.Suspend, false)
}

// Finished implements Adapter: condition Complete or Failed.
func (TrainJob) Finished(obj client.Object) bool {
	c := obj.(*trainer.TrainJob).Status.Conditions
	return apimeta.IsStatusConditionTrue(c, trainer.TrainJobComplete) || apimeta.IsStatusConditionTrue(c, trainer.TrainJobFailed)
}

// Gang implements Adapter: Trainer runs a TrainJob as a JobSet of the same
// name, whose pods carry the JobSet label (a PodGroup, with Trainer's
// coscheduling, takes precedence per pod: pkg/gang).
func (TrainJob) Gang(obj client.Object) gang.Gang {
	return gang.Gang{Kind: gang.KindJobSet, Namespace: obj.GetNamespace(), Name: obj.GetName(), Job: obj.GetName()}
}

// ToProgressStatus converts a Trainer API trainerStatus into the shape
// pkg/progress validates (which also accepts fractional values).
func ToProgressStatus(ts *trainer.TrainerStatus) progress.TrainerStatus {
	var out progress.TrainerStatus
	if ts == nil {
		return out
	}
	if p := ts.ProgressPercentage; p != nil {
		v := float64(*p)
		out.ProgressPercentage = &v
	}
	if e := ts.EstimatedRemainingSeconds; e != nil {
		v := float64(*e)
		out.EstimatedRemainingSeconds = &v
	}
	if len(ts.Metrics) > 0 {
		out.Metrics = make([]progress.MetricValue, len(ts.Metrics))
		for i, m := range ts.Metrics {
			out.Metrics[i] = progress.MetricValue{Name: m.Name, Value: m.Value}
		}
	}
	if !ts.LastUpdatedTime.IsZero() {
		t := ts.LastUpdatedTime.Time
		out.LastUpdatedTime = &t
	}
	return out
}
