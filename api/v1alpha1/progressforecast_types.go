package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
)

// Condition types of a ProgressForecast.
const (
	// ConditionObjectiveValid is False when the TrainJob's objective
	// annotation is invalid (the planner then uses the default objective).
	ConditionObjectiveValid = "ObjectiveValid"
	// ConditionWorkloadFound is True when the TrainJob has exactly one live
	// Kueue Workload controlled by it.
	ConditionWorkloadFound = "WorkloadFound"
	// ConditionEnforcing is True when the planner writes the Workload's
	// priority boost (and applies stop actions). False says why not: the
	// policy's advise mode, another writer owning the annotation, no
	// Workload, or no Kueue.
	ConditionEnforcing = "Enforcing"
	// ConditionHistoryValid is False when the stored history could not be
	// decoded (the planner then starts a new one).
	ConditionHistoryValid = "HistoryValid"
)

// Objective sources (ProgressForecastStatus.ObjectiveSource).
const (
	ObjectiveFromAnnotation = "annotation"
	ObjectiveDefault        = "default"
)

// JobRef names the job a ProgressForecast is about: any kind the planner
// tracks (docs/progress-sources.md lists them), in the ProgressForecast's
// namespace.
type JobRef struct {
	// apiVersion of the job, e.g. "trainer.kubeflow.org/v1alpha1",
	// "batch/v1" or "jobset.x-k8s.io/v1alpha2".
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=317
	// +kubebuilder:validation:Pattern=`^([a-z0-9.-]+/)?v[0-9][a-z0-9]*$`
	// +required
	APIVersion string `json:"apiVersion"`
	// kind of the job, e.g. "TrainJob", "Job", "JobSet".
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[A-Z][A-Za-z0-9]*$`
	// +required
	Kind string `json:"kind"`
	// name of the job, in the ProgressForecast's namespace.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +required
	Name string `json:"name"`
	// uid of the job: a recreated job of the same name is another job.
	// +optional
	UID types.UID `json:"uid,omitempty"`
}

// ProgressForecastSpec names the job a ProgressForecast is about. The
// planner creates and owns ProgressForecasts; users do not write them.
type ProgressForecastSpec struct {
	// jobRef is the job, in the same namespace, this forecast is about.
	// The ProgressForecast is owned by (and named like) it.
	// +required
	JobRef JobRef `json:"jobRef"`
}

// ForecastSummary is the latest forecast in a form for people and printer
// columns. Numbers that are not integers are decimal strings with four
// significant digits, durations are Go-style strings ("2h10m", "45s"), and
// shares are percentages ("45.2%"): the CRD carries no floating-point fields
// (see docs/controller.md). The full forecast can be recomputed from the
// stored history (`planner forecast`).
type ForecastSummary struct {
	// time is the instant the forecast was made for (planner clock).
	Time metav1.Time `json:"time"`
	// reports is the number of accepted reports in the history.
	Reports int32 `json:"reports"`
	// objectivePoints is the number of distinct objective observations the
	// curve fit used.
	// +optional
	ObjectivePoints int32 `json:"objectivePoints,omitempty"`
	// segments is 1 + the number of restarts (resumes from checkpoint) seen.
	// +optional
	Segments int32 `json:"segments,omitempty"`
	// progress is the planner's progress measure: step over total steps
	// from the job's counters, else the reported percentage ("45%").
	//
	// The strings of this summary are formatted for people, one way
	// everywhere (reasons, reports, explain): percentages "93%", "5.4%";
	// durations "45s", "4m30s", "12m", "2h05m", "3d4h"; values with four
	// significant digits; ranges "LO–HI".
	// +optional
	Progress string `json:"progress,omitempty"`
	// step is "STEP/TOTAL" (or "STEP" without a total).
	// +optional
	Step string `json:"step,omitempty"`
	// eta is the planner's own estimate of the remaining run time; empty
	// when unknown (notes say why).
	// +optional
	ETA string `json:"eta,omitempty"`
	// etaRange is the prediction interval of eta ("1h50m-2h40m").
	// +optional
	ETARange string `json:"etaRange,omitempty"`
	// reportedETA is what the job itself claims (untrusted).
	// +optional
	ReportedETA string `json:"reportedETA,omitempty"`
	// current is the latest value of the objective metric.
	// +optional
	Current string `json:"current,omitempty"`
	// best is the best objective value so far.
	// +optional
	Best string `json:"best,omitempty"`
	// predicted is the objective's predicted value at the planned end.
	// +optional
	Predicted string `json:"predicted,omitempty"`
	// predictedRange is the prediction interval of predicted.
	// +optional
	PredictedRange string `json:"predictedRange,omitempty"`
	// plateauProbability is the probability that the job will improve by
	// less than 1% of its gain so far before its planned end, as a
	// percentage.
	// +optional
	PlateauProbability string `json:"plateauProbability,omitempty"`
	// relativeRemaining is the expected remaining improvement as a share of
	// the improvement so far.
	// +optional
	RelativeRemaining string `json:"relativeRemaining,omitempty"`
	// diverging is the forecast's divergence call.
	// +optional
	Diverging bool `json:"diverging,omitempty"`
	// hung is the forecast's hang call.
	// +optional
	Hung bool `json:"hung,omitempty"`
	// confidence of the curve forecast, as a percentage.
	// +optional
	Confidence string `json:"confidence,omitempty"`
	// integrity lists findings about the job's own progress claims.
	// +optional
	// +listType=atomic
	Integrity []string `json:"integrity,omitempty"`
	// notes explain unknowns, the divergence or hang call, and the plateau
	// rule that decided (a call, or a hold and why).
	// +optional
	// +listType=atomic
	Notes []string `json:"notes,omitempty"`
}

// AdmissionEstimate is when a waiting job's Workload is expected to be
// admitted: the simulator run forward from the cluster's state in several
// futures (pkg/admission), the 80 % range calibrated on how the planner's
// earlier estimates turned out.
type AdmissionEstimate struct {
	// time is when the estimate was made.
	Time metav1.Time `json:"time"`
	// expected is the median admission time over the futures; empty when
	// fewer than half of them admit the job within the simulated horizon.
	// +optional
	Expected *metav1.Time `json:"expected,omitempty"`
	// earliest and latest bound the 80 % range; each is empty where the
	// futures do not reach it.
	// +optional
	Earliest *metav1.Time `json:"earliest,omitempty"`
	// +optional
	Latest *metav1.Time `json:"latest,omitempty"`
	// calibratedOn is the number of earlier estimates the range was
	// calibrated on (0: the futures' own range).
	// +optional
	CalibratedOn int32 `json:"calibratedOn,omitempty"`
	// calibrationShift is the calibration's shift in log(seconds + 1 min)
	// as a decimal (admission.Calibration; the CRD has no floating-point
	// fields): `planner explain` applies the freshest one it finds to its
	// own futures. Empty when calibratedOn is 0.
	// +optional
	// +kubebuilder:validation:MaxLength=32
	CalibrationShift string `json:"calibrationShift,omitempty"`
	// text is the estimate in explain's words, relative to time.
	// +optional
	Text string `json:"text,omitempty"`
}

// DecisionVersion is the version of ProgressForecastStatus's typed
// decision fields the planner writes (decisionVersion).
const DecisionVersion = 1

// ProgressForecastStatus is written by the planner only.
type ProgressForecastStatus struct {
	// revision counts the planner's writes of this status. A planner uses
	// it to tell its own stale cache from a write by another planner
	// instance (after a leader change).
	// +optional
	Revision int64 `json:"revision,omitempty"`

	// objective the planner forecasts, as "METRIC,minimize|maximize[,target=X]".
	// +optional
	Objective string `json:"objective,omitempty"`
	// objectiveSource is "annotation" (the TrainJob's
	// planner.progress.io/objective annotation) or "default" (eval_loss
	// when reported, else loss, minimized).
	// +optional
	ObjectiveSource string `json:"objectiveSource,omitempty"`

	// observations counts the trainerStatus changes the planner observed
	// (accepted or refused).
	// +optional
	Observations int64 `json:"observations,omitempty"`
	// lastObservedTime is the planner's time of the latest observation.
	// +optional
	LastObservedTime *metav1.Time `json:"lastObservedTime,omitempty"`
	// lastReportTime is trainerStatus.lastUpdatedTime of the latest
	// observation (the job's clock; untrusted).
	// +optional
	LastReportTime *metav1.Time `json:"lastReportTime,omitempty"`
	// observedStatusHash fingerprints the trainerStatus last observed, so
	// that a restarted planner does not count it again.
	// +optional
	ObservedStatusHash string `json:"observedStatusHash,omitempty"`
	// rejections counts refused reports and values by reason (see
	// docs/architecture.md, "Untrusted input").
	// +optional
	Rejections map[string]int32 `json:"rejections,omitempty"`
	// lastRejection describes the latest refused value.
	// +optional
	LastRejection string `json:"lastRejection,omitempty"`

	// workload is the name of the TrainJob's Kueue Workload.
	// +optional
	Workload string `json:"workload,omitempty"`
	// clusterQueue is the Workload's ClusterQueue.
	// +optional
	ClusterQueue string `json:"clusterQueue,omitempty"`

	// verdict of the latest decision (Unknown, Warming, Progressing,
	// Plateaued, Diverging, Hung, NearDone, Untrusted).
	// +optional
	Verdict string `json:"verdict,omitempty"`
	// boost is the kueue.x-k8s.io/priority-boost value the planner has
	// written to the Workload (0 when it wrote none, or removed its own).
	// +optional
	Boost int32 `json:"boost,omitempty"`
	// advisedBoost is the boost the policy decided, whatever the mode.
	// +optional
	AdvisedBoost int32 `json:"advisedBoost,omitempty"`
	// mode is "enforce", "advise" (the policy's mode for this job) or
	// "advise-only" (enforce by policy, but the planner does not write:
	// adviseOnly says why).
	// +optional
	Mode string `json:"mode,omitempty"`
	// adviseOnly says why the planner does not write the Workload although
	// the policy enforces (another writer owns the annotation, no Workload,
	// no Kueue). Empty when it enforces.
	// +optional
	AdviseOnly string `json:"adviseOnly,omitempty"`
	// reason is the policy's one-line explanation of the latest decision.
	// +optional
	Reason string `json:"reason,omitempty"`
	// boostChangedTime is when the planner last changed the Workload's
	// boost.
	// +optional
	BoostChangedTime *metav1.Time `json:"boostChangedTime,omitempty"`
	// lastPlannerEvictionTime is when the Workload was last evicted while
	// the planner's negative boost or stop action was in effect.
	// +optional
	LastPlannerEvictionTime *metav1.Time `json:"lastPlannerEvictionTime,omitempty"`
	// deactivatedTime is when the planner set the Workload's
	// spec.active=false (the policy's Deactivate action).
	// +optional
	DeactivatedTime *metav1.Time `json:"deactivatedTime,omitempty"`

	// decisionVersion is the version of the typed decision fields that
	// follow (DecisionVersion). Other components (planner-scheduler) read
	// only these fields, never the decision blob; a reader that does not
	// know the version it finds treats the job as untracked and says so
	// (docs/scheduler-plugin.md, "Versions").
	// +optional
	DecisionVersion int32 `json:"decisionVersion,omitempty"`
	// decidedTime is when the latest decision was made.
	// +optional
	DecidedTime *metav1.Time `json:"decidedTime,omitempty"`
	// verdictSince is since when the verdict has been what it is.
	// +optional
	VerdictSince *metav1.Time `json:"verdictSince,omitempty"`
	// stalledSince is since when the verdict has been Plateaued, Diverging
	// or Hung; empty otherwise.
	// +optional
	StalledSince *metav1.Time `json:"stalledSince,omitempty"`
	// protectedUntil is the end of the NearDone protection lease; empty
	// when the job holds none.
	// +optional
	ProtectedUntil *metav1.Time `json:"protectedUntil,omitempty"`

	// forecast summarizes the latest forecast.
	// +optional
	Forecast *ForecastSummary `json:"forecast,omitempty"`
	// decision is the latest preempt.Decision as JSON (docs/policy.md,
	// "Decision fields"): the state the next decision needs.
	// +optional
	// +kubebuilder:pruning:PreserveUnknownFields
	Decision *runtime.RawExtension `json:"decision,omitempty"`
	// history is the job's bounded progress history in the compact
	// encoding of pkg/progress (History.MarshalJSON: columnar JSON,
	// gzipped). It survives planner restarts here.
	// +optional
	// +kubebuilder:pruning:PreserveUnknownFields
	History *runtime.RawExtension `json:"history,omitempty"`

	// admissionEstimate is when the planner expects the job's Workload to
	// be admitted, while it waits (docs/controller.md, "Admission
	// estimates"); empty once it is admitted, and when the planner
	// publishes no estimates. The planner's admission publisher writes it
	// (a merge patch of this field alone); the job's reconciler carries it.
	// +optional
	AdmissionEstimate *AdmissionEstimate `json:"admissionEstimate,omitempty"`

	// conditions: ObjectiveValid, WorkloadFound, Enforcing, HistoryValid.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=8
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// ProgressForecast is the planner's forecast and decision for one job (a
// TrainJob, batch/v1 Job or JobSet: spec.jobRef). The planner creates one
// per tracked job, owned by it (deleted with it), and writes only its
// status.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=pf,categories=planner
// +kubebuilder:printcolumn:name="Kind",type=string,JSONPath=`.spec.jobRef.kind`,description="Kind of the job"
// +kubebuilder:printcolumn:name="Job",type=string,JSONPath=`.spec.jobRef.name`,priority=1,description="Name of the job"
// +kubebuilder:printcolumn:name="Progress",type=string,JSONPath=`.status.forecast.progress`,description="Progress from the job's step counters"
// +kubebuilder:printcolumn:name="ETA",type=string,JSONPath=`.status.forecast.eta`,description="The planner's estimate of the remaining run time"
// +kubebuilder:printcolumn:name="Verdict",type=string,JSONPath=`.status.verdict`,description="The policy's verdict"
// +kubebuilder:printcolumn:name="Boost",type=integer,JSONPath=`.status.boost`,description="Priority boost written to the Workload"
// +kubebuilder:printcolumn:name="Metric",type=string,JSONPath=`.status.forecast.current`,description="Latest value of the objective metric"
// +kubebuilder:printcolumn:name="Predicted",type=string,JSONPath=`.status.forecast.predicted`,description="Predicted objective value at the planned end"
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:printcolumn:name="Objective",type=string,JSONPath=`.status.objective`,priority=1
// +kubebuilder:printcolumn:name="Advised",type=integer,JSONPath=`.status.advisedBoost`,priority=1,description="Boost the policy decided, whatever the mode"
// +kubebuilder:printcolumn:name="Mode",type=string,JSONPath=`.status.mode`,priority=1
// +kubebuilder:printcolumn:name="Workload",type=string,JSONPath=`.status.workload`,priority=1
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.reason`,priority=1
// +kubebuilder:printcolumn:name="Admission",type=string,JSONPath=`.status.admissionEstimate.expected`,priority=1,description="When a waiting job is expected to be admitted"
type ProgressForecast struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   ProgressForecastSpec   `json:"spec"`
	Status ProgressForecastStatus `json:"status,omitempty"`
}

// ProgressForecastList is a list of ProgressForecasts.
//
// +kubebuilder:object:root=true
type ProgressForecastList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ProgressForecast `json:"items"`
}

func init() {
	SchemeBuilder.Register(&ProgressForecast{}, &ProgressForecastList{})
}
