package forecast

import (
	"math"
	"sort"

	"github.com/progress-planner/planner/pkg/progress"
)

// objPoint is one distinct observation of the objective: a report where
// its value changed (reporters repeat cached values between evaluations).
type objPoint struct {
	t, x, y float64 // y oriented: smaller is better
}

// axisKind names the progress axis curves are fitted against.
type axisKind string

const (
	axisSteps  axisKind = "steps"   // current_step with a known total
	axisEpochs axisKind = "epochs"  // current_epoch with known total epochs
	axisCount  axisKind = "counter" // a counter without a total (samples, tokens)
	axisTime   axisKind = "time"    // no counter at all
)

// chooseAxis picks the axis that defines the job's progress: the one with a
// known total first, so that the planned end is a point on it.
func chooseAxis(pts []progress.Point) axisKind {
	var steps, epochs, counter bool
	for i := len(pts) - 1; i >= 0 && i >= len(pts)-16; i-- {
		p := pts[i]
		if !math.IsNaN(p.Step) && !math.IsNaN(p.TotalSteps) {
			steps = true
		}
		if !math.IsNaN(p.Epoch) && !math.IsNaN(p.TotalEpochs) {
			epochs = true
		}
		if !math.IsNaN(p.Step) {
			counter = true
		}
	}
	switch {
	case steps:
		return axisSteps
	case epochs:
		return axisEpochs
	case counter:
		return axisCount
	default:
		return axisTime
	}
}

// axisValue returns point p's position on the axis (NaN when absent).
func (a axisKind) value(p progress.Point) float64 {
	switch a {
	case axisSteps, axisCount:
		return p.Step
	case axisEpochs:
		return p.Epoch
	default:
		return p.T
	}
}

// total returns the axis value at the planned end, NaN when unknown.
func (a axisKind) total(p progress.Point) float64 {
	switch a {
	case axisSteps:
		return p.TotalSteps
	case axisEpochs:
		return p.TotalEpochs
	default:
		return math.NaN()
	}
}

// objectiveSeries extracts the observations of metric up to time now,
// oriented by sign: each finite value at the report that first carried it,
// until the value changes. A report without the metric does not end the
// value: a reporter may repeat its cached metrics in some reports and not
// in others (a training-loss report between evaluations), and the cached
// value carried again is no new evaluation; read as one, at a new
// position, it is a flat stretch (docs/backtest.md 7.24). Points whose
// axis value is missing take the previous known axis value.
func objectiveSeries(h *progress.History, metric string, sign float64, axis axisKind, now float64) []objPoint {
	c, ok := h.MetricColumn(metric)
	if !ok {
		return nil
	}
	var out []objPoint
	prev := math.NaN()
	lastX := math.NaN()
	for _, p := range h.Points() {
		if p.T > now {
			break
		}
		if x := axis.value(p); !math.IsNaN(x) {
			lastX = x
		}
		v := p.Metric(c)
		if math.IsNaN(v) || v == prev {
			continue
		}
		prev = v
		x := axis.value(p)
		if math.IsNaN(x) {
			x = lastX
		}
		if math.IsNaN(x) {
			continue
		}
		out = append(out, objPoint{t: p.T, x: x, y: sign * v})
	}
	return out
}

// metricValues is metric's finite values up to time now, each logged value
// once (later reports repeat a value until the next log), at the time it
// was first seen; nil when the job never reported the metric. The schedule
// and overfitting rules read the learning rate and the training loss
// through it.
func metricValues(h *progress.History, metric string, now float64) []objPoint {
	c, ok := h.MetricColumn(metric)
	if !ok {
		return nil
	}
	var out []objPoint
	for _, p := range pointsUpTo(h, now) {
		v := p.Metric(c)
		if math.IsNaN(v) || (len(out) > 0 && out[len(out)-1].y == v) {
			continue
		}
		out = append(out, objPoint{t: p.T, y: v})
	}
	return out
}

// pointsUpTo is the history's points at or before now: a prefix, since a
// history's times never decrease (progress.History.Observe and the codec
// refuse any that would), shared read-only (its capacity ends at its
// length, so an append copies).
func pointsUpTo(h *progress.History, now float64) []progress.Point {
	pts := h.Points()
	n := sort.Search(len(pts), func(i int) bool { return pts[i].T > now })
	return pts[:n:n]
}

// segmentStart is the index of the first point of the latest segment of
// pts (restart segments, progress.Point.Seg); -1 when pts is empty.
func segmentStart(pts []progress.Point) int {
	i := len(pts) - 1
	for i > 0 && pts[i-1].Seg == pts[i].Seg {
		i--
	}
	return i
}
