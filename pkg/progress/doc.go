// Package progress holds a job's progress data: the tenant-written report
// (TrainerStatus, shaped like Kubeflow Trainer v2's trainerStatus) and its
// validation into a Snapshot with named Rejections; the bounded History
// of accepted reports (ordering, heartbeats, restart segments, thinning);
// its compact codec for the ProgressForecast status; the JSON Lines
// history-file format and its streaming reader; and the Objective a job
// optimizes.
//
// Everything here treats its input as hostile: nothing parses into the
// history unchecked, and nothing panics on any input. It imports nothing
// of Kubernetes; package forecast reads a History and forecasts from it.
package progress
