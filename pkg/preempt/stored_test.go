package preempt

import (
	"math"
	"testing"
)

// A forged stored decision (issue 14: mode enforce, boost 2000000000,
// Deactivate) yields nothing the current policy would not apply.
func TestConformForgedDecision(t *testing.T) {
	forged := Decision{
		At: t0 + 1e9, Verdict: Plateaued, VerdictSince: math.Inf(1), StalledSince: fp(t0 + 1e9),
		Mode: ModeEnforce, Boost: 2_000_000_000, AdvisedBoost: 2_000_000_000, EffectivePriority: math.MaxInt32,
		Action: ActionDeactivate, AdvisedAction: ActionDeactivate, GPUHoursSaved: 1e9,
		ProtectedUntil: fp(t0 + 1e12),
	}
	advise := DefaultPolicy()
	advise.Mode = ModeAdvise
	enforce := DefaultPolicy()
	enforceStop := stopPolicy()
	lowBoost := DefaultPolicy()
	lowBoost.Boosts.Min = -100
	for _, tc := range []struct {
		name      string
		p         Policy
		wantMode  Mode
		boost     int32
		advised   int32
		action    Action
		advisedAc Action
	}{
		// A positive boost for a Plateaued verdict is no boost at all.
		{"advise mode", advise, ModeAdvise, 0, 0, ActionNone, ActionNone},
		{"enforce, stop off", enforce, ModeEnforce, 0, 0, ActionNone, ActionNone},
		{"enforce, stop on", enforceStop, ModeEnforce, 0, 0, ActionDeactivate, ActionDeactivate},
	} {
		t.Run(tc.name, func(t *testing.T) {
			now := t0
			facts := running()
			c := Conform(forged, facts, tc.p, now)
			if c.Mode != tc.wantMode || c.Boost != tc.boost || c.AdvisedBoost != tc.advised || c.Action != tc.action || c.AdvisedAction != tc.advisedAc {
				t.Errorf("mode %s boost %d advised %d action %s/%s, want %s %d %d %s/%s",
					c.Mode, c.Boost, c.AdvisedBoost, c.Action, c.AdvisedAction, tc.wantMode, tc.boost, tc.advised, tc.action, tc.advisedAc)
			}
			if c.Boost < tc.p.Boosts.Min || c.Boost > tc.p.Boosts.Max {
				t.Errorf("boost %d outside the policy's [%d, %d]", c.Boost, tc.p.Boosts.Min, tc.p.Boosts.Max)
			}
			if c.EffectivePriority != facts.BasePriority+c.Boost {
				t.Errorf("effective priority %d, want %d", c.EffectivePriority, facts.BasePriority+c.Boost)
			}
			if c.At != now || c.VerdictSince > now || *c.StalledSince > now {
				t.Errorf("times after now %v: at %v, verdictSince %v, stalledSince %v", now, c.At, c.VerdictSince, *c.StalledSince)
			}
			if lim := now + tc.p.NearDone.MaxLease.Seconds(); *c.ProtectedUntil > lim {
				t.Errorf("lease until %v, past now + maxLease %v", *c.ProtectedUntil, lim)
			}
			if forged.Boost != 2_000_000_000 || *forged.ProtectedUntil != t0+1e12 {
				t.Error("Conform modified its argument")
			}
		})
	}
	t.Run("negative boost clamped to min", func(t *testing.T) {
		f := forged
		f.AdvisedBoost = -2_000_000_000
		c := Conform(f, running(), lowBoost, t0)
		if c.Boost != lowBoost.Boosts.Min {
			t.Errorf("boost %d, want the policy's min %d", c.Boost, lowBoost.Boosts.Min)
		}
	})
	t.Run("protection only NearDone's, under a lease", func(t *testing.T) {
		f := forged
		f.Verdict = NearDone
		c := Conform(f, running(), enforce, t0)
		if c.Boost != enforce.Boosts.NearDone {
			t.Errorf("boost %d, want the policy's NearDone boost %d", c.Boost, enforce.Boosts.NearDone)
		}
		f.ProtectedUntil = nil
		if c := Conform(f, running(), enforce, t0); c.Boost != 0 {
			t.Errorf("boost %d without a lease, want 0", c.Boost)
		}
	})
	t.Run("unknown verdict is no decision", func(t *testing.T) {
		f := forged
		f.Verdict = "Pwned"
		if c := Conform(f, running(), enforce, t0); !c.IsZero() {
			t.Errorf("got %+v, want the zero Decision", c)
		}
	})
	t.Run("deactivate needs a stalled verdict", func(t *testing.T) {
		f := forged
		f.Verdict = Progressing
		if c := Conform(f, running(), enforceStop, t0); c.Action != ActionNone || c.AdvisedAction != ActionNone {
			t.Errorf("action %s/%s for a Progressing verdict", c.Action, c.AdvisedAction)
		}
	})
}
