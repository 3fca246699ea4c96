package preempt

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/progress-planner/planner/internal/humanize"
	"github.com/progress-planner/planner/internal/queueorder"
	"github.com/progress-planner/planner/pkg/forecast"
)

// Facts is what the platform knows for sure about the job, independent of
// anything the job reports. Times are in the forecast's time base.
type Facts struct {
	// BasePriority is the Workload's priority before any boost.
	BasePriority int32 `json:"basePriority"`
	// GPUs held by the job while admitted.
	GPUs int `json:"gpus"`
	// AdmittedAt is when the current admission began; nil when the job is
	// not admitted (pending, evicted or deactivated).
	AdmittedAt *float64 `json:"admittedAt,omitempty"`
	// NotRunning: the job's Workload is known not to be running (waiting
	// for admission, evicted, deactivated or finished). A job that cannot
	// run makes no progress and is not silent: it is not judged Hung, and
	// keeps a Hung verdict it already had (verdict rule 4). False also
	// when nothing is known (offline runs, no Workload).
	NotRunning bool `json:"notRunning,omitempty"`
	// WatchingSince is since when the deciding controller has seen the
	// cluster without interruption (its start, or when its watches
	// resumed after it lost contact with the API server); nil when not
	// tracked (offline runs). A job's silence before it is the
	// controller's blindness, not the job's.
	WatchingSince *float64 `json:"watchingSince,omitempty"`
	// Evictions is the number of evictions so far (any cause).
	Evictions int `json:"evictions"`
	// LastPlannerEvictionAt is when the job was last evicted because of a
	// boost or action the planner applied; nil when never.
	LastPlannerEvictionAt *float64 `json:"lastPlannerEvictionAt,omitempty"`
	ClusterQueue          string   `json:"clusterQueue,omitempty"`
	Namespace             string   `json:"namespace,omitempty"`
	// StopOptIn: the TrainJob carries the owner's opt-in annotation for
	// being stopped when stalled.
	StopOptIn bool `json:"stopOptIn,omitempty"`
}

// Action is what the controller should do besides writing the boost.
type Action string

const (
	// ActionNone: only the boost.
	ActionNone Action = "None"
	// ActionDeactivate: set the Workload's spec.active=false (Kueue evicts
	// the job and keeps it out until its owner reactivates it).
	ActionDeactivate Action = "Deactivate"
)

// Hold names what kept the boost from moving to the verdict's boost.
type Hold string

const (
	// HoldDwell: the verdict has not held for Stability.MinDwell yet.
	HoldDwell Hold = "Dwell"
	// HoldRateCap: Stability.MaxBoostChangesPerHour reached.
	HoldRateCap Hold = "RateCap"
)

// Decision is the outcome for one job at one instant, and the state the
// next Decide needs: store it (it is plain JSON, e.g. in a status field)
// and pass it back as previous. Times are in the forecast's time base.
type Decision struct {
	// At is the forecast's Now.
	At float64 `json:"at"`
	// Verdict and since when it has held without interruption.
	Verdict      Verdict `json:"verdict"`
	VerdictSince float64 `json:"verdictSince"`
	// StalledSince is since when the verdict has been Plateaued, Diverging
	// or Hung without interruption (switching among those three keeps it);
	// nil otherwise. The stop grace period counts from here.
	StalledSince *float64 `json:"stalledSince,omitempty"`
	// Mode in effect for this job.
	Mode Mode `json:"mode"`
	// Boost is the value to write to kueue.x-k8s.io/priority-boost: the
	// AdvisedBoost in enforce mode, 0 in advise mode.
	Boost int32 `json:"boost"`
	// AdvisedBoost is the boost the policy decides (after dwell and rate
	// cap), whatever the mode. It is the state the rate cap tracks.
	AdvisedBoost int32 `json:"advisedBoost"`
	// EffectivePriority is BasePriority + Boost (saturating).
	EffectivePriority int32 `json:"effectivePriority"`
	// HeldBy says why AdvisedBoost is not the verdict's boost ("" when it
	// is, or when a cooldown is the reason, which the Reason then says).
	HeldBy Hold `json:"heldBy,omitempty"`
	// Action to apply (None in advise mode) and the action decided.
	Action        Action `json:"action"`
	AdvisedAction Action `json:"advisedAction"`
	// GPUHoursSaved by the (advised) Deactivate: GPUs × the planner's ETA,
	// or × Stop.Horizon when the ETA is unknown (the Reason says which).
	GPUHoursSaved float64 `json:"gpuHoursSaved,omitempty"`
	// ProtectedUntil is the end of the protection lease; nil when the job
	// holds no protection.
	ProtectedUntil *float64 `json:"protectedUntil,omitempty"`
	// LeaseCooldownUntil: protection cannot be earned before this time.
	LeaseCooldownUntil *float64 `json:"leaseCooldownUntil,omitempty"`
	// NearDoneAt is when a yielding job's step counter is projected to
	// come within Stability.MinDwell of NearDone.EnterProgress (its yield
	// ends there: a decision deadline); nil when it does not yield or the
	// projection is unknown.
	NearDoneAt *float64 `json:"nearDoneAt,omitempty"`
	// Distrust records the last integrity finding; while it lasts the job
	// cannot earn protection.
	Distrust *Distrust `json:"distrust,omitempty"`
	// BoostChanges are the times AdvisedBoost changed within the last hour
	// (bounded), for the rate cap.
	BoostChanges []float64 `json:"boostChanges,omitempty"`
	// Reason is one human line: the verdict, the evidence with its
	// numbers, the boost and what held or changed it.
	Reason string `json:"reason"`
}

// Distrust is the memory of an integrity finding.
type Distrust struct {
	At       float64 `json:"at"`       // time of the latest finding
	Until    float64 `json:"until"`    // no protection before this time
	Findings string  `json:"findings"` // what was found, human-readable
}

// IsZero reports whether d is the zero Decision ("no previous decision").
func (d Decision) IsZero() bool { return d.Verdict == "" }

const (
	rateWindow   = 3600.0 // seconds: the rate cap's sliding window
	maxChangeLog = 64     // bound on Decision.BoostChanges
)

// Decide turns one forecast into a Decision. It is a pure function: all
// state comes in through previous (the zero Decision for the first call)
// and goes out in the result. It runs decideSteps in order over one
// decideState:
//
//  1. carryOver: end an expired protection lease (starting the lease
//     cooldown) and record or expire integrity distrust.
//  2. judge: classify the forecast with the verdict rules (see the package
//     doc), using previous.Verdict to choose enter or exit thresholds.
//  3. revokeProtection: revoke protection if the verdict is no longer
//     NearDone.
//  4. pickTarget: pick the verdict's boost; a lease cooldown withholds
//     protection and an eviction cooldown withholds penalties.
//  5. moveBoost: move towards it subject to the minimum dwell and the rate
//     cap; removing protection is never held. Grant a lease when
//     protection starts.
//  6. stopStalled: decide Deactivate where stopping is opted in.
//  7. applyMode: apply the mode and write the reason.
//
// p should be valid (see Validate). If it is not, or if f.Now is not finite,
// the previous boost and state are kept, the verdict is Unknown and the
// reason says why.
func Decide(f forecast.Forecast, facts Facts, previous Decision, p Policy) Decision {
	if err := p.Validate(); err != nil {
		return keep(previous, f.Now, p.Boosts, facts, "policy not applied: "+err.Error())
	}
	if !finite(f.Now) {
		return keep(previous, f.Now, p.Boosts, facts, "forecast time is not finite")
	}
	st := decideState{f: f, facts: facts, previous: previous, p: p, now: f.Now,
		eff: p.Effective(facts.Namespace, facts.ClusterQueue)}
	if !previous.IsZero() {
		st.prev = previous.Verdict
	}
	st.prevBoost = clamp(previous.AdvisedBoost, p.Boosts.Min, p.Boosts.Max)
	st.d = Decision{At: st.now, Mode: st.eff.Mode, Action: ActionNone, AdvisedAction: ActionNone}
	for _, step := range decideSteps {
		step.run(&st)
	}
	return st.d
}

// decideStep is one named step of Decide.
type decideStep struct {
	name string
	run  func(*decideState)
}

// decideSteps are Decide's steps, in the order its doc numbers them: the
// state carried over from the previous decision first, then the verdict,
// what the verdict does to protection, the boost it asks for, how far the
// boost may move, the stop, and last the mode and the reason.
var decideSteps = [...]decideStep{
	{"carry over", carryOver},
	{"verdict", judge},
	{"revoke protection", revokeProtection},
	{"target", pickTarget},
	{"move boost", moveBoost},
	{"stop", stopStalled},
	{"mode and reason", applyMode},
}

// decideState is what Decide's steps share.
type decideState struct {
	f         forecast.Forecast
	facts     Facts
	previous  Decision
	p         Policy
	now       float64
	eff       Effective
	prev      Verdict // the previous verdict ("" for none)
	prevBoost int32   // the previous advised boost, clamped to the policy
	d         Decision
	notes     []string // the reason's notes, in order

	// carried over (step 1), changed by steps 3 and 5
	lease, leaseCool *float64 // the protection lease's end and its cooldown's
	findings         []string // the integrity findings in this forecast
	distrust         *Distrust
	distrustPhrase   string // an earlier finding still distrusted ("" when none)

	// the verdict (step 2)
	v        Verdict
	evidence string

	// the target (step 4)
	minDwell  float64
	evict     evictionState
	exemptAt  float64 // trusted progress, projected to now
	pastEnter bool    // exemptAt is at or past NearDone.EnterProgress
	target    int32

	// the move (step 5)
	nChanges int // boost changes in the last hour, before this decision
}

// carryOver: an expired lease ends (its cooldown starts), and integrity
// distrust is renewed by a finding or kept until it expires.
func carryOver(st *decideState) {
	now, p := st.now, &st.p
	st.lease = finitePtr(st.previous.ProtectedUntil)
	st.leaseCool = finitePtr(st.previous.LeaseCooldownUntil)
	if st.lease != nil && now >= *st.lease {
		st.leaseCool = ptr(*st.lease + p.NearDone.LeaseCooldown.Seconds())
		st.notes = append(st.notes, fmt.Sprintf("protection lease expired %s ago with the job still running", humanize.Duration(now-*st.lease)))
		st.lease = nil
	}
	st.findings = integrityFindings(&st.f, p)
	distrust := st.previous.Distrust
	if distrust != nil && !(finite(distrust.Until) && now < distrust.Until) {
		distrust = nil
	}
	if len(st.findings) > 0 {
		until := now + p.Integrity.DistrustFor.Seconds()
		if distrust != nil && distrust.Until > until {
			until = distrust.Until
		}
		distrust = &Distrust{At: now, Until: until, Findings: strings.Join(st.findings, ", ")}
		if now >= until {
			distrust = nil // DistrustFor 0: only the current forecast counts
		}
	} else if distrust != nil {
		distrust = &Distrust{At: distrust.At, Until: distrust.Until, Findings: distrust.Findings}
	}
	st.distrust, st.d.Distrust = distrust, distrust
	if distrust != nil && len(st.findings) == 0 {
		st.distrustPhrase = fmt.Sprintf("integrity finding %s ago (%s), distrusted for %s more",
			humanize.Duration(now-distrust.At), distrust.Findings, humanize.Duration(distrust.Until-now))
	}
}

// judge: the verdict rules decide; the verdict's age and the stall's carry
// over while they last, and integrity findings become a note unless the
// verdict is Untrusted (which says them already).
func judge(st *decideState) {
	now, d := st.now, &st.d
	in := ruleInput{f: &st.f, facts: &st.facts, p: &st.p, prev: st.prev, findings: st.findings, distrust: st.distrustPhrase}
	st.v, st.evidence = classify(&in)
	v := st.v
	d.Verdict, d.VerdictSince = v, now
	if v == st.prev && finite(st.previous.VerdictSince) {
		d.VerdictSince = st.previous.VerdictSince
	}
	if v.Stalled() {
		since := now
		if st.prev.Stalled() && st.previous.StalledSince != nil && finite(*st.previous.StalledSince) {
			since = *st.previous.StalledSince
		}
		d.StalledSince = &since
	}
	if v != Untrusted && (len(st.findings) > 0 || st.distrustPhrase != "") {
		if len(st.findings) > 0 {
			st.notes = append(st.notes, "integrity: "+strings.Join(st.findings, ", "))
		} else {
			st.notes = append(st.notes, st.distrustPhrase)
		}
	}
}

// revokeProtection: protection only lives in NearDone; a lease cooldown
// that has run out ends.
func revokeProtection(st *decideState) {
	if st.lease != nil && st.v != NearDone {
		st.leaseCool = ptr(st.now + st.p.NearDone.LeaseCooldown.Seconds())
		st.notes = append(st.notes, "protection revoked: the verdict left NearDone")
		st.lease = nil
	}
	if st.leaseCool != nil && st.now >= *st.leaseCool {
		st.leaseCool = nil
	}
}

// pickTarget: the boost the verdict asks for, withheld by a lease cooldown
// (protection), an eviction cooldown (penalties) or an exemption close to
// the planned end (penalties), clamped to the policy's bounds.
func pickTarget(st *decideState) {
	now, v, p := st.now, st.v, &st.p
	st.minDwell = p.Stability.MinDwell.Seconds()
	st.evict = evictionCooldown(&st.facts, p, now)
	st.exemptAt, st.pastEnter = trustedProgressPast(v, &st.f, p, st.distrust != nil)
	exempt := st.pastEnter && v.Stalled() && (v == Plateaued || stopComes(v, &st.f, p, st.eff, &st.facts))
	var target int32
	switch {
	case v == NearDone:
		if st.lease == nil && st.leaseCool != nil {
			st.notes = append(st.notes, fmt.Sprintf("protection cannot be re-earned for %s (lease cooldown)", humanize.Duration(*st.leaseCool-now)))
		} else {
			target = p.Boosts.NearDone
		}
	case v.Stalled() && st.evict.active && st.evict.out:
		// Still out after the planner evicted it: it keeps the yield it
		// was evicted with, or it would be readmitted at once, ahead of the
		// work it yielded to, and yield again (thrash).
		target = min(st.prevBoost, 0)
		st.notes = append(st.notes, st.evict.note)
	case v.Stalled() && st.evict.active:
		st.notes = append(st.notes, st.evict.note)
	case exempt:
		// A stall this close to the planned end costs at most the rest of
		// the run; a preemption would waste the work since the last
		// checkpoint. Only trusted, counter-derived progress counts.
		note := fmt.Sprintf("no yield at %.0f%% of its planned steps (%.0f%% is reached within the %s dwell): it finishes soon",
			100*st.exemptAt, 100*p.NearDone.EnterProgress, humanize.Duration(st.minDwell))
		if v != Plateaued {
			note += "; a broken job this close to its end is stopped, not preempted"
		}
		st.notes = append(st.notes, note)
	case v.Stalled():
		target = stallBoost(v, &p.Boosts)
	}
	st.target = clamp(target, p.Boosts.Min, p.Boosts.Max)
}

// moveBoost: the advised boost moves to the target as far as the dwell and
// the rate cap allow; the change is logged for the cap, a lease is granted
// when protection starts (and dropped otherwise), and a yielding job's
// NearDone crossing becomes a decision deadline.
func moveBoost(st *decideState) {
	now, d := st.now, &st.d
	changes := recentChanges(st.previous.BoostChanges, now)
	st.nChanges = len(changes)
	newBoost := nextBoost(st)
	if newBoost != st.prevBoost {
		changes = append(changes, now)
	}
	if len(changes) > maxChangeLog {
		changes = changes[len(changes)-maxChangeLog:]
	}
	if len(changes) > 0 {
		d.BoostChanges = changes
	}
	d.AdvisedBoost = newBoost
	if newBoost > 0 && st.v == NearDone {
		if st.lease == nil {
			st.lease = ptr(now + math.Min(st.f.ETA.Hi*(1+st.p.NearDone.LeaseMargin), st.p.NearDone.MaxLease.Seconds()))
		}
	} else {
		st.lease = nil
	}
	d.ProtectedUntil, d.LeaseCooldownUntil = st.lease, st.leaseCool
	if newBoost < 0 && st.facts.AdmittedAt != nil && !st.pastEnter {
		// (Past it already, the job yields for a reason that no crossing
		// changes: a broken job no stop will end, or distrust.)
		d.NearDoneAt = nearDoneCrossing(st.v, &st.f, &st.p)
	}
}

// nextBoost is the advised boost after the dwell and the rate cap, setting
// HeldBy when they hold it back.
func nextBoost(st *decideState) int32 {
	v, target, prevBoost, d := st.v, st.target, st.prevBoost, &st.d
	if target == prevBoost {
		return prevBoost
	}
	// A NaN divergence acts at once; so does lifting the yield of a job the
	// planner evicted, once it is readmitted (it must not be preempted
	// again before new evidence arrives), and of a job this close to its
	// end.
	lift := prevBoost < 0 && target >= 0 && (st.pastEnter || v == NearDone)
	dwellOK := st.now-d.VerdictSince >= st.minDwell || (v == Diverging && nonFinite(&st.f)) ||
		(st.evict.active && !st.evict.out && prevBoost < 0 && target == 0) || lift
	maxRate := st.p.Stability.MaxBoostChangesPerHour
	switch {
	case prevBoost > 0 && target <= 0:
		// Removing protection is never held; a penalty still waits
		// for the dwell.
		if !dwellOK && target < 0 {
			d.HeldBy = HoldDwell
			return 0
		}
		return target
	case !dwellOK:
		d.HeldBy = HoldDwell
		return prevBoost
	case lift && target > 0 && st.nChanges < maxRate:
		// Out of the yield at once; protection still waits for the
		// dwell like any grant.
		d.HeldBy = HoldDwell
		return 0
	}
	limit := maxRate
	if target > 0 {
		limit-- // keep room for the grant's removal
	}
	if st.nChanges >= limit {
		d.HeldBy = HoldRateCap
		return prevBoost
	}
	return target
}

// stopStalled: a stalled job gets the advised Deactivate where stopping applies
// and every condition holds; the note says which did not.
func stopStalled(st *decideState) {
	if !st.v.Stalled() {
		return
	}
	if note := decideStop(&st.d, &st.f, &st.facts, &st.p, st.eff, st.evict.active); note != "" {
		st.notes = append(st.notes, note)
	}
}

// applyMode: enforce mode applies the advised boost and action (advise
// mode leaves 0 and None); the reason explains it all on one line.
func applyMode(st *decideState) {
	d := &st.d
	if st.eff.Mode == ModeEnforce {
		d.Boost, d.Action = d.AdvisedBoost, d.AdvisedAction
	}
	d.EffectivePriority = queueorder.EffectivePriority(st.facts.BasePriority, d.Boost)
	d.Reason = buildReason(d, reasonParts{
		verdict: st.v, evidence: st.evidence, target: st.target, eff: st.eff, facts: st.facts,
		dwell: st.now - d.VerdictSince, minDwell: st.minDwell,
		changes: st.nChanges, maxRate: st.p.Stability.MaxBoostChangesPerHour,
		notes: st.notes,
	})
}

// decideStop sets the advised Deactivate when every condition holds and
// returns a note explaining the outcome ("" when stopping is not opted in).
func decideStop(d *Decision, f *forecast.Forecast, facts *Facts, p *Policy, eff Effective, evictionCooldown bool) string {
	if !stopApplies(eff, facts) {
		return ""
	}
	by := "stop opted in by the job"
	if eff.Stop {
		by = "stop enabled by policy (" + eff.StopScope + ")"
	}
	stalledFor := f.Now - *d.StalledSince
	grace := p.Stop.GracePeriod.Seconds()
	c := confidence(f)
	switch {
	case facts.AdmittedAt == nil:
		return by + "; not running, nothing to stop"
	case evictionCooldown:
		return by + "; not during the eviction cooldown"
	case c < p.Stop.MinConfidence && !nonFiniteDivergence(d.Verdict, f):
		return fmt.Sprintf("%s; no stop at confidence %.2f (stop floor %.2f)", by, c, p.Stop.MinConfidence)
	case stalledFor < grace:
		return fmt.Sprintf("%s; stalled %s, Deactivate after %s (%s to go)", by, humanize.Duration(stalledFor), humanize.Duration(grace), humanize.Duration(grace-stalledFor))
	}
	gpus := max(facts.GPUs, 0)
	var hours float64
	var basis string
	if f.ETA.Known && finite(f.ETA.Value) && f.ETA.Value >= 0 {
		hours = f.ETA.Value / 3600
		basis = fmt.Sprintf("%s to the planned end, planner ETA", humanize.Duration(f.ETA.Value))
	} else {
		hours = p.Stop.Horizon.Seconds() / 3600
		basis = fmt.Sprintf("%s horizon, ETA unknown", humanize.Duration(p.Stop.Horizon.Seconds()))
	}
	d.AdvisedAction = ActionDeactivate
	d.GPUHoursSaved = float64(gpus) * hours
	return fmt.Sprintf("Deactivate (%s): stalled %s (grace %s), saves %.1f GPU-hours (%d GPUs × %s)",
		by, humanize.Duration(stalledFor), humanize.Duration(grace), d.GPUHoursSaved, gpus, basis)
}

// stopApplies: stopping is enabled for the job by policy, or the job opted
// in where the policy allows it.
func stopApplies(eff Effective, facts *Facts) bool {
	return eff.Stop || (eff.AllowJobOptIn && facts.StopOptIn)
}

// stopComes: a stalled job in verdict v will be stopped once its grace
// period is over: stopping applies and the confidence floor does not stand
// in the way. A non-finite objective is an observed fact, not a curve
// forecast, so the floor does not apply to it.
func stopComes(v Verdict, f *forecast.Forecast, p *Policy, eff Effective, facts *Facts) bool {
	return stopApplies(eff, facts) && (confidence(f) >= p.Stop.MinConfidence || nonFiniteDivergence(v, f))
}

func nonFiniteDivergence(v Verdict, f *forecast.Forecast) bool { return v == Diverging && nonFinite(f) }

type evictionState struct {
	active bool
	out    bool // evicted and not readmitted since
	note   string
}

// evictionCooldown: after a planner-caused eviction the job is not
// penalized again until it has run Stability.EvictionCooldown after its
// readmission (while it is out, no new evidence can arrive).
func evictionCooldown(facts *Facts, p *Policy, now float64) evictionState {
	e := facts.LastPlannerEvictionAt
	cd := p.Stability.EvictionCooldown.Seconds()
	if e == nil || !finite(*e) || cd <= 0 {
		return evictionState{}
	}
	a := facts.AdmittedAt
	if a == nil || !finite(*a) || *a < *e {
		return evictionState{true, true, fmt.Sprintf(
			"eviction cooldown: the planner evicted it %s ago (evictions so far: %d), it keeps its yield while it waits and gets no new penalty until it has run %s after readmission",
			humanize.Duration(now-*e), facts.Evictions, humanize.Duration(cd))}
	}
	if until := *a + cd; now < until {
		return evictionState{true, false, fmt.Sprintf(
			"eviction cooldown: readmitted %s ago after a planner eviction (evictions so far: %d), no penalty for %s more",
			humanize.Duration(now-*a), facts.Evictions, humanize.Duration(until-now))}
	}
	return evictionState{}
}

// trustedProgressPast: the job's trusted counter progress, projected from
// its latest report at its recent step rate (projectedProgress; not for a
// Hung job), is at or past NearDone.EnterProgress within Stability.MinDwell: a yield that would
// have to be lifted again before the dwell is a flap, and a preemption in
// between would catch the job past the threshold. A stalled job past it does
// not yield when it is Plateaued, or Diverging or Hung and will be stopped
// after the grace period instead (stopComes); a broken job that no stop will
// end is never spared. It returns the progress projected to now.
func trustedProgressPast(v Verdict, f *forecast.Forecast, p *Policy, distrusted bool) (float64, bool) {
	if distrusted || len(f.Integrity.Issues) > 0 {
		return 0, false
	}
	moving := v != Hung
	now, ok := projectedProgress(f, moving)
	if !ok {
		return 0, false
	}
	soon := now
	if moving && f.StepRate != nil && *f.StepRate > 0 {
		soon = math.Min(now + *f.StepRate*p.Stability.MinDwell.Seconds() / *f.TotalSteps, 1)
	}
	return now, soon >= enterThreshold(f, p)-1e-9 // (float rounding at the crossing)
}

// enterThreshold is NearDone.EnterProgress less one step: counters are
// whole steps, so the job can be up to one step further than they say.
func enterThreshold(f *forecast.Forecast, p *Policy) float64 {
	return p.NearDone.EnterProgress - 1 / *f.TotalSteps
}

// projectedProgress is the step counter's progress, projected from the
// latest report to the forecast's Now at the job's own recent step rate when
// moving is true: between two reports a job keeps stepping. The projection
// reaches at most two usual report intervals past the latest report (beyond
// that, the silence is no evidence of progress). Capped at 1.
func projectedProgress(f *forecast.Forecast, moving bool) (float64, bool) {
	pr, ok := counterProgress(f)
	if !ok {
		return 0, false
	}
	if moving && f.StepRate != nil && *f.StepRate > 0 && f.LastReport != nil && f.Now > *f.LastReport {
		dt := f.Now - *f.LastReport
		if f.ReportInterval != nil && *f.ReportInterval > 0 {
			dt = math.Min(dt, 2**f.ReportInterval)
		}
		if x := pr + *f.StepRate*dt / *f.TotalSteps; finite(x) {
			pr = x
		}
	}
	return math.Min(pr, 1), true
}

// nearDoneCrossing is when a yielding job's step counter is projected to
// come within Stability.MinDwell of NearDone.EnterProgress at its recent step
// rate (nil when unknown, already there, or the job is hung): where
// trustedProgressPast starts to hold. The controller and the simulator
// decide again then, so that the yield is lifted before a preemption could
// catch the job past the threshold.
func nearDoneCrossing(v Verdict, f *forecast.Forecast, p *Policy) *float64 {
	if v == Hung || f.StepRate == nil || !(*f.StepRate > 0) || f.LastReport == nil || !finite(*f.LastReport) {
		return nil
	}
	pr, ok := counterProgress(f)
	enter := enterThreshold(f, p)
	if !ok || pr >= enter {
		return nil
	}
	t := *f.LastReport + (enter-pr)**f.TotalSteps / *f.StepRate - p.Stability.MinDwell.Seconds()
	if !finite(t) || t <= f.Now {
		return nil // already there: this decision took it into account
	}
	return &t
}

func stallBoost(v Verdict, b *Boosts) int32 {
	switch v {
	case Plateaued:
		return b.Plateaued
	case Diverging:
		return b.Diverging
	case Hung:
		return b.Hung
	}
	return 0
}

// keep returns previous with verdict Unknown: used when no decision can be
// made (invalid policy, non-finite time). Nothing changes, so nothing flaps;
// only a boost outside the bounds (when they make sense) is clamped.
func keep(previous Decision, now float64, b Boosts, facts Facts, why string) Decision {
	d := previous
	if b.Min <= 0 && b.Max >= 0 {
		d.Boost = clamp(d.Boost, b.Min, b.Max)
		d.AdvisedBoost = clamp(d.AdvisedBoost, b.Min, b.Max)
	}
	d.EffectivePriority = queueorder.EffectivePriority(facts.BasePriority, d.Boost)
	d.BoostChanges = slices.Clone(previous.BoostChanges)
	d.ProtectedUntil = clonePtr(previous.ProtectedUntil)
	d.LeaseCooldownUntil = clonePtr(previous.LeaseCooldownUntil)
	if previous.Distrust != nil {
		c := *previous.Distrust
		d.Distrust = &c
	}
	if finite(now) {
		d.At = now
	}
	if previous.Verdict != Unknown {
		d.VerdictSince = d.At
	}
	d.Verdict, d.StalledSince, d.HeldBy = Unknown, nil, ""
	d.Action, d.AdvisedAction, d.GPUHoursSaved = ActionNone, ActionNone, 0
	d.Reason = oneLine(fmt.Sprintf("Unknown: %s; boost %s kept from the previous decision", why, humanize.Boost(d.Boost)))
	return d
}

// recentChanges returns the change times within the rate window ending at
// now. Times after now (a clock that went backwards) are kept: they count
// against the cap, which errs on the side of fewer changes.
func recentChanges(ts []float64, now float64) []float64 {
	out := make([]float64, 0, len(ts)+1)
	for _, t := range ts {
		if finite(t) && t > now-rateWindow {
			out = append(out, t)
		}
	}
	return out
}

func clamp(b, lo, hi int32) int32 { return max(lo, min(hi, b)) }

func ptr(x float64) *float64 { return &x }

func finitePtr(p *float64) *float64 {
	if p == nil || !finite(*p) {
		return nil
	}
	return ptr(*p)
}

func clonePtr(p *float64) *float64 {
	if p == nil {
		return nil
	}
	return ptr(*p)
}
