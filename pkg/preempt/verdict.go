package preempt

import (
	"fmt"
	"math"
	"strings"

	"github.com/progress-planner/planner/internal/humanize"
	"github.com/progress-planner/planner/pkg/forecast"
)

// Verdict is the policy's judgement of one job at one instant.
type Verdict string

const (
	// Unknown: nothing usable (no reports, or nothing measured). Never
	// acted on.
	Unknown Verdict = "Unknown"
	// Warming: too little evidence (too few reports, confidence below the
	// floor, or admitted too recently). Never acted on.
	Warming Verdict = "Warming"
	// Progressing: learning, not near its end. Boost 0.
	Progressing Verdict = "Progressing"
	// Plateaued: the planner expects (almost) no further improvement
	// before the planned end. Yields.
	Plateaued Verdict = "Plateaued"
	// Diverging: the objective is getting worse (or is no longer finite).
	// Yields.
	Diverging Verdict = "Diverging"
	// Hung: no progress for much longer than the job's report rhythm.
	// Yields.
	Hung Verdict = "Hung"
	// NearDone: the planner's own step counters and ETA say the job ends
	// soon. Protected by a lease.
	NearDone Verdict = "NearDone"
	// Untrusted: the job's reported progress is implausible (now, or
	// within Integrity.DistrustFor). Never protected; boost 0.
	Untrusted Verdict = "Untrusted"
)

// Stalled reports whether the verdict is one whose job should yield (and,
// with opt-in, may be stopped): Plateaued, Diverging or Hung.
func (v Verdict) Stalled() bool { return v == Plateaued || v == Diverging || v == Hung }

// judged reports whether the verdict rests on enough evidence (anything but
// Unknown, Warming or no verdict at all).
func (v Verdict) judged() bool { return v != "" && v != Unknown && v != Warming }

// ruleInput is what every verdict rule sees.
type ruleInput struct {
	f     *forecast.Forecast
	facts *Facts
	p     *Policy
	// prev is the previous verdict ("" for none); rules use it to pick the
	// enter or the exit threshold.
	prev Verdict
	// findings are the integrity findings in this forecast.
	findings []string
	// distrust describes a still-active earlier finding ("" when none).
	distrust string
}

// verdictRule is one named rule. match reports whether the rule decides;
// when it does, it writes the evidence (a short phrase with the numbers
// behind it) to w. A rule that does not match writes nothing.
type verdictRule struct {
	verdict Verdict
	match   func(in *ruleInput, w *text) bool
}

// verdictRules are tried in order; the first that matches decides. The order
// is the policy (see the package doc): enough reports and age first, then the
// verdicts that make a job yield because it is broken (they do not rest on
// the curve), then curve confidence (an unjudged job with implausible
// progress is Untrusted), then protection (which demands trusted progress),
// then plateau, then distrust, then the default.
var verdictRules = [...]verdictRule{
	{Unknown, nothingUsable},
	{Warming, tooEarly},
	{Diverging, diverging},
	{Hung, hung},
	{Untrusted, untrustedUnjudged},
	{Warming, lowConfidence},
	{NearDone, nearDone},
	{Plateaued, plateaued},
	{Untrusted, untrusted},
	{Progressing, progressing},
}

// classify returns the verdict of the first matching rule and its evidence.
func classify(in *ruleInput) (Verdict, string) {
	var w text
	w.Grow(192)
	for _, r := range verdictRules {
		if r.match(in, &w) {
			return r.verdict, w.String()
		}
	}
	return Progressing, "" // unreachable: progressing always matches
}

// nothingUsable: no accepted report, or neither an objective observation nor
// a progress counter nor a hang/divergence signal.
func nothingUsable(in *ruleInput, w *text) bool {
	f := in.f
	if f.Reports <= 0 {
		w.str("no reports yet")
		return true
	}
	if f.ObjectivePts == 0 && f.Step == nil && f.Progress == nil && !f.Hung && !f.Diverging {
		w.int(int64(f.Reports))
		w.str(" reports but no objective (", metricName(f), ") or progress observations")
		return true
	}
	return false
}

// tooEarly: fewer than Evidence.MinReports reports, or admitted less than
// Evidence.MinAge ago.
func tooEarly(in *ruleInput, w *text) bool {
	f, e := in.f, in.p.Evidence
	if f.Reports < e.MinReports {
		w.int(int64(f.Reports))
		w.str(" reports (need ")
		w.int(int64(e.MinReports))
		w.str(")")
		return true
	}
	if a := in.facts.AdmittedAt; a != nil && finite(*a) && f.Now-*a < e.MinAge.Seconds() {
		w.str("admitted ")
		w.dur(f.Now - *a)
		w.str(" ago (need ")
		w.dur(e.MinAge.Seconds())
		w.str(")")
		return true
	}
	return false
}

// lowConfidence: forecast confidence below Evidence.ConfidenceFloor (a job
// already judged keeps being judged down to floor - margin). Confidence
// measures the evidence behind the curve forecast, so it comes after
// Diverging and Hung, which do not rest on the curve (a diverging job's
// curve fit is poor by nature).
func lowConfidence(in *ruleInput, w *text) bool {
	c, floor, low := belowFloor(in)
	if low {
		w.str("confidence ")
		w.fixed(c, 2)
		w.str(" below floor ")
		w.fixed(floor, 2)
	}
	return low
}

// belowFloor: the forecast's confidence is below the floor (lowered by the
// margin for a job already judged).
func belowFloor(in *ruleInput) (c, floor float64, low bool) {
	e := in.p.Evidence
	floor = e.ConfidenceFloor
	if in.prev.judged() {
		floor -= e.ConfidenceMargin
	}
	c = confidence(in.f)
	return c, floor, c < floor
}

// untrustedUnjudged: too uncertain to judge by its curve, and its progress
// is implausible: the integrity finding is the more useful verdict (both
// give boost 0 and no protection).
func untrustedUnjudged(in *ruleInput, w *text) bool {
	if _, _, low := belowFloor(in); !low {
		return false
	}
	return untrusted(in, w)
}

// diverging: the forecast says the objective diverges.
func diverging(in *ruleInput, w *text) bool {
	f := in.f
	if !f.Diverging {
		return false
	}
	if r := oneLine(f.DivergenceReason); r != "" {
		w.str(r)
	} else {
		w.str(metricName(f), " diverging")
	}
	if f.Current != nil && f.Best != nil {
		w.str(" (latest finite ")
		w.sig(*f.Current, 4)
		w.str(", best ")
		w.sig(*f.Best, 4)
		w.str(")")
	}
	if nonFinite(f) {
		w.str(", non-finite values: acts without dwell")
	}
	return true
}

// hung: the forecast says the job stopped making progress.
func hung(in *ruleInput, w *text) bool {
	f := in.f
	if !f.Hung {
		return false
	}
	if in.facts.NotRunning && in.prev != Hung {
		// A job that cannot run is not silent. One already judged Hung
		// keeps the verdict (and the yield it was evicted with) while it
		// waits: nothing it does while out can refute it.
		return false
	}
	// Time spent evicted and waiting in the queue is not silence, nor is
	// time the controller itself could not see the cluster: measured from
	// a (re)admission, or from when the controller last regained sight,
	// after the last activity, the job must still be silent past the
	// threshold.
	silence := f.SinceProgress
	for _, from := range []*float64{in.facts.AdmittedAt, in.facts.WatchingSince} {
		if from != nil && finite(*from) && f.Now-*from < silence {
			silence = math.Max(0, f.Now-*from)
		}
	}
	if f.HangAfter != nil && silence <= *f.HangAfter {
		return false
	}
	w.str("no progress for ")
	w.dur(silence)
	if r := oneLine(f.HangReason); r != "" {
		w.str(" (planner: ", r, ")")
	} else if f.ReportInterval != nil {
		w.str(" (reports every ")
		w.dur(*f.ReportInterval)
		w.str(")")
	}
	return true
}

// nearDone: trusted, counter-derived progress >= the threshold, the
// planner's ETA upper bound <= the limit, the step counter moving. Entering
// uses the enter thresholds, staying the exit ones. Never for a job with an
// integrity finding now or within Integrity.DistrustFor.
func nearDone(in *ruleInput, w *text) bool {
	f, n := in.f, in.p.NearDone
	if len(in.findings) > 0 || in.distrust != "" {
		return false
	}
	progress, ok := counterProgress(f)
	if !ok || f.StepRate == nil || !(*f.StepRate > 0) {
		return false
	}
	if !f.ETA.Known || !finite(f.ETA.Hi) || f.ETA.Hi < 0 {
		return false
	}
	minProgress, maxETA, band := n.EnterProgress, n.EnterMaxETA.Seconds(), "enters at "
	if in.prev == NearDone {
		minProgress, maxETA, band = n.ExitProgress, n.ExitMaxETA.Seconds(), "exits below "
	}
	if progress < minProgress || f.ETA.Hi > maxETA {
		return false
	}
	w.str("progress ")
	w.pct(progress)
	w.str(" (step ")
	w.fixed(*f.Step, 0)
	w.str(" of ")
	w.fixed(*f.TotalSteps, 0)
	w.str(" from the step counter, ", band)
	w.pct(minProgress)
	w.str("), planner ETA ")
	w.dur(f.ETA.Value)
	w.str(", upper bound ")
	w.dur(f.ETA.Hi)
	w.str(" (limit ")
	w.dur(maxETA)
	w.str("), confidence ")
	w.fixed(confidence(f), 2)
	return true
}

// plateaued: the forecast calls a plateau, PlateauProbability >= enter
// (0.8) and RelativeRemaining <= enter (0.02); a Plateaued job stays while
// >= exit (0.6) and <= exit (0.05).
//
// A job enters only on the forecast's own call, which carries its trust
// holds (plateau rules 3-8: a learning rate still moving, a meaningful
// gain ahead, an anneal or a step to come ...); they keep its probability
// just under the forecaster's threshold. Read from the probability alone,
// a policy whose enter threshold is lower than the forecaster's would call
// every job they hold. A judged job stays by the exit band whatever the
// holds say, unless the forecast releases it (Forecast.PlateauRelease: its
// learning rate has left its peak, or a step-schedule jump just came).
func plateaued(in *ruleInput, w *text) bool {
	f, pl := in.f, in.p.Plateau
	minP, maxR, band := pl.EnterProbability, pl.EnterRelativeRemaining, " (enters at "
	called := f.Plateaued
	if in.prev == Plateaued {
		minP, maxR, band, called = pl.ExitProbability, pl.ExitRelativeRemaining, " (exits below ", f.PlateauRelease == ""
	}
	if !called || !(f.PlateauProbability >= minP) || f.RelativeRemaining == nil || !(*f.RelativeRemaining <= maxR) {
		return false
	}
	w.str("plateau probability ")
	w.fixed(f.PlateauProbability, 2)
	w.str(band)
	w.fixed(minP, 2)
	w.str("), ")
	curveEvidence(w, f)
	if f.PlateauOnset != nil && finite(*f.PlateauOnset) && *f.PlateauOnset <= f.Now {
		w.str(", flat for ")
		w.dur(f.Now - *f.PlateauOnset)
	}
	return true
}

// untrusted: an integrity finding in this forecast, or one within
// Integrity.DistrustFor.
func untrusted(in *ruleInput, w *text) bool {
	switch {
	case len(in.findings) > 0:
		w.str("implausible progress: ", strings.Join(in.findings, ", "))
	case in.distrust != "":
		w.str(in.distrust)
	default:
		return false
	}
	return true
}

// progressing: the default. A job the forecast released from Plateaued
// says why: its probability alone may still read as a plateau.
func progressing(in *ruleInput, w *text) bool {
	if in.prev == Plateaued && in.f.PlateauRelease != "" {
		w.str("released from Plateaued: ", in.f.PlateauRelease, "; ")
	}
	w.str("plateau probability ")
	w.fixed(in.f.PlateauProbability, 2)
	w.str(", ")
	curveEvidence(w, in.f)
	return true
}

// integrityFindings lists what is implausible in f under p. The forecast's
// own findings always count; the thresholds can only add findings.
func integrityFindings(f *forecast.Forecast, p *Policy) []string {
	in, lim := f.Integrity, p.Integrity
	var out []string
	if in.ProgressWithoutSteps {
		out = append(out, "reported progress moved without step-counter movement")
	}
	if r := in.JumpRatio; r != nil && !(*r <= lim.MaxJumpRatio) {
		out = append(out, fmt.Sprintf("progress jumped at %.3g× the job's median rate (limit %.3g×)", *r, lim.MaxJumpRatio))
	}
	if g := in.ReportedProgressGap; g != nil && !(*g <= lim.MaxProgressGap) {
		out = append(out, fmt.Sprintf("reported progress %s ahead of the step counter (limit %s)", humanize.Percent(*g), humanize.Percent(lim.MaxProgressGap)))
	}
	if r := in.ETARatio; r != nil {
		switch gap := etaGap(f, *r); {
		case math.IsNaN(*r):
			out = append(out, "reported ETA ratio is not a number")
		case *r < 1/lim.MaxETARatio && gap > lim.MinETAGap.Seconds():
			out = append(out, fmt.Sprintf("reported ETA %.2g× the planner's ETA from the step history, %s short (limit %.2g× and %s)",
				*r, humanize.Duration(gap), 1/lim.MaxETARatio, humanize.Duration(lim.MinETAGap.Seconds())))
		}
	}
	if in.ETANotShrinking {
		out = append(out, "reported ETA not shrinking as time passes")
	}
	for _, s := range in.Issues {
		if s = oneLine(s); s != "" {
			out = append(out, "planner: "+s)
		}
	}
	return out
}

// etaGap is how far (seconds) the job's reported ETA is below the planner's;
// +Inf when the planner's ETA is unknown (the ratio alone then decides).
func etaGap(f *forecast.Forecast, ratio float64) float64 {
	switch {
	case !f.ETA.Known || !finite(f.ETA.Value):
		return math.Inf(1)
	case f.ReportedETA != nil && finite(*f.ReportedETA):
		return f.ETA.Value - *f.ReportedETA
	default:
		return f.ETA.Value * (1 - ratio)
	}
}

// counterProgress is Step/TotalSteps: progress as the planner measures it,
// never the job's reported percentage.
func counterProgress(f *forecast.Forecast) (float64, bool) {
	if f.Step == nil || f.TotalSteps == nil || !(*f.TotalSteps > 0) || !(*f.Step >= 0) {
		return 0, false
	}
	p := *f.Step / *f.TotalSteps
	return p, finite(p)
}

// nonFinite reports whether the divergence is a NaN/Inf in the objective
// or a loss-like metric (the forecast's structured flag).
func nonFinite(f *forecast.Forecast) bool { return f.Diverging && f.NonFinite }

// curveEvidence: expected remaining improvement, ETA.
func curveEvidence(w *text, f *forecast.Forecast) {
	switch {
	case f.RelativeRemaining != nil && finite(*f.RelativeRemaining):
		w.str("expected remaining improvement ")
		w.pct(*f.RelativeRemaining)
		w.str(" of gains so far (", metricName(f))
		if f.RemainingImprovement != nil && finite(*f.RemainingImprovement) {
			w.str(" ")
			w.sig(*f.RemainingImprovement, 3)
		}
		w.str(")")
	case f.RemainingImprovement != nil && finite(*f.RemainingImprovement):
		w.str("expected remaining improvement ")
		w.sig(*f.RemainingImprovement, 3)
		w.str(" (", metricName(f), ")")
	default:
		w.str("expected remaining improvement unknown (", metricName(f), ")")
	}
	w.str(", ")
	if !f.ETA.Known || !finite(f.ETA.Value) {
		w.str("ETA unknown")
		return
	}
	w.str("ETA ")
	w.dur(f.ETA.Value)
	if finite(f.ETA.Lo) && finite(f.ETA.Hi) && f.ETA.Hi > f.ETA.Lo {
		w.str(" (")
		w.dur(f.ETA.Lo)
		w.str("–")
		w.dur(f.ETA.Hi)
		w.str(")")
	}
}

func metricName(f *forecast.Forecast) string {
	if m := oneLine(f.Objective.Metric); m != "" {
		return m
	}
	return "objective"
}

func confidence(f *forecast.Forecast) float64 {
	if !finite(f.Confidence) {
		return 0
	}
	return f.Confidence
}

func finite(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }
