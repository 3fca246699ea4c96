package stats

import (
	"math"
	"slices"
	"sort"
)

// Survival is a Kaplan–Meier estimate of a duration's distribution from
// complete observations and right-censored ones (durations known only to
// exceed their value: jobs still running). The run times of the jobs that
// finished recently are biased short on their own: the long ones are the
// ones still running.
type Survival struct {
	t   []float64 // distinct complete durations, ascending
	s   []float64 // S(t[i]) = P(T > t[i])
	max float64   // the largest observation, complete or censored
}

// KaplanMeier estimates the survival function from complete durations
// done and censored ones; NaN, infinite and negative values are ignored.
func KaplanMeier(done, censored []float64) Survival {
	type obs struct {
		v    float64
		done bool
	}
	var all []obs
	for _, v := range done {
		if v >= 0 && !math.IsInf(v, 1) {
			all = append(all, obs{v, true})
		}
	}
	for _, v := range censored {
		if v >= 0 && !math.IsInf(v, 1) {
			all = append(all, obs{v, false})
		}
	}
	// At a tie the completions come first: a job censored at t was
	// still at risk at t.
	slices.SortFunc(all, func(a, b obs) int {
		if a.v != b.v {
			return cmpFloat(a.v, b.v)
		}
		if a.done == b.done {
			return 0
		}
		if a.done {
			return -1
		}
		return 1
	})
	var sv Survival
	s := 1.0
	for i := 0; i < len(all); {
		v, atRisk, d := all[i].v, len(all)-i, 0
		j := i
		for ; j < len(all) && all[j].v == v; j++ {
			if all[j].done {
				d++
			}
		}
		if d > 0 {
			s *= 1 - float64(d)/float64(atRisk)
			sv.t, sv.s = append(sv.t, v), append(sv.s, s)
		}
		sv.max = v
		i = j
	}
	return sv
}

func cmpFloat(a, b float64) int {
	if a < b {
		return -1
	}
	return 1
}

// Empty reports an estimate without a complete observation.
func (sv Survival) Empty() bool { return len(sv.t) == 0 }

// At is P(T > x).
func (sv Survival) At(x float64) float64 {
	i := sort.SearchFloat64s(sv.t, x) // first t >= x
	if i < len(sv.t) && sv.t[i] == x {
		return sv.s[i]
	}
	if i == 0 {
		return 1
	}
	return sv.s[i-1]
}

// DrawAfter is the duration T, given T > x, at uniform u in (0, 1): the
// smallest complete duration past x whose survival is at most u·S(x).
// Past the last completion the estimate says nothing; a draw there is
// the largest observation, or 2x for a job that has outlived them all
// (a job is taken to run as long again as it has: an assumption, not
// fitted). NaN when there is no complete observation.
func (sv Survival) DrawAfter(x, u float64) float64 {
	if sv.Empty() {
		return math.NaN()
	}
	x = math.Max(x, 0)
	target := u * sv.At(x)
	for i, t := range sv.t {
		if t > x && sv.s[i] <= target {
			return t
		}
	}
	return math.Max(sv.max, 2*x)
}
