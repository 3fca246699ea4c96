package preempt

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/progress-planner/planner/internal/humanize"
	"github.com/progress-planner/planner/pkg/forecast"
)

// TestVerdicts covers every verdict rule and its boundaries, entering (no
// previous verdict) and staying (previous verdict set: exit thresholds).
func TestVerdicts(t *testing.T) {
	prevOf := func(v Verdict) Decision { return Decision{At: t0 - 60, Verdict: v, VerdictSince: t0 - 3600} }
	young := running()
	young.AdmittedAt = fp(t0 - 599)
	grown := running()
	grown.AdmittedAt = fp(t0 - 600)
	pending := running()
	pending.AdmittedAt = nil

	tests := []struct {
		name  string
		f     forecast.Forecast
		facts *Facts
		prev  Verdict
		want  Verdict
		ev    []string // evidence the reason must name
	}{
		// Unknown.
		{name: "no reports", f: with(fcProgressing(t0), func(f *forecast.Forecast) { f.Reports = 0 }), want: Unknown, ev: []string{"no reports"}},
		{name: "nothing measured", f: with(fcProgressing(t0), func(f *forecast.Forecast) {
			f.ObjectivePts, f.Step, f.Progress = 0, nil, nil
		}), want: Unknown, ev: []string{"50 reports but no objective (eval_loss)"}},
		{name: "non-finite time", f: fcProgressing(math.NaN()), want: Unknown, ev: []string{"forecast time is not finite"}},

		// Warming.
		{name: "9 reports", f: with(fcProgressing(t0), func(f *forecast.Forecast) { f.Reports = 9 }), want: Warming, ev: []string{"9 reports (need 10)"}},
		{name: "10 reports", f: with(fcProgressing(t0), func(f *forecast.Forecast) { f.Reports = 10 }), want: Progressing},
		{name: "admitted 599s ago", f: fcProgressing(t0), facts: &young, want: Warming, ev: []string{"admitted 9m59s ago (need 10m)"}},
		{name: "admitted 600s ago", f: fcProgressing(t0), facts: &grown, want: Progressing},
		{name: "not admitted is not young", f: fcProgressing(t0), facts: &pending, want: Progressing},
		{name: "confidence just below floor", f: with(fcProgressing(t0), func(f *forecast.Forecast) { f.Confidence = 0.4999 }), want: Warming, ev: []string{"confidence 0.50 below floor 0.50"}},
		{name: "confidence at floor", f: with(fcProgressing(t0), func(f *forecast.Forecast) { f.Confidence = 0.5 }), want: Progressing},
		{name: "judged job keeps judging down to floor-margin", f: with(fcProgressing(t0), func(f *forecast.Forecast) { f.Confidence = 0.4 }), prev: Progressing, want: Progressing},
		{name: "judged job below floor-margin", f: with(fcProgressing(t0), func(f *forecast.Forecast) { f.Confidence = 0.3999 }), prev: Progressing, want: Warming, ev: []string{"below floor 0.40"}},
		{name: "warming job needs the full floor", f: with(fcProgressing(t0), func(f *forecast.Forecast) { f.Confidence = 0.45 }), prev: Warming, want: Warming},
		{name: "NaN confidence", f: with(fcProgressing(t0), func(f *forecast.Forecast) { f.Confidence = math.NaN() }), want: Warming, ev: []string{"confidence 0.00"}},
		{name: "diverging with few reports is warming", f: with(fcNaN(t0), func(f *forecast.Forecast) { f.Reports = 3 }), want: Warming},

		// Diverging, Hung.
		{name: "diverging", f: fcDiverging(t0), want: Diverging, ev: []string{"Diverging: eval_loss rose 40% above its best over the last 20 reports (latest finite 1.68, best 1.2)", "latest finite 1.68, best 1.2"}},
		{name: "diverging NaN", f: fcNaN(t0), want: Diverging, ev: []string{"is NaN", "acts without dwell"}},
		{name: "hung", f: fcHung(t0), want: Hung, ev: []string{"no progress for 47m (planner: step counter unchanged over 47 report intervals)"}},
		{name: "hung without reason", f: with(fcHung(t0), func(f *forecast.Forecast) { f.HangReason = "" }), want: Hung, ev: []string{"no progress for 47m (reports every 1m)"}},
		{name: "hung beats near done", f: with(fcNearDone(t0), func(f *forecast.Forecast) { f.Hung = true }), want: Hung},
		{name: "diverging beats hung", f: with(fcHung(t0), func(f *forecast.Forecast) { f.Diverging = true }), want: Diverging},
		{name: "diverging at low confidence", f: with(fcNaN(t0), func(f *forecast.Forecast) { f.Confidence = 0.03 }), want: Diverging},
		{name: "hung at low confidence", f: with(fcHung(t0), func(f *forecast.Forecast) { f.Confidence = 0.3 }), want: Hung},
		{name: "hung while young is warming", f: fcHung(t0), facts: &young, want: Warming},
		{name: "plateau at low confidence is warming", f: with(fcPlateau(t0), func(f *forecast.Forecast) { f.Confidence = 0.3 }), want: Warming},
		{name: "near done at low confidence is warming", f: with(fcNearDone(t0), func(f *forecast.Forecast) { f.Confidence = 0.3 }), want: Warming},

		// Plateaued: enter at >= 0.8 and <= 0.02; stay at >= 0.6 and <= 0.05.
		{name: "plateau enter boundary", f: with(fcPlateau(t0), func(f *forecast.Forecast) { f.PlateauProbability, f.RelativeRemaining = 0.8, fp(0.02) }),
			want: Plateaued, ev: []string{"plateau probability 0.80 (enters at 0.80)", "2.0% of gains so far"}},
		{name: "plateau probability below enter", f: with(fcPlateau(t0), func(f *forecast.Forecast) { f.PlateauProbability = 0.7999 }), want: Progressing},
		{name: "relative remaining above enter", f: with(fcPlateau(t0), func(f *forecast.Forecast) { f.RelativeRemaining = fp(0.0201) }), want: Progressing},
		{name: "relative remaining unknown", f: with(fcPlateau(t0), func(f *forecast.Forecast) { f.RelativeRemaining = nil }), want: Progressing},
		{name: "plateau stays at exit boundary", f: with(fcPlateau(t0), func(f *forecast.Forecast) { f.PlateauProbability, f.RelativeRemaining = 0.6, fp(0.05) }),
			prev: Plateaued, want: Plateaued, ev: []string{"exits below 0.60"}},
		{name: "plateau exits below 0.6", f: with(fcPlateau(t0), func(f *forecast.Forecast) { f.PlateauProbability = 0.5999 }), prev: Plateaued, want: Progressing},
		{name: "plateau exits above 0.05", f: with(fcPlateau(t0), func(f *forecast.Forecast) { f.RelativeRemaining = fp(0.0501) }), prev: Plateaued, want: Progressing},
		{name: "exit band does not let a progressing job in", f: with(fcPlateau(t0), func(f *forecast.Forecast) { f.PlateauProbability = 0.7 }), prev: Progressing, want: Progressing},
		{name: "the curve dipping keeps a judged job", f: with(fcPlateau(t0), func(f *forecast.Forecast) { f.PlateauProbability, f.Plateaued = 0.7, false }), prev: Plateaued, want: Plateaued},
		{name: "a hold that doubts keeps a judged job", f: with(fcPlateau(t0), func(f *forecast.Forecast) {
			f.PlateauProbability, f.Plateaued, f.PlateauReason = 0.79, false, "step schedule: its history shows 2 jump(s)"
		}), prev: Plateaued, want: Plateaued},
		{name: "a schedule that moves releases a judged job", f: with(fcPlateau(t0), func(f *forecast.Forecast) {
			f.PlateauProbability, f.Plateaued = 0.79, false
			f.PlateauReason = "learning rate still falling (0.001→0.00075, peak 0.001) before the planned end: annealing ahead"
			f.PlateauRelease = "its learning rate stood at its peak 0.001 and now moves (0.00075): a cool-down or a step begun"
		}), prev: Plateaued, want: Progressing, ev: []string{"released from Plateaued: its learning rate stood at its peak"}},
		{name: "plateau with integrity finding still yields", f: with(fcPlateau(t0), func(f *forecast.Forecast) { f.Integrity.JumpRatio = fp(50) }),
			want: Plateaued, ev: []string{"integrity: progress jumped at 50×"}},

		// NearDone: counter progress >= 0.9, ETA.Hi <= 30m; stay >= 0.85, <= 45m.
		{name: "near done", f: fcNearDone(t0), want: NearDone, ev: []string{"progress 95% (step 9500 of 10000 from the step counter, enters at 90%)", "planner ETA 8m20s", "upper bound 10m (limit 30m)", "confidence 0.80"}},
		{name: "near done enter boundary", f: with(fcNearDone(t0), func(f *forecast.Forecast) { f.Step, f.ETA.Hi = fp(9000), 1800 }), want: NearDone},
		{name: "progress below enter", f: with(fcNearDone(t0), func(f *forecast.Forecast) { f.Step = fp(8999) }), want: Progressing},
		{name: "ETA bound above enter", f: with(fcNearDone(t0), func(f *forecast.Forecast) { f.ETA.Hi = 1801 }), want: Progressing},
		{name: "near done stays at exit boundary", f: with(fcNearDone(t0), func(f *forecast.Forecast) { f.Step, f.ETA.Hi = fp(8500), 2700 }), prev: NearDone, want: NearDone, ev: []string{"exits below 85%", "limit 45m"}},
		{name: "near done exits on progress", f: with(fcNearDone(t0), func(f *forecast.Forecast) { f.Step = fp(8499) }), prev: NearDone, want: Progressing},
		{name: "near done exits on ETA", f: with(fcNearDone(t0), func(f *forecast.Forecast) { f.ETA.Hi = 2701 }), prev: NearDone, want: Progressing},
		{name: "reported percentage is not progress", f: with(fcNearDone(t0), func(f *forecast.Forecast) { f.Step, f.TotalSteps, f.Progress = nil, nil, fp(0.99) }), want: Progressing},
		{name: "ETA unknown", f: with(fcNearDone(t0), func(f *forecast.Forecast) { f.ETA = forecast.Estimate{} }), want: Progressing},
		{name: "step counter not moving", f: with(fcNearDone(t0), func(f *forecast.Forecast) { f.StepRate = fp(0) }), want: Progressing},
		{name: "near done beats plateau", f: with(fcNearDone(t0), func(f *forecast.Forecast) { f.PlateauProbability, f.RelativeRemaining = 0.95, fp(0.001) }), want: NearDone},
		{name: "near done with finding is untrusted", f: with(fcNearDone(t0), func(f *forecast.Forecast) { f.Integrity.ETANotShrinking = true }), want: Untrusted, ev: []string{"reported ETA not shrinking"}},

		{name: "unjudged with a finding is untrusted", f: with(fcProgressing(t0), func(f *forecast.Forecast) { f.Confidence, f.Integrity.ETANotShrinking = 0.2, true }), want: Untrusted, ev: []string{"reported ETA not shrinking"}},
		{name: "unjudged without a finding is warming", f: with(fcProgressing(t0), func(f *forecast.Forecast) { f.Confidence = 0.2 }), want: Warming},

		// Untrusted: integrity thresholds.
		{name: "jump ratio at limit", f: with(fcProgressing(t0), func(f *forecast.Forecast) { f.Integrity.JumpRatio = fp(10) }), want: Progressing},
		{name: "jump ratio above limit", f: with(fcProgressing(t0), func(f *forecast.Forecast) { f.Integrity.JumpRatio = fp(10.01) }), want: Untrusted, ev: []string{"progress jumped at 10× the job's median rate (limit 10×)"}},
		{name: "jump ratio NaN", f: with(fcProgressing(t0), func(f *forecast.Forecast) { f.Integrity.JumpRatio = fp(math.NaN()) }), want: Untrusted},
		{name: "progress gap at limit", f: with(fcProgressing(t0), func(f *forecast.Forecast) { f.Integrity.ReportedProgressGap = fp(0.05) }), want: Progressing},
		{name: "progress gap above limit", f: with(fcProgressing(t0), func(f *forecast.Forecast) { f.Integrity.ReportedProgressGap = fp(0.3) }), want: Untrusted, ev: []string{"reported progress 30% ahead of the step counter"}},
		// Planner ETA 6000 s: a reported 1500 s is at the 0.25 limit.
		{name: "ETA ratio at limit", f: with(fcProgressing(t0), func(f *forecast.Forecast) { f.ReportedETA, f.Integrity.ETARatio = fp(1500), fp(0.25) }), want: Progressing},
		{name: "ETA ratio below limit", f: with(fcProgressing(t0), func(f *forecast.Forecast) { f.ReportedETA, f.Integrity.ETARatio = fp(1494), fp(0.249) }),
			want: Untrusted, ev: []string{"reported ETA 0.25× the planner's ETA from the step history, 1h15m short (limit 0.25× and 5m)"}},
		{name: "ETA ratio far above is harmless", f: with(fcProgressing(t0), func(f *forecast.Forecast) { f.ReportedETA, f.Integrity.ETARatio = fp(60000), fp(10) }), want: Progressing},
		{name: "ETA ratio low but gap small", f: with(fcNearDone(t0), func(f *forecast.Forecast) { f.ETA.Value, f.ReportedETA, f.Integrity.ETARatio = 300, fp(30), fp(0.1) }), want: NearDone},
		{name: "ETA gap at limit", f: with(fcProgressing(t0), func(f *forecast.Forecast) {
			f.ETA.Value, f.ReportedETA, f.Integrity.ETARatio = 400, fp(100), fp(0.25-1e-9)
		}), want: Progressing},
		{name: "ETA gap above limit", f: with(fcProgressing(t0), func(f *forecast.Forecast) {
			f.ETA.Value, f.ReportedETA, f.Integrity.ETARatio = 401, fp(100), fp(0.2494)
		}), want: Untrusted},
		{name: "ETA ratio without reported ETA", f: with(fcProgressing(t0), func(f *forecast.Forecast) { f.Integrity.ETARatio = fp(0.05) }), want: Untrusted, ev: []string{"reported ETA 0.05× the planner's", "1h35m short"}},
		{name: "ETA ratio NaN", f: with(fcProgressing(t0), func(f *forecast.Forecast) { f.Integrity.ETARatio = fp(math.NaN()) }), want: Untrusted},
		{name: "planner's NaN/Inf divergence", f: with(fcDiverging(t0), func(f *forecast.Forecast) {
			f.DivergenceReason = "a loss-like metric reported NaN/Inf at t=5400s"
			f.NonFinite = true
		}),
			want: Diverging, ev: []string{"acts without dwell"}},
		{name: "progress without steps", f: with(fcProgressing(t0), func(f *forecast.Forecast) { f.Integrity.ProgressWithoutSteps = true }), want: Untrusted, ev: []string{"without step-counter movement"}},
		{name: "ETA not shrinking", f: with(fcProgressing(t0), func(f *forecast.Forecast) { f.Integrity.ETANotShrinking = true }), want: Untrusted},
		{name: "forecast issue", f: with(fcProgressing(t0), func(f *forecast.Forecast) { f.Integrity.Issues = []string{"counter reset\nwithout restart"} }), want: Untrusted, ev: []string{"planner: counter reset without restart"}},

		// Progressing.
		{name: "progressing", f: fcProgressing(t0), want: Progressing, ev: []string{"plateau probability 0.10", "expected remaining improvement 25% of gains so far (eval_loss 0.3)", "ETA 1h40m (1h32m–1h50m)"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			facts := running()
			if tc.facts != nil {
				facts = *tc.facts
			}
			var prev Decision
			if tc.prev != "" {
				prev = prevOf(tc.prev)
			}
			d := Decide(tc.f, facts, prev, DefaultPolicy())
			if d.Verdict != tc.want {
				t.Fatalf("verdict %s, want %s (%s)", d.Verdict, tc.want, d.Reason)
			}
			if finite(tc.f.Now) {
				checkDecision(t, DefaultPolicy(), d)
			}
			wantContains(t, d.Reason, tc.ev...)
		})
	}
}

// TestReasons: every reason names its verdict, the evidence with numbers,
// and the boost.
func TestReasons(t *testing.T) {
	p := DefaultPolicy()
	p.Stability.MinDwell = Dur(0)
	tests := []struct {
		name string
		f    forecast.Forecast
		want []string
	}{
		{"Plateaued", fcPlateau(t0), []string{"Plateaued: ", "plateau probability 0.93", "expected remaining improvement 0.4% of gains so far (eval_loss 0.0031)", "ETA 2h10m", "flat for 3h", "boost -100 (yield to waiting work of the same priority)", "priority 1000 → 900"}},
		{"Diverging", fcDiverging(t0), []string{"Diverging: ", "rose 40% above its best", "boost -100"}},
		{"Hung", fcHung(t0), []string{"Hung: ", "no progress for 47m", "boost -100"}},
		{"NearDone", fcNearDone(t0), []string{"NearDone: ", "progress 95%", "planner ETA 8m20s", "upper bound 10m", "boost +100 (protected; lease ends in 15m)", "priority 1000 → 1100"}},
		{"Untrusted", with(fcNearDone(t0), func(f *forecast.Forecast) { f.Integrity.JumpRatio = fp(120) }), []string{"Untrusted: implausible progress: progress jumped at 120×", "boost 0 (no protection for unverified progress)"}},
		{"Warming", with(fcProgressing(t0), func(f *forecast.Forecast) { f.Reports = 4 }), []string{"Warming: ", "4 reports (need 10)", "boost 0 (not enough evidence to act)"}},
		{"Unknown", with(fcProgressing(t0), func(f *forecast.Forecast) { f.Reports = 0 }), []string{"Unknown: ", "no reports", "boost 0"}},
		{"Progressing", fcProgressing(t0), []string{"Progressing: ", "plateau probability 0.10", "expected remaining improvement 25% of gains so far", "ETA 1h40m", "boost 0"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := Decide(tc.f, running(), Decision{}, p)
			checkDecision(t, p, d)
			if string(d.Verdict) != tc.name {
				t.Fatalf("verdict %s, want %s", d.Verdict, tc.name)
			}
			wantContains(t, d.Reason, tc.want...)
		})
	}
}

func TestDwellBeforeBoost(t *testing.T) {
	j := newJob(t, DefaultPolicy())
	d := j.at(fcPlateau(t0))
	if d.Verdict != Plateaued || d.AdvisedBoost != 0 || d.HeldBy != HoldDwell {
		t.Fatalf("first plateau decision: %+v", d)
	}
	wantContains(t, d.Reason, "held: verdict is 0s old, boost -100 waits for the 5m dwell")
	if d = j.at(fcPlateau(t0 + 299)); d.AdvisedBoost != 0 {
		t.Fatalf("boost changed before the dwell: %d", d.AdvisedBoost)
	}
	d = j.at(fcPlateau(t0 + 300))
	if d.Boost != -100 || d.EffectivePriority != 900 || d.HeldBy != "" || d.VerdictSince != t0 {
		t.Fatalf("after dwell: boost %d priority %d held %q since %v", d.Boost, d.EffectivePriority, d.HeldBy, d.VerdictSince)
	}
	if len(d.BoostChanges) != 1 || d.BoostChanges[0] != t0+300 {
		t.Fatalf("change log %v", d.BoostChanges)
	}
	// Back to progressing: the penalty stays for the dwell of the new verdict.
	d = j.at(fcProgressing(t0 + 600))
	if d.Verdict != Progressing || d.Boost != -100 || d.HeldBy != HoldDwell {
		t.Fatalf("exit: %+v", d)
	}
	if d = j.at(fcProgressing(t0 + 900)); d.Boost != 0 {
		t.Fatalf("penalty not lifted after the dwell: %s", d.Reason)
	}
}

func TestHysteresisKeepsVerdict(t *testing.T) {
	j := newJob(t, DefaultPolicy())
	j.run(t0, t0+600, 60, fcPlateau)
	// Noise inside the band keeps the verdict and its age.
	for i, pp := range []float64{0.7, 0.62, 0.79, 0.6} {
		d := j.at(with(fcPlateau(t0+600+float64(i)*60), func(f *forecast.Forecast) { f.PlateauProbability = pp }))
		if d.Verdict != Plateaued || d.VerdictSince != t0 || d.Boost != -100 {
			t.Fatalf("pp %.2f: %s since %v boost %d", pp, d.Verdict, d.VerdictSince, d.Boost)
		}
	}
	d := j.at(with(fcPlateau(t0+900), func(f *forecast.Forecast) { f.PlateauProbability = 0.59 }))
	if d.Verdict != Progressing || d.VerdictSince != t0+900 {
		t.Fatalf("below exit: %s since %v", d.Verdict, d.VerdictSince)
	}
}

func TestNearDoneLease(t *testing.T) {
	p := DefaultPolicy()
	j := newJob(t, p)
	d := j.at(fcNearDone(t0))
	if d.Verdict != NearDone || d.AdvisedBoost != 0 || d.ProtectedUntil != nil {
		t.Fatalf("protection before the dwell: %+v", d)
	}
	d = j.at(fcNearDone(t0 + 300))
	// Lease = now + ETA.Hi * 1.5 = 300 + 900.
	if d.Boost != 100 || d.ProtectedUntil == nil || *d.ProtectedUntil != t0+1200 {
		t.Fatalf("grant: boost %d lease %v", d.Boost, d.ProtectedUntil)
	}
	// The lease is never extended by later forecasts.
	d = j.run(t0+360, t0+1200, 60, func(now float64) forecast.Forecast {
		return with(fcNearDone(now), func(f *forecast.Forecast) { f.ETA.Hi = 1500 })
	})
	if d.Boost != 100 || *d.ProtectedUntil != t0+1200 {
		t.Fatalf("before expiry: boost %d lease %v", d.Boost, *d.ProtectedUntil)
	}
	// Still running at the lease end: protection lost, cooldown 1h from the lease end.
	d = j.at(fcNearDone(t0 + 1200))
	if d.Boost != 0 || d.ProtectedUntil != nil || d.LeaseCooldownUntil == nil || *d.LeaseCooldownUntil != t0+1200+3600 {
		t.Fatalf("expiry: boost %d lease %v cooldown %v", d.Boost, d.ProtectedUntil, d.LeaseCooldownUntil)
	}
	wantContains(t, d.Reason, "protection lease expired 0s ago with the job still running", "cannot be re-earned for 1h")
	if d = j.run(t0+1260, t0+4800, 60, fcNearDone); d.Boost != 0 || d.Verdict != NearDone {
		t.Fatalf("re-earned during the cooldown: %s", d.Reason)
	}
	d = j.at(fcNearDone(t0 + 4800))
	if d.Boost != 100 || *d.ProtectedUntil != t0+4800+900 || d.LeaseCooldownUntil != nil {
		t.Fatalf("after cooldown: %s", d.Reason)
	}
}

func TestLeaseCappedAtMaxLease(t *testing.T) {
	p := DefaultPolicy()
	p.NearDone.LeaseMargin = 3 // 1800 * 4 = 2h > maxLease 1h
	p.Stability.MinDwell = Dur(0)
	d := Decide(with(fcNearDone(t0), func(f *forecast.Forecast) { f.ETA.Hi = 1800 }), running(), Decision{}, p)
	if d.ProtectedUntil == nil || *d.ProtectedUntil != t0+3600 {
		t.Fatalf("lease %v, want capped at now+1h", d.ProtectedUntil)
	}
}

func TestProtectionRemovedAtOnce(t *testing.T) {
	for _, tc := range []struct {
		name      string
		next      func(float64) forecast.Forecast
		verdict   Verdict
		boost     int32
		held      Hold
		reasonHas string
	}{
		{"hung", fcHung, Hung, 0, HoldDwell, "protection revoked: the verdict left NearDone"},
		{"untrusted", func(now float64) forecast.Forecast {
			return with(fcNearDone(now), func(f *forecast.Forecast) { f.Integrity.JumpRatio = fp(100) })
		}, Untrusted, 0, "", "jumped at 100×"},
		{"NaN divergence", fcNaN, Diverging, -100, "", "is NaN"},
		{"progressing", fcProgressing, Progressing, 0, "", "protection revoked"},
		{"warming", func(now float64) forecast.Forecast {
			return with(fcNearDone(now), func(f *forecast.Forecast) { f.Confidence = 0.1 })
		}, Warming, 0, "", "protection revoked"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			j := newJob(t, DefaultPolicy())
			j.run(t0, t0+360, 60, fcNearDone)
			if j.d.Boost != 100 {
				t.Fatalf("setup: not protected: %s", j.d.Reason)
			}
			d := j.at(tc.next(t0 + 360))
			if d.Verdict != tc.verdict || d.Boost != tc.boost || d.HeldBy != tc.held || d.ProtectedUntil != nil {
				t.Fatalf("got %s boost %d held %q lease %v: %s", d.Verdict, d.Boost, d.HeldBy, d.ProtectedUntil, d.Reason)
			}
			if d.LeaseCooldownUntil == nil || *d.LeaseCooldownUntil != t0+360+3600 {
				t.Fatalf("lease cooldown %v", d.LeaseCooldownUntil)
			}
			wantContains(t, d.Reason, tc.reasonHas)
		})
	}
}

func TestRevokedProtectionNeedsCooldown(t *testing.T) {
	// Leaving NearDone and coming back does not renew protection.
	j := newJob(t, DefaultPolicy())
	j.run(t0, t0+360, 60, fcNearDone)
	j.at(fcProgressing(t0 + 360))
	d := j.run(t0+420, t0+3960, 60, fcNearDone)
	if d.Boost != 0 {
		t.Fatalf("protection re-earned within the cooldown: %s", d.Reason)
	}
	if d = j.at(fcNearDone(t0 + 3960)); d.Boost != 100 {
		t.Fatalf("not re-earned after the cooldown: %s", d.Reason)
	}
}

func TestDivergingDwell(t *testing.T) {
	p := DefaultPolicy()
	if d := Decide(fcNaN(t0), running(), Decision{}, p); d.Boost != -100 || d.HeldBy != "" {
		t.Fatalf("NaN divergence should act at once: %s", d.Reason)
	}
	if d := Decide(fcDiverging(t0), running(), Decision{}, p); d.Boost != 0 || d.HeldBy != HoldDwell {
		t.Fatalf("finite divergence should wait for the dwell: %s", d.Reason)
	}
	// Only the forecast's structured flag counts, never words in the reason.
	words := with(fcDiverging(t0), func(f *forecast.Forecast) { f.DivergenceReason = "loss is NaN" })
	if nonFinite(&words) {
		t.Error("a reason mentioning NaN was read as a non-finite divergence")
	}
}

func TestRateCap(t *testing.T) {
	p := DefaultPolicy()
	p.Stability.MinDwell = Dur(0)
	p.Stability.MaxBoostChangesPerHour = 2
	j := newJob(t, p)
	sawCap := false
	for i := 0; i < 150; i++ {
		now := t0 + float64(i)*60
		fc := fcPlateau
		if i%2 == 1 {
			fc = fcProgressing
		}
		if d := j.at(fc(now)); d.HeldBy == HoldRateCap {
			sawCap = true
			wantContains(t, d.Reason, "boost changes in the last hour (cap 2)")
		}
	}
	if !sawCap {
		t.Fatal("rate cap never held")
	}
	assertCap(t, j.log, 2)
	if got := changeTimes(j.log); len(got) != 6 { // one pair per hour: t0, t0+60, t0+3600, ...
		t.Fatalf("changes at %v", got)
	}
}

func TestGrantKeepsRoomForRemoval(t *testing.T) {
	p := DefaultPolicy() // cap 4
	prev := Decision{At: t0 - 60, Verdict: NearDone, VerdictSince: t0 - 3000, Mode: ModeEnforce,
		BoostChanges: []float64{t0 - 300, t0 - 200, t0 - 100}}
	d := Decide(fcNearDone(t0), running(), prev, p)
	if d.AdvisedBoost != 0 || d.HeldBy != HoldRateCap {
		t.Fatalf("grant with 3 of 4 changes used: %s", d.Reason)
	}
	prev.BoostChanges = prev.BoostChanges[1:]
	if d = Decide(fcNearDone(t0), running(), prev, p); d.AdvisedBoost != 100 {
		t.Fatalf("grant with 2 of 4 changes used: %s", d.Reason)
	}
	// A penalty may use the last slot.
	prev.Verdict, prev.BoostChanges = Plateaued, []float64{t0 - 300, t0 - 200, t0 - 100}
	if d = Decide(fcPlateau(t0), running(), prev, p); d.AdvisedBoost != -100 {
		t.Fatalf("penalty with 3 of 4 changes used: %s", d.Reason)
	}
	// Removal of protection is never capped.
	prev = Decision{At: t0 - 60, Verdict: NearDone, VerdictSince: t0 - 3000, AdvisedBoost: 100, Boost: 100,
		ProtectedUntil: fp(t0 + 600), BoostChanges: []float64{t0 - 400, t0 - 300, t0 - 200, t0 - 100}}
	if d = Decide(fcProgressing(t0), running(), prev, p); d.AdvisedBoost != 0 || len(d.BoostChanges) != 5 {
		t.Fatalf("removal with a full cap: %s (%v)", d.Reason, d.BoostChanges)
	}
}

func TestEvictionCooldown(t *testing.T) {
	j := newJob(t, DefaultPolicy())
	if d := j.run(t0, t0+3600, 60, fcPlateau); d.Boost != -100 {
		t.Fatalf("setup: %s", d.Reason)
	}
	// The planner's boost got the job evicted at t0+3600.
	j.facts.AdmittedAt, j.facts.LastPlannerEvictionAt, j.facts.Evictions = nil, fp(t0+3600), 1
	// While it waits it keeps the yield it was evicted with (else it would be
	// readmitted at once ahead of the work it yielded to, and yield again).
	d := j.at(fcPlateau(t0 + 3660))
	if d.Verdict != Plateaued || d.Boost != -100 {
		t.Fatalf("yield dropped while out after a planner eviction: %s", d.Reason)
	}
	wantContains(t, d.Reason, "eviction cooldown: the planner evicted it 1m ago (evictions so far: 1), it keeps its yield while it waits")
	// Readmitted at t0+7200: no penalty until it has run 30m.
	j.facts.AdmittedAt = fp(t0 + 7200)
	for now := t0 + 7200; now < t0+9000; now += 60 {
		if d = j.at(fcPlateau(now)); d.Boost != 0 {
			t.Fatalf("penalized %s after readmission: %s", humanize.Duration(now-t0-7200), d.Reason)
		}
	}
	wantContains(t, d.Reason, "eviction cooldown: readmitted 29m ago")
	if d = j.at(fcPlateau(t0 + 9000)); d.Boost != -100 {
		t.Fatalf("no penalty after the cooldown: %s", d.Reason)
	}
}

func TestWarmingLiftsPenaltyAfterDwell(t *testing.T) {
	j := newJob(t, DefaultPolicy())
	j.run(t0, t0+600, 60, fcPlateau)
	low := func(now float64) forecast.Forecast {
		return with(fcPlateau(now), func(f *forecast.Forecast) { f.Confidence = 0.2 })
	}
	if d := j.at(low(t0 + 600)); d.Verdict != Warming || d.Boost != -100 {
		t.Fatalf("%s", d.Reason)
	}
	if d := j.at(low(t0 + 900)); d.Boost != 0 {
		t.Fatalf("penalty not lifted: %s", d.Reason)
	}
}

func TestDistrustOutlivesTheFinding(t *testing.T) {
	p := DefaultPolicy()
	p.Integrity.DistrustFor = Dur(2 * time.Hour)
	j := newJob(t, p)
	j.run(t0, t0+600, 60, fcProgressing)
	// One report jumps from 40% to 99%; later reports look normal.
	jump := with(fcNearDone(t0+600), func(f *forecast.Forecast) {
		f.Step = fp(9900)
		f.Integrity.JumpRatio = fp(300)
	})
	if d := j.at(jump); d.Verdict != Untrusted || d.Distrust == nil || d.Distrust.Until != t0+600+7200 {
		t.Fatalf("jump: %+v", d)
	}
	d := j.run(t0+660, t0+7800, 60, fcNearDone)
	if d.Verdict != Untrusted || d.Boost != 0 {
		t.Fatalf("protected within the distrust period: %s", d.Reason)
	}
	wantContains(t, d.Reason, "integrity finding 1h59m ago (progress jumped at 300×", "distrusted for 1m more")
	d = j.run(t0+7800, t0+8100, 60, fcNearDone)
	if d.Verdict != NearDone || d.Distrust != nil || d.Boost != 0 {
		t.Fatalf("after distrust: %s", d.Reason)
	}
	if d = j.at(fcNearDone(t0 + 8100)); d.Boost != 100 {
		t.Fatalf("not protected after distrust and dwell: %s", d.Reason)
	}
}

func TestModes(t *testing.T) {
	p := DefaultPolicy()
	p.Overrides = []Override{{Namespace: "team-a", Mode: ModeAdvise}}
	j := newJob(t, p)
	d := j.run(t0, t0+360, 60, fcPlateau)
	if d.Mode != ModeAdvise || d.Boost != 0 || d.AdvisedBoost != -100 || d.EffectivePriority != 1000 {
		t.Fatalf("advise: %+v", d)
	}
	wantContains(t, d.Reason, "boost -100", "advise mode (namespace team-a): would apply boost -100; applying 0")

	j = newJob(t, p)
	j.facts.Namespace = "team-b"
	if d = j.run(t0, t0+360, 60, fcPlateau); d.Mode != ModeEnforce || d.Boost != -100 || strings.Contains(d.Reason, "advise") {
		t.Fatalf("enforce: %+v", d)
	}

	// Switching to enforce applies the advised boost without a new change.
	j = newJob(t, p)
	j.run(t0, t0+360, 60, fcPlateau)
	j.p = DefaultPolicy()
	if d = j.at(fcPlateau(t0 + 360)); d.Boost != -100 || len(d.BoostChanges) != 1 {
		t.Fatalf("after switch: %+v", d)
	}
}

func TestStalledSince(t *testing.T) {
	j := newJob(t, DefaultPolicy())
	j.run(t0, t0+600, 60, fcPlateau)
	d := j.at(fcHung(t0 + 600))
	if d.Verdict != Hung || d.VerdictSince != t0+600 || d.StalledSince == nil || *d.StalledSince != t0 {
		t.Fatalf("plateau→hung: %s since %v stalled since %v", d.Verdict, d.VerdictSince, d.StalledSince)
	}
	if d.Boost != -100 {
		t.Fatalf("penalty dropped on a switch between stall verdicts: %s", d.Reason)
	}
	if d = j.at(fcProgressing(t0 + 660)); d.StalledSince != nil {
		t.Fatalf("stalled since survives progress: %v", *d.StalledSince)
	}
}

func TestClockGoingBackwardsHolds(t *testing.T) {
	j := newJob(t, DefaultPolicy())
	j.at(fcPlateau(t0 + 1000))
	if d := j.at(fcPlateau(t0 + 500)); d.AdvisedBoost != 0 || d.HeldBy != HoldDwell {
		t.Fatalf("%s", d.Reason)
	}
}

func TestInvalidInputKeepsPrevious(t *testing.T) {
	j := newJob(t, DefaultPolicy())
	prev := j.run(t0, t0+600, 60, fcPlateau)
	bad := DefaultPolicy()
	bad.Boosts.Plateaued = 5
	d := Decide(fcPlateau(t0+600), running(), prev, bad)
	if d.Verdict != Unknown || d.Boost != prev.Boost || d.AdvisedBoost != prev.AdvisedBoost || d.Action != ActionNone {
		t.Fatalf("%+v", d)
	}
	wantContains(t, d.Reason, "Unknown: policy not applied: invalid policy: boosts.plateaued: 5 must not be positive", "boost -100 kept")
	d = Decide(fcPlateau(math.Inf(1)), running(), prev, DefaultPolicy())
	if d.Verdict != Unknown || d.Boost != -100 || d.At != prev.At {
		t.Fatalf("%+v", d)
	}
	roundTrip(t, d)
}

func TestBoundsAndPriority(t *testing.T) {
	p := DefaultPolicy()
	p.Boosts.Min, p.Boosts.Max = -50, 50
	p.Boosts.Plateaued, p.Boosts.Diverging, p.Boosts.Hung, p.Boosts.NearDone = -50, -50, -50, 50
	prev := Decision{At: t0 - 60, Verdict: Plateaued, VerdictSince: t0 - 3600, AdvisedBoost: -5000, Boost: -5000}
	d := Decide(fcPlateau(t0), running(), prev, p)
	if d.Boost != -50 || len(d.BoostChanges) != 0 {
		t.Fatalf("out-of-bounds previous boost: %+v", d)
	}
	facts := running()
	facts.BasePriority = math.MaxInt32 - 10
	p = DefaultPolicy()
	p.Stability.MinDwell = Dur(0)
	if d = Decide(fcNearDone(t0), facts, Decision{}, p); d.EffectivePriority != math.MaxInt32 {
		t.Fatalf("priority %d", d.EffectivePriority)
	}
}

// --- Deactivate ---

func stopPolicy() Policy {
	p := DefaultPolicy()
	p.Stop.Enabled = true
	return p
}

func TestDeactivate(t *testing.T) {
	j := newJob(t, stopPolicy())
	j.run(t0, t0+7200, 60, fcPlateau)
	if got := j.d.AdvisedAction; got != ActionNone {
		t.Fatalf("Deactivate before the grace period: %s", j.d.Reason)
	}
	wantContains(t, j.d.Reason, "stop enabled by policy (global); stalled 1h59m, Deactivate after 2h (1m to go)")
	d := j.at(fcPlateau(t0 + 7200))
	if d.Action != ActionDeactivate || d.GPUHoursSaved != 8*7800.0/3600 {
		t.Fatalf("at grace: %s %v", d.Action, d.GPUHoursSaved)
	}
	wantContains(t, d.Reason, "Deactivate (stop enabled by policy (global)): stalled 2h (grace 2h), saves 17.3 GPU-hours (8 GPUs × 2h10m to the planned end, planner ETA)")
}

func TestDeactivateHorizonWhenETAUnknown(t *testing.T) {
	j := newJob(t, stopPolicy())
	d := j.run(t0, t0+7260, 60, fcHung) // fcHung: ETA unknown
	if d.Action != ActionDeactivate || d.GPUHoursSaved != 8*24 {
		t.Fatalf("%s %v", d.Action, d.GPUHoursSaved)
	}
	wantContains(t, d.Reason, "saves 192.0 GPU-hours (8 GPUs × 24h horizon, ETA unknown)")
}

func TestDeactivateOptIn(t *testing.T) {
	override := func(o Override) Policy {
		p := DefaultPolicy()
		p.Overrides = []Override{o}
		return p
	}
	yes, no := true, false
	tests := []struct {
		name   string
		p      Policy
		optIn  bool
		want   Action
		reason string
	}{
		{"default policy, no annotation", DefaultPolicy(), false, ActionNone, ""},
		{"default policy, annotation", DefaultPolicy(), true, ActionDeactivate, "stop opted in by the job"},
		{"annotation not honoured", func() Policy { p := DefaultPolicy(); p.Stop.AllowJobOptIn = false; return p }(), true, ActionNone, ""},
		{"namespace enables", override(Override{Namespace: "team-a", Stop: &yes}), false, ActionDeactivate, "Deactivate (stop enabled by policy (namespace team-a))"},
		{"other namespace", override(Override{Namespace: "team-b", Stop: &yes}), false, ActionNone, ""},
		{"queue enables", override(Override{ClusterQueue: "gpu", Stop: &yes}), false, ActionDeactivate, "stop enabled by policy (clusterQueue gpu)"},
		{"namespace forbids annotation", override(Override{Namespace: "team-a", AllowJobOptIn: &no}), true, ActionNone, ""},
		{"queue disables global", func() Policy { p := stopPolicy(); p.Overrides = []Override{{ClusterQueue: "gpu", Stop: &no}}; return p }(), false, ActionNone, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			j := newJob(t, tc.p)
			j.facts.StopOptIn = tc.optIn
			d := j.run(t0, t0+10*3600, 300, fcPlateau)
			if d.Action != tc.want {
				t.Fatalf("action %s, want %s: %s", d.Action, tc.want, d.Reason)
			}
			for _, e := range j.log {
				if tc.want == ActionNone && e.AdvisedAction != ActionNone {
					t.Fatalf("advised %s without opt-in: %s", e.AdvisedAction, e.Reason)
				}
			}
			wantContains(t, d.Reason, tc.reason)
		})
	}
}

func TestDeactivateNever(t *testing.T) {
	low := func(c float64) func(float64) forecast.Forecast {
		return func(now float64) forecast.Forecast {
			return with(fcPlateau(now), func(f *forecast.Forecast) { f.Confidence = c })
		}
	}
	tests := []struct {
		name string
		fc   func(float64) forecast.Forecast
		edit func(*job)
		want Action
	}{
		{"untrusted", func(now float64) forecast.Forecast {
			return with(fcProgressing(now), func(f *forecast.Forecast) { f.Integrity.ProgressWithoutSteps = true })
		}, nil, ActionNone},
		{"warming", low(0.3), nil, ActionNone},
		{"unknown", func(now float64) forecast.Forecast {
			return with(fcPlateau(now), func(f *forecast.Forecast) { f.Reports = 0 })
		}, nil, ActionNone},
		{"confidence just below the stop floor", low(0.6999), nil, ActionNone},
		{"hung below the stop floor yields but is not stopped", func(now float64) forecast.Forecast {
			return with(fcHung(now), func(f *forecast.Forecast) { f.Confidence = 0.3 })
		}, nil, ActionNone},
		{"confidence at the stop floor", low(0.7), nil, ActionDeactivate},
		{"not admitted", fcPlateau, func(j *job) { j.facts.AdmittedAt = nil }, ActionNone},
		{"eviction cooldown", fcPlateau, func(j *job) {
			j.facts.LastPlannerEvictionAt = fp(t0 - 8000)
			j.facts.AdmittedAt = fp(t0 + 9*3600)
		}, ActionNone},
		{"progressing", fcProgressing, nil, ActionNone},
		{"near done", fcNearDone, nil, ActionNone},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			j := newJob(t, stopPolicy())
			if tc.edit != nil {
				tc.edit(j)
			}
			j.run(t0, t0+10*3600, 300, tc.fc)
			if got := j.d.AdvisedAction; got != tc.want {
				t.Fatalf("advised %s, want %s: %s", got, tc.want, j.d.Reason)
			}
		})
	}
}

func TestHungAtLowConfidenceYieldsButIsNotStopped(t *testing.T) {
	j := newJob(t, stopPolicy())
	d := j.run(t0, t0+4*3600, 60, func(now float64) forecast.Forecast {
		return with(fcHung(now), func(f *forecast.Forecast) { f.Confidence = 0.3 })
	})
	if d.Verdict != Hung || d.Boost != -100 || d.Action != ActionNone {
		t.Fatalf("%s", d.Reason)
	}
	wantContains(t, d.Reason, "no stop at confidence 0.30 (stop floor 0.70)")
}

func TestDeactivateGraceRestartsAfterProgress(t *testing.T) {
	j := newJob(t, stopPolicy())
	j.run(t0, t0+5400, 60, fcPlateau)
	j.at(fcProgressing(t0 + 5400))
	if d := j.run(t0+5460, t0+5460+7200, 60, fcPlateau); d.AdvisedAction != ActionNone {
		t.Fatalf("grace did not restart: %s", d.Reason)
	}
	if d := j.at(fcPlateau(t0 + 5460 + 7200)); d.Action != ActionDeactivate {
		t.Fatalf("%s", d.Reason)
	}
}

func TestDeactivateAdvise(t *testing.T) {
	p := stopPolicy()
	p.Mode = ModeAdvise
	j := newJob(t, p)
	d := j.run(t0, t0+7260, 60, fcPlateau)
	if d.Action != ActionNone || d.AdvisedAction != ActionDeactivate || d.GPUHoursSaved == 0 {
		t.Fatalf("%+v", d)
	}
	wantContains(t, d.Reason, "advise mode (global): would apply boost -100 and Deactivate; applying boost 0, no action")
}

// changeTimes lists the times the advised boost changed in a run.
func changeTimes(log []Decision) []float64 {
	var out []float64
	var prev int32
	for _, d := range log {
		if d.AdvisedBoost != prev {
			out = append(out, d.At)
		}
		prev = d.AdvisedBoost
	}
	return out
}

// assertCap checks that no sliding hour holds more than limit changes.
func assertCap(t *testing.T, log []Decision, limit int) {
	t.Helper()
	ts := changeTimes(log)
	for i := range ts {
		n := 0
		for k := 0; k <= i; k++ {
			if ts[k] > ts[i]-rateWindow {
				n++
			}
		}
		if n > limit {
			t.Fatalf("%d boost changes in the hour up to %v (cap %d): %v", n, ts[i], limit, ts)
		}
	}
}

func TestPlateauPastNearDoneProgressDoesNotYield(t *testing.T) {
	at95 := func(now float64) forecast.Forecast {
		f := fcPlateau(now)
		f.Step, f.TotalSteps = fp(9500), fp(10000)
		f.ETA = forecast.Estimate{Known: true, Value: 3 * 3600, Lo: 2 * 3600, Hi: 4 * 3600, Basis: "total-steps"}
		return f
	}
	j := newJob(t, DefaultPolicy())
	d := j.run(t0, t0+3600, 60, at95)
	if d.Verdict != Plateaued || d.Boost != 0 {
		t.Fatalf("plateaued at 95%% yields: %s", d.Reason)
	}
	wantContains(t, d.Reason, "no yield at 95% of its planned steps")
	// Forged or distrusted progress does not buy the exemption.
	forged := func(now float64) forecast.Forecast {
		f := at95(now)
		f.Integrity.Issues = []string{"progress moved 40%→95% while the step counter stood still"}
		return f
	}
	j = newJob(t, DefaultPolicy())
	if d = j.run(t0, t0+3600, 60, forged); d.Boost != -100 {
		t.Fatalf("a plateaued job with implausible progress escaped its yield: %s", d.Reason)
	}
}

// A broken (Diverging, Hung) job past NearDone.EnterProgress is stopped
// rather than preempted where a stop will come; where none will, it yields.
func TestBrokenNearDoneStoppedNotPreempted(t *testing.T) {
	near := func(fc func(float64) forecast.Forecast, conf float64) func(float64) forecast.Forecast {
		return func(now float64) forecast.Forecast {
			return with(fc(now), func(f *forecast.Forecast) { f.Step, f.Confidence = fp(9300), conf })
		}
	}
	tests := []struct {
		name      string
		p         Policy
		fc        func(float64) forecast.Forecast
		wantBoost int32
		want      Action
	}{
		{"diverging, stop enabled", stopPolicy(), near(fcDiverging, 0.8), 0, ActionDeactivate},
		{"NaN below the stop floor, stop enabled: the floor does not apply", stopPolicy(), near(fcNaN, 0.3), 0, ActionDeactivate},
		{"hung, stop enabled", stopPolicy(), near(fcHung, 0.8), 0, ActionDeactivate},
		{"hung below the stop floor: no stop comes, it yields", stopPolicy(), near(fcHung, 0.3), -100, ActionNone},
		{"diverging without stop yields", DefaultPolicy(), near(fcDiverging, 0.8), -100, ActionNone},
		{"hung without stop yields", DefaultPolicy(), near(fcHung, 0.8), -100, ActionNone},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			j := newJob(t, tc.p)
			d := j.run(t0, t0+3*3600, 300, tc.fc)
			if d.AdvisedBoost != tc.wantBoost || d.AdvisedAction != tc.want {
				t.Fatalf("boost %d action %s, want %d %s: %s", d.AdvisedBoost, d.AdvisedAction, tc.wantBoost, tc.want, d.Reason)
			}
			for _, e := range j.log {
				if tc.wantBoost == 0 && e.AdvisedBoost != 0 {
					t.Fatalf("yielded on the way: %s", e.Reason)
				}
			}
		})
	}
}

// Between reports the job keeps stepping: a plateaued job whose last
// report said 88 % but whose step rate puts it past 90 % now does not
// yield; a yielding job's crossing of 90 % is a decision deadline, and the
// yield is lifted there without waiting for the dwell.
func TestYieldEndsAtProjectedNearDone(t *testing.T) {
	at := func(step, lastReport float64) func(float64) forecast.Forecast {
		return func(now float64) forecast.Forecast {
			f := fcPlateau(now)
			f.Step, f.LastReport = fp(step), fp(lastReport)
			f.ETA = forecast.Estimate{Known: true, Value: 3 * 3600, Lo: 2 * 3600, Hi: 4 * 3600, Basis: "total-steps"}
			return f
		}
	}
	// 8,000 steps at t0, 1 step/s, total 10,000: 90 % less one step (counters
	// are whole steps) at t0+999, within the 5m dwell of it from t0+699.
	j := newJob(t, DefaultPolicy())
	d := j.run(t0-3600, t0+1, 60, func(now float64) forecast.Forecast { return at(8000-(t0-now), now)(now) })
	if d.AdvisedBoost != -100 || d.NearDoneAt == nil || *d.NearDoneAt != t0+699 {
		t.Fatalf("want a yield with NearDoneAt t0+699: boost %d %v: %s", d.AdvisedBoost, d.NearDoneAt, d.Reason)
	}
	if next := d.NextChange(j.facts, j.p); next != t0+699 {
		t.Fatalf("NextChange %v, want t0+699 (%v)", next-t0, d.Reason)
	}
	// At the deadline, the latest report 9 s old: projected 87 % now, 90 %
	// within the dwell.
	d = j.at(at(8690, t0+690)(t0 + 699))
	if d.AdvisedBoost != 0 || d.NearDoneAt != nil {
		t.Fatalf("yield not lifted at the projected crossing: %s", d.Reason)
	}
	wantContains(t, d.Reason, "no yield at 87% of its planned steps (90% is reached within the 5m dwell)")
	// A hung job is not projected forward.
	j = newJob(t, stopPolicy())
	d = j.run(t0, t0+3600, 60, func(now float64) forecast.Forecast {
		return with(fcHung(now), func(f *forecast.Forecast) { f.Step, f.LastReport, f.Confidence = fp(8000), fp(now-47*60), 0.3 })
	})
	if d.AdvisedBoost != -100 || d.NearDoneAt != nil {
		t.Fatalf("hung job: boost %d NearDoneAt %v: %s", d.AdvisedBoost, d.NearDoneAt, d.Reason)
	}
}

// A yielding job that becomes NearDone leaves its yield at once; its
// protection still waits for the dwell.
func TestNearDoneLiftsYieldWithoutDwell(t *testing.T) {
	j := newJob(t, DefaultPolicy())
	j.run(t0, t0+3600, 60, func(now float64) forecast.Forecast {
		return with(fcPlateau(now), func(f *forecast.Forecast) { f.Step = fp(8000) })
	})
	if j.d.AdvisedBoost != -100 {
		t.Fatalf("setup: %s", j.d.Reason)
	}
	d := j.at(fcNearDone(t0 + 3600))
	if d.Verdict != NearDone || d.AdvisedBoost != 0 || d.HeldBy != HoldDwell {
		t.Fatalf("want NearDone, boost 0, protection held by the dwell: %d %s: %s", d.AdvisedBoost, d.HeldBy, d.Reason)
	}
	d = j.run(t0+3660, t0+3600+j.p.Stability.MinDwell.Seconds()+60, 60, fcNearDone)
	if d.AdvisedBoost != j.p.Boosts.NearDone {
		t.Fatalf("protection after the dwell: %s", d.Reason)
	}
}

// Silence is measured from a readmission: a job evicted before its last
// report and readmitted recently is not Hung for the time it waited in the
// queue, only once it stays silent past the threshold after the readmission.
func TestHungCountsSilenceFromReadmission(t *testing.T) {
	p := DefaultPolicy()
	now := t0 + 20*3600
	f := fcHungSilent(now, 10*3600, 1800) // the last report came before the eviction
	facts := running()
	facts.AdmittedAt = fp(now - 1200) // readmitted 20 minutes ago, no report since
	if d := Decide(f, facts, Decision{}, p); d.Verdict == Hung {
		t.Errorf("silent 20m since the readmission, threshold 30m: verdict %s (%s)", d.Verdict, d.Reason)
	}
	facts.AdmittedAt = fp(now - 2400) // 40 minutes: past the threshold
	d := Decide(f, facts, Decision{}, p)
	if d.Verdict != Hung {
		t.Errorf("silent 40m since the readmission, threshold 30m: verdict %s (%s)", d.Verdict, d.Reason)
	}
	wantContains(t, d.Reason, "no progress for 40m")
}

// A job that is not running (preempted by someone else and waiting in the
// queue, say) makes no progress and is not silent: however long since its
// last report, it is not Hung while it waits, and the yield a Hung verdict
// brings (-100 once the dwell has passed) does not put it behind all the
// work of its priority. Once readmitted, its silence counts from the
// readmission (TestHungCountsSilenceFromReadmission).
func TestHungNotWhileWaiting(t *testing.T) {
	p := DefaultPolicy()
	now := t0 + 20*3600
	f := fcHungSilent(now, 3*3600, 1800) // its last report came before the preemption
	waiting := running()
	waiting.AdmittedAt, waiting.NotRunning = nil, true
	prev := Decision{}
	for at := now; at <= now+3600; at += 600 { // an hour in the queue, decided every 10 minutes
		f.Now, f.SinceProgress = at, 3*3600+(at-now)
		d := Decide(f, waiting, prev, p)
		if d.Verdict == Hung || d.AdvisedBoost < 0 {
			t.Fatalf("waiting in the queue %v s after 3h without a report: verdict %s, boost %d (%s)", at-now, d.Verdict, d.AdvisedBoost, d.Reason)
		}
		prev = d
	}
	// A job judged Hung while it ran keeps the verdict, and its yield,
	// while it waits (here evicted by that yield): nothing it does while
	// out can refute it.
	judged := running()
	judged.AdmittedAt = nil
	hung := Decide(f, judged, Decision{}, p)
	if hung.Verdict != Hung {
		t.Fatalf("setup: verdict %s (%s)", hung.Verdict, hung.Reason)
	}
	hung.Boost, hung.AdvisedBoost = p.Boosts.Hung, p.Boosts.Hung
	waiting.LastPlannerEvictionAt = fp(f.Now)
	f.Now += 600
	if d := Decide(f, waiting, hung, p); d.Verdict != Hung || d.AdvisedBoost != p.Boosts.Hung {
		t.Errorf("evicted as Hung, waiting 10m: verdict %s, boost %d, want Hung and %d (%s)", d.Verdict, d.AdvisedBoost, p.Boosts.Hung, d.Reason)
	}
	// Facts that do not say (an offline run, no Workload): the silence since
	// the last report counts as before.
	unknown := running()
	unknown.AdmittedAt = nil
	if d := Decide(f, unknown, Decision{}, p); d.Verdict != Hung {
		t.Errorf("running state unknown, silent 4h, threshold 30m: verdict %s (%s)", d.Verdict, d.Reason)
	}
}

// Silence is measured from when the controller last regained sight of the
// cluster too: a job whose last report came before the controller lost
// its watches (an API server outage) is not Hung for the time the
// controller was blind, only once it stays silent past the threshold after
// the controller sees again; while it is still blind (WatchingSince = now)
// not at all.
func TestHungCountsSilenceFromWatchingSince(t *testing.T) {
	p := DefaultPolicy()
	now := t0 + 20*3600
	f := fcHungSilent(now, 3600, 1800)
	facts := running()
	for _, c := range []struct {
		since float64
		hung  bool
	}{{now, false}, {now - 1200, false}, {now - 2400, true}} {
		facts.WatchingSince = fp(c.since)
		if d := Decide(f, facts, Decision{}, p); (d.Verdict == Hung) != c.hung {
			t.Errorf("watching for %v, silent 1h, threshold 30m: verdict %s (%s)", now-c.since, d.Verdict, d.Reason)
		}
	}
}

// A policy whose enter threshold is below the forecaster's own still
// enters Plateaued only on the forecast's call: the forecast's holds (a
// learning rate still falling, a meaningful gain ahead, an anneal or a
// step to come) keep its probability just under its own threshold, 0.79,
// and read from the probability alone such a policy called every held job.
func TestPlateauedOnlyOnTheForecastsCall(t *testing.T) {
	p := DefaultPolicy()
	p.Plateau.EnterProbability = 0.7
	held := with(fcPlateau(t0), func(f *forecast.Forecast) {
		f.PlateauProbability, f.Plateaued = 0.79, false
		f.PlateauReason = "still 2.3% of its value to gain at its recent pace carried to the planned end"
	})
	if d := Decide(held, running(), Decision{}, p); d.Verdict != Progressing {
		t.Errorf("held by the forecast, policy enters at 0.7: verdict %s (%s), want Progressing", d.Verdict, d.Reason)
	}
	called := with(held, func(f *forecast.Forecast) { f.Plateaued = true })
	if d := Decide(called, running(), Decision{}, p); d.Verdict != Plateaued {
		t.Errorf("called by the forecast at 0.79, policy enters at 0.7: verdict %s (%s), want Plateaued", d.Verdict, d.Reason)
	}
}
