package forecast

import (
	"fmt"
	"math"

	"github.com/progress-planner/planner/internal/stats"
	"github.com/progress-planner/planner/pkg/forecast/curve"
	"github.com/progress-planner/planner/pkg/progress"
)

// Settings tune Fit. DefaultSettings documents every default.
type Settings struct {
	// Interval is the coverage of prediction intervals (0.8 = 80 %).
	Interval float64
	// MinObjectivePoints is the fewest distinct objective observations a
	// curve is fitted on.
	MinObjectivePoints int
	// PlateauEpsilon: a job has plateaued when its expected remaining
	// improvement is below this share of the improvement it made so far.
	PlateauEpsilon float64
	// PlateauThreshold is the plateau probability at which Forecast.Plateaued
	// is set.
	PlateauThreshold float64
	// PlateauStallShare: the job also counts as plateaued when its best
	// value improved by less than PlateauEpsilon of its gain over this
	// share of its elapsed time (stretched to hold at least
	// PlateauStallPoints observations), whatever the curve says.
	PlateauStallShare  float64
	PlateauStallPoints int
	// PlateauStallMaxRemaining: the stall rule is overruled while the
	// curve still expects at least this share of the gain so far.
	PlateauStallMaxRemaining float64
	// PlateauStallMaxShare caps the stall window, which otherwise grows to
	// the longest stall the job has already recovered from (a job whose
	// history shows learning-rate steps must stall longer).
	PlateauStallMaxShare float64
	// MinImprovement is the smallest gain, as a share of the metric's own
	// value, that is worth the job's GPUs: a job whose recent pace
	// (carried to its planned end) still promises this much is not
	// Plateaued, whatever share of its gain so far that is. Per job with
	// the annotation planner.progress.io/min-improvement
	// (docs/policy.md).
	MinImprovement float64
	// PlateauAnnealShare: a job with a fixed total that reports no
	// learning rate must be flat for this share of its planned run before
	// a plateau is called (its schedule may still anneal). A step
	// schedule's first stage (a third of the run in ImageNet's 30/60/90)
	// is flat for most of its length before its first step shows.
	PlateauAnnealShare float64
	// StepJumpShare: one observation that gains this share of all the
	// gain before it (and several times its recent gains) is a step of
	// the learning-rate schedule; a job with such steps is held for its
	// step period.
	StepJumpShare float64
	// HangMultiple and HangSlack: hung after HangMultiple normal report
	// intervals (up to one more for irregular reporters) plus HangSlack
	// seconds without progress.
	HangMultiple float64
	HangSlack    float64
	// DivergeNoise and DivergeShare: diverging when the objective is worse
	// than its best by more than max(DivergeNoise·σ, DivergeShare·gain).
	DivergeNoise float64
	DivergeShare float64
	// IntervalInflation widens the curve's predictive spread; learning
	// curves change regime (schedules, decay) in ways no family sees, so
	// the raw spread is too narrow. Calibrated by `planner backtest`
	// (docs/backtest.md).
	IntervalInflation float64
	// IntervalHorizonPower: the blend's hindcast error is carried to a
	// forecast r hindcast-spans ahead with variance ∝ r^IntervalHorizonPower
	// (2: the error grows in proportion to the distance, as a wrong curve
	// shape's bias does; 1: as a random walk's). Calibrated by `planner
	// backtest` (docs/backtest.md 7).
	IntervalHorizonPower float64
	// IntervalAnnealShare: for a job with a fixed total, the predicted
	// final's optimistic bound reaches at least this share of the gain its
	// recent pace would make by the end (a budget anneals by its end, a
	// gain no curve family sees).
	IntervalAnnealShare float64
	// OvershootEvalShare: a target-stopped job's final value may overshoot
	// the target by this share of its recent per-evaluation gain, shrunk
	// to the crossing by the curve's shape (when that is more than the
	// curve's step there). 1: at most one evaluation's gain, as the first
	// evaluation past the target ends the run.
	OvershootEvalShare float64
	// CrossingMultiple: how many times the job's own line's distance to
	// the target (linearCrossing, itself stretched by the job's past) a
	// curve may put its crossing (boundCrossing), whether or not the
	// hindcast checked the curve. It was 2 for an unchecked curve (7.18)
	// and 4 for a checked one (7.33); 1.5 for both is as good on the
	// scored sets that are not language models at 50 and 75 %, and puts a
	// language model that stops at its target ahead of its line
	// (docs/backtest.md 7.36).
	CrossingMultiple float64
	// LineReplaceShare: the time to target takes the recent line's
	// crossing instead of the curve's when the line's hindcast squared
	// error is under this share of the curve's (newBlended).
	LineReplaceShare float64
	// DampedTrend is the share of the pace's fitted trend carried into the
	// future (selectTrend weighs it against none by the job's own
	// hindcasts; docs/backtest.md 7.3).
	DampedTrend float64
	// Curves are the curve-fitting settings.
	Curves curve.Settings
	// EndStep overrides the planned end on the progress axis (nil: the
	// job's total, or the target crossing). The backtest sets it for runs
	// that ended early, as the baseline does.
	EndStep *float64
}

// DefaultSettings returns the documented defaults.
func DefaultSettings() Settings {
	return Settings{
		Interval:                 0.8,
		MinObjectivePoints:       4,
		PlateauEpsilon:           0.01,
		PlateauThreshold:         0.8,
		PlateauStallShare:        0.2,
		PlateauStallPoints:       3,
		PlateauStallMaxRemaining: 0.1,
		PlateauStallMaxShare:     0.5,
		MinImprovement:           0.01,
		PlateauAnnealShare:       0.25,
		StepJumpShare:            0.2,
		HangMultiple:             2,
		HangSlack:                45,
		DivergeNoise:             6,
		DivergeShare:             0.2,
		IntervalInflation:        2,
		IntervalHorizonPower:     2,
		IntervalAnnealShare:      0.25,
		OvershootEvalShare:       1,
		CrossingMultiple:         1.5,
		LineReplaceShare:         0.5,
		DampedTrend:              0.5,
		Curves:                   curve.DefaultSettings(),
	}
}

func etaEstimate(secs, rel, z float64, basis string) Estimate {
	secs = math.Max(secs, 0)
	return Estimate{Known: true, Value: secs, Lo: math.Max(0, secs*(1-z*rel)), Hi: secs * (1 + z*rel), Basis: basis}
}

// oriented maps an oriented (smaller is better) estimate back to metric
// units, keeping Lo <= Hi.
func oriented(mean, lo, hi, sign float64, basis string) Estimate {
	a, b := sign*lo, sign*hi
	if a > b {
		a, b = b, a
	}
	return Estimate{Known: true, Value: unsigned0(sign * mean), Lo: unsigned0(a), Hi: unsigned0(b), Basis: basis}
}

// unsigned0 turns −0 (a maximized metric's bound of 0, negated) into 0, so
// that no interval prints as "-0 to 1".
func unsigned0(v float64) float64 {
	if v == 0 {
		return 0
	}
	return v
}

// stalled reports whether the best-so-far gained less than PlateauEpsilon
// of the total gain during the stall window: the last PlateauStallShare of
// elapsed time — or, when longer, the longest stall the job has already
// recovered from (at most PlateauStallMaxShare) — stretched back to hold at
// least PlateauStallPoints observations (evaluations can be sparse). sb is
// smoothedBest(obs) and w0 the window's start, stallWindowStart.
func stalled(obs []objPoint, sb []float64, w0 float64, s Settings) bool {
	k := s.PlateauStallPoints
	if len(obs) < 2*k || s.PlateauStallShare <= 0 || k < 1 {
		return false
	}
	best := sb[len(sb)-1]
	gain := obs[0].y - best
	if gain <= 0 {
		return false
	}
	bestBefore := math.Inf(1)
	for i, o := range obs {
		if o.t < w0 {
			bestBefore = sb[i]
		}
	}
	if math.IsInf(bestBefore, 1) {
		return false
	}
	return bestBefore-best < s.PlateauEpsilon*gain
}

// stallWindowStart is where the stall window begins: the last
// PlateauStallShare of elapsed time, or the longest stall the job has
// already recovered from (at most PlateauStallMaxShare), stretched back to
// hold at least PlateauStallPoints observations. sb is smoothedBest(obs).
func stallWindowStart(obs []objPoint, sb []float64, now float64, s Settings) float64 {
	k := min(max(s.PlateauStallPoints, 1), len(obs))
	t0 := obs[0].t
	share := math.Min(s.PlateauStallMaxShare, math.Max(s.PlateauStallShare, longestFalseStall(obs, sb, s.PlateauEpsilon)))
	return math.Min(now-share*(now-t0), obs[len(obs)-k].t)
}

// longestFalseStall is the longest stretch, as a share of the elapsed time
// at its end, during which this job's best value stood still (gained less
// than eps of its gain so far) and after which it still gained at least 5 %
// of its gain: a job whose own history shows such false plateaus (learning
// rate steps) must stall longer before the stall counts.
func longestFalseStall(obs []objPoint, sb []float64, eps float64) float64 {
	t0 := obs[0].t
	worst := 0.0
	last := 0 // index of the last real improvement
	for i := 1; i < len(obs); i++ {
		g := obs[0].y - sb[i]
		if sb[last]-sb[i] <= eps*g {
			continue
		}
		if d := obs[i].t - obs[last].t; sb[last]-sb[i] >= 0.05*g && obs[i].t > t0 && i-last > 1 {
			worst = math.Max(worst, d/(obs[i].t-t0))
		}
		last = i
	}
	return worst
}

// smoothedBest is the best-so-far of the running median of three, so one
// noisy low reading is not taken for progress.
func smoothedBest(obs []objPoint) []float64 {
	sb := make([]float64, len(obs))
	best := obs[0].y
	for i := range obs {
		if i > 0 && i < len(obs)-1 {
			best = math.Min(best, median3(obs[i-1].y, obs[i].y, obs[i+1].y))
		}
		sb[i] = best
	}
	return sb
}

func median3(a, b, c float64) float64 {
	return math.Max(math.Min(a, b), math.Min(math.Max(a, b), c))
}

// crossingReach: a curve's target crossing is searched up to this
// multiple of the job's position on its axis. Relative, so that it does
// not depend on the counter's unit: a floor of one unit made it 50× for a
// job counting fractional epochs (MLPerf dlrm and gnn end within one).
const crossingReach = 20

// timeToTarget estimates the time from the latest moving report until the
// objective reaches obj.Target (Value = seconds, an interval from the pace
// and the crossing's uncertainty), the axis position of the crossing and,
// when the crossing is the line's, the line's stretch (else 1). The time
// of a checked curve's crossing may be held nearer than the crossing
// itself (boundCrossing): the position returned is still the curve's, for
// the final's overshoot and the planned-end test, and note says so
// (docs/backtest.md 7.33).
// With too few observations for a curve, or a curve levelling off within
// its own noise of the target, a straight line through the recent
// observations (the job's current rate of improvement, stretched by how
// slow such a line proved on the job's own past: linearCrossing) is a
// rough guide.
func timeToTarget(obj progress.Objective, obs []objPoint, best float64, cf curve.Ensemble, curveOK bool, bl blended,
	pc pace, paceOK, hung bool, s Settings) (tt Estimate, xc, stretch float64, note string) {
	z := stats.CentralZ(s.Interval)
	level := obj.Sign() * *obj.Target
	switch {
	case len(obs) > 0 && best <= level:
		return Estimate{Known: true, Basis: "target", Why: "target already reached"}, 0, 1, ""
	case hung:
		return Estimate{Why: "job is hung: no progress to extrapolate"}, 0, 1, ""
	case !paceOK || !(pc.perAxis > 0) || len(obs) < 2:
		return Estimate{Why: fmt.Sprintf("too few reports of %s to extrapolate to the target %g", obj.Metric, *obj.Target)}, 0, 1, ""
	}
	xLast := obs[len(obs)-1].x
	basis, ok := "target", false
	stretch = 1
	// The curve's crossing, unless a straight line predicted the job's own
	// recent past better (the blend's hindcast).
	if curveOK && !bl.lineBetter {
		xc, ok = cf.Crossing(level, xLast, crossingReach*xLast)
		if !ok {
			a, okA := cf.Asymptote()
			if (!okA || a-level > math.Max(cf.Sigma, bl.hErr)) && bl.levelsOffChecked {
				return Estimate{Why: fmt.Sprintf("the fitted curve levels off before the target %g", *obj.Target)}, 0, 1, ""
			}
		}
	}
	xTime := xc
	if ok {
		// An unchecked curve's crossing is its family's prior, shape and
		// time alike, so the bound replaces it; a checked curve's shape
		// stands and only the time is held.
		xTime = boundCrossing(obs, level, xc, s.CrossingMultiple)
		if !bl.checked() {
			xc = xTime
		} else if xTime < xc {
			note = fmt.Sprintf("the fitted curve alone puts the target (%g) %.1f× as far; its time is held to %g× the distance of the job's own line (a crossing near the curve's asymptote is its least certain part)",
				*obj.Target, (xc-xLast)/(xTime-xLast), s.CrossingMultiple)
		}
	}
	if !ok {
		xc, stretch, ok = linearCrossing(obs, level)
		xTime, basis = xc, "target-linear"
	}
	if !ok {
		return Estimate{Why: fmt.Sprintf("the objective is not improving toward the target %g", *obj.Target)}, 0, 1, ""
	}
	secs, rel := pc.timeToAxis(xTime)
	if basis == "target" {
		// Crossing uncertainty through the curve's slope there.
		mean, sd := bl.predict(xTime)
		dx := math.Max(xTime*1e-3, 1e-9)
		m2, _ := bl.predict(xTime + dx)
		if slope := (mean - m2) / dx; slope > 0 && secs > 0 {
			xrel := sd / slope / math.Max(xTime-pc.xLast/pc.perAxis, dx)
			rel = math.Sqrt(rel*rel + xrel*xrel)
		}
	} else {
		rel = math.Sqrt(rel*rel + 0.5*0.5) // a line is a rough guide
	}
	return etaEstimate(secs, rel, z, basis), xc, stretch, note
}

// boundCrossing holds the curve's crossing xc to at most m
// (Settings.CrossingMultiple) times the distance the job's own line puts the target at. With too few
// observations for the hindcast (newBlended), the curve's crossing is its
// family's prior, not the job's: how much slower than its current rate
// the job will improve is what its history has not shown yet, and a
// family that saturates early puts the target many times further than the
// job then took (docs/backtest.md 7.18). A checked curve fits the values
// the job has shown, but a target near its asymptote is where its
// crossing is least certain: a small error in the asymptote moves the
// crossing many-fold, and a schedule's warm-down, which no curve fitted
// before it sees, makes the last gain the fastest (7.33, 7.34). The line
// is itself checked on the job's past (lineStretch), so the bound is the
// simplest method's, widened by what the job has shown.
func boundCrossing(obs []objPoint, level, xc, m float64) float64 {
	xLast := obs[len(obs)-1].x
	xl, _, ok := linearCrossing(obs, level)
	if !ok || xl <= xLast {
		return xc
	}
	return math.Min(xc, xLast+m*(xl-xLast))
}

// runningSince is the instant from which the job has been working toward
// the progress measured at tMoved: tMoved itself, or the start of the
// current segment when the job restarted after it (a restart gap is not
// time spent running).
func runningSince(pts []progress.Point, tMoved float64) float64 {
	last := pts[len(pts)-1]
	for i := len(pts) - 1; i >= 0 && pts[i].Seg == last.Seg; i-- {
		if pts[i].T <= tMoved {
			return tMoved
		}
		if i == 0 || pts[i-1].Seg != last.Seg {
			return math.Max(tMoved, pts[i].T)
		}
	}
	return tMoved
}

// linearCrossing extends recentLine (the observations of the last fifth
// of observed time, at least the last two) to level, its distance
// stretched by lineStretch (returned too); ok is false when the line is
// not improving or its crossing overflows (values near ±MaxFloat64).
func linearCrossing(obs []objPoint, level float64) (x, stretch float64, ok bool) {
	slope, last, ok := recentLine(obs)
	if !ok {
		return 0, 1, false
	}
	stretch = lineStretch(obs)
	x = last.x + stretch*(level-last.y)/slope
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return 0, 1, false
	}
	return x, stretch, true
}

// Bounds of lineStretch: a hindcast from a handful of evaluations may at
// most halve or double the line's distance (docs/backtest.md 7.6).
const (
	minLineStretch = 0.5
	maxLineStretch = 2
)

// lineStretch checks the straight line on the job's own past: from each
// origin in the second half of its observations, how many times the
// recent line's distance to the best level the job has reached since
// (smoothedBest: one lucky evaluation is not a level reached) it
// actually took (the median over origins, within [minLineStretch,
// maxLineStretch]). A metric that slows as it improves reaches each level
// later than a straight line says, and its own history says by how much.
// With too few observations for the smoothed best to have moved past an
// origin's line (three: the median of three cannot speak for the last),
// the raw best answers instead: one evaluation's word, bounded as above,
// is still the job's own (docs/backtest.md 7.31). 1 when neither finds an
// origin with a finite ratio.
func lineStretch(obs []objPoint) float64 {
	if r, ok := lineStretchTo(obs, smoothedBest(obs)); ok {
		return r
	}
	if r, ok := lineStretchTo(obs, bestSoFar(obs)); ok {
		return r
	}
	return 1
}

// lineStretchTo is lineStretch's median ratio with the levels reached
// read from sb, a best-so-far series of obs; ok is false without an
// origin with a finite ratio.
func lineStretchTo(obs []objPoint, sb []float64) (float64, bool) {
	n := len(obs)
	level := sb[n-1]
	var ratios []float64
	for k := max(2, n/2); k < n; k++ {
		slope, last, ok := recentLine(obs[:k])
		if !ok || level >= last.y {
			continue
		}
		reached := last.x
		for i := k; i < n; i++ {
			if sb[i] <= level {
				reached = obs[i].x
				break
			}
		}
		// Values near ±MaxFloat64 overflow the line's distance (Inf/Inf
		// is NaN): such an origin says nothing about the line.
		if r := (reached - last.x) / ((level - last.y) / slope); !math.IsNaN(r) && !math.IsInf(r, 0) {
			ratios = append(ratios, r)
		}
	}
	if len(ratios) == 0 {
		return 0, false
	}
	return math.Min(maxLineStretch, math.Max(minLineStretch, stats.Median(ratios))), true
}

// recentEvalGain is the median improvement per observation over the last
// five observations (oriented, >= 0).
func recentEvalGain(obs []objPoint) float64 {
	var d []float64
	for i := max(1, len(obs)-5); i < len(obs); i++ {
		d = append(d, math.Max(0, obs[i-1].y-obs[i].y))
	}
	if len(d) == 0 {
		return 0
	}
	return stats.Median(d)
}

// medianObsStep is the median axis distance between objective
// observations (one evaluation interval).
func medianObsStep(obs []objPoint) float64 {
	if len(obs) < 2 {
		return 0
	}
	d := make([]float64, 0, len(obs)-1)
	for i := 1; i < len(obs); i++ {
		d = append(d, obs[i].x-obs[i-1].x)
	}
	return stats.MedianInPlace(d) // d is this call's own
}

// plateauOnset is the first observation time after which the best-so-far
// improved by less than eps of the total improvement so far.
func plateauOnset(obs []objPoint, eps float64) float64 {
	if len(obs) < 2 {
		return math.NaN()
	}
	return obs[flatFrom(bestSoFar(obs), obs[0].y, eps)].t
}

// bestSoFar is the running best (minimum) of the observations.
func bestSoFar(obs []objPoint) []float64 {
	sb := make([]float64, len(obs))
	b := math.Inf(1)
	for i, o := range obs {
		b = math.Min(b, o.y)
		sb[i] = b
	}
	return sb
}

// flatFrom is the first index from which the best-so-far series sb (never
// rising) stays within eps of the gain from first to its latest value.
func flatFrom(sb []float64, first, eps float64) int {
	best := sb[len(sb)-1]
	for i := range sb {
		if sb[i]-best <= eps*(first-best) {
			return i
		}
	}
	return len(sb) - 1
}

// confidence grows with the number of observations and shrinks with the
// width of the predicted-final interval relative to the gain so far.
func confidence(n int, gain, half float64, cf curve.Ensemble) float64 {
	c := math.Min(1, float64(n-3)/12)
	if c <= 0 {
		return 0
	}
	if gain > 0 {
		c *= 1 / (1 + half/gain)
	}
	return math.Round(c*1000) / 1000
}

func normCDF(x float64) float64 { return 0.5 * math.Erfc(-x/math.Sqrt2) }

func ptr(v float64) *float64 { return &v }
