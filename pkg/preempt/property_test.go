package preempt

import (
	"math"
	"math/rand/v2"
	"reflect"
	"sync/atomic"
	"testing"
	"time"

	"github.com/progress-planner/planner/pkg/forecast"
)

const (
	sequencesPerThreshold = 1000
	stepsPerSequence      = 45 // 55–135 s apart: 41–101 min per sequence
)

func clamp01(x float64) float64 { return math.Max(0, math.Min(1, x)) }

// randomPolicy draws a valid policy with random bounds, magnitudes, dwell,
// cap, cooldowns, stop settings and mode.
func randomPolicy(r *rand.Rand) Policy {
	p := DefaultPolicy()
	p.Boosts.Min = -int32(1 + r.IntN(1000))
	p.Boosts.Max = int32(1 + r.IntN(1000))
	p.Boosts.Plateaued = -int32(r.IntN(int(-p.Boosts.Min) + 1))
	p.Boosts.Diverging = -int32(r.IntN(int(-p.Boosts.Min) + 1))
	p.Boosts.Hung = -int32(r.IntN(int(-p.Boosts.Min) + 1))
	p.Boosts.NearDone = int32(r.IntN(int(p.Boosts.Max) + 1))
	p.Stability.MinDwell = Dur([]time.Duration{0, time.Minute, 5 * time.Minute}[r.IntN(3)])
	p.Stability.MaxBoostChangesPerHour = 2 + r.IntN(5)
	p.Stability.EvictionCooldown = Dur([]time.Duration{0, 10 * time.Minute, 30 * time.Minute}[r.IntN(3)])
	p.NearDone.LeaseCooldown = Dur([]time.Duration{0, 10 * time.Minute, time.Hour}[r.IntN(3)])
	p.NearDone.LeaseMargin = r.Float64()
	p.Stop.Enabled = r.IntN(3) == 0
	p.Stop.GracePeriod = Dur([]time.Duration{5 * time.Minute, 20 * time.Minute, time.Hour}[r.IntN(3)])
	if r.IntN(4) == 0 {
		p.Mode = ModeAdvise
	}
	if err := p.Validate(); err != nil {
		panic(err)
	}
	return p
}

type noisyGen func(r *rand.Rand, now float64) forecast.Forecast

// thresholdScenarios put the forecast right on a threshold, with noise.
var thresholdScenarios = []struct {
	name string
	gen  noisyGen
}{
	{"plateau enter probability", func(r *rand.Rand, now float64) forecast.Forecast {
		f := fcPlateau(now)
		f.PlateauProbability = clamp01(0.8 + 0.06*r.NormFloat64())
		f.RelativeRemaining = fp(math.Max(0, 0.02+0.006*r.NormFloat64()))
		return f
	}},
	{"plateau exit probability", func(r *rand.Rand, now float64) forecast.Forecast {
		f := fcPlateau(now)
		f.PlateauProbability = clamp01(0.7 + 0.12*r.NormFloat64())
		return f
	}},
	{"plateau relative remaining", func(r *rand.Rand, now float64) forecast.Forecast {
		f := fcPlateau(now)
		f.RelativeRemaining = fp(math.Max(0, 0.035+0.02*r.NormFloat64()))
		return f
	}},
	{"near-done progress", func(r *rand.Rand, now float64) forecast.Forecast {
		f := fcNearDone(now)
		f.Step = fp(10000 * clamp01(0.875+0.04*r.NormFloat64()))
		f.ETA.Hi = math.Max(0, 1500+300*r.NormFloat64())
		return f
	}},
	{"near-done ETA bound", func(r *rand.Rand, now float64) forecast.Forecast {
		f := fcNearDone(now)
		f.ETA.Hi = math.Max(0, 2250+700*r.NormFloat64())
		return f
	}},
	{"confidence floor", func(r *rand.Rand, now float64) forecast.Forecast {
		f := fcPlateau(now)
		if r.IntN(2) == 0 {
			f = fcNearDone(now)
		}
		f.Confidence = clamp01(0.45 + 0.08*r.NormFloat64())
		return f
	}},
	{"hung and diverging flicker", func(r *rand.Rand, now float64) forecast.Forecast {
		switch x := r.Float64(); {
		case x < 0.4:
			return fcNearDone(now)
		case x < 0.6:
			return fcHung(now)
		case x < 0.8:
			return fcDiverging(now)
		case x < 0.9:
			return fcNaN(now)
		default:
			return fcPlateau(now)
		}
	}},
	{"integrity jump ratio", func(r *rand.Rand, now float64) forecast.Forecast {
		f := fcNearDone(now)
		f.Integrity.JumpRatio = fp(math.Abs(10 + 6*r.NormFloat64()))
		return f
	}},
	{"mixed", func(r *rand.Rand, now float64) forecast.Forecast {
		gens := []func(float64) forecast.Forecast{fcProgressing, fcPlateau, fcNearDone, fcHung, fcDiverging, fcNaN}
		f := gens[r.IntN(len(gens))](now)
		f.PlateauProbability = clamp01(f.PlateauProbability + 0.1*r.NormFloat64())
		f.Confidence = clamp01(f.Confidence + 0.15*r.NormFloat64())
		if r.IntN(10) == 0 {
			f.Reports = r.IntN(12)
		}
		return f
	}},
}

// TestPropertyBoundsRateCapAndStop: for 1,000 random noisy forecast sequences
// around each threshold, with random policies and facts, every boost is
// within the bounds, boost changes stay within the per-hour cap in every
// sliding hour, and Deactivate only ever follows opt-in, the grace period,
// a stalled verdict and enough confidence.
func TestPropertyBoundsRateCapAndStop(t *testing.T) {
	var deactivations, capHolds, changes atomic.Int64
	t.Run("thresholds", func(t *testing.T) {
		for si, sc := range thresholdScenarios {
			t.Run(sc.name, func(t *testing.T) {
				t.Parallel()
				r := rand.New(rand.NewPCG(20260101, uint64(si)))
				for seq := 0; seq < sequencesPerThreshold; seq++ {
					p := randomPolicy(r)
					facts := running()
					facts.StopOptIn = r.IntN(2) == 0
					eff := p.Effective(facts.Namespace, facts.ClusterQueue)
					var d Decision
					log := make([]Decision, 0, stepsPerSequence)
					now := t0
					for step := 0; step < stepsPerSequence; step++ {
						now += 55 + 80*r.Float64()
						if sc.name == "mixed" {
							evolveFacts(r, &facts, now)
						}
						f := sc.gen(r, now)
						d = Decide(f, facts, d, p)
						checkDecision(t, p, d)
						if c := Conform(d, facts, p, d.At); !reflect.DeepEqual(c, d) {
							t.Fatalf("Conform changed a decision Decide made:\n got %+v\nwant %+v", c, d)
						}
						if seq%25 == 0 {
							d = roundTrip(t, d)
						}
						if d.AdvisedAction == ActionDeactivate {
							deactivations.Add(1)
							checkDeactivate(t, p, eff, facts, f, d)
						}
						if d.HeldBy == HoldRateCap {
							capHolds.Add(1)
						}
						log = append(log, d)
					}
					assertCap(t, log, p.Stability.MaxBoostChangesPerHour)
					changes.Add(int64(len(changeTimes(log))))
				}
			})
		}
	})
	// The properties must not hold vacuously.
	if deactivations.Load() == 0 || capHolds.Load() == 0 || changes.Load() == 0 {
		t.Fatalf("vacuous run: %d deactivations, %d rate-cap holds, %d boost changes", deactivations.Load(), capHolds.Load(), changes.Load())
	}
	t.Logf("%d deactivations, %d rate-cap holds, %d boost changes", deactivations.Load(), capHolds.Load(), changes.Load())
}

// evolveFacts randomly evicts (by the planner or not) and readmits the job.
func evolveFacts(r *rand.Rand, facts *Facts, now float64) {
	switch x := r.Float64(); {
	case facts.AdmittedAt != nil && x < 0.02:
		facts.AdmittedAt = nil
		facts.Evictions++
		if r.IntN(2) == 0 {
			facts.LastPlannerEvictionAt = fp(now)
		}
	case facts.AdmittedAt == nil && x < 0.2:
		facts.AdmittedAt = fp(now)
	}
}

func checkDeactivate(t *testing.T, p Policy, eff Effective, facts Facts, f forecast.Forecast, d Decision) {
	t.Helper()
	switch {
	case !eff.Stop && !(eff.AllowJobOptIn && facts.StopOptIn):
		t.Fatalf("Deactivate without opt-in: %s", d.Reason)
	case !d.Verdict.Stalled():
		t.Fatalf("Deactivate for %s: %s", d.Verdict, d.Reason)
	case d.StalledSince == nil || d.At-*d.StalledSince < p.Stop.GracePeriod.Seconds():
		t.Fatalf("Deactivate before the grace period %s: %s", p.Stop.GracePeriod, d.Reason)
	case !(f.Confidence >= p.Stop.MinConfidence) && !(d.Verdict == Diverging && f.Diverging && f.NonFinite):
		// (A non-finite objective is observed, not forecast: no floor.)
		t.Fatalf("Deactivate at confidence %.3f below %.2f: %s", f.Confidence, p.Stop.MinConfidence, d.Reason)
	case facts.AdmittedAt == nil:
		t.Fatalf("Deactivate of a job that is not running: %s", d.Reason)
	case d.GPUHoursSaved < 0 || math.IsNaN(d.GPUHoursSaved):
		t.Fatalf("GPU-hours saved %v", d.GPUHoursSaved)
	}
}

// forgery scripts one kind of forged progress. k counts forged reports from
// 0; st carries the forger's counter between reports.
type forgery struct {
	name string
	// forge edits an honest-looking forecast at 80 % into the forged one.
	forge func(r *rand.Rand, k int, dt float64, st *forgerState, f *forecast.Forecast)
	// flagged: the forgery is visible in the integrity evidence, so the
	// verdict right after it must be Untrusted (else: only "not NearDone").
	flagged bool
}

type forgerState struct {
	step    float64
	variant int
}

var forgeries = []forgery{
	{name: "instant jump to 99%", flagged: true, forge: func(r *rand.Rand, k int, dt float64, st *forgerState, f *forecast.Forecast) {
		// One report jumps the counter to 99 %; afterwards it creeps on
		// at a normal-looking rate and the integrity evidence is clean.
		if k == 0 {
			st.step = 9900
			ratio := 50 + 1000*r.Float64()
			switch st.variant % 3 {
			case 0: // the planner's ratio only
				f.Integrity.JumpRatio = fp(ratio)
			case 1: // the planner's finding only
				f.Integrity.Issues = []string{"progress jumped 81 points in one report"}
			default: // both
				f.Integrity.JumpRatio = fp(ratio)
				f.Integrity.Issues = []string{"progress jumped 81 points in one report"}
			}
		} else {
			st.step = math.Min(st.step+0.05*dt, 9990)
			f.Integrity.JumpRatio = fp(0.8 + 0.4*r.Float64())
		}
		setCounter(f, st.step, 0.05+0.01*r.NormFloat64())
	}},
	{name: "progress without step movement", flagged: true, forge: func(r *rand.Rand, k int, dt float64, st *forgerState, f *forecast.Forecast) {
		// The reported percentage climbs to 99 % while the counter is
		// frozen at 80 % (or absent).
		reported := math.Min(0.99, 0.8+0.05*float64(k+1))
		if st.variant%2 == 0 {
			f.Step, f.TotalSteps, f.StepRate = nil, nil, nil
		} else {
			f.StepRate = fp(0)
			f.Integrity.ReportedProgressGap = fp(reported - 0.8)
		}
		f.Progress = fp(reported)
		f.ETA = forecast.Estimate{Known: true, Value: 300, Lo: 200, Hi: 400, Basis: "reported"}
		f.Integrity.ProgressWithoutSteps = true
	}},
	{name: "step rate 100x its history", flagged: true, forge: func(r *rand.Rand, k int, dt float64, st *forgerState, f *forecast.Forecast) {
		// The counter races at ~100× its historical rate to 99.5 %, then
		// ticks on at the normal rate with clean integrity evidence.
		if st.step < 9950 {
			st.step = math.Min(st.step+100*dt*(1+0.1*r.NormFloat64()), 9950)
			f.Integrity.JumpRatio = fp(100 * (1 + 0.1*r.NormFloat64()))
			setCounter(f, st.step, 100)
		} else {
			st.step = math.Min(st.step+dt, 9999)
			f.Integrity.JumpRatio = fp(1)
			setCounter(f, st.step, 1)
		}
	}},
	{name: "ETA that never shrinks", flagged: true, forge: func(r *rand.Rand, k int, dt float64, st *forgerState, f *forecast.Forecast) {
		// The job keeps claiming 10 minutes left; its counter (honest)
		// advances into the near-done range.
		st.step = math.Min(st.step+dt, 9990)
		setCounter(f, st.step, 1)
		f.ReportedETA = fp(600)
		f.Integrity.ETANotShrinking = true
		if st.variant%2 == 0 && f.ETA.Value > 0 {
			f.Integrity.ETARatio = fp(600 / f.ETA.Value)
		}
	}},
}

// setCounter makes the forecast's counter-derived fields consistent with a
// counter at step moving at rate steps/s.
func setCounter(f *forecast.Forecast, step, rate float64) {
	rate = math.Max(rate, 1e-3)
	total := *f.TotalSteps
	f.Step, f.Progress, f.StepRate = fp(step), fp(step/total), fp(rate)
	eta := (total - step) / rate
	f.ETA = forecast.Estimate{Known: true, Value: eta, Lo: 0.9 * eta, Hi: 1.2 * eta, Basis: "total-steps"}
}

// TestPropertyNoProtectionFromForgedProgress: scripted forgeries with random
// noise and random (valid) policies never yield a positive boost.
func TestPropertyNoProtectionFromForgedProgress(t *testing.T) {
	for fi, fg := range forgeries {
		t.Run(fg.name, func(t *testing.T) {
			t.Parallel()
			r := rand.New(rand.NewPCG(7, uint64(fi)))
			for run := 0; run < 250; run++ {
				p := randomPolicy(r)
				p.Boosts.NearDone = p.Boosts.Max // protection is worth having
				p.Integrity.DistrustFor = Dur(time.Duration(6+r.IntN(42)) * time.Hour)
				facts := running()
				var d Decision
				now := t0
				// Honest prefix: 50 % → 80 % at one step per second.
				for k := 0; k < 20; k++ {
					now += 60
					f := fcProgressing(now)
					setCounter(&f, 5000+150*float64(k), 1)
					d = Decide(f, facts, d, p)
				}
				st := &forgerState{step: 8000, variant: run}
				for k := 0; k < stepsPerSequence; k++ {
					dt := 40 + 80*r.Float64()
					now += dt
					f := fcProgressing(now)
					setCounter(&f, st.step, 1)
					f.PlateauProbability = clamp01(0.2 + 0.1*r.NormFloat64())
					f.Confidence = clamp01(0.85 + 0.05*r.NormFloat64())
					fg.forge(r, k, dt, st, &f)
					d = Decide(f, facts, d, p)
					checkDecision(t, p, d)
					if d.AdvisedBoost > 0 || d.Boost > 0 || d.ProtectedUntil != nil {
						t.Fatalf("run %d report %d: protection from forged progress: %s", run, k, d.Reason)
					}
					if d.Verdict == NearDone {
						t.Fatalf("run %d report %d: NearDone from forged progress: %s", run, k, d.Reason)
					}
					if k == 0 && fg.flagged && d.Verdict != Untrusted {
						t.Fatalf("run %d: forged report judged %s, want Untrusted: %s", run, d.Verdict, d.Reason)
					}
				}
				if d.Verdict != Untrusted {
					t.Fatalf("run %d: final verdict %s, want Untrusted: %s", run, d.Verdict, d.Reason)
				}
			}
		})
	}
}

// TestForgeriesWouldOtherwiseBeProtected makes sure the forgery scripts are
// not trivially harmless: the same final forecasts without integrity
// evidence and without distrust are judged NearDone and protected.
func TestForgeriesWouldOtherwiseBeProtected(t *testing.T) {
	for _, fg := range []string{"instant jump to 99%", "step rate 100x its history", "ETA that never shrinks"} {
		t.Run(fg, func(t *testing.T) {
			var g forgery
			for _, x := range forgeries {
				if x.name == fg {
					g = x
				}
			}
			r := rand.New(rand.NewPCG(1, 1))
			p := DefaultPolicy()
			p.Stability.MinDwell = Dur(0)
			st := &forgerState{step: 8000, variant: 1}
			var f forecast.Forecast
			now := t0
			for k := 0; k < stepsPerSequence; k++ {
				now += 60
				f = fcProgressing(now)
				setCounter(&f, st.step, 1)
				g.forge(r, k, 60, st, &f)
			}
			f.Integrity = forecast.Integrity{}
			d := Decide(f, running(), Decision{}, p)
			if d.Verdict != NearDone || d.Boost <= 0 {
				t.Fatalf("clean copy of the forged forecast: %s", d.Reason)
			}
		})
	}
}
