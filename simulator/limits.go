package simulator

import (
	"fmt"
	"math"

	"github.com/progress-planner/planner/pkg/report"
)

// Limits on every number read from a trace, a scenario or a flag
// (docs/limits.md). They are far beyond any real cluster or trace and
// exist so that no loop, allocation or float→int conversion is sized by
// an absurd input: a capacity of 2^63 GPUs or a duration of 1e308 s is an
// error naming the field, not a hang.
const (
	// MaxGPUs bounds one job's request and a cluster's (or queue's) GPUs:
	// the capacity forecast's bound (the simulator scores it).
	MaxGPUs = report.MaxGPUs
	// MaxSeconds bounds a duration, an arrival and every interval: ten
	// years, the bound pkg/forecast puts on a reported ETA.
	MaxSeconds = 10 * 365 * 86400
	// MaxJobs bounds the jobs of one simulation (a trace's usable rows,
	// the generator's jobs, --limit). The Philly trace has 82,248.
	MaxJobs = 1_000_000
	// MaxTraceLineBytes bounds one line of a trace: a real row is under
	// 200 bytes; the CSV reader would otherwise buffer a line of any length.
	MaxTraceLineBytes = 64 << 10

	// minInterval bounds the report interval and the forecast cadence
	// from below, maxReportsPerRun the reports per run: together they cap
	// the events one job makes.
	minInterval      = 1
	maxReportsPerRun = 100_000
	// maxRunEvents bounds the reports and forecast ticks of one run (the
	// whole Philly trace makes about 10^7).
	maxRunEvents = 100_000_000
	// maxTotalSteps bounds a scenario's step total: 1e12, within the
	// bound pkg/progress puts on a reported counter (1e15).
	maxTotalSteps = 1e12
)

// checkSeconds is the range check of a duration-like field.
func checkSeconds(field string, v float64) error {
	if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 || v > MaxSeconds {
		return fmt.Errorf("%s %v: must be a number of seconds in [0, %d] (ten years)", field, v, MaxSeconds)
	}
	return nil
}

// checkGPUs is the range check of a GPU count (lo is 0 or 1).
func checkGPUs(field string, v, lo int) error {
	if v < lo || v > MaxGPUs {
		return fmt.Errorf("%s %d: must be in [%d, %d]", field, v, lo, MaxGPUs)
	}
	return nil
}
