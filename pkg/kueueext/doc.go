// Package kueueext is Progress Planner's controller: it watches jobs of
// every kind built in pkg/jobframework (Kubeflow Trainer v2 TrainJobs,
// trainer.kubeflow.org/v1alpha1; with a report source also batch/v1 Jobs
// and JobSets) and their Kueue Workloads (kueue.x-k8s.io/v1beta2), one
// generic reconciler per kind; it folds every new progress report of a job
// (a TrainJob's status.trainerStatus) into the job's bounded history, forecasts it with
// pkg/forecast, decides with pkg/preempt, and applies the decision: it
// writes only the Workload annotation kueue.x-k8s.io/priority-boost (server-side
// apply, field manager "progress-planner"), wakes waiting Workloads after
// lowering an admitted one, and, where the policy says so, deactivates a
// stalled Workload. Each tracked job gets a ProgressForecast
// (planner.progress.io/v1alpha1) owned by it, whose status holds the history,
// the latest forecast and the decision, so that the planner's state survives
// restarts.
//
// Files by responsibility:
//
//	names.go              annotation and field-manager names
//	objective.go          the planner.progress.io/objective annotation
//	workload.go           listing the Workload (pkg/workloads chooses), facts, boost ownership, actuation
//	schedule.go           the per-job forecast rate limit
//	arrivals.go           when the watch delivered each status change (decision latency)
//	contact.go            whether the planner itself sees the cluster (its blindness is not a job's silence)
//	clock.go, text.go     clamping other components' times; printable annotation text
//	summary.go            history-file to Trainer status conversion, ForecastSummary
//	metrics.go            Prometheus collectors (planner_*)
//	crds.go               waiting for the job kinds', Kueue's and the planner's CRDs
//	job_controller.go     the generic reconciler of one job kind (JobReconciler)
//	setup.go              scheme, manager and controller wiring
//
// The component config file (PlannerConfiguration) is package
// plannerconfig; `planner replay` (writing a TrainJob's status from a
// history file) is package replay: the controller never writes TrainJob
// status.
//
// docs/controller.md documents the behaviour, annotations, metrics and
// configuration.
package kueueext
