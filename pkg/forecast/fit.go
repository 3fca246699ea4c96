package forecast

import (
	"fmt"
	"math"
	"slices"
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
	// a plateau is called (its schedule may still anneal).
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
	// the target by this share of its recent per-evaluation gain (when
	// that is more than the curve's step there).
	OvershootEvalShare float64
	// Curves are the curve-fitting settings.
	Curves CurveSettings
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
		PlateauAnnealShare:       0.15,
		StepJumpShare:            0.2,
		HangMultiple:             2,
		HangSlack:                45,
		DivergeNoise:             6,
		DivergeShare:             0.2,
		IntervalInflation:        2,
		IntervalHorizonPower:     2,
		IntervalAnnealShare:      0.25,
		OvershootEvalShare:       0.5,
		Curves:                   DefaultCurveSettings(),
	}
}

// zFor returns the two-sided normal quantile for a central interval.
func zFor(coverage float64) float64 {
	if coverage <= 0 || coverage >= 1 {
		coverage = 0.8
	}
	return math.Sqrt2 * math.Erfinv(coverage)
}

// Fit forecasts one job from its history as of now: progress, pace and
// ETA, the objective's predicted final value, plateau, divergence, hang
// and the integrity of the job's own claims. It is a pure function of its
// inputs; it never panics on any history.
func Fit(h *History, obj Objective, now float64, s Settings) Forecast {
	f := Forecast{Now: now, Objective: obj, Reports: h.Len()}
	z := zFor(s.Interval)
	var pts []Point
	for _, p := range h.points {
		if p.T <= now {
			pts = append(pts, p)
		}
	}
	if len(pts) == 0 {
		f.ETA = Estimate{Why: "no reports"}
		f.PredictedFinal = Estimate{Why: "no reports"}
		f.Notes = append(f.Notes, "no reports yet")
		return f
	}
	f.Reports = len(pts)
	last := pts[len(pts)-1]
	f.Segments = last.Seg + 1
	f.LastReport = ptr(math.Min(now, math.Max(last.T, h.lastReport)))
	axis := chooseAxis(pts)

	// Progress.
	if x := axis.value(last); axis != axisTime && !math.IsNaN(x) {
		f.Step = ptr(x)
	}
	if tot := axis.total(last); !math.IsNaN(tot) {
		f.TotalSteps = ptr(tot)
	}
	if fr := last.Fraction(); !math.IsNaN(fr) {
		f.Progress = ptr(fr)
	} else if !math.IsNaN(last.Progress) {
		f.Progress = ptr(last.Progress)
		f.Notes = append(f.Notes, "progress is the job's reported percentage (no counters to check it against)")
	}
	med, p95, okStats := reportStats(pts)
	if okStats {
		f.ReportInterval = ptr(med)
	}
	act := activityTimes(h, axis, now)
	f.SinceProgress = math.Max(0, now-act[len(act)-1])
	if okStats {
		thr, basis := hangThreshold(med, p95, s), fmt.Sprintf("the %.0fs median report interval", med)
		if am, ap, ok := activityStats(act); ok {
			if at := hangThreshold(am, ap, s); at > thr {
				thr, basis = at, fmt.Sprintf("the %.0fs median interval between changes", am)
			}
		}
		f.HangAfter = ptr(thr)
		if f.SinceProgress > thr {
			f.Hung = true
			f.HangReason = fmt.Sprintf("no progress for %.0fs (threshold %.0fs: %.0f× %s + %.0fs)",
				f.SinceProgress, thr, s.HangMultiple, basis, s.HangSlack)
		}
	}

	// Pace on the axis that defines progress (fraction when a total exists).
	paceAxis := axis.value
	if axis == axisSteps || axis == axisEpochs {
		paceAxis = Point.Fraction
	}
	pc, paceOK := fitPace(paceSamples(pts, paceAxis))
	if paceOK && pc.level > 0 && (axis == axisSteps || axis == axisEpochs || axis == axisCount) {
		rate := 1 / pc.level
		if axis != axisCount {
			if tot := axis.total(last); !math.IsNaN(tot) {
				rate *= tot
			}
		}
		f.StepRate = ptr(rate)
	}
	if !math.IsNaN(last.ReportedETA) {
		f.ReportedETA = ptr(math.Max(0, last.ReportedETA-(now-last.T)))
	}

	// Objective series and curve.
	sign := obj.Sign()
	obs := objectiveSeries(h, obj.Metric, sign, axis, now)
	f.ObjectivePts = len(obs)
	var cf CurveFit
	curveOK := false
	var first, best float64
	if len(obs) > 0 {
		first, best = obs[0].y, math.Inf(1)
		for _, o := range obs {
			best = math.Min(best, o.y)
		}
		f.Current = ptr(sign * obs[len(obs)-1].y)
		f.Best = ptr(sign * best)
	}
	if len(obs) >= s.MinObjectivePoints {
		d := CurveData{X: make([]float64, len(obs)), Y: make([]float64, len(obs))}
		for i, o := range obs {
			d.X[i], d.Y[i] = o.x, o.y
		}
		var err error
		cf, err = FitCurves(d, s.Curves)
		curveOK = err == nil && len(cf.Models) > 0
		if !curveOK {
			f.Notes = append(f.Notes, fmt.Sprintf("curve fit failed: %v", err))
		}
	} else {
		f.Notes = append(f.Notes, fmt.Sprintf("%d distinct %s observations; a curve needs %d", len(obs), obj.Metric, s.MinObjectivePoints))
	}
	var bl blended
	if curveOK {
		bl = newBlended(cf, obs, s)
		for _, m := range cf.Models {
			f.Models = append(f.Models, ModelWeight{Family: m.Family, Weight: m.Weight})
		}
	}

	// Planned end on the axis.
	xLast := math.NaN()
	if len(obs) > 0 {
		xLast = obs[len(obs)-1].x
	}
	if v := axis.value(last); !math.IsNaN(v) {
		xLast = math.Max(xLast, v)
	}
	xEnd, endBasis := math.NaN(), ""
	switch {
	case s.EndStep != nil:
		xEnd, endBasis = *s.EndStep, "given"
	case !math.IsNaN(axis.total(last)):
		xEnd, endBasis = axis.total(last), "total"
	}

	// Time to target (whenever a target is set) and ETA: to the total
	// when there is one, else to the target.
	var xc float64
	if obj.Target != nil {
		var tt Estimate
		tt, xc = timeToTarget(obj, obs, best, cf, curveOK, bl, pc, paceOK, f.Hung, s)
		if tt.Known && tt.Value > 0 {
			tt = etaEstimate(tt.Value-(now-runningSince(pts, pc.tLast)), (tt.Hi-tt.Value)/(z*tt.Value), z, tt.Basis)
		}
		f.TimeToTarget = &tt
	}
	switch {
	case f.Hung:
		f.ETA = Estimate{Why: "job is hung: no progress to extrapolate"}
	case endBasis == "total" && paceOK:
		secs, rel := pc.timeTo(1)
		f.ETA = etaEstimate(secs-(now-runningSince(pts, pc.tLast)), rel, z, "total-steps")
	case endBasis == "total":
		f.ETA = Estimate{Why: "too few reports to measure the pace"}
	case f.TimeToTarget != nil:
		f.ETA = *f.TimeToTarget
		if f.ETA.Known && xc > 0 && endBasis == "" {
			xEnd, endBasis = xc, "target"
		}
	default:
		f.ETA = Estimate{Why: "no total steps and no target: ETA unknown"}
	}

	// Predicted final value at the planned end, and plateau over the
	// remaining run (or, with no planned end, over a horizon as long as the
	// run so far).
	pin := plateauInput{obs: obs, h: h, obj: obj, now: now, s: s, last: last, xEnd: xEnd, fixed: endBasis == "total"}
	if len(obs) > 0 {
		pin.pace, pin.paceHorizon = recentPaceGain(&pin)
	}
	f.PredictedFinal = Estimate{Why: "no planned end known (no total steps, no reachable target)"}
	targetStop := obj.Target != nil && math.IsNaN(axis.total(last)) && s.EndStep == nil && len(obs) > 0 && best > sign**obj.Target
	switch {
	case curveOK:
		x0 := obs[0].x
		xH, basis := xEnd, "curve"
		switch {
		case endBasis == "target" && s.EndStep == nil:
			basis = "target-stop"
		case math.IsNaN(xEnd) && targetStop:
			// The curve never reaches the target: its long-run value.
			xH, basis = xLast+100*math.Max(xLast-x0, 1), "asymptote"
		case math.IsNaN(xEnd):
			xH, basis = xLast+math.Max(xLast-x0, 1), ""
		}
		xH = math.Max(xH, xLast)
		mean, sd := bl.predict(xH)
		half := z * sd
		lo, hi := mean-half, mean+half
		if basis == "target-stop" {
			// A target-stopped job ends at the first evaluation past the
			// target: the final value lies between the target and one
			// evaluation's gain beyond it.
			tgt := sign * *obj.Target
			m2, _ := bl.predict(xH + medianObsStep(obs))
			g := math.Max(0, tgt-m2)
			// How far one evaluation overshoots: the curve's step there, or,
			// when larger, the job's own recent steps (a curve levelling
			// off understates the last evaluations' gains).
			over := math.Max(g, s.OvershootEvalShare*recentEvalGain(obs))
			mean, lo, hi = tgt-g/2, tgt-over, tgt+g*0.5
		}
		if pin.fixed && len(obs) >= s.PlateauStallPoints {
			// A fixed budget anneals by its end: the job's recent pace
			// carried to the end is a gain the curve may not see.
			if pin.pace > 0 {
				lo = math.Min(lo, best-s.IntervalAnnealShare*pin.pace)
			}
		}
		if basis != "" {
			f.PredictedFinal = oriented(mean, lo, hi, sign, basis)
		}
		rem := math.Max(0, best-mean)
		gain := first - best
		f.RemainingImprovement = ptr(rem)
		if gain > 0 {
			f.RelativeRemaining = ptr(rem / gain)
			eps := s.PlateauEpsilon * gain
			f.PlateauProbability = normCDF((eps - (best - mean)) / math.Max(sd, 1e-12))
		}
		f.Confidence = confidence(len(obs), gain, half, cf)
	case targetStop:
		// Too little data for a curve, but the job stops on its target: if
		// it ends on its own, it ends there. Confidence stays 0.
		tgt, cur := sign**obj.Target, obs[len(obs)-1].y
		f.PredictedFinal = oriented(tgt, cur, tgt-0.1*(cur-tgt), sign, "target-stop")
		f.PredictedFinal.Why = "too few observations for a curve; the job stops at its target"
	default:
		f.PredictedFinal.Why = "no curve fitted"
	}
	pin.curve, pin.relRem = f.PlateauProbability, f.RelativeRemaining
	if rule, why := judgePlateau(&pin); rule != nil {
		f.PlateauReason = why
		if rule.probability != nil {
			f.PlateauProbability = rule.probability(f.PlateauProbability, s.PlateauThreshold)
		}
		f.Plateaued = rule.call == plateau
		if rule.name == "overfitting" {
			// The objective got worse: nothing of the curve's remaining
			// gain is expected.
			f.RelativeRemaining = ptr(0)
		}
	}
	if f.Plateaued {
		if on := plateauOnset(obs, s.PlateauEpsilon); !math.IsNaN(on) {
			f.PlateauOnset = ptr(on)
		}
	}

	// Divergence: NaN/Inf in a loss-like metric in the current segment, or
	// the objective rising beyond its noise.
	for i := len(pts) - 1; i >= 0 && pts[i].Seg == last.Seg; i-- {
		if pts[i].NonFinite {
			f.Diverging, f.NonFinite = true, true
			f.DivergenceReason = fmt.Sprintf("a loss-like metric reported NaN/Inf at t=%.0fs", pts[i].T)
			break
		}
		if slices.Contains(pts[i].NaNMetrics, obj.Metric) {
			f.Diverging, f.NonFinite = true, true
			f.DivergenceReason = fmt.Sprintf("the objective %s reported NaN/Inf at t=%.0fs", obj.Metric, pts[i].T)
			break
		}
	}
	if !f.Diverging {
		f.Diverging, f.DivergenceReason = divergence(obs, s)
		// An evaluated objective rising while the training loss still
		// falls is overfitting, not a run blowing up: the plateau rules
		// call it (rule overfitting), the divergence test does not.
		if f.Diverging {
			if over, _ := overfitting(&pin); over {
				f.Diverging, f.DivergenceReason = false, ""
			}
		}
	}

	f.Integrity = integrity(h, axis, f.ETA, now)
	return f
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
	return Estimate{Known: true, Value: sign * mean, Lo: a, Hi: b, Basis: basis}
}

// stalled reports whether the best-so-far gained less than PlateauEpsilon
// of the total gain during the stall window: the last PlateauStallShare of
// elapsed time — or, when longer, the longest stall the job has already
// recovered from (at most PlateauStallMaxShare) — stretched back to hold at
// least PlateauStallPoints observations (evaluations can be sparse).
func stalled(obs []objPoint, now float64, s Settings) bool {
	k := s.PlateauStallPoints
	if len(obs) < 2*k || s.PlateauStallShare <= 0 || k < 1 {
		return false
	}
	sb := smoothedBest(obs)
	best := sb[len(sb)-1]
	gain := obs[0].y - best
	if gain <= 0 {
		return false
	}
	w0 := stallWindowStart(obs, sb, now, s)
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

// timeToTarget estimates the time from the latest moving report until the
// objective reaches obj.Target (Value = seconds, an interval from the pace
// and the crossing's uncertainty) and the axis position of the crossing.
// With too few observations for a curve, or a curve levelling off within
// its own noise of the target, a straight line through the recent
// observations (the job's current rate of improvement) is a rough guide.
func timeToTarget(obj Objective, obs []objPoint, best float64, cf CurveFit, curveOK bool, bl blended,
	pc pace, paceOK, hung bool, s Settings) (Estimate, float64) {
	z := zFor(s.Interval)
	level := obj.Sign() * *obj.Target
	switch {
	case len(obs) > 0 && best <= level:
		return Estimate{Known: true, Basis: "target", Why: "target already reached"}, 0
	case hung:
		return Estimate{Why: "job is hung: no progress to extrapolate"}, 0
	case !paceOK || len(obs) < 2:
		return Estimate{Why: fmt.Sprintf("too few reports of %s to extrapolate to the target %g", obj.Metric, *obj.Target)}, 0
	}
	xLast := obs[len(obs)-1].x
	basis := "target"
	xc, ok := 0.0, false
	// The curve's crossing, unless a straight line predicted the job's own
	// recent past better (the blend's hindcast).
	if curveOK && !bl.lineBetter {
		xc, ok = cf.Crossing(level, xLast, math.Max(xLast, 1)*20)
		if !ok {
			a, okA := cf.Asymptote()
			if !okA || a-level > math.Max(cf.Sigma, bl.hErr) {
				return Estimate{Why: fmt.Sprintf("the fitted curve levels off before the target %g", *obj.Target)}, 0
			}
		}
	}
	if !ok {
		xc, ok = linearCrossing(obs, level)
		basis = "target-linear"
	}
	if !ok {
		return Estimate{Why: fmt.Sprintf("the objective is not improving toward the target %g", *obj.Target)}, 0
	}
	secs, rel := pc.timeTo(xc)
	if basis == "target" {
		// Crossing uncertainty through the curve's slope there.
		mean, sd := bl.predict(xc)
		dx := math.Max(xc*1e-3, 1e-9)
		m2, _ := bl.predict(xc + dx)
		if slope := (mean - m2) / dx; slope > 0 && secs > 0 {
			xrel := sd / slope / math.Max(xc-pc.xLast, dx)
			rel = math.Sqrt(rel*rel + xrel*xrel)
		}
	} else {
		rel = math.Sqrt(rel*rel + 0.5*0.5) // a line is a rough guide
	}
	return etaEstimate(secs, rel, z, basis), xc
}

// runningSince is the instant from which the job has been working toward
// the progress measured at tMoved: tMoved itself, or the start of the
// current segment when the job restarted after it (a restart gap is not
// time spent running).
func runningSince(pts []Point, tMoved float64) float64 {
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
// of observed time, at least the last two) to level; ok is false when the
// line is not improving.
func linearCrossing(obs []objPoint, level float64) (float64, bool) {
	slope, last, ok := recentLine(obs)
	if !ok {
		return 0, false
	}
	return last.x + (level-last.y)/slope, true
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
	return median(d)
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
	return median(d)
}

// plateauOnset is the first observation time after which the best-so-far
// improved by less than eps of the total improvement so far.
func plateauOnset(obs []objPoint, eps float64) float64 {
	if len(obs) < 2 {
		return math.NaN()
	}
	bestSoFar := make([]float64, len(obs))
	b := math.Inf(1)
	for i, o := range obs {
		b = math.Min(b, o.y)
		bestSoFar[i] = b
	}
	total := obs[0].y - b
	for i := range obs {
		if bestSoFar[i]-b <= eps*total {
			return obs[i].t
		}
	}
	return obs[len(obs)-1].t
}

// confidence grows with the number of observations and shrinks with the
// width of the predicted-final interval relative to the gain so far.
func confidence(n int, gain, half float64, cf CurveFit) float64 {
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
