package forecast

import (
	"fmt"
	"math"
	"strings"

	"github.com/progress-planner/planner/internal/humanize"
	"github.com/progress-planner/planner/internal/stats"
	"github.com/progress-planner/planner/pkg/progress"
)

// The plateau call.
//
// "No more improvement worth the GPUs" is judged by an ordered table of
// named rules; the first that matches decides, and its phrase becomes
// Forecast.PlateauReason. The order is the trust policy:
//
//  1. tooFewObservations: no call on fewer than MinObjectivePoints+2
//     distinct observations.
//  2. overfitting: the evaluated objective is worse than its best beyond
//     its noise for the last two evaluations while the training loss still
//     falls beyond its own noise. The strongest stop signal for
//     fine-tuning; it overrides the schedule rules below.
//  3. learningRateMoving: a job with a fixed total, or a target not yet
//     reached, whose reported learning rate is still falling is annealing, and annealing is where
//     the last gain comes from (cosine, linear, warm-up-stable-decay and
//     step schedules flatten mid-run and improve again); one whose rate is
//     still rising is warming up, with its whole decay ahead.
//  4. targetInReach: a job that stops at its target (no fixed total) and,
//     by the fast end of its own time-to-target forecast's interval, may
//     reach it sooner than it has run so far will likely end on its own:
//     it has not plateaued short of its target. The share-of-gains rules
//     below read its slow last approach as a stall. A crossing already
//     due holds nothing.
//  5. meaningfulGainAhead: the job's recent pace carried to its planned
//     end (a fixed budget anneals by its end, so the recent pace is a
//     floor, not a ceiling) still promises at least MinImprovement of the
//     metric's own value. The share-of-gains rules below cannot see this:
//     the first drop from random initialisation dwarfs a 2 % loss change
//     that the job exists to make. For a job that stops at a target it has
//     not reached, the pace is also read at the fast end of its confidence
//     band, up to the target: called short of its target, such a job
//     loses what it ran for, and a flat stretch in a few noisy evaluations
//     does not rule out the gain. The doubt goes to the job.
//  6. shortFlatBeforeAnneal: a job with a fixed total that reports no
//     learning rate, or one not yet annealed (warming up, the stable phase
//     of a warm-up-stable-decay run, a decay under way), will most likely
//     gain as it anneals by its end; it must have been flat for
//     PlateauAnnealShare of its planned run.
//  7. stepScheduleAhead: a job with a fixed total, or a target not yet
//     reached, whose own history shows
//     step-schedule jumps (one observation gaining StepJumpShare of all the
//     gain before it, several times its recent per-observation gains) is
//     held while it has been flat for less than the run from its start
//     to its last jump. A history of a job with a fixed total that begins
//     after reports the planner did not see (first seen mid-run) hides the
//     schedule before it, and the jump that began its flat stretch may
//     be among its first observations, where none is looked for, or
//     show no gain over them: the start of its flat stretch counts as
//     a jump.
//  8. unevaluatedSinceRestart: the job restarted (a readmission, a
//     counter restart or a long silence began its latest history segment)
//     and has not evaluated its objective since. The windows of the rules
//     below and of 5 are shares of elapsed time, which then holds time the
//     job did not run: a wait in the queue would read as a flat stretch.
//  9. curve: the curve's plateau probability is at least PlateauThreshold.
//  10. stall: the best value gained less than PlateauEpsilon of the gain so
//     far over the stall window, and the curve does not expect
//     PlateauStallMaxRemaining of it still.
//
// When no rule matches, the job is not plateaued.
type plateauInput struct {
	obs []objPoint
	// sb is smoothedBest(obs), stallFrom stallWindowStart, lr the reported
	// learning_rate up to now (metricValues) and jumps stepJumps (nil
	// when StepJumpShare is 0), each computed once per forecast for the
	// rules that read them (zero without observations).
	sb        []float64
	stallFrom float64
	lr        []objPoint
	jumps     []int
	// unseenHead is the planned-run position of the history's first
	// report when the planner first saw the job mid-run (unseenHeadAt),
	// else NaN.
	unseenHead float64
	h          *progress.History
	obj        progress.Objective
	now        float64
	s          Settings
	last       progress.Point // latest point up to now
	// curve is the curve's plateau probability and relRem its expected
	// remaining gain as a share of the gain so far (nil without a curve).
	curve  float64
	relRem *float64
	// pace is recentPaceGain's gain and paceHorizon its phrase, computed
	// once per forecast (the interval and meaningfulGainAhead read it).
	pace        float64
	paceHorizon string
	// xEnd is the planned end on the axis (NaN: none known) and fixed
	// reports whether it is the job's own total.
	xEnd  float64
	fixed bool
	// toTarget is the time-to-target forecast of a job that stops at its
	// target and has not reached it (nil otherwise), and toTargetDue says
	// its crossing was due by now and not seen (the forecast is then the
	// wait for the next evaluation); targetStop says the job stops at its
	// target and has not reached it, targetMet that it has.
	toTarget    *Estimate
	toTargetDue bool
	targetStop  bool
	targetMet   bool
}

// plateauCall is what a matching rule decides.
type plateauCall int

const (
	noCall  plateauCall = iota // not plateaued, the probability as the curve says
	plateau                    // plateaued
	hold                       // not plateaued although the curve or the stall may say so
)

type plateauRule struct {
	name  string
	call  plateauCall
	match func(in *plateauInput) (bool, string)
	// probability, when set, is the plateau probability the rule implies
	// from the curve's (p) and the threshold.
	probability func(p, threshold float64) float64
}

var plateauRules = [...]plateauRule{
	{"tooFewObservations", noCall, tooFewObservations, nil},
	{"overfitting", plateau, overfitting, func(float64, float64) float64 { return 1 }},
	{"learningRateMoving", hold, learningRateMoving, heldProbability},
	{"targetInReach", hold, targetInReach, heldProbability},
	{"meaningfulGainAhead", hold, meaningfulGainAhead, heldProbability},
	{"shortFlatBeforeAnneal", hold, shortFlatBeforeAnneal, heldProbability},
	{"stepScheduleAhead", hold, stepScheduleAhead, heldProbability},
	{"unevaluatedSinceRestart", hold, unevaluatedSinceRestart, heldProbability},
	{"curve", plateau, curvePlateau, nil},
	{"stall", plateau, stallPlateau, math.Max},
}

// heldProbability: below the threshold, so no new plateau is called, but
// not to zero, so a policy's exit hysteresis still holds a job already
// judged plateaued against one noisy window (the policy enters only on
// Forecast.Plateaued, so no policy threshold turns a hold into a call, and
// leaves on Forecast.PlateauRelease, the release rules below, whatever the
// probability).
func heldProbability(p, threshold float64) float64 { return math.Min(p, 0.99*threshold) }

// judgePlateau applies plateauRules in order and returns the rule that
// decided (nil when none did) with its phrase.
func judgePlateau(in *plateauInput) (*plateauRule, string) {
	for i := range plateauRules {
		if ok, why := plateauRules[i].match(in); ok {
			return &plateauRules[i], why
		}
	}
	return nil, ""
}

// The release of a judged job.
//
// The holds above doubt a call not yet made, and through them a job
// already judged plateaued stays judged by the policy's exit band (their
// probability sits just under the threshold). Two events in the run
// itself end the flat stretch a call was made on; when the forecast does
// not call a plateau, the first that matches becomes
// Forecast.PlateauRelease and a policy ends the verdict on it:
//
//  1. learningRateStarted: the reported learning rate moves over the stall
//     window (as rule 3 reads it) after standing at its peak over a
//     stretch as long just before it: a warm-up-stable-decay cool-down, a
//     cosine leaving its peak, a first step. A rate moving all along (a
//     linear decay) releases nothing, so a call made under it
//     (overfitting) keeps its hysteresis.
//  2. stepJumpRecent: a step-schedule jump (as rule 7 finds them) within
//     the stall window.
var releaseRules = [...]struct {
	name  string
	match func(in *plateauInput) (bool, string)
}{
	{"learningRateStarted", learningRateStarted},
	{"stepJumpRecent", stepJumpRecent},
}

// judgeRelease applies releaseRules in order and returns the phrase of the
// first that matches ("" when none does).
func judgeRelease(in *plateauInput) string {
	for _, r := range releaseRules {
		if ok, why := r.match(in); ok {
			return why
		}
	}
	return ""
}

func tooFewObservations(in *plateauInput) (bool, string) {
	need := in.s.MinObjectivePoints + 2
	if len(in.obs) < need {
		return true, fmt.Sprintf("%d distinct observations; a plateau call needs %d", len(in.obs), need)
	}
	return false, ""
}

// overfitting: the objective is an evaluation metric, its last two
// observations are both worse than its best by more than three times its
// noise and 1 % of its value, and the training loss improved over the same
// stretch by more than 1 % and three times its own noise.
func overfitting(in *plateauInput) (bool, string) {
	if !strings.Contains(in.obj.Metric, "val") && !strings.HasPrefix(in.obj.Metric, "eval") {
		return false, ""
	}
	// The training loss, under the names reporters use for it.
	train := ""
	for _, m := range [...]string{"loss", "train_loss"} {
		if m != in.obj.Metric && in.h.HasMetric(m) {
			train = m
			break
		}
	}
	if train == "" {
		return false, ""
	}
	n := len(in.obs)
	best, bi := math.Inf(1), 0
	for i, o := range in.obs[:n-2] {
		if o.y < best {
			best, bi = o.y, i
		}
	}
	thr := math.Max(3*noiseScale(in.obs), 0.01*math.Abs(best))
	if in.obs[n-2].y-best <= thr || in.obs[n-1].y-best <= thr {
		return false, ""
	}
	atBest, latest, noise := trainingLossSince(in, train, in.obs[bi].t)
	// A fall within the training loss's own noise is no evidence: with
	// sparse evaluations a noisy eval loss would otherwise meet a training
	// loss that merely wobbled (docs/backtest.md 7.8).
	if math.IsNaN(atBest) || !(latest < atBest*(1-0.01)) || atBest-latest <= 3*noise {
		return false, ""
	}
	return true, fmt.Sprintf("overfitting: %s is worse than its best by %.3g while the training loss fell %.3g→%.3g",
		in.obj.Metric, in.obs[n-1].y-best, atBest, latest)
}

// trainingLossSince reads the training loss (metric train, minimized) up
// to now: its value at tb (or the first one logged after it: a trainer may
// log its loss less often), its latest (NaN when none) and its noise
// (noiseScale over its distinct logged values).
func trainingLossSince(in *plateauInput, train string, tb float64) (atBest, latest, noise float64) {
	atBest, latest = math.NaN(), math.NaN()
	tr := metricValues(in.h, train, in.now)
	for _, o := range tr {
		if o.t <= tb || math.IsNaN(atBest) {
			atBest = o.y
		}
		latest = o.y
	}
	return atBest, latest, noiseScale(tr)
}

// How far the reported learning rate must move over the stall window to
// count (learningRateMoving). Rising, or falling for a job with a fixed
// total, 5 %: a slower decay is left to shortFlatBeforeAnneal, which bounds
// the flat stretch by the planned run. Falling for a job that stops at its
// target, any fall past a logged rate's rounding: no planned run bounds
// its flat stretch, and a slow decay (a cosine's first part, a linear
// decay over a long budget) falls by less than 5 % over a young run's
// window while the whole anneal is still ahead (docs/backtest.md 7.35).
const (
	learningRateMove           = 0.05
	learningRateFallTargetStop = 0.001
)

// learningRateMoving: a fixed total or a target not yet reached, and the
// reported learning_rate moved over the stall window (learningRateMove,
// learningRateFallTargetStop) while it is above 2 % of its peak (a
// schedule that has annealed is done). Falling, the job is annealing;
// rising, it is still warming up (a warm-up counted in iterations spans
// many epochs of a small dataset), and a flat stretch before the peak says
// nothing about where the decay will take it.
func learningRateMoving(in *plateauInput) (bool, string) {
	if !(in.fixed || in.targetStop) || !in.h.HasMetric("learning_rate") {
		return false, ""
	}
	if fr := in.last.Fraction(); !math.IsNaN(fr) && fr >= 1 {
		return false, ""
	}
	peak, atStart, latest := learningRateSince(in, in.stallFrom)
	if math.IsNaN(latest) || peak <= 0 || latest <= 0.02*peak {
		return false, ""
	}
	fall := learningRateFall(in)
	switch {
	case latest < (1-fall)*atStart:
		return true, fmt.Sprintf("learning rate still falling (%.3g→%.3g, peak %.3g) before the planned end: annealing ahead", atStart, latest, peak)
	case latest > (1+learningRateMove)*atStart:
		return true, fmt.Sprintf("learning rate still warming up (%.3g→%.3g) before the planned end: its decay is all ahead", atStart, latest)
	}
	return false, ""
}

// learningRateFall is the fall over the stall window that counts as a
// moving rate: learningRateMove, or for a job that stops at its target
// without a fixed total any fall past a logged rate's rounding.
func learningRateFall(in *plateauInput) float64 {
	if !in.fixed {
		return learningRateFallTargetStop
	}
	return learningRateMove
}

// learningRateStill: a rate stood still when it moved by no more than this
// share of learningRateFall. Well under the bound, so that a steady decay
// that moves about the bound in every window (a linear decay over a long
// budget) is not read as one that stood still and then started.
const learningRateStill = 0.25

// learningRateStarted (release rule 1): the rate moved over the stall
// window (learningRateMoving) after standing still at its peak (moving no
// more than learningRateStill of learningRateFall) over a stretch as long
// just before it. A rate already below its peak may only be logged too
// coarsely to show a steady decay in every window (1.9e-05, 1.8e-05), and
// a history that does not reach back that far shows no standing rate.
func learningRateStarted(in *plateauInput) (bool, string) {
	if moving, _ := learningRateMoving(in); !moving {
		return false, ""
	}
	w0 := in.stallFrom
	t1 := w0 - (in.now - w0)
	if len(in.lr) == 0 || in.lr[0].t > t1 {
		return false, ""
	}
	peak, before, latest := learningRateSince(in, t1)
	_, atWindow, _ := learningRateSince(in, w0)
	still := learningRateStill * learningRateFall(in)
	if !(before > 0) || before < (1-still)*peak || math.Abs(atWindow-before) > still*before {
		return false, ""
	}
	return true, fmt.Sprintf("its learning rate stood at its peak %.3g and now moves (%.3g): a cool-down or a step begun", before, latest)
}

// stepJumpRecent (release rule 2): the latest step-schedule jump
// (stepJumps, as rule 7 finds them; none when StepJumpShare is 0) lies
// within the stall window: the best value just fell by StepJumpShare or
// more of all the gain before it.
func stepJumpRecent(in *plateauInput) (bool, string) {
	if len(in.jumps) == 0 {
		return false, ""
	}
	i := in.jumps[len(in.jumps)-1]
	if in.obs[i].t < in.stallFrom {
		return false, ""
	}
	best := in.obs[0].y
	for _, o := range in.obs[:i] {
		best = math.Min(best, o.y)
	}
	return true, fmt.Sprintf("a step-schedule jump at t=%.0fs gained %.0f%% of all the gain before it, within the stall window",
		in.obs[i].t, 100*(best-in.obs[i].y)/(in.obs[0].y-best))
}

// learningRateSince reads the reported learning_rate up to now (in.lr):
// its peak, its value at t0 (or the first one logged after it) and its
// latest (NaN when none is reported).
func learningRateSince(in *plateauInput, t0 float64) (peak, atStart, latest float64) {
	atStart, latest = math.NaN(), math.NaN()
	for _, o := range in.lr {
		if o.y < 0 {
			continue
		}
		peak = math.Max(peak, o.y)
		if o.t <= t0 || math.IsNaN(atStart) {
			atStart = o.y
		}
		latest = o.y
	}
	return peak, atStart, latest
}

// annealAhead: a job reports no learning rate, or one not yet annealed
// (above 2 % of its peak: still warming up, in a warm-up-stable-decay
// run's stable phase, or decaying): its decay, or the rest of it, is
// still to come.
func annealAhead(in *plateauInput) (bool, string) {
	if !in.h.HasMetric("learning_rate") {
		return true, "no learning rate reported"
	}
	peak, _, latest := learningRateSince(in, in.now)
	if math.IsNaN(latest) || peak <= 0 || latest <= 0.02*peak {
		return false, ""
	}
	return true, fmt.Sprintf("learning rate not yet annealed (%.3g, peak %.3g)", latest, peak)
}

// targetInReach: a job that stops at its target, not reached yet, whose
// time-to-target interval's fast end (the forecast, when that end is
// clamped to 0) is no later than the time the job has run so far (the
// horizon recentPaceGain uses when there is no planned end). Not the
// forecast alone, and not the slow end: MLPerf's target runs
// approach their target ever more slowly, and the slow end was past that
// horizon on two of the three gnn runs called plateaued one to five
// evaluations before they reached their target (docs/backtest.md 7.9);
// the forecast was past it for a bert run five evaluations short of its
// target (7.28). A stop short of the target costs the whole run, so the
// doubt goes to the job.
func targetInReach(in *plateauInput) (bool, string) {
	tt := in.toTarget
	if tt == nil || !tt.Known {
		return false, ""
	}
	ran := in.now - in.obs[0].t
	// An end clamped to 0 (a relative error past 1/z) says only that the
	// interval is wide: the forecast then.
	soonest := tt.Value
	if tt.Lo > 0 {
		soonest = tt.Lo
	}
	// A crossing already due that has not come refutes the line it was
	// read from: no hold on it, though the forecast still waits for the
	// next evaluation (toTargetDue).
	if in.toTargetDue || !(tt.Value > 0 && soonest <= ran) {
		return false, ""
	}
	if soonest == tt.Value {
		return true, fmt.Sprintf("reaches its target in %s (at most %s), sooner than it has run so far (%s)",
			humanize.Duration(tt.Value), humanize.Duration(tt.Hi), humanize.Duration(ran))
	}
	return true, fmt.Sprintf("may reach its target in %s (forecast %s, at most %s), sooner than it has run so far (%s)",
		humanize.Duration(soonest), humanize.Duration(tt.Value), humanize.Duration(tt.Hi), humanize.Duration(ran))
}

// meaningfulGainAhead: the recent pace carried to the planned end is at
// least MinImprovement of the metric's own value, at its median slope
// (plateauInput.pace) or, for a job that stops at a target it has not
// reached, at the fast end of the slope's band (fastPaceGain) up to the
// target, which ends it: with a few noisy evaluations in the window the
// median can read a job still improving as flat (docs/backtest.md
// 7.27-7.28). A job with a fixed total ends on its own and has the anneal
// rules; one called short of its target loses what it ran for. A job that
// has reached its target has no planned end left to carry its pace to:
// what it asked for is done.
func meaningfulGainAhead(in *plateauInput) (bool, string) {
	if in.s.MinImprovement <= 0 || in.targetMet {
		return false, ""
	}
	best := math.Inf(1)
	for _, o := range in.obs {
		best = math.Min(best, o.y)
	}
	scale := math.Abs(best)
	if scale == 0 {
		return false, ""
	}
	floor := in.s.MinImprovement * scale
	if in.pace >= floor {
		return true, fmt.Sprintf("still %.1f%% of its value to gain at its recent pace carried %s (meaningful: %.1f%%)",
			100*in.pace/scale, in.paceHorizon, 100*in.s.MinImprovement)
	}
	if !in.targetStop {
		return false, ""
	}
	// No gain past the target is made: the job ends there.
	gap := best - in.obj.Sign()**in.obj.Target
	if fast := math.Min(fastPaceGain(in), gap); fast >= floor {
		return true, fmt.Sprintf("%.1f%% of its value short of its target, and its recent evaluations are too few or too noisy to rule out gaining %.1f%% (the fast end of its recent pace's %.0f%% band, carried %s; meaningful: %.1f%%)",
			100*gap/scale, 100*fast/scale, 100*in.s.Interval, in.paceHorizon, 100*in.s.MinImprovement)
	}
	return false, ""
}

// shortFlatBeforeAnneal: a job with a fixed total whose decay is still
// ahead (annealAhead) will, as most schedules do, anneal by its end; a
// flat stretch shorter than PlateauAnnealShare of its planned run is not
// yet a plateau.
func shortFlatBeforeAnneal(in *plateauInput) (bool, string) {
	if !in.fixed || in.s.PlateauAnnealShare <= 0 {
		return false, ""
	}
	ahead, lr := annealAhead(in)
	if !ahead {
		return false, ""
	}
	xLast := in.obs[len(in.obs)-1].x
	span := in.xEnd - in.obs[0].x
	if in.xEnd <= xLast || span <= 0 {
		return false, ""
	}
	x0 := axisAt(in.last, in.xEnd) - in.s.PlateauAnnealShare*span
	sb := in.sb
	best, before := sb[len(sb)-1], math.Inf(1)
	for i, o := range in.obs {
		if o.x < x0 {
			before = sb[i]
		}
	}
	// No observation that early: the job has not run that long yet.
	gain := in.obs[0].y - best
	if !math.IsInf(before, 1) && (gain <= 0 || before-best < in.s.PlateauEpsilon*gain) {
		return false, ""
	}
	return true, fmt.Sprintf("%s and a fixed total: flat for less than %.0f%% of its planned run, annealing may still come", lr, 100*in.s.PlateauAnnealShare)
}

// stepScheduleAhead: see the rule list. The hold after the last jump is
// as long as the run from the start (the run's, with a fixed total) to
// that jump. A step schedule's stages are no longer than the run before
// them (30/60/90, 50/75/100 %, 80/120/160), so for a real schedule this is
// its longest stage or past its end, as the longest gap between jumps is;
// but one spurious jump inside a stage (a noisy evaluation that gains
// StepJumpShare early in a run) splits that stage and shortens its longest
// gap, and would release the job before its real step. Measured from the
// start, a jump found can only lengthen the hold.
func stepScheduleAhead(in *plateauInput) (bool, string) {
	if !(in.fixed || in.targetStop) || in.s.StepJumpShare <= 0 {
		return false, ""
	}
	xLast := in.obs[len(in.obs)-1].x
	if in.fixed && in.xEnd <= xLast {
		return false, ""
	}
	jumps := in.jumps
	unseen := !math.IsNaN(in.unseenHead)
	if len(jumps) == 0 && !unseen {
		return false, ""
	}
	// A fixed total's axis starts at 0, where the schedule's first stage
	// starts; measured from the first evaluation, which comes later, the
	// first period would be short by that much.
	start := in.obs[0].x
	if in.fixed {
		start = math.Min(start, 0)
	}
	// A history that begins mid-run may have missed the jump its flat
	// stretch began with: it can have been as late as that stretch's
	// start (never before the history's own).
	lastJump := math.Inf(-1)
	if len(jumps) > 0 {
		lastJump = in.obs[jumps[len(jumps)-1]].x
	}
	prev := lastJump
	if unseen {
		flat := in.obs[flatFrom(in.sb, in.obs[0].y, in.s.PlateauEpsilon)].x
		prev = math.Max(prev, math.Max(in.unseenHead, flat))
	}
	seen := prev == lastJump // the hold is the last jump's, not the unseen one's
	period := prev - start
	now, span, of := xLast, xLast-start, "its run so far"
	if in.fixed {
		now, span, of = math.Max(xLast, axisAt(in.last, in.xEnd)), in.xEnd-start, "the planned run"
	}
	if now-prev >= period {
		return false, ""
	}
	if !seen {
		return true, fmt.Sprintf("first seen %.0f%% into %s: a step schedule's jump may have begun its flat stretch, %.0f%% of %s from its start; flat for %.0f%% of it since",
			100*in.unseenHead/span, of, 100*period/span, of, 100*(now-prev)/span)
	}
	return true, fmt.Sprintf("step schedule: its history shows %d jump(s), the last %.0f%% of %s from its start; flat for %.0f%% of it since",
		len(jumps), 100*period/span, of, 100*(now-prev)/span)
}

// stepJumps are the observations that improved on the best before them by
// at least share of all the gain before them and by at least three times
// the median per-observation gain of the five observations before them:
// the discontinuity a learning-rate step makes, not the steep start every
// run has.
func stepJumps(obs []objPoint, share float64) []int {
	var out []int
	best := obs[0].y
	for i := 1; i < len(obs); i++ {
		gain, jump := obs[0].y-best, best-obs[i].y
		if i >= 6 && gain > 0 && jump >= share*gain && jump >= 3*recentEvalGain(obs[:i]) {
			out = append(out, i)
		}
		best = math.Min(best, obs[i].y)
	}
	return out
}

// unseenHeadReports and unseenHeadShare: a history whose first report is
// further from the run's start than this many of its reports' progress
// and this share of its planned run begins after reports the planner did
// not see. One late or lost report is jitter; so are a few coalesced at
// the start of a run (the controller folds status changes it sees
// together), and within a tenth of a run no step schedule's stage has
// ended (warm-up and the steep start do).
const (
	unseenHeadReports = 2
	unseenHeadShare   = 0.1
)

// unseenHeadAt is the planned-run position (on the axis whose end is
// xEnd) of the history's first report when the job has a fixed total and
// that report lies more than unseenHeadReports of its reports' median
// progress (over its first eight steps, which are the ones that tell what
// came before) and more than unseenHeadShare of the planned run from the
// run's start: the planner first saw the job
// mid-run (installed on a running cluster, or the job's history lost),
// so what its schedule did before is unseen. A job that first reports
// after an epoch of ten has shown the planner all it reported. Only
// reports up to now count. NaN otherwise.
func unseenHeadAt(h *progress.History, xEnd, now float64, fixed bool) float64 {
	if !fixed || !(xEnd > 0) {
		return math.NaN()
	}
	first, prev := math.NaN(), math.NaN()
	var buf [8]float64
	steps := buf[:0]
	for _, p := range h.Points() {
		if p.T > now {
			break
		}
		x := axisAt(p, xEnd)
		switch {
		case math.IsNaN(x):
			continue
		case math.IsNaN(first):
			if !(x > 0) {
				return math.NaN() // seen from the start
			}
			first = x
		case x > prev:
			steps = append(steps, x-prev)
		}
		prev = x
		if len(steps) == cap(buf) {
			break
		}
	}
	if len(steps) == 0 || first <= max(unseenHeadReports*stats.MedianInPlace(steps), unseenHeadShare*xEnd) {
		return math.NaN()
	}
	return first
}

// axisAt is the job's current position on the axis whose end is xEnd.
func axisAt(p progress.Point, xEnd float64) float64 {
	if fr := p.Fraction(); !math.IsNaN(fr) {
		return fr * xEnd
	}
	return math.NaN()
}

// unevaluatedSinceRestart: the latest history segment (a readmission the
// controller reported, a counter restart, a long silence) holds no new
// objective value yet. Until the job evaluates again nothing it did since
// shows, and the time-based windows (the recent pace, the stall window)
// would span the time it was not running.
func unevaluatedSinceRestart(in *plateauInput) (bool, string) {
	if in.last.Seg == 0 || len(in.obs) == 0 {
		return false, ""
	}
	pts := pointsUpTo(in.h, in.now)
	i := segmentStart(pts)
	if i < 0 || in.obs[len(in.obs)-1].t >= pts[i].T {
		return false, ""
	}
	return true, fmt.Sprintf("no evaluation since it restarted %s ago: the time it did not run is not a flat stretch",
		humanize.Duration(in.now-pts[i].T))
}

func curvePlateau(in *plateauInput) (bool, string) {
	if in.curve < in.s.PlateauThreshold {
		return false, ""
	}
	return true, fmt.Sprintf("the curve expects less than %.0f%% of the gain so far (probability %.2f)", 100*in.s.PlateauEpsilon, in.curve)
}

func stallPlateau(in *plateauInput) (bool, string) {
	if !stalled(in.obs, in.sb, in.stallFrom, in.s) || (in.relRem != nil && *in.relRem >= in.s.PlateauStallMaxRemaining) {
		return false, ""
	}
	return true, fmt.Sprintf("the best value gained less than %.0f%% of the gain so far over the stall window", 100*in.s.PlateauEpsilon)
}

// recentPaceGain carries the objective's recent rate of improvement (a
// Theil–Sen slope, on the progress axis, over paceWindow) to the planned
// end, or over a horizon as long as the run so far when there is none
// (paceAhead). It returns the oriented gain (>= 0) and a phrase for the
// horizon.
func recentPaceGain(in *plateauInput) (float64, string) {
	win := paceWindow(in)
	if len(win) < 3 {
		return 0, ""
	}
	slope, _ := theilSenBand(win, 0)
	ahead, horizon := paceAhead(in)
	return math.Max(0, -slope) * ahead, horizon
}

// fastPaceGain is recentPaceGain at the fast end of the slope's central
// band of Settings.Interval, measured over the pace window or, when it
// holds more observations, the flat stretch the job is in (flatFrom on the
// smoothed best, as the stall rule reads it): a long flat stretch is more
// evidence, and its band is narrower. The flat stretch starts where the
// best was set, so its slopes lean toward no gain; from the reading before
// it, they lean the other way. It is read both ways, and either one showing
// a gain is doubt enough (docs/backtest.md 7.30).
func fastPaceGain(in *plateauInput) float64 {
	win := paceWindow(in)
	if len(win) < 3 {
		return 0
	}
	z := stats.CentralZ(in.s.Interval)
	var fast float64
	if from := flatFrom(in.sb, in.obs[0].y, in.s.PlateauEpsilon); len(in.obs)-from > len(win) {
		_, fast = theilSenBand(in.obs[from:], z)
		if from > 0 {
			_, before := theilSenBand(in.obs[from-1:], z)
			fast = math.Min(fast, before)
		}
	} else {
		_, fast = theilSenBand(win, z)
	}
	ahead, _ := paceAhead(in)
	return math.Max(0, -fast) * ahead
}

// paceWindow is the observations of the last PlateauStallShare of elapsed
// time, stretched back to hold at least PlateauStallPoints (none when the
// value has not changed for the whole window). It is not stretched to the
// job's longest false stall as the stall rule's is: the pace is the job's
// current one.
func paceWindow(in *plateauInput) []objPoint {
	k := min(max(in.s.PlateauStallPoints, 1), len(in.obs))
	w0 := in.now - in.s.PlateauStallShare*(in.now-in.obs[0].t)
	if in.obs[len(in.obs)-1].t < w0 {
		return nil
	}
	w0 = math.Min(w0, in.obs[len(in.obs)-k].t)
	i := len(in.obs)
	for i > 0 && in.obs[i-1].t >= w0 {
		i--
	}
	return in.obs[i:]
}

// paceAhead is the axis distance from the latest observation to the
// planned end (or as long again as the run so far, when none is known),
// and its phrase.
func paceAhead(in *plateauInput) (float64, string) {
	xLast := in.obs[len(in.obs)-1].x
	end, horizon := in.xEnd, "to the planned end"
	switch {
	case math.IsNaN(end):
		end, horizon = xLast+(xLast-in.obs[0].x), "over as long again as the run so far"
	case !in.fixed:
		horizon = "to the target"
	}
	return math.Max(0, end-xLast), horizon
}

// theilSenBand is the median of pairwise slopes dy/dx (at most 64 points,
// evenly taken, keep it cheap) and the fast (most negative) end of its
// central band for the normal quantile z (0: the median again): Sen's
// (1968) distribution-free interval, which counts C = z·√(m(m−1)(2m+5)/18)
// slopes in from each end of the sorted slopes of m points (the variance
// of Kendall's statistic). With three points and z = 1.28 it is their
// steepest slope; it narrows as points accumulate.
func theilSenBand(pts []objPoint, z float64) (slope, fast float64) {
	stride := (len(pts) + 63) / 64
	m := (len(pts) + stride - 1) / stride // points taken
	sl := make([]float64, 0, m*(m-1)/2)
	for i := 0; i < len(pts); i += stride {
		for j := i + stride; j < len(pts); j += stride {
			if dx := pts[j].x - pts[i].x; dx > 0 {
				sl = append(sl, (pts[j].y-pts[i].y)/dx)
			}
		}
	}
	if len(sl) == 0 {
		return 0, 0
	}
	slope = stats.MedianInPlace(sl) // sorts sl, this call's own
	if z <= 0 {
		return slope, slope
	}
	mf := float64(m)
	c := z * math.Sqrt(mf*(mf-1)*(2*mf+5)/18)
	k := min(max(int(math.Floor((float64(len(sl))-c)/2)), 0), len(sl)-1)
	return slope, sl[k]
}

// noiseScale is the robust scale of successive differences of the
// observations (one observation's noise).
func noiseScale(obs []objPoint) float64 {
	if len(obs) < 3 {
		return 0
	}
	d := make([]float64, 0, len(obs)-1)
	for i := 1; i < len(obs); i++ {
		d = append(d, math.Abs(obs[i].y-obs[i-1].y))
	}
	return 1.4826 * stats.MedianInPlace(d) / math.Sqrt2 // d is this call's own
}
