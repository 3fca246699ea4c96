package forecast

import (
	"math"
	"strconv"
	"strings"
	"testing"

	"github.com/progress-planner/planner/pkg/progress"
)

// scheduled builds a history of n reports, 10 s apart, 10 steps each, of a
// job with a fixed total of 10*n steps: metric values come from vals(step).
func scheduled(n int, vals func(step float64) map[string]float64) *progress.History {
	return scheduledFrom(n, 0, vals)
}

// scheduledFrom is scheduled as the planner sees a job it first saw at
// step from: no report before it.
func scheduledFrom(n int, from float64, vals func(step float64) map[string]float64) *progress.History {
	h := progress.NewHistory(progress.DefaultLimits())
	total := float64(10 * n)
	for i := 0; i <= n; i++ {
		step := float64(10 * i)
		if step < from {
			continue
		}
		ms := []string{"current_step", strconv.FormatFloat(step, 'f', -1, 64), "total_steps", strconv.FormatFloat(total, 'f', -1, 64)}
		for name, v := range vals(step) {
			ms = append(ms, name, strconv.FormatFloat(v, 'g', 6, 64))
		}
		h.Observe(float64(10*i), progress.TrainerStatus{ProgressPercentage: f64(math.Floor(100 * step / total)), Metrics: metrics(ms...)})
	}
	return h
}

func fitAt(h *progress.History, obj progress.Objective, now float64, s Settings) Forecast {
	return Fit(h, obj, now, s)
}

// A job flat in loss mid-run while its reported learning rate still falls
// toward the end of its budget is annealing, not plateaued; the same flat
// loss under a constant learning rate is.
func TestPlateauLearningRateStillFalling(t *testing.T) {
	const n = 400
	loss := func(step float64) float64 { return 2 + 3/(1+math.Min(step, 1200)/100) }
	decaying := scheduled(n, func(step float64) map[string]float64 {
		return map[string]float64{"loss": loss(step), "learning_rate": 1e-3 * (1 - step/(10*n))}
	})
	constant := scheduled(n, func(step float64) map[string]float64 {
		return map[string]float64{"loss": loss(step), "learning_rate": 1e-3}
	})
	now := 0.7 * 10 * n
	if f := fitAt(decaying, lossMin, now, DefaultSettings()); f.Plateaued || !strings.Contains(f.PlateauReason, "learning rate still falling") {
		t.Errorf("annealing job: plateaued=%v reason %q", f.Plateaued, f.PlateauReason)
	}
	if f := fitAt(constant, lossMin, now, DefaultSettings()); !f.Plateaued {
		t.Errorf("flat loss under a constant learning rate not plateaued: %q (p=%.2f)", f.PlateauReason, f.PlateauProbability)
	}
}

// A warm-up counted in iterations spans many epochs of a small dataset (an
// Ultralytics YOLO run warms up for at least 100 iterations): a job flat
// while its reported learning rate still rises has its whole decay ahead
// and is not plateaued, however long the flat stretch; once the rate stands
// still at its peak, the same stretch is.
func TestPlateauLearningRateStillWarmingUp(t *testing.T) {
	const n = 400
	loss := func(step float64) float64 { return 2 + 3/(1+math.Min(step, 1200)/100) }
	warming := scheduled(n, func(step float64) map[string]float64 {
		return map[string]float64{"loss": loss(step), "learning_rate": 1e-3 * math.Min(1, step/3000)}
	})
	peaked := scheduled(n, func(step float64) map[string]float64 {
		return map[string]float64{"loss": loss(step), "learning_rate": 1e-3 * math.Min(1, step/1000)}
	})
	now := 0.6 * 10 * n // flat since step 1,200: 30 % of the planned run
	if f := fitAt(warming, lossMin, now, DefaultSettings()); f.Plateaued || !strings.Contains(f.PlateauReason, "still warming up") {
		t.Errorf("warming-up job: plateaued=%v reason %q", f.Plateaued, f.PlateauReason)
	}
	if f := fitAt(peaked, lossMin, now, DefaultSettings()); !f.Plateaued {
		t.Errorf("flat loss at a constant peak learning rate not plateaued: %q (p=%.2f)", f.PlateauReason, f.PlateauProbability)
	}
}

// targetStopWithRate is a job with no fixed total, 301 reports 10 s and
// 10 steps apart, whose loss falls until step 1,200 and is flat after it,
// reporting the learning rate lr(step).
func targetStopWithRate(lr func(step float64) float64) *progress.History {
	h := progress.NewHistory(progress.DefaultLimits())
	for i := 0; i <= 300; i++ {
		step := float64(10 * i)
		loss := 2 + 3/(1+math.Min(step, 1200)/100)
		h.Observe(float64(10*i), progress.TrainerStatus{Metrics: metrics("current_step", strconv.FormatFloat(step, 'f', -1, 64),
			"loss", strconv.FormatFloat(loss, 'g', 6, 64), "learning_rate", strconv.FormatFloat(lr(step), 'g', 6, 64))})
	}
	return h
}

// A job that stops at its target has no fixed total, but a reported
// learning rate still moving says the same of it: its schedule is not
// done. Flat short of its target under a falling rate it is held; under a
// constant rate the same flat stretch is a plateau, though the line
// through its last new values crossed the target long ago (a crossing
// overdue is no target in reach).
func TestPlateauTargetStopLearningRateFalling(t *testing.T) {
	target := 2.0
	obj := progress.Objective{Metric: "loss", Direction: progress.Minimize, Target: &target}
	falling := targetStopWithRate(func(step float64) float64 { return 1e-3 * (1 - step/8000) })
	if f := fitAt(falling, obj, 3000, DefaultSettings()); f.Plateaued || !strings.Contains(f.PlateauReason, "learning rate still falling") {
		t.Errorf("target-stopped job with a falling rate: plateaued=%v reason %q", f.Plateaued, f.PlateauReason)
	}
	constant := targetStopWithRate(func(float64) float64 { return 1e-3 })
	if f := fitAt(constant, obj, 3000, DefaultSettings()); !f.Plateaued {
		t.Errorf("target-stopped job flat at a constant rate not plateaued: %q (p=%.2f)", f.PlateauReason, f.PlateauProbability)
	}
}

// A language-model-like run: a huge first drop, then a slow steady gain of
// about 6 % of its value over the rest of its budget. Measured as a share
// of its gain so far the rest is nothing; measured against its own value it
// is what the job exists for.
func TestPlateauMeaningfulGainAhead(t *testing.T) {
	const n = 400
	h := scheduled(n, func(step float64) map[string]float64 {
		return map[string]float64{"loss": 3.3 + 7/(1+step/20) + 0.2*(1-step/(10*n))}
	})
	now := 0.5 * 10 * n
	f := fitAt(h, lossMin, now, DefaultSettings())
	if f.Plateaued || !strings.Contains(f.PlateauReason, "of its value to gain") {
		t.Errorf("steady 6%% gain ahead: plateaued=%v reason %q", f.Plateaued, f.PlateauReason)
	}
	// The anneal rule's hold (a fixed budget, no learning rate) is off too:
	// it also holds this job, for a quarter of its budget.
	off := DefaultSettings()
	off.MinImprovement, off.PlateauAnnealShare = 0, 0
	if g := fitAt(h, lossMin, now, off); !g.Plateaued {
		t.Errorf("without MinImprovement the share-of-gains rules should call it (that is what the rule guards against): %q", g.PlateauReason)
	}
}

// Eval loss rising while the training loss still falls is a stop signal,
// even for a job with a fixed total and a falling learning rate.
func TestPlateauOverfitting(t *testing.T) {
	const n = 300
	h := scheduled(n, func(step float64) map[string]float64 {
		ev := 1 + 2/(1+step/100)
		if step > 1500 {
			ev = 1 + 2/(1+1500.0/100) + 0.001*(step-1500)
		}
		ms := map[string]float64{"eval_loss": ev, "learning_rate": 1e-3 * (1 - step/(10*n))}
		if step > 400 { // the trainer logs its loss only from step 400 on
			ms["loss"] = 0.5 + 2/(1+step/100)
		}
		return ms
	})
	evalMin := progress.Objective{Metric: "eval_loss", Direction: progress.Minimize}
	f := fitAt(h, evalMin, 0.8*10*n, DefaultSettings())
	if !f.Plateaued || !strings.HasPrefix(f.PlateauReason, "overfitting") {
		t.Errorf("overfitting not called: plateaued=%v reason %q", f.Plateaued, f.PlateauReason)
	}
	if f.Diverging {
		t.Errorf("overfitting flagged as divergence: %s", f.DivergenceReason)
	}
	// The same eval loss beside a training loss that only wobbles (±0.02
	// each log, drifting down 2 % between the eval's best and now): a
	// fall within its own noise is no evidence of overfitting.
	wobbly := scheduled(n, func(step float64) map[string]float64 {
		ev := 1 + 2/(1+math.Min(step, 1500)/100) + 0.001*math.Max(0, step-1500)
		wobble := 0.02
		if int(step/10)%2 == 1 {
			wobble = -0.02
		}
		return map[string]float64{"eval_loss": ev, "loss": 0.93 - 0.00002*step + wobble, "learning_rate": 1e-3 * (1 - step/(10*n))}
	})
	if g := fitAt(wobbly, evalMin, 0.8*10*n, DefaultSettings()); strings.HasPrefix(g.PlateauReason, "overfitting") {
		t.Errorf("a training loss within its noise called overfitting: %q", g.PlateauReason)
	}
}

// With a fixed total and no learning rate reported, a flat stretch shorter
// than PlateauAnnealShare of the planned run is not yet a plateau; a longer
// one is. A fifth of the run is still short: a step schedule's first stage
// (a third of the run in ImageNet's 30/60/90) is flat that long before its
// first step (docs/backtest.md 7.37).
func TestPlateauShortFlatBeforeAnneal(t *testing.T) {
	const n = 400 // 4000 steps, 10 s per 10 steps
	flatFrom := func(x float64) *progress.History {
		return scheduled(n, func(step float64) map[string]float64 {
			return map[string]float64{"loss": 2 + 3*math.Exp(-math.Min(step, x)/700) + 0.001*math.Sin(step)}
		})
	}
	s := DefaultSettings()
	short := flatFrom(2000) // flat for 10 % of the budget at 60 %
	if f := fitAt(short, lossMin, 2400, s); f.Plateaued || !strings.Contains(f.PlateauReason, "annealing may still come") {
		t.Errorf("flat for 10%% of the budget: plateaued=%v reason %q", f.Plateaued, f.PlateauReason)
	}
	fifth := flatFrom(1600) // flat for 20 % of the budget at 60 %
	if f := fitAt(fifth, lossMin, 2400, s); f.Plateaued || !strings.Contains(f.PlateauReason, "annealing may still come") {
		t.Errorf("flat for 20%% of the budget: plateaued=%v reason %q", f.Plateaued, f.PlateauReason)
	}
	long := flatFrom(1200) // flat for 30 % of the budget at 60 %
	if f := fitAt(long, lossMin, 2400, s); !f.Plateaued {
		t.Errorf("flat for 30%% of the budget not plateaued: %q", f.PlateauReason)
	}
}

// A fixed-budget job whose reported learning rate has not annealed yet
// (held at its peak in a warm-up-stable-decay run's stable phase, or
// decaying too slowly to count as falling over the stall window) has its
// decay, or the rest of it, still ahead: as for a job that reports no
// rate, a flat stretch shorter than PlateauAnnealShare of the budget is
// not yet a plateau. A longer one is, and so is a short one once the rate
// has annealed to 2 % of its peak.
func TestPlateauLearningRateNotYetAnnealed(t *testing.T) {
	const n = 400 // 4000 steps, 10 s per 10 steps
	run := func(flatFrom float64, lr func(step float64) float64) *progress.History {
		return scheduled(n, func(step float64) map[string]float64 {
			return map[string]float64{
				"loss":          2 + 3*math.Exp(-math.Min(step, flatFrom)/700) + 0.001*math.Sin(step),
				"learning_rate": lr(step),
			}
		})
	}
	wsd := func(step float64) float64 { return 1e-3 * math.Min(1, (4000-step)/800) }
	slow := func(step float64) float64 { return 1e-3 * (1 - step/40000) }
	annealed := func(step float64) float64 { return 1e-3 * math.Max(0.01, 1-step/1500) }
	s := DefaultSettings()
	for _, c := range []struct {
		name      string
		h         *progress.History
		plateaued bool
	}{
		{"stable phase, flat for 10% of the budget", run(2000, wsd), false},
		{"slow decay, flat for 10% of the budget", run(2000, slow), false},
		{"stable phase, flat for 30% of the budget", run(1200, wsd), true},
		{"annealed to 1% of its peak, flat for 10% of the budget", run(2000, annealed), true},
	} {
		f := fitAt(c.h, lossMin, 2400, s)
		if f.Plateaued != c.plateaued {
			t.Errorf("%s: plateaued=%v, want %v (%q)", c.name, f.Plateaued, c.plateaued, f.PlateauReason)
		}
		if !c.plateaued && !strings.Contains(f.PlateauReason, "learning rate not yet annealed") {
			t.Errorf("%s: held by %q, want the anneal rule", c.name, f.PlateauReason)
		}
	}
}

// A warm-up-stable-decay run flat for most of its stable phase is called
// plateaued there (rule 6 holds it only for a quarter of the run); once
// its cool-down begins, the learning rate moving holds the call back and
// releases it (PlateauRelease), so a policy does not keep the job
// Plateaued through the stretch that makes its last gain. Only a rate
// that stood at its peak and then moves releases: one moving all along does
// not, nor does a hold that doubts a call not yet made.
func TestPlateauCoolDownReleases(t *testing.T) {
	const n = 400 // 4,000 steps, 10 s per 10 steps; decay from step 3,200
	h := scheduled(n, func(step float64) map[string]float64 {
		return map[string]float64{
			"loss":          2 + 3*math.Exp(-math.Min(step, 1200)/700) - 0.06*math.Max(0, step-3200)/800 + 0.001*math.Sin(step),
			"learning_rate": 1e-3 * math.Min(1, (4000-step)/800),
		}
	})
	s := DefaultSettings()
	if f := fitAt(h, lossMin, 2400, s); !f.Plateaued || f.PlateauRelease != "" {
		t.Errorf("stable phase, flat for 30%% of the budget: plateaued=%v release=%q (%q)", f.Plateaued, f.PlateauRelease, f.PlateauReason)
	}
	f := fitAt(h, lossMin, 3400, s)
	if f.Plateaued || !strings.Contains(f.PlateauRelease, "its learning rate stood at its peak 0.001") || !strings.Contains(f.PlateauReason, "learning rate still falling") {
		t.Errorf("cool-down begun: plateaued=%v release=%q (%q)", f.Plateaued, f.PlateauRelease, f.PlateauReason)
	}
	// A rate that was falling all along holds the same flat stretch but
	// releases nothing: the call it holds back was never made under a
	// standing rate, and one made under it (overfitting) keeps its
	// hysteresis.
	linear := scheduled(n, func(step float64) map[string]float64 {
		return map[string]float64{"loss": 2 + 3*math.Exp(-math.Min(step, 1200)/700) + 0.001*math.Sin(step), "learning_rate": 1e-3 * (1 - step/4000)}
	})
	if f := fitAt(linear, lossMin, 3400, s); f.Plateaued || f.PlateauRelease != "" || !strings.Contains(f.PlateauReason, "learning rate still falling") {
		t.Errorf("linear decay: plateaued=%v release=%q (%q)", f.Plateaued, f.PlateauRelease, f.PlateauReason)
	}
	// A rate that left its peak long ago (a first step at 1,000) and then
	// stood still releases nothing when it moves again: a rate logged too
	// coarsely to show a steady decay in every window looks the same.
	second := scheduled(n, func(step float64) map[string]float64 {
		lr := 1e-3 * math.Min(1, (4000-step)/800)
		if step >= 1000 {
			lr = math.Min(lr, 5e-4)
		}
		return map[string]float64{"loss": 2 + 3*math.Exp(-math.Min(step, 1200)/700) + 0.001*math.Sin(step), "learning_rate": lr}
	})
	if f := fitAt(second, lossMin, 3700, s); f.Plateaued || f.PlateauRelease != "" || !strings.Contains(f.PlateauReason, "learning rate still falling") {
		t.Errorf("a later move below the peak: plateaued=%v release=%q (%q)", f.Plateaued, f.PlateauRelease, f.PlateauReason)
	}
	// The same run without a learning rate: the anneal hold may keep the
	// call back, but it releases nothing.
	bare := scheduled(n, func(step float64) map[string]float64 {
		return map[string]float64{"loss": 2 + 3*math.Exp(-math.Min(step, 1200)/700) - 0.06*math.Max(0, step-3200)/800 + 0.001*math.Sin(step)}
	})
	if f := fitAt(bare, lossMin, 3400, s); f.PlateauRelease != "" {
		t.Errorf("no learning rate reported: release=%q (%q)", f.PlateauRelease, f.PlateauReason)
	}
}

// A step schedule (a loss that drops in one evaluation at a third of the
// run, flat before and after) holds the plateau call for as long as the
// job's own step period; past it, a flat job is plateaued. With a fixed
// total the period runs from the start of the run, where the schedule
// starts, not from the first evaluation: evaluated every 150 steps, the
// first at 150 and the step seen at 1,050, the period is 1,050 steps (900
// from the first evaluation), so the job is held at step 2,000.
func TestPlateauStepScheduleAhead(t *testing.T) {
	const n = 300 // 3000 steps, 10 s per 10 steps
	for _, c := range []struct {
		name               string
		every, held, after float64 // evaluation interval; held at, plateaued at (steps)
	}{
		{"every report", 10, 1800, 2400},
		{"an evaluation every 150 steps", 150, 2000, 2200},
	} {
		h := scheduled(n, func(step float64) map[string]float64 {
			if step == 0 || math.Mod(step, c.every) != 0 {
				return nil
			}
			l := 3 + 2*math.Exp(-step/150) + 0.002*math.Sin(step)
			if step >= 1000 {
				l -= 0.8 // the learning-rate step
			}
			return map[string]float64{"loss": l}
		})
		s := DefaultSettings()
		if f := fitAt(h, lossMin, c.held, s); f.Plateaued || !strings.HasPrefix(f.PlateauReason, "step schedule") {
			t.Errorf("%s, at step %v: within the step period: plateaued=%v reason %q", c.name, c.held, f.Plateaued, f.PlateauReason)
		}
		if f := fitAt(h, lossMin, c.after, s); !f.Plateaued {
			t.Errorf("%s, at step %v: past the step period: not plateaued: %q", c.name, c.after, f.PlateauReason)
		}
	}
}

// A jump that is not the schedule's (a level shift at step 400, early in
// the first stage) splits the first stage in two: measured as the longest
// gap between jumps, the period was 600 steps and the job, flat since its
// real step at 1,000, was called plateaued at 1,800, before a second step
// at 2,000 could come. Measured from the start to the last jump, a jump
// found only lengthens the hold: held until 2,000, plateaued after.
func TestPlateauStepScheduleSpuriousJump(t *testing.T) {
	h := scheduled(300, func(step float64) map[string]float64 {
		if step == 0 || math.Mod(step, 10) != 0 {
			return nil
		}
		l := 3 + 2*math.Exp(-step/150) + 0.002*math.Sin(step)
		if step >= 400 {
			l -= 0.4 // not a learning-rate step, but as large as one
		}
		if step >= 1000 {
			l -= 0.8 // the learning-rate step
		}
		return map[string]float64{"loss": l}
	})
	s := DefaultSettings()
	if f := fitAt(h, lossMin, 1800, s); f.Plateaued || !strings.HasPrefix(f.PlateauReason, "step schedule: its history shows 2 jump(s)") {
		t.Errorf("at step 1800, flat for less than the run before its last jump: plateaued=%v reason %q", f.Plateaued, f.PlateauReason)
	}
	if f := fitAt(h, lossMin, 2200, s); !f.Plateaued {
		t.Errorf("at step 2200, flat for longer than the run before its last jump: not plateaued: %q", f.PlateauReason)
	}
}

// A job the planner first saw mid-run (installed on a running cluster)
// has no report of how its schedule began. Evaluated every 150 steps with
// steps at 1,000 and 2,000 of 3,000 and first seen at step 800, its first
// step shows at its second evaluation, too early for a jump to be looked
// for, so the step rule found nothing and the anneal rule, a quarter of
// the run, let it be called plateaued at step 1,950, just before its
// second step. Its flat stretch may have begun with a step: it is held
// for as long as the run before that stretch. Seen from its start, the
// same job is held by the jump it shows. A job whose first report comes
// one report interval into its run (one epoch of ten), or whose first
// reports within a tenth of its run were not seen, was seen whole.
func TestPlateauStepScheduleFirstSeenMidRun(t *testing.T) {
	vals := func(step float64) map[string]float64 {
		if step == 0 || math.Mod(step, 150) != 0 {
			return nil
		}
		l := 3 + 2*math.Exp(-step/150) + 0.002*math.Sin(step)
		if step >= 1000 {
			l -= 0.8
		}
		if step >= 2000 {
			l -= 0.4
		}
		return map[string]float64{"loss": l}
	}
	s := DefaultSettings()
	if f := fitAt(scheduledFrom(300, 800, vals), lossMin, 1950, s); f.Plateaued || !strings.HasPrefix(f.PlateauReason, "first seen 27% into the planned run") {
		t.Errorf("first seen at step 800, at step 1950: plateaued=%v reason %q", f.Plateaued, f.PlateauReason)
	}
	if f := fitAt(scheduled(300, vals), lossMin, 1950, s); f.Plateaued || !strings.HasPrefix(f.PlateauReason, "step schedule: its history shows 1 jump(s)") {
		t.Errorf("seen from its start, at step 1950: plateaued=%v reason %q", f.Plateaued, f.PlateauReason)
	}
	epochly := progress.NewHistory(progress.DefaultLimits())
	for step := 300.0; step <= 3000; step += 300 {
		epochly.Observe(step/10, progress.TrainerStatus{Metrics: metrics("current_step", strconv.FormatFloat(step, 'f', -1, 64), "total_steps", "3000", "loss", "3")})
	}
	for _, c := range []struct {
		name  string
		h     *progress.History
		first float64 // NaN: seen whole
	}{
		{"first seen at step 800, a report every 10 steps", scheduledFrom(300, 800, vals), 800},
		{"a report every 10 steps from step 0", scheduled(300, vals), math.NaN()},
		{"a report every 10 steps from step 150: the first reports coalesced", scheduledFrom(300, 150, vals), math.NaN()},
		{"a report every 300 steps from step 300", epochly, math.NaN()},
	} {
		got := unseenHeadAt(c.h, 3000, 3000, true)
		if math.IsNaN(c.first) != math.IsNaN(got) || (!math.IsNaN(got) && got != c.first) {
			t.Errorf("%s: unseenHeadAt %v, want %v", c.name, got, c.first)
		}
	}
}

// A job that stops at its target (no total), approaching it slowly, with
// its last two evaluations just below its best: the stall rule alone
// calls that a plateau. Its own forecast reaches the target sooner than it
// has run so far, so it is held; with a target out of reach, or already
// reached, it is plateaued.
func TestPlateauTargetInReach(t *testing.T) {
	h := progress.NewHistory(progress.DefaultLimits())
	best := 0.0
	for i := 1; i <= 13; i++ { // an evaluation every 40 s
		acc := 0.722 - 0.045/math.Pow(float64(i), 1.2)
		if i >= 12 {
			acc = best - 0.0003*float64(i-11)
		}
		best = math.Max(best, acc)
		h.Observe(40*float64(i), progress.TrainerStatus{Metrics: metrics(
			"accuracy", strconv.FormatFloat(acc, 'g', 6, 64), "epoch", strconv.FormatFloat(0.05*float64(i), 'g', 6, 64))})
	}
	s := DefaultSettings()
	for _, c := range []struct {
		target    float64
		plateaued bool
	}{
		{0.72, false}, // 0.0005 to go at the recent pace
		{0.75, true},  // beyond what the curve reaches
		{0.70, true},  // reached and overrun: the job should have stopped
	} {
		f := fitAt(h, progress.Objective{Metric: "accuracy", Direction: progress.Maximize, Target: f64(c.target)}, 520, s)
		if f.Plateaued != c.plateaued {
			t.Errorf("target %v: plateaued=%v, want %v (%q)", c.target, f.Plateaued, c.plateaued, f.PlateauReason)
		}
		if !c.plateaued && !strings.Contains(f.PlateauReason, "its target in") {
			t.Errorf("target %v: held by %q, want the target rule", c.target, f.PlateauReason)
		}
	}
}

// A job that stops at its target, past a steep start and creeping up by
// 0.0005 an evaluation: short of its target the creep is a meaningful gain
// ahead; past its target it is not (what the job asked for is done), and
// the stall calls it plateaued.
func TestPlateauTargetMetNoMeaningfulGain(t *testing.T) {
	h := progress.NewHistory(progress.DefaultLimits())
	for i := 1; i <= 16; i++ { // an evaluation every 20 s
		acc := 0.70 - 0.3*math.Exp(-float64(i)/1.5) + 0.0005*float64(i)
		h.Observe(20*float64(i), progress.TrainerStatus{Metrics: metrics(
			"accuracy", strconv.FormatFloat(acc, 'g', 6, 64), "samples_count", strconv.Itoa(150000*i))})
	}
	s := DefaultSettings()
	short := fitAt(h, progress.Objective{Metric: "accuracy", Direction: progress.Maximize, Target: f64(0.715)}, 320, s)
	if short.Plateaued || !strings.HasPrefix(short.PlateauReason, "still") {
		t.Errorf("short of its target: plateaued=%v (%q), want held by the meaningful gain ahead", short.Plateaued, short.PlateauReason)
	}
	met := fitAt(h, progress.Objective{Metric: "accuracy", Direction: progress.Maximize, Target: f64(0.70)}, 320, s)
	if !met.Plateaued {
		t.Errorf("past its target: not plateaued (%q)", met.PlateauReason)
	}
}

// targetStopped builds a job that stops at its target (no total): one
// evaluation of accuracy every dt seconds, a sample counter beside it.
func targetStopped(vals []float64, dt float64) *progress.History {
	h := progress.NewHistory(progress.DefaultLimits())
	for i, v := range vals {
		h.Observe(dt*float64(i+1), progress.TrainerStatus{Metrics: metrics(
			"accuracy", strconv.FormatFloat(v, 'f', -1, 64), "samples", strconv.Itoa(1000*(i+1)))})
	}
	return h
}

// A job that stops at its target, three readings short of it and
// creeping up by about 0.001 a reading: its line reaches the target in
// 7m12s, later than the 6m36s it has run, but the fast end of that
// forecast's interval (2m35s) is sooner. Called short of its target it
// loses the whole run, so it is held (the stall rule called it when
// targetInReach read the forecast alone).
func TestPlateauTargetStopSlowApproachHeld(t *testing.T) {
	h := targetStopped([]float64{0.38, 0.40, 0.47, 0.63, 0.70, 0.708, 0.711, 0.713, 0.7142, 0.7160, 0.7163, 0.7170}, 36)
	obj := progress.Objective{Metric: "accuracy", Direction: progress.Maximize, Target: f64(0.72)}
	f := fitAt(h, obj, 12*36, DefaultSettings())
	if f.Plateaued || !strings.HasPrefix(f.PlateauReason, "may reach its target in 2m35s (forecast 7m12s") {
		t.Errorf("slow approach to the target: plateaued=%v reason %q", f.Plateaued, f.PlateauReason)
	}
}

// A job that stops at its target, flat far short of it (an ImageNet run
// between its learning-rate steps): its last readings scatter by 0.02, so
// the fast end of its recent pace's band still reaches 1 % of its value,
// and it is held. The same job flat to the third decimal for as long has
// a narrow band over its whole flat stretch and is plateaued.
func TestPlateauTargetStopNoisyFlatHeld(t *testing.T) {
	obj := progress.Objective{Metric: "accuracy", Direction: progress.Maximize, Target: f64(0.75)}
	noisy := targetStopped([]float64{0.09, 0.26, 0.33, 0.37, 0.42, 0.45, 0.47, 0.462, 0.478, 0.455, 0.481, 0.466, 0.476}, 1600)
	if f := fitAt(noisy, obj, 13*1600, DefaultSettings()); f.Plateaued || !strings.Contains(f.PlateauReason, "short of its target, and its recent evaluations are too few or too noisy") {
		t.Errorf("noisy and far from its target: plateaued=%v reason %q", f.Plateaued, f.PlateauReason)
	}
	stuck := []float64{0.09, 0.26, 0.33, 0.37, 0.42, 0.45}
	for i := 0; i < 10; i++ {
		stuck = append(stuck, 0.470+0.001*float64(i%2))
	}
	if f := fitAt(targetStopped(stuck, 1600), obj, 16*1600, DefaultSettings()); !f.Plateaued {
		t.Errorf("flat to the third decimal for ten readings: not plateaued: %q", f.PlateauReason)
	}
}

// A job short of its target whose best came with a step (0.45 → 0.49) and
// that has read a little below it four times since: a flat stretch that
// starts at its best leans toward "no gain", so with the reading before
// the step it cannot rule out another. Ten such readings can.
func TestPlateauTargetStopAfterAStepHeld(t *testing.T) {
	obj := progress.Objective{Metric: "accuracy", Direction: progress.Maximize, Target: f64(0.75)}
	vals := []float64{0.09, 0.26, 0.33, 0.37, 0.42, 0.45, 0.49}
	for i := 0; i < 10; i++ {
		vals = append(vals, 0.470+0.001*float64(i%2))
	}
	if f := fitAt(targetStopped(vals[:11], 1600), obj, 11*1600, DefaultSettings()); f.Plateaued || !strings.Contains(f.PlateauReason, "too few or too noisy") {
		t.Errorf("four readings after a step: plateaued=%v reason %q", f.Plateaued, f.PlateauReason)
	}
	if f := fitAt(targetStopped(vals, 1600), obj, 17*1600, DefaultSettings()); !f.Plateaued {
		t.Errorf("ten readings after a step, flat to the third decimal: not plateaued: %q", f.PlateauReason)
	}
}

// A job that stops at its target and reports a learning rate in the slow
// first part of its decay (here 0.3 % over the stall window, as a cosine
// or a long linear decay early on) has its whole anneal ahead and no
// planned run to bound its flat stretch by: it is held, where before 7.35
// the stall rule called it (an Alpaca fine-tune and a YOLO run recast to
// stop at a target were called so at 8-12 % of their runs). A fall within
// a logged rate's rounding is no decay: the same job at a constant rate
// that rounds differently is still called.
func TestPlateauTargetStopSlowLearningRateDecayHeld(t *testing.T) {
	target := 2.0
	obj := progress.Objective{Metric: "loss", Direction: progress.Minimize, Target: &target}
	slow := targetStopWithRate(func(step float64) float64 { return 1e-3 * (1 - step/200000) })
	f := fitAt(slow, obj, 3000, DefaultSettings())
	if f.Plateaued || !strings.Contains(f.PlateauReason, "learning rate still falling") {
		t.Errorf("target-stopped job early in a slow decay: plateaued=%v reason %q", f.Plateaued, f.PlateauReason)
	}
	// The same rate with a fixed total is left to shortFlatBeforeAnneal,
	// which bounds the flat stretch by the planned run (PlateauAnnealShare
	// of 3,000 steps; this one has been flat for 60 %).
	fixed := scheduled(300, func(step float64) map[string]float64 {
		return map[string]float64{"loss": 2 + 3/(1+math.Min(step, 1200)/100), "learning_rate": 1e-3 * (1 - step/200000)}
	})
	if g := fitAt(fixed, lossMin, 2990, DefaultSettings()); !g.Plateaued {
		t.Errorf("fixed-total job flat for 60 %% of its run under a slow decay not plateaued: %q", g.PlateauReason)
	}
	jitter := targetStopWithRate(func(step float64) float64 { return 1e-3 * (1 - 1e-4*float64(int(step/10)%2)) })
	if g := fitAt(jitter, obj, 3000, DefaultSettings()); !g.Plateaued {
		t.Errorf("target-stopped job at a constant rate with rounding jitter not plateaued: %q", g.PlateauReason)
	}
}

// A job readmitted after a long wait in the queue, not yet evaluated since:
// the windows of the pace and stall rules are shares of elapsed time, which
// now holds the wait, and read it as a flat stretch. Until the job
// evaluates again it is held; once it does, the rules read it as before.
func TestPlateauNotWhileUnevaluatedSinceRestart(t *testing.T) {
	loss := func(step float64) float64 { return 3.3 + 7/(1+step/20) + 0.2*(1-step/4000) }
	report := func(h *progress.History, at, step float64) {
		h.Observe(at, progress.TrainerStatus{Metrics: metrics("current_step", strconv.FormatFloat(step, 'f', -1, 64),
			"loss", strconv.FormatFloat(loss(step), 'g', 6, 64))})
	}
	h := progress.NewHistory(progress.DefaultLimits())
	for i := 0; i <= 200; i++ {
		report(h, float64(10*i), float64(10*i))
	}
	if f := fitAt(h, lossMin, 2005, DefaultSettings()); f.Plateaued {
		t.Fatalf("setup: plateaued before the wait: %q", f.PlateauReason)
	}
	// Evicted, six times as long in the queue as it had run, readmitted
	// from its checkpoint at step 2000: the restarted reporter sends the
	// last logged loss again until the next log.
	h.Resume()
	last := strconv.FormatFloat(loss(2000), 'g', 6, 64)
	for i := 0; i < 4; i++ {
		h.Observe(14000+float64(10*i), progress.TrainerStatus{Metrics: metrics("current_step", strconv.FormatFloat(2000+float64(10*i), 'f', -1, 64), "loss", last)})
	}
	f := fitAt(h, lossMin, 14035, DefaultSettings())
	if f.Plateaued || !strings.Contains(f.PlateauReason, "no evaluation since it restarted") {
		t.Errorf("readmitted, not evaluated since: plateaued=%v (p=%.2f) reason %q", f.Plateaued, f.PlateauProbability, f.PlateauReason)
	}
	// Its next log: judged on its values again, with no wait in them.
	report(h, 14040, 2040)
	g := fitAt(h, lossMin, 14045, DefaultSettings())
	if g.Plateaued || strings.Contains(g.PlateauReason, "restarted") {
		t.Errorf("evaluated again after the restart: plateaued=%v reason %q", g.Plateaued, g.PlateauReason)
	}
}
