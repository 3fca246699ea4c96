package kueueext

// Annotations, labels and field managers the planner reads or writes.
const (
	// AnnotationObjective on a job (any tracked kind) names the metric to forecast:
	// "METRIC[,minimize|maximize][,target=X]" (progress.ParseObjective).
	AnnotationObjective = "planner.progress.io/objective"
	// AnnotationStopOptIn on a job ("true") opts the job in to being
	// stopped (Workload spec.active=false) when it has stalled, where the
	// policy honours job opt-ins (stop.allowJobOptIn).
	AnnotationStopOptIn = "planner.progress.io/stop-when-stalled"
	// AnnotationMinImprovement on a job sets the job's own meaningful
	// improvement (forecast.Settings.MinImprovement): a fraction ("0.005")
	// or a percentage ("0.5%") of the objective's value, at most
	// plannerconfig.MaxMinImprovement; "0" turns the rule off for the job.
	AnnotationMinImprovement = "planner.progress.io/min-improvement"
	// AnnotationPriorityBoost is Kueue's priority boost (KEP-7990): a
	// signed integer added to the Workload's priority.
	AnnotationPriorityBoost = "kueue.x-k8s.io/priority-boost"

	// FieldManager is the server-side apply field manager of the boost
	// annotation, and of every other planner write on Workloads (waking
	// waiting Workloads re-spells their boost annotation under it too, so
	// the planner never conflicts with itself).
	FieldManager = "progress-planner"
	// StatusFieldManager is the field manager the Trainer status server
	// uses for TrainJob status.trainerStatus; `planner replay` writes like it.
	StatusFieldManager = "trainer-status"
	// ControllerName names the planner in Events and leader election.
	ControllerName = "progress-planner"
)
