package admission

import (
	"cmp"
	"math"
	"slices"

	"github.com/progress-planner/planner/simulator"
)

// Calibration of the 80 % interval on the estimator's own past misses.
//
// The futures' spread is the spread of what the forward run varies (the
// forecasts' ETA intervals, the run times drawn for jobs without one, the
// arrivals drawn at the recent rate); it has no term for the forward
// model's own error (a surge of arrivals the recent rate did not show,
// the planner's later decisions, Kueue's order in a changed queue). Each
// admission is an outcome the planner sees, so the interval is widened,
// or narrowed, by what the estimator missed on the jobs before: split
// conformal calibration of a quantile interval (conformalised quantile
// regression, Romano et al. 2019), in log time.
//
// A past estimate's score is how far its wait fell outside its interval,
// max(L(P10) − L(wait), L(wait) − L(P90)) with L(x) = log(x + Scale):
// negative when inside. The interval of a new estimate is stretched by
// the ⌈(n+1)·0.8⌉-th smallest of n scores on both ends (in L). An
// estimate that has not resolved yet but already waited past its P90 is a
// known miss: its score is at least L(waited) − L(P90), and it counts
// with that bound, so a surge widens the interval while it happens, not
// hours later when its jobs are admitted. Estimates still waiting inside
// their interval are left out (their score is not known yet).

// calibrationScale is the time below which waits count as equal in the
// scores (L's offset): a minute, the granularity at which a wait
// estimate is read ("expected in 5m"). Chosen, not tuned.
const calibrationScale = 60.0

// MinOutcomes is the fewest past outcomes a calibration is made from:
// with fewer the futures' interval is shown as it is. Chosen, not tuned:
// the conformal rank ⌈(n+1)·0.8⌉ exceeds n (no bound) below 4 outcomes
// and is the single largest score up to 8 (one outlier sets the range);
// 10 is the first round number past that.
const MinOutcomes = 10

// calibrationLevel is the interval's coverage (10 % to 90 %).
const calibrationLevel = 0.8

// Outcome is one earlier estimate and what followed (simulator's type,
// so the backtest can collect them).
type Outcome = simulator.AdmissionOutcome

// Calibration stretches the futures' interval: both ends move by Shift in
// log(time + 1 min) (negative: narrowed). Zero when not enough outcomes.
type Calibration struct {
	// Outcomes the shift was computed from.
	Outcomes int `json:"outcomes"`
	// Shift in log(seconds + 60).
	Shift float64 `json:"shift"`
}

// Calibrate computes the calibration from past outcomes (resolved ones,
// and unresolved ones already past their P90: see above), whatever their
// age. Outcomes with a non-finite or negative P10/P90, or a NaN wait, are
// ignored.
func Calibrate(past []Outcome) Calibration { return CalibrateWithin(past, math.Inf(1)) }

// CalibrateWithin calibrates on the outcomes of the estimates made within
// horizon seconds (Outcome.Age). When those give fewer than MinOutcomes
// scores, the most recent older ones make up the number: after a quiet
// spell, the estimator's older misses say more about its error than the
// futures' own range, which covers far less than 80 % (docs/simulator.md
// "Admission estimates").
func CalibrateWithin(past []Outcome, horizon float64) Calibration {
	type aged struct{ age, score float64 }
	all := make([]aged, 0, len(past))
	recent := 0
	for _, o := range past {
		if s, ok := score(o); ok {
			all = append(all, aged{o.Age, s})
			if o.Age <= horizon {
				recent++
			}
		}
	}
	keep := recent
	if keep < MinOutcomes {
		keep = min(MinOutcomes, len(all))
	}
	slices.SortStableFunc(all, func(a, b aged) int { return cmp.Compare(a.age, b.age) })
	scores := make([]float64, keep)
	for i := range scores {
		scores[i] = all[i].score
	}
	n := len(scores)
	if n < MinOutcomes {
		return Calibration{}
	}
	slices.Sort(scores)
	k := int(math.Ceil(float64(n+1) * calibrationLevel)) // 1-based rank
	if k > n {
		k = n
	}
	return Calibration{Outcomes: n, Shift: scores[k-1]}
}

// score is o's conformity score.
func score(o Outcome) (float64, bool) {
	if !(o.P10 >= 0) || !(o.P90 >= o.P10) || math.IsInf(o.P90, 1) || math.IsNaN(o.Wait) || o.Wait < 0 {
		return 0, false
	}
	l := func(x float64) float64 { return math.Log(x + calibrationScale) }
	switch {
	case o.Waiting && o.Wait > o.P90:
		return l(o.Wait) - l(o.P90), true // a known miss, by at least this much
	case o.Waiting || math.IsInf(o.Wait, 1):
		return 0, false // not known yet
	}
	return math.Max(l(o.P10)-l(o.Wait), l(o.Wait)-l(o.P90)), true
}

// Apply is the calibrated interval of an estimate: both ends moved by the
// shift, the lower end at least 0, the median (kept) inside. A +Inf end
// (not admitted within the simulated future) stays +Inf.
func (c Calibration) Apply(p10, median, p90 float64) (lo, hi float64) {
	if c.Outcomes == 0 {
		return p10, p90
	}
	stretch := func(x, by float64) float64 {
		if math.IsInf(x, 1) {
			return x
		}
		return math.Max(0, (x+calibrationScale)*math.Exp(by)-calibrationScale)
	}
	lo, hi = stretch(p10, -c.Shift), stretch(p90, c.Shift)
	if !math.IsInf(median, 1) {
		lo = math.Min(lo, median)
	}
	return lo, math.Max(hi, median)
}
