// Package jobframework is what the planner needs to know about one kind of
// job, in the spirit of Kueue's jobframework.GenericJob but read-only: the
// planner never creates, suspends or changes jobs, it only watches them.
//
// An Adapter per kind answers, for one object of that kind: its GVK and a
// new empty object (for watches), whether the planner tracks it, its latest
// progress report, whether it is suspended or has finished, and its gang
// (the pods that run, and are evicted, together: pkg/gang). Its Workload is
// found by pkg/workloads' rule through FindWorkload (FindWorkloadIndexed in
// the controller's cache), for every kind alike;
// its annotations (objective, stop opt-in, min-improvement) are its object
// metadata's, read by the reconciler the same way for every kind.
//
// Where the progress comes from differs by kind: a TrainJob carries its
// own (status.trainerStatus, written by Trainer's status server); a batch/v1
// Job or a JobSet carries none, so its reports come from a ReportSource (the
// planner's progress endpoint writes into one; MemorySource is the
// in-memory implementation). Built lists the built kinds, the one table to
// extend (docs/progress-sources.md, "How to add a job kind").
//
// The package does no API calls except FindWorkload's list; adapters are
// pure functions of the object (and, for report-fed kinds, the source).
package jobframework
