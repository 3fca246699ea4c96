package simulator

import (
	"fmt"
	"math"

	"github.com/progress-planner/planner/internal/humanize"
)

// headline says in a few plain lines what the planner changed against
// Kueue alone on this comparison's jobs: queueing, completion time, GPU
// time past plateaus, preemptions, and (with Deactivate) the stops. Worse
// numbers are stated as plainly as better ones. Nil unless both kueue and
// planner ran.
func (c *Comparison) headline() []string {
	var k, p *Summary
	for _, r := range c.Results {
		switch r.Summary.Policy {
		case PolicyKueue:
			k = &r.Summary
		case PolicyPlanner:
			p = &r.Summary
		}
	}
	if k == nil || p == nil {
		return nil
	}
	out := []string{
		fmt.Sprintf("Progress Planner against Kueue alone, on the same %d jobs and learning curves:", c.Jobs),
		fmt.Sprintf("  waiting for a first admission: mean %s → %s (%s), p95 %s → %s",
			hours(k.Queueing.Mean), hours(p.Queueing.Mean), change(p.Queueing.Mean, k.Queueing.Mean), hours(k.Queueing.P95), hours(p.Queueing.P95)),
		fmt.Sprintf("  job completion time: mean %s → %s (%s)", hours(k.JCT.Mean), hours(p.JCT.Mean), change(p.JCT.Mean, k.JCT.Mean)),
		fmt.Sprintf("  GPU-hours spent after a job's learning had plateaued: %.1f → %.1f (%s)",
			k.PlateauGPUHours, p.PlateauGPUHours, change(p.PlateauGPUHours, k.PlateauGPUHours)),
		fmt.Sprintf("  preemptions: %d → %d; of jobs past 90%% progress: %d → %d", k.Preemptions, p.Preemptions, k.PreemptionsPast90, p.PreemptionsPast90),
	}
	if p.Deactivated > 0 || c.Settings.Deactivate {
		out = append(out, fmt.Sprintf("  stopped %d stalled jobs, %.1f GPU-hours of planned run handed back; %d stops came before the job's true plateau",
			p.Deactivated, p.SavedGPUHours, p.EarlyStops))
	} else {
		out = append(out, "  boosts only reorder the work here; --deactivate lets queues opt in to stopping stalled jobs")
	}
	return out
}

// hours prints a time given in hours the way the rest of the product does.
func hours(h float64) string { return humanize.Duration(h * 3600) }

// change is x against ref as a signed percentage, "no change" when equal.
func change(x, ref float64) string {
	switch {
	case x == ref:
		return "no change"
	case ref == 0 || math.IsNaN(x) || math.IsNaN(ref):
		return "n/a"
	}
	return fmt.Sprintf("%+.1f%%", 100*(x-ref)/ref)
}
