package preempt

import (
	"math"
	"strconv"
	"strings"
	"testing"

	"github.com/progress-planner/planner/pkg/forecast"
	"github.com/progress-planner/planner/pkg/progress"
)

// budgetRun is a job with a fixed total of 4,000 steps, one step a second,
// reporting every `every` steps the values vals(step) gives.
func budgetRun(every float64, vals func(step float64) map[string]float64) *progress.History {
	h := progress.NewHistory(progress.DefaultLimits())
	for step := 0.0; step <= 4000; step += every {
		ms := []progress.MetricValue{{Name: "current_step", Value: strconv.FormatFloat(step, 'f', -1, 64)}, {Name: "total_steps", Value: "4000"}}
		for name, v := range vals(step) {
			ms = append(ms, progress.MetricValue{Name: name, Value: strconv.FormatFloat(v, 'g', 6, 64)})
		}
		h.Observe(step, progress.TrainerStatus{ProgressPercentage: fp(math.Floor(step / 40)), Metrics: ms})
	}
	return h
}

// plateauedSpan drives forecast.Fit and Decide together every dt seconds
// in [from, to], as the controller does, and returns when the job was
// first judged Plateaued, when it next left the verdict (NaN: never), and
// the decision and forecast that let it go.
func plateauedSpan(t *testing.T, h *progress.History, from, to, dt float64) (entered, left float64, d Decision, f forecast.Forecast) {
	t.Helper()
	obj := progress.Objective{Metric: "loss", Direction: progress.Minimize}
	j := newJob(t, DefaultPolicy())
	j.facts.AdmittedAt = fp(0)
	entered, left = math.NaN(), math.NaN()
	for now := from; now <= to && math.IsNaN(left); now += dt {
		f = forecast.Fit(h, obj, now, forecast.DefaultSettings())
		switch d = j.at(f); {
		case d.Verdict == Plateaued && math.IsNaN(entered):
			entered = now
		case d.Verdict != Plateaued && !math.IsNaN(entered):
			left = now
		}
	}
	return entered, left, d, f
}

// The forecaster and the policy together, on a warm-up-stable-decay run
// (the learning rate at its peak until step 3,200 and then falling
// linearly to 0, a report every 10 steps): its loss is flat from step
// 1,200, so it is judged Plateaued in its stable phase, and its cool-down
// then makes 1.7 % of its value. The cool-down releases it: the policy
// leaves Plateaued within a few reports of the rate's first 5 % fall
// instead of keeping the job's −100 boost by its exit band.
func TestCoolDownLeavesPlateaued(t *testing.T) {
	h := budgetRun(10, func(step float64) map[string]float64 {
		return map[string]float64{
			"loss":          2 + 3*math.Exp(-math.Min(step, 1200)/700) - 0.06*math.Max(0, step-3200)/800 + 0.001*math.Sin(step),
			"learning_rate": 1e-3 * math.Min(1, (4000-step)/800),
		}
	})
	entered, left, d, f := plateauedSpan(t, h, 1000, 3900, 20)
	if !(entered < 3200) {
		t.Fatalf("never judged Plateaued in the stable phase (entered %v)", entered)
	}
	t.Logf("Plateaued from t=%.0f, left at t=%.0f", entered, left)
	// The rate has fallen 5 % at step 3,240; a few reports of slack.
	if !(left >= 3200 && left <= 3300) || f.PlateauRelease == "" {
		t.Errorf("Plateaued from t=%.0f, left at %v (%s): want released soon after the cool-down begins at 3,200", entered, left, d.Reason)
	}
}

// A job judged Plateaued whose best then falls by a step-schedule jump (an
// evaluation every 100 steps, the loss flat from step 1,200 and lower by
// 30 % or 50 % of its gain so far from step 2,600 on, no learning rate
// reported) is released at the evaluation that shows the jump; before the
// release rule the exit band kept it Plateaued for three more evaluations.
func TestStepJumpLeavesPlateaued(t *testing.T) {
	gain := 3 * (1 - math.Exp(-1200.0/700))
	for _, drop := range []float64{0.3, 0.5} {
		h := budgetRun(100, func(step float64) map[string]float64 {
			loss := 2 + 3*math.Exp(-math.Min(step, 1200)/700) + 0.001*math.Sin(step)
			if step >= 2600 {
				loss -= drop * gain
			}
			return map[string]float64{"loss": loss}
		})
		entered, left, d, _ := plateauedSpan(t, h, 1000, 3500, 100)
		t.Logf("drop %.1f: Plateaued from t=%.0f, left at t=%.0f", drop, entered, left)
		if !(entered < 2600) || left != 2600 || !strings.Contains(d.Reason, "released from Plateaued: a step-schedule jump at t=2600s") {
			t.Errorf("drop %.1f: Plateaued from t=%v, left at %v (%s): want judged before the jump and released at it (2,600)", drop, entered, left, d.Reason)
		}
	}
}
