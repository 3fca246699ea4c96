package backtest

// This file re-implements, line for line, the definitions of the corpus's
// independent evaluator (shared/eval/baseline.py) so that the figures
// compare one to one: the x axis, observations of a metric, done/total,
// the reported-ETA and linear step-rate baselines, the plateau ground
// truth and the linear time-to-target comparator. Comments name the
// baseline function each helper mirrors.

import (
	"math"
	"sort"
	"strconv"
	"strings"

	"github.com/progress-planner/planner/pkg/progress"
)

// counterKeys mirrors COUNTER_KEYS.
var counterKeys = []string{"samples_count", "tokens_count", "epoch"}

// rep is one report as the baseline sees it (load): t, progressPercentage,
// estimatedRemainingSeconds and the metrics by (raw) name.
type rep struct {
	t   float64
	p   *float64
	eta *float64
	m   map[string]string
}

func toReps(f *progress.HistoryFile) []rep {
	out := make([]rep, len(f.Reports))
	for i, r := range f.Reports {
		m := make(map[string]string, len(r.TrainerStatus.Metrics))
		for _, mv := range r.TrainerStatus.Metrics {
			m[mv.Name] = mv.Value // later duplicates win, like the dict comprehension
		}
		out[i] = rep{t: r.T, p: r.TrainerStatus.ProgressPercentage, eta: r.TrainerStatus.EstimatedRemainingSeconds, m: m}
	}
	return out
}

// fnum mirrors fnum: a float or ok=false. Like Python's float() it
// accepts surrounding whitespace, "nan" and "inf".
func fnum(s string, present bool) (float64, bool) {
	if !present {
		return 0, false
	}
	v, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
	if err != nil {
		return 0, false
	}
	return v, true
}

func (r rep) num(key string) (float64, bool) {
	s, ok := r.m[key]
	return fnum(s, ok)
}

// xkey mirrors xkey: current_step, else runInfo.progressCounter, else the
// first of COUNTER_KEYS present in any report; "" for none (time axis).
func xkey(hd progress.FileHeader, reps []rep) string {
	has := func(k string) bool {
		for _, r := range reps {
			if _, ok := r.m[k]; ok {
				return true
			}
		}
		return false
	}
	if has("current_step") {
		return "current_step"
	}
	if c := hd.RunInfoString("progressCounter"); c != "" && has(c) {
		return c
	}
	for _, k := range counterKeys {
		if has(k) {
			return k
		}
	}
	return ""
}

// obsPoint is one distinct observation (t, x, y) of a metric.
type obsPoint struct{ t, x, y float64 }

// series mirrors series: the reports where the metric's value (string)
// changed; non-numeric, NaN and infinite values are skipped; x is the
// counter xk, else t.
func series(reps []rep, metric, xk string) []obsPoint {
	var out []obsPoint
	for _, i := range valueChanges(reps, metric) {
		r := reps[i]
		y, ok := fnum(r.m[metric], true)
		if !ok || math.IsNaN(y) || math.IsInf(y, 0) {
			continue
		}
		x, okx := 0.0, false
		if xk != "" {
			x, okx = r.num(xk)
		}
		if !okx {
			x = r.t
		}
		out = append(out, obsPoint{r.t, x, y})
	}
	return out
}

// valueChanges are the indices of the reports at which the metric's value
// (string) changed: every report repeats the latest value of each metric,
// so a change is a new observation (for the objective, an evaluation). A
// report without the metric ends a run of equal values; one that repeats
// its predecessor exactly is not seen, as a live reader would not see it.
func valueChanges(reps []rep, metric string) []int {
	var out []int
	prev, havePrev := "", false
	for i, r := range reps {
		v, ok := r.m[metric]
		if !ok {
			havePrev = false
			continue
		}
		if !havePrev || v != prev {
			out = append(out, i)
		}
		prev, havePrev = v, true
	}
	return out
}

// doneTotal mirrors done_total: current_epoch/total_epochs where
// runInfo.progressUnit is "epochs", else current_step/total_steps.
func doneTotal(hd progress.FileHeader, r rep) (done float64, okDone bool, total float64, okTotal bool) {
	if hd.RunInfoString("progressUnit") == "epochs" {
		done, okDone = r.num("current_epoch")
		total, okTotal = r.num("total_epochs")
		return
	}
	done, okDone = r.num("current_step")
	total, okTotal = r.num("total_steps")
	return
}

// seen returns the reports with t <= c (+ the baseline's tolerance).
func seen(reps []rep, c float64) []rep {
	n := sort.Search(len(reps), func(i int) bool { return !progress.AtOrBefore(reps[i].t, c) })
	return reps[:n]
}

// reportedETA mirrors ETA baseline (i): the last report at or before c
// carrying estimatedRemainingSeconds, aged to c: max(t_r + ETA_r - c, 0).
func reportedETA(seen []rep, c float64) (float64, bool) {
	for i := len(seen) - 1; i >= 0; i-- {
		if e := seen[i].eta; e != nil {
			return math.Max(seen[i].t+*e-c, 0), true
		}
	}
	return 0, false
}

// linearETA mirrors ETA baseline (ii): the step rate over the reports in
// [0.8c, c] that carry the done counter (at least the last two such
// reports): max((total - done)/rate - (c - t_last), 0).
func linearETA(hd progress.FileHeader, seen []rep, c float64) (float64, bool) {
	var win []rep
	for _, r := range seen {
		if _, ok, _, _ := doneTotal(hd, r); ok && r.t >= 0.8*c {
			win = append(win, r)
		}
	}
	if len(win) < 2 {
		win = win[:0]
		for _, r := range seen {
			if _, ok, _, _ := doneTotal(hd, r); ok {
				win = append(win, r)
			}
		}
		if len(win) > 2 {
			win = win[len(win)-2:]
		}
	}
	if len(win) < 2 {
		return 0, false
	}
	d1, _, _, _ := doneTotal(hd, win[0])
	last := win[len(win)-1]
	d2, _, tot, okTot := doneTotal(hd, last)
	dt := last.t - win[0].t
	if !okTot || tot == 0 || !(dt > 0) || !(d2 > d1) {
		return 0, false
	}
	rate := (d2 - d1) / dt
	return math.Max((tot-d2)/rate-(c-last.t), 0), true
}

// plateauTime mirrors plateau_time: the first t after which the
// best-so-far objective (oriented by sign, smaller is better) improves by
// less than 1 % of the total improvement |z0 - best_end| until the end.
func plateauTime(obs []obsPoint, sign float64) (float64, bool) {
	if len(obs) < 2 {
		return 0, false
	}
	best := make([]float64, len(obs))
	b := math.Inf(1)
	for i, o := range obs {
		b = math.Min(b, sign*o.y)
		best[i] = b
	}
	end := best[len(best)-1]
	total := math.Abs(sign*obs[0].y - end)
	if total <= 0 {
		return obs[0].t, true
	}
	for i := range obs {
		if best[i]-end < 0.01*total {
			return obs[i].t, true
		}
	}
	return obs[len(obs)-1].t, true
}

// linearTimeToTarget mirrors the comparator of time_to_target: a straight
// line through the first and last observation (t, sign·y) in [0.8c, c]
// (else the last two), extended to the target; never below c. ok=false
// ("never") when the line does not head towards the target.
func linearTimeToTarget(obsT []obsPoint, sign, target, c float64) (float64, bool) {
	type tz struct{ t, z float64 }
	var win []tz
	for _, o := range obsT {
		if o.t >= 0.8*c {
			win = append(win, tz{o.t, sign * o.y})
		}
	}
	if len(win) < 2 {
		win = win[:0]
		from := max(0, len(obsT)-2)
		for _, o := range obsT[from:] {
			win = append(win, tz{o.t, sign * o.y})
		}
	}
	if len(win) < 2 {
		return 0, false
	}
	t1, z1 := win[0].t, win[0].z
	t2, z2 := win[len(win)-1].t, win[len(win)-1].z
	if !(t2 > t1) {
		return 0, false
	}
	slope := (z2 - z1) / (t2 - t1)
	if !(slope < 0) {
		return 0, false
	}
	return math.Max(t2+(sign*target-z2)/slope, c), true
}

func meanOf(v []float64) float64 {
	if len(v) == 0 {
		return math.NaN()
	}
	s := 0.0
	for _, x := range v {
		s += x
	}
	return s / float64(len(v))
}
