// Package forecast forecasts one job from its progress History: progress,
// pace and ETA, the objective's final value with an interval, the time to
// a target, and the detectors — hang, plateau (an ordered table of named
// rules, plateau.go), divergence and integrity.
//
// Fit is a pure, deterministic function of its inputs, run as an ordered
// table of named stages (fit_stages.go). The curve numerics live in
// package curve; the data it reads lives in package progress. It imports
// nothing of Kubernetes.
package forecast
