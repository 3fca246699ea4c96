package kueueext

import (
	"math"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/progress-planner/planner/pkg/forecast"
	"github.com/progress-planner/planner/pkg/preempt"
)

// This file holds what the dashboard shows about outcomes rather than
// work done: how many jobs sit in each verdict, the GPU-hours freed by
// yields, and how far the ETA was off once a job finished. Each is fed by
// one call from the reconciler and keeps no job names in its labels.

// verdictCounts tracks every tracked job's current verdict so that
// planner_jobs{verdict} is a level (the dashboard's "jobs by verdict over
// time"), not a count of decisions.
type verdictCounts struct {
	mu    sync.Mutex
	byJob map[jobKey]preempt.Verdict
	gauge *prometheus.GaugeVec
}

// set records key's verdict ("" drops the job) and republishes the counts
// of the verdicts that changed.
func (c *verdictCounts) set(key jobKey, v preempt.Verdict) {
	c.mu.Lock()
	defer c.mu.Unlock()
	old, had := c.byJob[key]
	if had && old == v {
		return
	}
	if v == "" {
		delete(c.byJob, key)
	} else {
		c.byJob[key] = v
	}
	if had {
		c.publish(old)
	}
	if v != "" {
		c.publish(v)
	}
}

func (c *verdictCounts) publish(v preempt.Verdict) {
	n := 0
	for _, x := range c.byJob {
		if x == v {
			n++
		}
	}
	c.gauge.WithLabelValues(string(v)).Set(float64(n))
}

// newVerdictCounts publishes into g (planner_jobs in the controller).
func newVerdictCounts(g *prometheus.GaugeVec) *verdictCounts {
	return &verdictCounts{byJob: map[jobKey]preempt.Verdict{}, gauge: g}
}

// yieldedGPUHours is the estimate counted when Kueue evicts a job after
// the planner lowered its boost: its GPUs times the time it still planned
// to run (the last forecast's ETA), as planner_gpu_hours_saved_total does
// for a stop. A job without a known ETA counts the yield but no hours.
func yieldedGPUHours(gpus int, lastETA forecast.Estimate) float64 {
	if !lastETA.Known || !finiteNonNeg(lastETA.Value) {
		return 0
	}
	return float64(max(gpus, 0)) * lastETA.Value / 3600
}

// noteYield counts one yield and its freed GPU-hours.
func noteYield(gpus int, lastETA forecast.Estimate) {
	metricYields.Inc()
	metricGPUHoursYielded.Add(yieldedGPUHours(gpus, lastETA))
}

// etaCheckpoints remembers the planner's predicted end at the first
// forecast past each progress checkpoint (25, 50, 75 %), so that the ETA's
// error can be published when the job finishes: the live counterpart of
// the backtest's ETA MdAPE (docs/backtest.md), per cutoff.
type etaCheckpoints struct {
	// predictedEnd[i] is Unix seconds and at[i] when that forecast was
	// made, both meaningful when seen[i].
	predictedEnd, at [3]float64
	seen             [3]bool
	settled          bool
}

// etaCutoffs are the checkpoints' progress fractions and metric labels.
var etaCutoffs = [3]struct {
	frac  float64
	label string
}{{0.25, "25"}, {0.5, "50"}, {0.75, "75"}}

// record notes f's predicted end for every checkpoint f's progress has
// just passed (the first forecast past it; later ones do not overwrite).
func (e *etaCheckpoints) record(f *forecast.Forecast, now time.Time) {
	if f == nil || f.Progress == nil || !f.ETA.Known || !finiteNonNeg(f.ETA.Value) {
		return
	}
	t := unixSeconds(now)
	for i, c := range etaCutoffs {
		if e.seen[i] || *f.Progress < c.frac || *f.Progress >= 1 {
			continue
		}
		e.seen[i], e.at[i], e.predictedEnd[i] = true, t, t+f.ETA.Value
	}
}

// settle publishes the absolute percentage error of each recorded
// checkpoint once the job succeeded at end (Unix seconds): |predicted end
// − end| / (end − forecast time). It runs once per job.
func (e *etaCheckpoints) settle(end float64) {
	if e.settled {
		return
	}
	e.settled = true
	for i, c := range etaCutoffs {
		if !e.seen[i] || end <= e.at[i] {
			continue
		}
		metricETAError.WithLabelValues(c.label).Observe(math.Abs(e.predictedEnd[i]-end) / (end - e.at[i]))
	}
}

// succeededAt is when Kueue marked wl Finished with reason Succeeded (the
// one end whose time is the job's own, for every job kind), or false.
func succeededAt(wl *kueue.Workload) (time.Time, bool) {
	if wl == nil {
		return time.Time{}, false
	}
	c := apimeta.FindStatusCondition(wl.Status.Conditions, kueue.WorkloadFinished)
	if c == nil || c.Status != "True" || c.Reason != kueue.WorkloadFinishedReasonSucceeded {
		return time.Time{}, false
	}
	return c.LastTransitionTime.Time, true
}

func finiteNonNeg(x float64) bool { return x >= 0 && !math.IsInf(x, 1) && !math.IsNaN(x) }
