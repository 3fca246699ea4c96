package preempt

import "github.com/progress-planner/planner/internal/queueorder"

// Conform returns d as the current policy p applies it to a job with facts
// at now. A Decision read back from stored state (the controller keeps it
// in the ProgressForecast status, which anyone allowed to edit that status
// can forge) is untrusted input; after Conform it cannot make the caller
// apply anything p would not:
//
//   - an unknown verdict is no decision at all (the zero Decision);
//   - the mode is p's for facts, never the stored one;
//   - the advised boost is clamped to [Boosts.Min, Boosts.Max]; a positive
//     one (protection) needs the NearDone verdict and a lease, and is at
//     most Boosts.NearDone; the boost to apply is the advised one in
//     enforce mode, 0 in advise mode;
//   - Deactivate stays advised only for a stalled verdict where stopping
//     applies (policy or the job's opt-in), and is applied only in enforce
//     mode;
//   - times after now are now, and a protection lease ends at most
//     NearDone.MaxLease after the decision.
//
// For a decision Decide made under p and facts, Conform at its At changes
// nothing. What it cannot check is memory that only removes restrictions
// (an edited-away distrust period or rate-cap log), so write access to the
// status belongs to the planner alone.
func Conform(d Decision, facts Facts, p Policy, now float64) Decision {
	switch d.Verdict {
	case Unknown, Warming, Progressing, Plateaued, Diverging, Hung, NearDone, Untrusted:
	default:
		return Decision{}
	}
	eff := p.Effective(facts.Namespace, facts.ClusterQueue)
	c := d
	if finite(now) {
		c.At = notAfter(c.At, now)
		c.VerdictSince = notAfter(c.VerdictSince, c.At)
		if c.StalledSince != nil {
			c.StalledSince = ptr(notAfter(*c.StalledSince, c.At))
		}
	}
	if c.ProtectedUntil != nil && finite(c.At) {
		c.ProtectedUntil = ptr(min(*c.ProtectedUntil, c.At+p.NearDone.MaxLease.Seconds()))
	}
	c.Mode = eff.Mode
	c.AdvisedBoost = clamp(c.AdvisedBoost, p.Boosts.Min, p.Boosts.Max)
	if c.AdvisedBoost > 0 {
		// Decide protects only a NearDone job under a lease, with the
		// NearDone boost.
		if c.Verdict != NearDone || c.ProtectedUntil == nil || !(*c.ProtectedUntil >= c.At) {
			c.AdvisedBoost = 0
		}
		c.AdvisedBoost = min(c.AdvisedBoost, max(p.Boosts.NearDone, 0))
	}
	if c.AdvisedAction != ActionDeactivate || !c.Verdict.Stalled() || !stopApplies(eff, &facts) {
		c.AdvisedAction, c.GPUHoursSaved = ActionNone, 0
	}
	c.Boost, c.Action = 0, ActionNone
	if eff.Mode == ModeEnforce {
		c.Boost, c.Action = c.AdvisedBoost, c.AdvisedAction
	}
	c.EffectivePriority = queueorder.EffectivePriority(facts.BasePriority, c.Boost)
	return c
}

// notAfter is t, or limit when t is later or not finite.
func notAfter(t, limit float64) float64 {
	if !finite(t) || t > limit {
		return limit
	}
	return t
}
