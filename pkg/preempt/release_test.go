package preempt

import (
	"math"
	"strconv"
	"strings"
	"testing"

	"github.com/progress-planner/planner/pkg/forecast"
	"github.com/progress-planner/planner/pkg/progress"
)

// The forecaster and the policy together, on a warm-up-stable-decay run
// (4,000 steps, a report every 10 steps and 10 s, the learning rate at its
// peak until step 3,200 and then falling linearly to 0): its loss is flat
// from step 1,200, so it is judged Plateaued in its stable phase, and its
// cool-down then makes 1.7 % of its value. The cool-down releases it: the
// policy leaves Plateaued within a few reports of the rate's first 5 %
// fall instead of keeping the job's −100 boost by its exit band.
func TestCoolDownLeavesPlateaued(t *testing.T) {
	h := progress.NewHistory(progress.DefaultLimits())
	for i := 0; i <= 400; i++ {
		step := float64(10 * i)
		loss := 2 + 3*math.Exp(-math.Min(step, 1200)/700) - 0.06*math.Max(0, step-3200)/800 + 0.001*math.Sin(step)
		lr := 1e-3 * math.Min(1, (4000-step)/800)
		m := func(name string, v float64) progress.MetricValue {
			return progress.MetricValue{Name: name, Value: strconv.FormatFloat(v, 'g', 6, 64)}
		}
		h.Observe(step, progress.TrainerStatus{ProgressPercentage: fp(math.Floor(step / 40)),
			Metrics: []progress.MetricValue{m("current_step", step), m("total_steps", 4000), m("loss", loss), m("learning_rate", lr)}})
	}
	obj := progress.Objective{Metric: "loss", Direction: progress.Minimize}
	j := newJob(t, DefaultPolicy())
	j.facts.AdmittedAt = fp(0)
	entered, left := math.NaN(), math.NaN()
	for now := 1000.0; now <= 3900; now += 20 {
		f := forecast.Fit(h, obj, now, forecast.DefaultSettings())
		switch d := j.at(f); {
		case d.Verdict == Plateaued && math.IsNaN(entered):
			entered = now
		case d.Verdict != Plateaued && !math.IsNaN(entered) && math.IsNaN(left):
			left = now
			if f.PlateauRelease == "" {
				t.Errorf("left Plateaued at t=%.0f without the forecast's release: %s", now, d.Reason)
			}
		}
	}
	if !(entered < 3200) {
		t.Fatalf("never judged Plateaued in the stable phase (entered %v)", entered)
	}
	t.Logf("Plateaued from t=%.0f, left at t=%.0f", entered, left)
	// The rate has fallen 5 % at step 3,240; a few reports of slack.
	if !(left >= 3200 && left <= 3300) {
		t.Errorf("Plateaued from t=%.0f, left at %v: want soon after the cool-down begins at 3,200", entered, left)
	}
}

// A job judged Plateaued whose best then falls by a step-schedule jump (an
// evaluation every 100 steps, the loss flat from step 1,200 and lower by
// 30 % or 50 % of its gain so far from step 2,600 on, no learning rate
// reported) is released at the evaluation that shows the jump; before the
// release rule the exit band kept it Plateaued for three more evaluations.
func TestStepJumpLeavesPlateaued(t *testing.T) {
	for _, drop := range []float64{0.3, 0.5} {
		h := progress.NewHistory(progress.DefaultLimits())
		gain := 3 * (1 - math.Exp(-1200.0/700))
		for step := 0.0; step <= 4000; step += 100 {
			loss := 2 + 3*math.Exp(-math.Min(step, 1200)/700) + 0.001*math.Sin(step)
			if step >= 2600 {
				loss -= drop * gain
			}
			m := func(name string, v float64) progress.MetricValue {
				return progress.MetricValue{Name: name, Value: strconv.FormatFloat(v, 'g', 6, 64)}
			}
			h.Observe(step, progress.TrainerStatus{ProgressPercentage: fp(math.Floor(step / 40)),
				Metrics: []progress.MetricValue{m("current_step", step), m("total_steps", 4000), m("loss", loss)}})
		}
		obj := progress.Objective{Metric: "loss", Direction: progress.Minimize}
		j := newJob(t, DefaultPolicy())
		j.facts.AdmittedAt = fp(0)
		entered, left := math.NaN(), math.NaN()
		for now := 1000.0; now < 3600; now += 100 {
			f := forecast.Fit(h, obj, now, forecast.DefaultSettings())
			switch d := j.at(f); {
			case d.Verdict == Plateaued && math.IsNaN(entered):
				entered = now
			case d.Verdict != Plateaued && !math.IsNaN(entered) && math.IsNaN(left):
				left = now
				if !strings.Contains(d.Reason, "released from Plateaued: a step-schedule jump at t=2600s") {
					t.Errorf("drop %.1f: left Plateaued at t=%.0f without the jump's release: %s", drop, now, d.Reason)
				}
			}
		}
		t.Logf("drop %.1f: Plateaued from t=%.0f, left at t=%.0f", drop, entered, left)
		if !(entered < 2600) || left != 2600 {
			t.Errorf("drop %.1f: Plateaued from t=%v, left at %v: want judged before the jump and released at it (2,600)", drop, entered, left)
		}
	}
}
