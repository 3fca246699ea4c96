package forecast

import (
	"fmt"
	"math"
	"slices"

	"github.com/progress-planner/planner/internal/stats"
	"github.com/progress-planner/planner/pkg/forecast/curve"
	"github.com/progress-planner/planner/pkg/progress"
)

// Fit forecasts one job from its history as of now: progress, pace and
// ETA, the objective's predicted final value, plateau, divergence, hang
// and the integrity of the job's own claims. It is a pure function of its
// inputs; it never panics on any history.
//
// Fit runs fitStages in order over one fitState; each stage reads what
// the stages before it measured and writes its part of the Forecast.
func Fit(h *progress.History, obj progress.Objective, now float64, s Settings) Forecast {
	st := fitState{h: h, obj: obj, now: now, s: s, z: stats.CentralZ(s.Interval),
		f: Forecast{Now: now, Objective: obj, Reports: h.Len()}}
	for _, stage := range fitStages {
		if !stage.run(&st) {
			break
		}
	}
	return st.f
}

// fitStage is one named step of Fit. run returns false when nothing
// further can be forecast (the Forecast then says why).
type fitStage struct {
	name string
	run  func(*fitState) bool
}

// fitStages are Fit's steps, in order. The measuring stages come first
// (progress, pace, the objective's curve, the planned end); the
// detectors — hang, plateau, divergence, integrity — each judge one
// failure from those measurements. Hang is judged before the ETA, which
// a hung job does not get.
var fitStages = [...]fitStage{
	{"reports", selectReports},
	{"progress", measureProgress},
	{"hang", detectHang},
	{"pace", measurePace},
	{"objective", fitObjective},
	{"planned end", planEnd},
	{"eta", estimateETA},
	{"final value", predictFinal},
	{"plateau", detectPlateau},
	{"divergence", detectDivergence},
	{"integrity", checkIntegrity},
}

// fitState is what Fit's stages share.
type fitState struct {
	h   *progress.History
	obj progress.Objective
	now float64
	s   Settings
	z   float64 // the interval's normal quantile
	f   Forecast

	pts  []progress.Point // reports up to now
	last progress.Point   // the latest of them
	axis axisKind

	pc     pace
	paceOK bool

	obs         []objPoint // the oriented objective series
	sign        float64
	first, best float64 // oriented first and best values
	cf          curve.Ensemble
	curveOK     bool
	bl          blended

	xLast, xEnd float64 // latest objective position and planned end on the axis
	endBasis    string  // "given", "total", "target" or "" (none)
	xc          float64 // the target crossing on the axis (0: none)
	xcStretch   float64 // lineStretch of a crossing that is the line's (else 1)
	ttDue       bool    // the time to target's crossing was due by now and not seen

	pin plateauInput
}

// selectReports keeps the reports up to now.
func selectReports(st *fitState) bool {
	st.pts = pointsUpTo(st.h, st.now)
	if len(st.pts) == 0 {
		st.f.ETA = Estimate{Why: "no reports"}
		st.f.PredictedFinal = Estimate{Why: "no reports"}
		st.f.Notes = append(st.f.Notes, "no reports yet")
		return false
	}
	f := &st.f
	f.Reports = len(st.pts)
	st.last = st.pts[len(st.pts)-1]
	f.Segments = st.last.Seg + 1
	f.LastReport = ptr(math.Min(st.now, math.Max(st.last.T, st.h.LastReport())))
	st.axis = chooseAxis(st.pts)
	return true
}

// measureProgress: step, total and progress from the latest report.
func measureProgress(st *fitState) bool {
	f, last, axis := &st.f, st.last, st.axis
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
	return true
}

// detectHang: silent for longer than the job's own rhythm allows — the
// longest of the report-based threshold, the change-based threshold and
// the longest pause the job already came back from (plus the slack), so a
// job whose progress moves only at evaluations is judged by their cadence
// and one that stops for each evaluation by the length of those stops.
func detectHang(st *fitState) bool {
	f, s := &st.f, st.s
	med, p95, okStats := reportStats(st.pts)
	act := activityTimes(st.h, st.axis, st.now)
	f.SinceProgress = math.Max(0, st.now-act[len(act)-1])
	if !okStats {
		return true
	}
	f.ReportInterval = ptr(med)
	// Which threshold won, kept as its parts: the reason is written only
	// for a hung job (this runs at every forecast).
	const byReports, byChanges, byPause = 0, 1, 2
	thr, by, interval := hangThreshold(med, p95, s), byReports, med
	if am, ap, ok := activityStats(act); ok {
		if at := hangThreshold(am, ap, s); at > thr {
			thr, by, interval = at, byChanges, am
		}
	}
	if gap := longestRecoveredGap(st.h, st.pts, act); gap+s.HangSlack > thr {
		thr, by, interval = gap+s.HangSlack, byPause, gap
	}
	f.HangAfter = ptr(thr)
	if f.SinceProgress <= thr {
		return true
	}
	var rule string
	switch by {
	case byReports:
		rule = fmt.Sprintf("%.0f× the %.0fs median report interval + %.0fs", s.HangMultiple, interval, s.HangSlack)
	case byChanges:
		rule = fmt.Sprintf("%.0f× the %.0fs median interval between changes + %.0fs", s.HangMultiple, interval, s.HangSlack)
	default:
		rule = fmt.Sprintf("the %.0fs pause it already came back from + %.0fs", interval, s.HangSlack)
	}
	f.Hung = true
	f.HangReason = fmt.Sprintf("no progress for %.0fs (threshold %.0fs: %s)", f.SinceProgress, thr, rule)
	return true
}

// measurePace fits the pace on the axis that defines progress (the
// fraction when a total exists), and carries the job's own ETA claim.
func measurePace(st *fitState) bool {
	f, last, axis := &st.f, st.last, st.axis
	paceAxis, perAxis := axis.value, 1.0
	if axis == axisSteps || axis == axisEpochs {
		paceAxis, perAxis = progress.Point.Fraction, 1/latestTotal(st.pts, axis)
	}
	st.pc, st.paceOK = fitPace(paceSamples(st.pts, paceAxis), st.s.DampedTrend)
	if st.paceOK {
		st.pc.position(st.pts, paceAxis)
		st.pc.perAxis = perAxis
		if c := st.pc.cycles; c > 0 {
			f.Notes = append(f.Notes, fmt.Sprintf("the job pauses as it runs: its pace is measured over its latest %d whole cycle(s) of training and pause", c))
		}
	}
	if st.paceOK && st.pc.level > 0 && (axis == axisSteps || axis == axisEpochs || axis == axisCount) {
		rate := 1 / st.pc.level
		if axis != axisCount {
			if tot := axis.total(last); !math.IsNaN(tot) {
				rate *= tot
			}
		}
		f.StepRate = ptr(rate)
	}
	if !math.IsNaN(last.ReportedETA) {
		f.ReportedETA = ptr(math.Max(0, last.ReportedETA-(st.now-last.T)))
	}
	return true
}

// latestTotal is the newest planned end on axis that a point reports (NaN
// when none does).
func latestTotal(pts []progress.Point, axis axisKind) float64 {
	for i := len(pts) - 1; i >= 0; i-- {
		if v := axis.total(pts[i]); v > 0 && !math.IsInf(v, 1) {
			return v
		}
	}
	return math.NaN()
}

// fitObjective builds the objective series, fits the curve ensemble and
// its hindcast blend.
func fitObjective(st *fitState) bool {
	f, s := &st.f, st.s
	st.sign = st.obj.Sign()
	st.obs = objectiveSeries(st.h, st.obj.Metric, st.sign, st.axis, st.now)
	obs := st.obs
	f.ObjectivePts = len(obs)
	if len(obs) > 0 {
		st.first, st.best = obs[0].y, math.Inf(1)
		for _, o := range obs {
			st.best = math.Min(st.best, o.y)
		}
		f.Current = ptr(st.sign * obs[len(obs)-1].y)
		f.Best = ptr(st.sign * st.best)
	}
	if len(obs) < s.MinObjectivePoints {
		f.Notes = append(f.Notes, fmt.Sprintf("%d distinct %s observations; a curve needs %d", len(obs), st.obj.Metric, s.MinObjectivePoints))
		return true
	}
	d := curve.Data{X: make([]float64, len(obs)), Y: make([]float64, len(obs))}
	for i, o := range obs {
		d.X[i], d.Y[i] = o.x, o.y
	}
	cf, err := curve.Fit(d, s.Curves)
	st.cf, st.curveOK = cf, err == nil && len(cf.Models) > 0
	if !st.curveOK {
		f.Notes = append(f.Notes, fmt.Sprintf("curve fit failed: %v", err))
		return true
	}
	st.bl = newBlended(cf, obs, s)
	for _, m := range cf.Models {
		f.Models = append(f.Models, ModelWeight{Family: m.Family, Weight: m.Weight})
	}
	return true
}

// planEnd places the planned end on the axis: given (the backtest), or
// the job's total. A target-stopped job's end is set by estimateETA.
func planEnd(st *fitState) bool {
	st.xLast = math.NaN()
	if len(st.obs) > 0 {
		st.xLast = st.obs[len(st.obs)-1].x
	}
	if v := st.axis.value(st.last); !math.IsNaN(v) {
		st.xLast = math.Max(st.xLast, v)
	}
	st.xEnd = math.NaN()
	switch {
	case st.s.EndStep != nil:
		st.xEnd, st.endBasis = *st.s.EndStep, "given"
	case !math.IsNaN(st.axis.total(st.last)):
		st.xEnd, st.endBasis = st.axis.total(st.last), "total"
	}
	return true
}

// crossingMethod names a time-to-target basis for reasons.
func crossingMethod(basis string) string {
	if basis == "target-linear" {
		return "recent line"
	}
	return "fitted curve"
}

// estimateETA: the time to target (whenever a target is set) and the ETA,
// to the total when there is one, else to the target.
func estimateETA(st *fitState) bool {
	f, pts, pc, z := &st.f, st.pts, st.pc, st.z
	// Time since the latest move, and since a report last showed the job
	// where that move left it (pace.left).
	since := st.now - runningSince(pts, pc.tLast)
	seen := math.Min(since, st.now-math.Max(pc.tLast, *f.LastReport))
	if st.obj.Target != nil {
		tt, xc, stretch, note := timeToTarget(st.obj, st.obs, st.best, st.cf, st.curveOK, st.bl, pc, st.paceOK, f.Hung, st.s)
		st.xc, st.xcStretch = xc, stretch
		if tt.Known && tt.Value > 0 && st.endBasis != "" && st.xc > st.xEnd {
			// A crossing past the planned end is no time at all: the job
			// stops first (a time in days for a run ending in minutes
			// said nothing true).
			tt = Estimate{Why: fmt.Sprintf("the %s reaches the target %g only past the planned end", crossingMethod(tt.Basis), *st.obj.Target)}
		}
		if note != "" && tt.Known {
			f.Notes = append(f.Notes, note)
		}
		if tt.Known && st.targetUnmet() {
			// A crossing due by now that has not been seen refutes what
			// it was read from (targetInReach); the job is still seen at
			// its target only at an evaluation.
			st.ttDue = tt.Value <= since
			next, nextRel := nextEvaluation(st.obs, pc)
			secs, rel := tt.Value, nextRel
			if tt.Value > 0 {
				rel = (tt.Hi - tt.Value) / (z * tt.Value)
			}
			if next > secs {
				f.Notes = append(f.Notes, fmt.Sprintf("the %s puts the target (%g) before the job's next evaluation, the soonest it can be seen there: the time to target is the wait for that evaluation",
					crossingMethod(tt.Basis), *st.obj.Target))
				secs = next
			}
			tt = etaEstimate(pc.left(secs, st.xc*pc.perAxis, since, seen), rel, z, tt.Basis)
		}
		f.TimeToTarget = &tt
	}
	switch {
	case f.Hung:
		f.ETA = Estimate{Why: "job is hung: no progress to extrapolate"}
	case st.endBasis == "total" && st.paceOK:
		secs, rel := pc.timeTo(1)
		f.ETA = etaEstimate(pc.left(secs, 1, since, seen), rel, z, "total-steps")
	case st.endBasis == "total":
		f.ETA = Estimate{Why: "too few reports to measure the pace"}
	case f.TimeToTarget != nil:
		f.ETA = *f.TimeToTarget
		if f.ETA.Known && st.xc > 0 && st.endBasis == "" {
			st.xEnd, st.endBasis = st.xc, "target"
		}
	default:
		f.ETA = Estimate{Why: "no total steps and no target: ETA unknown"}
	}
	return true
}

// targetUnmet: a target is set, the job has observations, and its best
// has not reached the target.
func (st *fitState) targetUnmet() bool {
	return st.obj.Target != nil && len(st.obs) > 0 && st.best > st.sign**st.obj.Target
}

// nextEvaluation is the time, from the pace's latest point, of the job's
// next evaluation: the objective is observed only at evaluations, so a
// target not yet seen reached is seen at the next one at the soonest, and
// a job that stops at its target stops there. Evaluations are taken to
// come every medianObsStep from the latest one; the next is the first
// past the job's position at the pace's latest point. It returns the
// seconds and their relative uncertainty (the pace's); 0 when the
// evaluations give no step.
func nextEvaluation(obs []objPoint, pc pace) (secs, rel float64) {
	step := medianObsStep(obs)
	if !(step > 0) || !(pc.perAxis > 0) {
		return 0, 0
	}
	xLast, xNow := obs[len(obs)-1].x, pc.xLast/pc.perAxis
	next := xLast + math.Max(1, math.Ceil((xNow-xLast)/step-1e-9))*step
	return pc.timeToAxis(next)
}

// predictFinal predicts the objective's value at the planned end (or,
// with no planned end, over a horizon as long as the run so far) with its
// interval, and the curve's plateau probability.
func predictFinal(st *fitState) bool {
	f, s, obs, sign := &st.f, st.s, st.obs, st.sign
	st.pin = plateauInput{obs: obs, h: st.h, obj: st.obj, now: st.now, s: s, last: st.last, xEnd: st.xEnd, fixed: st.endBasis == "total"}
	pin := &st.pin
	if len(obs) > 0 {
		pin.sb = smoothedBest(obs)
		pin.stallFrom = stallWindowStart(obs, pin.sb, st.now, s)
		pin.lr = metricValues(st.h, "learning_rate", st.now)
		pin.unseenHead = unseenHeadAt(st.h, st.xEnd, st.now, pin.fixed)
		if s.StepJumpShare > 0 {
			pin.jumps = stepJumps(obs, s.StepJumpShare)
		}
		pin.pace, pin.paceHorizon = recentPaceGain(pin)
	}
	f.PredictedFinal = Estimate{Why: "no planned end known (no total steps, no reachable target)"}
	stopsAtTarget := st.obj.Target != nil && math.IsNaN(st.axis.total(st.last)) && s.EndStep == nil && len(obs) > 0
	targetStop := stopsAtTarget && st.targetUnmet()
	pin.targetMet, pin.targetStop = stopsAtTarget && !targetStop, targetStop
	if targetStop {
		pin.toTarget, pin.toTargetDue = f.TimeToTarget, st.ttDue
	}
	switch {
	case st.curveOK:
		predictFinalFromCurve(st, targetStop)
	case targetStop:
		// Too little data for a curve, but the job stops on its target: if
		// it ends on its own, it ends there. Confidence stays 0.
		floor, _ := physicalBounds(obs)
		tgt, cur := max(floor, sign**st.obj.Target), obs[len(obs)-1].y
		f.PredictedFinal = oriented(tgt, cur, max(floor, tgt-0.1*(cur-tgt)), sign, "target-stop")
		f.PredictedFinal.Why = "too few observations for a curve; the job stops at its target"
	default:
		f.PredictedFinal.Why = "no curve fitted"
	}
	pin.curve, pin.relRem = f.PlateauProbability, f.RelativeRemaining
	return true
}

// predictFinalFromCurve is predictFinal with a fitted curve.
func predictFinalFromCurve(st *fitState, targetStop bool) {
	f, s, obs, sign, bl, best := &st.f, st.s, st.obs, st.sign, st.bl, st.best
	x0 := obs[0].x
	xH, basis := st.xEnd, "curve"
	switch {
	case st.endBasis == "target" && s.EndStep == nil:
		basis = "target-stop"
	case math.IsNaN(st.xEnd) && targetStop:
		// The curve never reaches the target: its long-run value.
		xH, basis = st.xLast+100*(st.xLast-x0), "asymptote"
	case math.IsNaN(st.xEnd):
		xH, basis = st.xLast+(st.xLast-x0), ""
	}
	xH = math.Max(xH, st.xLast)
	mean, sd := bl.predict(xH)
	half := st.z * sd
	lo, hi := mean-half, mean+half
	if basis == "target-stop" {
		// A target-stopped job ends at the first evaluation past the
		// target: the final value lies between the target and one
		// evaluation's gain beyond it.
		tgt, step := sign**st.obj.Target, medianObsStep(obs)
		m2, _ := bl.predict(xH + step)
		g := math.Max(0, tgt-m2)
		// How far one evaluation overshoots: the curve's step there, or,
		// when larger, the job's own recent steps (a curve levelling
		// off understates the last evaluations' gains), shrunk by as
		// much as the curve's step shrinks between now and the crossing
		// or, when the crossing is the line's, as much as the job's own
		// past says the line is slow (a curve set aside for the
		// crossing does not size the step there).
		shrink := stepShrink(bl, st.xLast, step, mean-m2)
		if f.TimeToTarget != nil && f.TimeToTarget.Basis == "target-linear" {
			shrink = math.Min(1, 1/st.xcStretch)
		}
		over := math.Max(g, s.OvershootEvalShare*recentEvalGain(obs)*shrink) + recentSetback(obs)
		mean, lo, hi = tgt-g/2, tgt-over, tgt+g*0.5
	}
	if st.pin.fixed && len(obs) >= s.PlateauStallPoints && st.pin.pace > 0 {
		// A fixed budget anneals by its end: the job's recent pace
		// carried to the end is a gain the curve may not see.
		lo = math.Min(lo, best-s.IntervalAnnealShare*st.pin.pace)
	}
	// Far from the end the spread easily reaches values the metric cannot
	// take (a loss below 0, an accuracy past 1): no job ends there.
	mean, lo, hi = bl.within(mean), bl.within(lo), bl.within(hi)
	if basis != "" {
		f.PredictedFinal = oriented(mean, lo, hi, sign, basis)
	}
	rem := math.Max(0, best-mean)
	gain := st.first - best
	f.RemainingImprovement = ptr(rem)
	if gain > 0 {
		f.RelativeRemaining = ptr(rem / gain)
		eps := s.PlateauEpsilon * gain
		f.PlateauProbability = normCDF((eps - (best - mean)) / math.Max(sd, 1e-12))
	}
	f.Confidence = confidence(len(obs), gain, half, st.cf)
}

// detectPlateau applies the plateau rules (plateau.go) and dates the
// onset of a called plateau.
func detectPlateau(st *fitState) bool {
	f := &st.f
	rule, why := judgePlateau(&st.pin)
	if rule != nil {
		f.PlateauReason = why
		if rule.probability != nil {
			f.PlateauProbability = rule.probability(f.PlateauProbability, st.s.PlateauThreshold)
		}
		f.Plateaued = rule.call == plateau
		if rule.name == "overfitting" {
			// The objective got worse: nothing of the curve's remaining
			// gain is expected.
			f.RelativeRemaining = ptr(0)
		}
	}
	// A hold, or no rule at all (every observation count rule passed):
	// may the run have changed since an earlier call?
	if rule == nil || rule.call == hold {
		f.PlateauRelease = judgeRelease(&st.pin)
	}
	if f.Plateaued {
		if on := plateauOnset(st.obs, st.s.PlateauEpsilon); !math.IsNaN(on) {
			f.PlateauOnset = ptr(on)
		}
	}
	return true
}

// detectDivergence: NaN/Inf in a loss-like metric or the objective that
// the current segment has not recovered from, or the objective rising
// beyond its noise (unless that is overfitting, which the plateau rules
// call).
func detectDivergence(st *fitState) bool {
	f := &st.f
	if why, ok := unrecoveredNonFinite(st); ok {
		f.Diverging, f.NonFinite, f.DivergenceReason = true, true, why
		return true
	}
	f.Diverging, f.DivergenceReason = divergence(st.obs, st.s)
	// An evaluated objective rising while the training loss still falls
	// is overfitting, not a run blowing up.
	if f.Diverging {
		if over, _ := overfitting(&st.pin); over {
			f.Diverging, f.DivergenceReason = false, ""
		}
	}
	return true
}

// unrecoveredNonFinite: the latest NaN/Inf report of the current segment,
// a loss-like metric's or the objective's, with no report since whose
// losses are finite again (finiteLossColumns). A segment with no NaN/Inf
// report at all, the usual case, is passed over without building the
// column list.
func unrecoveredNonFinite(st *fitState) (string, bool) {
	pts, seg, obj := st.pts, st.last.Seg, st.obj.Metric
	i := len(pts) - 1
	for i >= 0 && pts[i].Seg == seg && !nonFiniteAt(pts[i], obj) {
		i--
	}
	if i < 0 || pts[i].Seg != seg {
		return "", false
	}
	finite := finiteLossColumns(st)
	for j := len(pts) - 1; j > i; j-- {
		if finite(pts[j]) {
			// A later report's losses are finite again: the NaN/Inf
			// was a step the job survived (an overflow mixed
			// precision skips), not a run blown up, which stays
			// non-finite.
			return "", false
		}
	}
	if pts[i].NonFinite {
		return fmt.Sprintf("a loss-like metric reported NaN/Inf at t=%.0fs", pts[i].T), true
	}
	return fmt.Sprintf("the objective %s reported NaN/Inf at t=%.0fs", obj, pts[i].T), true
}

// nonFiniteAt: the point reported NaN/Inf in a loss-like metric or in the
// objective.
func nonFiniteAt(p progress.Point, objective string) bool {
	return p.NonFinite || slices.Contains(p.NaNMetrics, objective)
}

// finiteLossColumns returns whether a point is a report with nothing
// non-finite that carries a finite value of the objective or of a
// loss-like metric: evidence that the losses are finite there.
func finiteLossColumns(st *fitState) func(progress.Point) bool {
	var cols []int
	for _, name := range st.h.MetricNames() {
		if name == st.obj.Metric || progress.LossLike(name) {
			if c, ok := st.h.MetricColumn(name); ok {
				cols = append(cols, c)
			}
		}
	}
	return func(p progress.Point) bool {
		if nonFiniteAt(p, st.obj.Metric) {
			return false
		}
		for _, c := range cols {
			if !math.IsNaN(p.Metric(c)) {
				return true
			}
		}
		return false
	}
}

// checkIntegrity compares the job's own claims with what the planner
// measured.
func checkIntegrity(st *fitState) bool {
	st.f.Integrity = integrity(st.h, st.axis, st.f.ETA, st.now)
	return true
}

// recentSetback is the median size of the setbacks (an observation worse
// than the one before) among the last ten steps, 0 without any:
// on a metric that improves, a setback is noise, and noise can carry the
// first evaluation past the target further than one step's gain.
func recentSetback(obs []objPoint) float64 {
	var d []float64
	for i := max(1, len(obs)-10); i < len(obs); i++ {
		if up := obs[i].y - obs[i-1].y; up > 0 {
			d = append(d, up)
		}
	}
	if len(d) == 0 {
		return 0
	}
	return stats.MedianInPlace(d)
}

// stepShrink is the ratio of the blended curve's gain over one
// evaluation step at the crossing (then, from the caller's predictions
// there) to its gain over one step at xLast, in [0, 1] (1 when the curve
// is not improving at xLast). A run's per-evaluation gains measured early
// overstate those at a crossing far ahead; the curve's shape says by how
// much, even where its level is off.
func stepShrink(bl blended, xLast, step, then float64) float64 {
	if step <= 0 {
		return 1
	}
	a, _ := bl.predict(xLast)
	b, _ := bl.predict(xLast + step)
	now := a - b
	if now <= 0 {
		return 1
	}
	return math.Max(0, math.Min(1, then/now))
}
