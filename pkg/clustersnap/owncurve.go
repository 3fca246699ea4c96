package clustersnap

import (
	"math"

	"github.com/progress-planner/planner/pkg/forecast"
	"github.com/progress-planner/planner/pkg/progress"
	"github.com/progress-planner/planner/simulator"
)

// ownCurve is a tracked job's learning curve over its whole run: its
// stored history up to where it is, then its forecast's continuation.
type ownCurve struct {
	spec simulator.CurveSpec
	// at is the job's run fraction now (the forecast's progress).
	at float64
	// totalSteps is the job's planned step total.
	totalSteps float64
}

// The continuation: continuationPoints evaluations from the job's run
// fraction to its end, the best value so far moving to the predicted
// final one as 1 − e^(−continuationShape·u) over the rest u of the run
// (normalised to reach it at the end): most of the remaining gain early,
// as a decaying learning curve makes it. An assumption of shape, not a
// constant tuned on data; the forecast decides the endpoint and the
// plateau call.
const (
	continuationPoints = 20
	continuationShape  = 3.0
)

// maxHistoryPoints bounds the stored history's part of a curve: a bound
// on the exported scenario's size (a ConfigMap for --as-job holds 1 MiB),
// not a tuned constant; the forecaster bins a curve to 64 points too
// (curve.DefaultSettings().MaxFitPoints).
const maxHistoryPoints = 64

// ownCurveOf places the history's finite objective values on the run by
// each report's step over its total (the planner's own progress measure),
// and continues them with fc. It returns nil when the job has no step
// total, is not between its start and its end, or has fewer than three
// placed values.
func ownCurveOf(h *progress.History, fc *forecast.Forecast) *ownCurve {
	if h == nil || fc.Progress == nil || fc.TotalSteps == nil || fc.Best == nil {
		return nil
	}
	at := *fc.Progress
	if !(at > 0 && at < 1) {
		return nil
	}
	var x, v []float64
	for i, p := range h.Points() {
		f, val := p.Fraction(), h.Value(i, fc.Objective.Metric)
		if !(f > 0 && f <= at) || math.IsNaN(val) || math.IsInf(val, 0) {
			continue
		}
		// A restart from a checkpoint runs the same steps again: its
		// values replace the ones from there on.
		for len(x) > 0 && x[len(x)-1] >= f {
			x, v = x[:len(x)-1], v[:len(v)-1]
		}
		x, v = append(x, f), append(v, val)
	}
	if len(x) < 3 {
		return nil
	}
	x, v = thinEvenly(x, maxHistoryPoints), thinEvenly(v, maxHistoryPoints)
	best, final := *fc.Best, *fc.Best
	if pf := fc.PredictedFinal; !fc.Plateaued && pf.Known && fc.Objective.Sign()*(pf.Value-best) < 0 {
		final = pf.Value
	}
	norm := 1 - math.Exp(-continuationShape)
	for k := 1; k <= continuationPoints; k++ {
		u := float64(k) / continuationPoints
		x = append(x, at+(1-at)*u)
		v = append(v, best+(final-best)*(1-math.Exp(-continuationShape*u))/norm)
	}
	// The objective's target, if any, stays: the simulator runs a curve's
	// job for its planned duration whatever its target (CurveSpec.curve).
	return &ownCurve{at: at, totalSteps: *fc.TotalSteps, spec: simulator.CurveSpec{Objective: fc.Objective, X: x, V: v}}
}

// withOwnCurve gives js (its run time left set) the job's own curve, when
// it has one and the run so far fits the simulator's bounds: it has run
// what the ETA's pace says for its progress, at × ETA / (1 − at).
func withOwnCurve(js *simulator.JobSpec, fut jobFuture) bool {
	c := fut.own
	if c == nil {
		return false
	}
	ran := math.Round(c.at * float64(js.Duration) / (1 - c.at))
	if !(ran >= 1) || ran+float64(max(js.Duration, js.DurationHi)) > simulator.MaxSeconds {
		return false
	}
	spec := c.spec
	js.Curve, js.RanFor = &spec, simulator.Seconds(ran)
	if c.totalSteps >= 1 && c.totalSteps <= 1e12 {
		js.TotalSteps = c.totalSteps
	}
	return true
}

// thinEvenly keeps at most m of v's values, evenly spaced by index, the
// first and the last among them.
func thinEvenly(v []float64, m int) []float64 {
	n := len(v)
	if n <= m {
		return v
	}
	out := make([]float64, m)
	for i := range m {
		out[i] = v[int(math.Round(float64(i)*float64(n-1)/float64(m-1)))]
	}
	return out
}
