package preempt

import "math"

// NextChange is the earliest instant after d.At at which the decision could
// change with no new report: a protection lease or lease cooldown ending, a
// held boost's dwell or rate cap ending, the minimum age after admission
// passing, the stop grace period ending, distrust or an eviction cooldown
// expiring. NaN when none. The controller and the simulator schedule their
// next decision with it.
func (d Decision) NextChange(facts Facts, p Policy) float64 {
	if d.IsZero() {
		return math.NaN()
	}
	best := math.NaN()
	consider := func(t float64) {
		if !math.IsNaN(t) && !math.IsInf(t, 0) && t > d.At && (math.IsNaN(best) || t < best) {
			best = t
		}
	}
	if d.ProtectedUntil != nil {
		consider(*d.ProtectedUntil)
	}
	if d.LeaseCooldownUntil != nil {
		consider(*d.LeaseCooldownUntil)
	}
	if d.HeldBy == HoldDwell {
		consider(d.VerdictSince + p.Stability.MinDwell.Seconds())
	}
	if d.HeldBy == HoldRateCap && len(d.BoostChanges) > 0 {
		consider(d.BoostChanges[0] + 3600) // the oldest change leaves the hour
	}
	if facts.AdmittedAt != nil {
		consider(*facts.AdmittedAt + p.Evidence.MinAge.Seconds())
	}
	if d.StalledSince != nil {
		consider(*d.StalledSince + p.Stop.GracePeriod.Seconds())
	}
	if d.NearDoneAt != nil {
		consider(*d.NearDoneAt)
	}
	if d.Distrust != nil {
		consider(d.Distrust.Until)
	}
	if facts.LastPlannerEvictionAt != nil {
		consider(*facts.LastPlannerEvictionAt + p.Stability.EvictionCooldown.Seconds())
		if facts.AdmittedAt != nil {
			consider(*facts.AdmittedAt + p.Stability.EvictionCooldown.Seconds())
		}
	}
	return best
}
