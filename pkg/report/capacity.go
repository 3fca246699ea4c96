package report

import (
	"math"

	"github.com/progress-planner/planner/internal/humanize"
	"github.com/progress-planner/planner/internal/stats"
	"github.com/progress-planner/planner/pkg/forecast"
)

// The capacity forecast: how many GPUs a ClusterQueue's running jobs are
// expected to free, and when a new job would fit. One implementation, used
// by `planner report`, the live page and the simulator's backtest
// (simulator.CapacityBacktest), so the number the backtest measures is the
// number the report prints.
//
// Each running job finishes within a horizon h with probability
// p = P(ETA <= h), read from its ETA estimate: the forecast's ETA interval
// is a central normal interval (pkg/forecast etaEstimate: value ± z·sd), so
// sd = (Hi − Value)/z. The upper half is used because Lo is clipped at 0.
// Jobs finish independently (Bernoulli(p)); the GPUs freed are the weighted
// sum Σ GPUs_i·B_i, whose distribution (a Poisson-binomial with weights) is
// computed exactly by a small dynamic program over GPU totals.

// MaxGPUs is the most GPUs a ClusterQueue is taken to hold: a job's GPUs,
// a quota and the GPUs a forecast counts are clamped to it (Build,
// FreedDist, clusterview). The capacity forecast keeps one probability per
// GPU, so this bounds its arrays to 512 KiB whatever an input claims (a
// header's runInfo.gpus of 999999999, a Workload whose "GPU" resource is
// memory asking 64Gi). docs/limits.md.
const MaxGPUs = 1 << 16

// ClampGPUs clamps a GPU count from outside to [0, MaxGPUs].
func ClampGPUs(n int64) int { return int(max(0, min(n, MaxGPUs))) }

// RunningJob is one admitted job as the capacity forecast sees it.
type RunningJob struct {
	GPUs int
	// ETA is the planner's remaining-time estimate (seconds from now). An
	// unknown ETA counts as not finishing within any horizon: the planner
	// does not claim GPUs it cannot forecast.
	ETA forecast.Estimate
}

// FinishProbability is P(the job ends within h seconds) from its ETA
// estimate, whose interval has central coverage interval (e.g. 0.8).
func FinishProbability(eta forecast.Estimate, h, interval float64) float64 {
	if !eta.Known || math.IsNaN(eta.Value) {
		return 0
	}
	sd := (eta.Hi - eta.Value) / stats.CentralZ(interval)
	if !(sd > 0) || math.IsInf(sd, 0) {
		if eta.Value <= h {
			return 1
		}
		return 0
	}
	return 0.5 * math.Erfc(-(h-eta.Value)/(sd*math.Sqrt2))
}

// Dist is a distribution of a non-negative integer number of GPUs:
// PMF[k] = P(k GPUs).
type Dist struct {
	PMF []float64
}

// FreedDist is the distribution of the GPUs the jobs free within h seconds,
// up to MaxGPUs (the last entry holds P(at least MaxGPUs)).
func FreedDist(jobs []RunningJob, h, interval float64) Dist {
	return freedDist(jobs, h, interval, MaxGPUs)
}

// freedDist is FreedDist saturated at limit GPUs: PMF[limit] is
// P(X >= limit). The arrays and the work are O(min(Σ GPUs, limit)).
func freedDist(jobs []RunningJob, h, interval float64, limit int) Dist {
	limit = ClampGPUs(int64(limit))
	total := 0
	for _, j := range jobs {
		total = min(total+ClampGPUs(int64(j.GPUs)), limit)
	}
	pmf := make([]float64, total+1)
	pmf[0] = 1
	top := 0
	for _, j := range jobs {
		g := ClampGPUs(int64(j.GPUs))
		p := FinishProbability(j.ETA, h, interval)
		if g == 0 || p <= 0 {
			continue
		}
		// Walk downwards so each job is added once (0/1 knapsack order).
		// Mass at the saturated top stays there.
		for k := min(top, total-1); k >= 0; k-- {
			if pmf[k] == 0 {
				continue
			}
			pmf[min(k+g, total)] += pmf[k] * p
			pmf[k] *= 1 - p
		}
		top = min(top+g, total)
	}
	return Dist{PMF: pmf}
}

// Mean is the expected number of GPUs.
func (d Dist) Mean() float64 {
	m := 0.0
	for k, p := range d.PMF {
		m += float64(k) * p
	}
	return m
}

// Quantile is the smallest k with P(X <= k) >= q.
func (d Dist) Quantile(q float64) int {
	c := 0.0
	for k, p := range d.PMF {
		c += p
		if c >= q-1e-12 {
			return k
		}
	}
	return max(len(d.PMF)-1, 0)
}

// AtLeast is P(X >= k).
func (d Dist) AtLeast(k int) float64 {
	if k <= 0 {
		return 1
	}
	s := 0.0
	for i := k; i < len(d.PMF); i++ {
		s += d.PMF[i]
	}
	return math.Min(s, 1)
}

// Freed is the capacity forecast for one horizon: the GPUs expected to be
// freed by the running jobs within Horizon seconds, with the central
// interval [Lo, Hi] of the report's coverage.
type Freed struct {
	Horizon  float64 `json:"horizon"`
	Expected float64 `json:"expected"`
	Median   int     `json:"median"`
	Lo       int     `json:"lo"`
	Hi       int     `json:"hi"`
}

// FreedWithin forecasts the GPUs freed within h seconds. This is the
// function the simulator's capacity backtest scores.
func FreedWithin(jobs []RunningJob, h, interval float64) Freed {
	d := FreedDist(jobs, h, interval)
	a := (1 - interval) / 2
	return Freed{Horizon: h, Expected: d.Mean(), Median: d.Quantile(0.5), Lo: d.Quantile(a), Hi: d.Quantile(1 - a)}
}

// Admission is when a job of GPUs GPUs submitted now would likely be
// admitted: the first instant at which the queue's free GPUs cover it and
// the waiting work ahead of it, with probability 1/2 (Median) and at the
// ends of the central interval (Lo: optimistic, Hi: pessimistic). Times are
// seconds from now; nil when not reached within the search horizon.
type Admission struct {
	GPUs   int      `json:"gpus"`
	Median *float64 `json:"median,omitempty"`
	Lo     *float64 `json:"lo,omitempty"`
	Hi     *float64 `json:"hi,omitempty"`
	// Ahead is the GPUs of the waiting Workloads ordered before it.
	Ahead int `json:"ahead"`
	// Note says why a time is missing ("exceeds the quota", "not within 7d").
	Note string `json:"note,omitempty"`
}

// AdmissionSearch is the grid the admission time is searched on: every
// minute for an hour, every 5 minutes to a day, then hourly to a week.
func AdmissionSearch() []float64 {
	var g []float64
	for t := 0.0; t < 3600; t += 60 {
		g = append(g, t)
	}
	for t := 3600.0; t <= 86400; t += 300 {
		g = append(g, t)
	}
	for t := 90000.0; t <= 7*86400; t += 3600 {
		g = append(g, t)
	}
	return g
}

// AdmitWhen estimates the admission of a new job of n GPUs in a queue with
// quota GPUs, free GPUs free now, ahead GPUs of waiting work ordered before
// it, and the running jobs. The approximation is documented in
// docs/report.md: the work ahead is served first and whole (Kueue's
// BestEffortFIFO may let a small job pass a large one), nothing arriving
// later is ordered before it, and it preempts nothing.
func AdmitWhen(quota, free, ahead, n int, running []RunningJob, interval float64, grid []float64) Admission {
	a := Admission{GPUs: n, Ahead: ahead}
	if n > quota {
		a.Note = "exceeds the queue's quota"
		return a
	}
	need := ahead + n - free
	lvl := (1 - interval) / 2
	set := func(dst **float64, t float64) {
		if *dst == nil {
			v := t
			*dst = &v
		}
	}
	for _, t := range grid {
		var p float64
		if need <= 0 {
			p = 1
		} else {
			p = freedDist(running, t, interval, need).AtLeast(need) // only P(X >= need) matters
		}
		if p >= lvl {
			set(&a.Lo, t)
		}
		if p >= 0.5 {
			set(&a.Median, t)
		}
		if p >= 1-lvl {
			set(&a.Hi, t)
			break
		}
	}
	if a.Hi == nil && len(grid) > 0 {
		a.Note = "not within " + humanize.Duration(grid[len(grid)-1]) + " with the running jobs' forecasts"
	}
	return a
}
