// Package preempt is the decision policy of Progress Planner: it turns a
// job's forecast (pkg/forecast) into a bounded, explained priority boost for
// Kueue's kueue.x-k8s.io/priority-boost annotation and, where opted in, into
// stopping the job (Workload spec.active=false).
//
// It is pure Go with no Kubernetes imports. The controller (Unix seconds),
// the simulator (virtual seconds) and the reports all call the same pure
// function:
//
//	d := preempt.Decide(forecast, facts, previous, policy)
//
// where previous is the Decision returned last time (the zero Decision the
// first time). The Decision carries all the state the next call needs and
// serializes to JSON.
//
// Decide runs an ordered table of named steps (decideSteps in decide.go,
// numbered in Decide's doc): carry over the previous state, judge the
// verdict (the rules below), revoke protection, pick the verdict's boost,
// move towards it under the dwell and the rate cap, decide the stop, and
// apply the mode and write the reason.
//
// # Verdict rules
//
// The verdict is the first of these rules that matches (verdictRules in
// verdict.go):
//
//  1. nothingUsable → Unknown: no reports, or nothing measured.
//  2. tooEarly → Warming: fewer than Evidence.MinReports reports, or
//     admitted less than Evidence.MinAge ago.
//  3. diverging → Diverging: the forecast says the objective diverges.
//  4. hung → Hung: the forecast says the job stopped making progress, and
//     it has stayed silent past Forecast.HangAfter counted from its latest
//     (re)admission and from when the controller last regained sight of
//     the cluster (Facts.WatchingSince) too: queue time and the
//     controller's own blindness are not silence. A job that is not
//     running (Facts.NotRunning) is not newly judged Hung; one already
//     Hung stays so while it waits.
//  5. untrustedUnjudged → Untrusted: confidence below the floor (as in
//     rule 6) and an integrity finding (as in rule 9), now or within
//     Integrity.DistrustFor: the finding is the more useful verdict.
//  6. lowConfidence → Warming: confidence below Evidence.ConfidenceFloor (a
//     judged job stays judged down to the floor minus
//     Evidence.ConfidenceMargin). It comes after Diverging and Hung because
//     those do not rest on the curve forecast that confidence measures.
//  7. nearDone → NearDone: progress from the step counters (never the job's
//     reported percentage) >= NearDone.EnterProgress, the step counter
//     moving, the planner's ETA known with upper bound <=
//     NearDone.EnterMaxETA, and no integrity finding now or within
//     Integrity.DistrustFor. A NearDone job stays while progress >=
//     ExitProgress and the upper bound <= ExitMaxETA.
//  8. plateaued → Plateaued: the forecast calls a plateau (Plateaued, after
//     its holds), PlateauProbability >= Plateau.EnterProbability and
//     RelativeRemaining <= Plateau.EnterRelativeRemaining; a Plateaued job
//     stays while >= ExitProbability and <= ExitRelativeRemaining, unless
//     the forecast releases it (PlateauRelease: its learning rate left its
//     peak, or a step-schedule jump just came).
//  9. untrusted → Untrusted: an integrity finding (progress without step
//     movement, a jump far beyond the job's step rate, reported progress
//     ahead of the counter, a reported ETA far below what the step history
//     allows, a reported ETA that never shrinks, or any finding of the
//     forecast), now or within Integrity.DistrustFor.
//
// 10. progressing → Progressing: everything else.
//
// A job about to finish is protected rather than made to yield for a
// plateau (stopping it would save at most NearDone.EnterMaxETA and waste its
// work since its last checkpoint); a Plateaued job with implausible progress
// still yields (forging progress must never help a stalled job escape the
// penalty).
//
// # From verdict to boost
//
// Plateaued, Diverging and Hung map to their (negative) Boosts, NearDone to
// Boosts.NearDone (positive), everything else to 0; every boost lies within
// [Boosts.Min, Boosts.Max]. To prevent flapping:
//
//   - the verdict thresholds have enter/exit hysteresis;
//   - the boost moves to a new verdict's boost only once the verdict has held
//     for Stability.MinDwell (a Diverging verdict with non-finite values acts
//     at once);
//   - at most Stability.MaxBoostChangesPerHour boost changes per sliding hour;
//   - after a planner-caused eviction the job keeps its yield while it waits,
//     and gets no new penalty (and no stop) until it has run
//     Stability.EvictionCooldown after readmission (the yield is lifted at
//     readmission without dwell).
//
// A stalled job at or past NearDone.EnterProgress of its planned steps
// (trusted counter progress, projected from its latest report to now at its
// recent step rate; no integrity finding) does not yield: a preemption would
// waste the work since its last checkpoint to save at most the rest of the
// run. That holds for Plateaued jobs, and for Diverging and Hung jobs that
// will be stopped after the grace period instead (stopping applies and the
// confidence floor does not stand in the way); a broken job that no stop
// will end still yields. A yielding job's projected crossing of
// NearDone.EnterProgress is a decision deadline (Decision.NearDoneAt), and
// the yield of a job that is exempt or NearDone is lifted without waiting
// for the dwell.
//
// Removing protection is never held back by dwell or the rate cap; granting
// protection needs room in the rate cap for its own removal, so the cap holds
// with removals included.
//
// # Protection is a lease
//
// Protection (a positive boost) is earned only from the planner's own
// counter-derived progress and ETA. When granted it comes with a lease that
// ends at Now + ETA.Hi*(1+NearDone.LeaseMargin), capped at NearDone.MaxLease;
// it is never extended. A job still running when its lease ends, or whose
// verdict leaves NearDone, loses protection at once and cannot earn it again
// for NearDone.LeaseCooldown.
//
// # Stop (opt-in)
//
// Where Stop.Enabled (globally or by an Override), or where the job opted in
// and Stop.AllowJobOptIn, a running job that has been stalled (Plateaued,
// Diverging or Hung, continuously) for Stop.GracePeriod, with confidence >=
// Stop.MinConfidence (not required for a non-finite objective: that is
// observed, not forecast) and outside an eviction cooldown, gets the action
// Deactivate, with the GPU-hours it saves.
//
// # Modes
//
// In enforce mode Decision.Boost and Decision.Action are applied. In advise
// mode the policy decides and explains exactly the same way, but Boost is 0
// and Action is None; the decided values are in AdvisedBoost and
// AdvisedAction. Mode is global, overridable per namespace and ClusterQueue.
//
// docs/policy.md documents the defaults, why they are what they are, and how
// to tune them.
package preempt
