package forecast

import (
	"fmt"
	"math"

	"github.com/progress-planner/planner/internal/stats"
	"github.com/progress-planner/planner/pkg/progress"
)

// reportStats summarises how often a job normally reports: the median and
// 95th percentile of the intervals between stored points (heartbeats that
// repeated the previous report are collapsed and do not count).
func reportStats(pts []progress.Point) (med, p95 float64, ok bool) {
	if len(pts) < 3 {
		return 0, 0, false
	}
	d := make([]float64, 0, len(pts)-1)
	for i := 1; i < len(pts); i++ {
		if pts[i].Seg == pts[i-1].Seg && pts[i].T > pts[i-1].T {
			d = append(d, pts[i].T-pts[i-1].T)
		}
	}
	return intervalStats(d)
}

// intervalStats are the median and 95th percentile of intervals d (sorted
// in place); ok is false with fewer than two.
func intervalStats(d []float64) (med, p95 float64, ok bool) {
	if len(d) < 2 {
		return 0, 0, false
	}
	med = stats.MedianInPlace(d) // sorts d
	return med, d[int(math.Ceil(0.95*float64(len(d))))-1], true
}

// activityTimes are the times, up to now, at which the job showed it was
// working: its progress axis moved, a metric value changed, or a segment
// began. A job whose counter advances only at evaluations still logs a new
// training loss every few seconds, and a hung job logs nothing new (a stale
// heartbeat repeats its values), so both count as activity.
func activityTimes(h *progress.History, axis axisKind, now float64) []float64 {
	pts := h.Points()
	var out []float64
	for i := range pts {
		if pts[i].T > now {
			break
		}
		if i == 0 || pts[i].Seg != pts[i-1].Seg || h.Informative(i) {
			out = append(out, pts[i].T)
			continue
		}
		x, px := axis.value(pts[i]), axis.value(pts[i-1])
		if axis != axisTime && !math.IsNaN(x) && (math.IsNaN(px) || x != px) {
			out = append(out, pts[i].T)
		}
	}
	return out
}

// activityStats are the median and 95th percentile of the intervals
// between activity times: the job's own cadence of changes, which can be
// far slower than its cadence of reports.
func activityStats(times []float64) (med, p95 float64, ok bool) {
	if len(times) < 3 {
		return 0, 0, false
	}
	d := make([]float64, 0, len(times)-1)
	for i := 1; i < len(times); i++ {
		if times[i] > times[i-1] {
			d = append(d, times[i]-times[i-1])
		}
	}
	return intervalStats(d)
}

// longestRecoveredGap is the longest silence between two activity times
// (act, from activityTimes) that the job came back from: an evaluation, a
// checkpoint or a data reload it already survived. Only the current segment
// counts (a restart is not a pause), and only intact stored points (a gap
// that thinning made is not one the job showed), together with the
// history's own record of its longest gap (History.LongestGap), kept as
// the reports arrived: a job that reports every few seconds and evaluates
// every half hour has its last pause thinned away long before the next.
// pts are the stored points up to now, indexed as h.Points().
func longestRecoveredGap(h *progress.History, pts []progress.Point, act []float64) float64 {
	gap := 0.0
	if len(pts) == h.Len() {
		gap = h.LongestGap() // no stored point is after now
	}
	i := h.IntactFrom()
	if i >= len(pts) {
		return gap
	}
	from := pts[max(i, segmentStart(pts))].T
	for k := 1; k < len(act); k++ {
		if act[k-1] >= from {
			gap = math.Max(gap, act[k]-act[k-1])
		}
	}
	return gap
}

// hangThreshold: a job is hung when it shows no progress for twice its
// normal interval (or its 95th-percentile interval, whichever is longer,
// capped at three intervals) plus a fixed slack for scheduling jitter.
// Fit takes the longer of the thresholds from the report cadence and from
// the activity cadence.
func hangThreshold(med, p95 float64, s Settings) float64 {
	base := math.Min(math.Max(s.HangMultiple*med, p95), (s.HangMultiple+1)*med)
	return base + s.HangSlack
}

// divergence looks for a rise of the objective (oriented: smaller is
// better) beyond the curve's own noise: the last two observations both
// worse than the best by more than max(DivergeNoise·σ, DivergeShare·gain),
// or the latest one worse by more than the whole gain so far. σ is the
// robust scale of successive differences of the observations.
func divergence(obs []objPoint, s Settings) (bool, string) {
	n := len(obs)
	if n < 5 {
		return false, ""
	}
	// The best before the last two, of the running median of three: one
	// lucky evaluation of a noisy metric is no level to have fallen from.
	best, first := smoothedBest(obs[:n-1])[n-3], obs[0].y
	gain := first - best
	sigma := noiseScale(obs[:n-2])
	thr := math.Max(s.DivergeNoise*sigma, s.DivergeShare*gain)
	if thr <= 0 {
		return false, ""
	}
	a, b := obs[n-2].y-best, obs[n-1].y-best
	if (a > thr && b > thr && b >= a) || b > math.Max(thr, gain) {
		return true, fmt.Sprintf("objective worse than its best by %.3g (threshold %.3g: %.0f× noise or %.0f%% of the gain so far)",
			b, thr, s.DivergeNoise, 100*s.DivergeShare)
	}
	return false, ""
}

// integrity checks tenant-reported progress against the job's own step
// history. It never trusts reported percentage or ETA; it only compares
// them with what the counters show.
func integrity(h *progress.History, axis axisKind, plannerETA Estimate, now float64) Integrity {
	var in Integrity
	seen := pointsUpTo(h, now)
	if len(seen) == 0 {
		return in
	}
	last := seen[len(seen)-1]
	hasCounter := axis != axisTime
	// Progress without steps: reported progress moved since the counter
	// last moved (in this segment), or progress is reported with no counter.
	if !math.IsNaN(last.Progress) && last.Progress > 0 {
		if !hasCounter {
			in.ProgressWithoutSteps = true
			in.Issues = append(in.Issues, "progress reported without any step or epoch counter")
		} else if j := lastCounterMove(seen, axis); j >= 0 && !math.IsNaN(seen[j].Progress) &&
			!math.IsNaN(axis.value(last)) && last.Progress > seen[j].Progress+0.005 {
			// (A report without counters is not evidence: the Hugging Face
			// reporter's final 100 % report drops them.)
			in.ProgressWithoutSteps = true
			in.Issues = append(in.Issues, fmt.Sprintf("progress moved %.0f%%→%.0f%% while the step counter stood still",
				100*seen[j].Progress, 100*last.Progress))
		}
	}
	// Reported vs counter-derived progress.
	if f := last.Fraction(); !math.IsNaN(f) && !math.IsNaN(last.Progress) {
		gap := last.Progress - f
		in.ReportedProgressGap = &gap
		if gap > 0.05 {
			in.Issues = append(in.Issues, fmt.Sprintf("reported progress %.0f%% is ahead of the counters' %.0f%%", 100*last.Progress, 100*f))
		}
	}
	// Jump: the latest increment's rate against the median historical rate,
	// on the counter axis and on reported progress.
	jr := math.Max(jumpRatio(seen, axis.value, 0), jumpRatio(seen, func(p progress.Point) float64 { return p.Progress }, 0.01))
	if !math.IsNaN(jr) && jr > 0 {
		in.JumpRatio = &jr
		if jr >= 10 {
			in.Issues = append(in.Issues, fmt.Sprintf("latest progress moved %.0f× faster than the job's median rate", jr))
		}
	}
	// Reported ETA vs the planner's. Only before any restart: a resumed
	// reporter counts elapsed time from the restart but steps from the
	// start, so its ETA is honestly biased low (and grows for a while).
	if last.Seg == 0 && !math.IsNaN(last.ReportedETA) && plannerETA.Known && plannerETA.Value > 0 {
		r := last.ReportedETA / plannerETA.Value
		in.ETARatio = &r
		if r < 0.25 && plannerETA.Value-last.ReportedETA > 300 {
			in.Issues = append(in.Issues, fmt.Sprintf("reported ETA %.0fs is far below the step history's %.0fs", last.ReportedETA, plannerETA.Value))
		}
	}
	// ETA that never shrinks over the recent reports.
	var etas []progress.Point
	for i := len(seen) - 1; i >= 0 && len(etas) < 8 && seen[i].Seg == last.Seg; i-- {
		if !math.IsNaN(seen[i].ReportedETA) {
			etas = append(etas, seen[i])
		}
	}
	if len(etas) >= 8 && last.Seg == 0 {
		newest, oldest := etas[0], etas[len(etas)-1]
		span := newest.T - oldest.T
		if span >= 60 && span >= 0.1*(newest.T-seen[0].T) && newest.ReportedETA >= oldest.ReportedETA && newest.ReportedETA > 0 {
			in.ETANotShrinking = true
			in.Issues = append(in.Issues, fmt.Sprintf("reported ETA did not shrink over the last %.0fs (%.0fs→%.0fs)", newest.T-oldest.T, oldest.ReportedETA, newest.ReportedETA))
		}
	}
	return in
}

// lastCounterMove is the index of the latest point of the last segment at
// which the progress counter moved (or the segment's first point), -1 when
// there is none.
func lastCounterMove(pts []progress.Point, axis axisKind) int {
	n := len(pts)
	if n == 0 {
		return -1
	}
	seg := pts[n-1].Seg
	for i := n - 1; i > 0 && pts[i-1].Seg == seg; i-- {
		x, px := axis.value(pts[i]), axis.value(pts[i-1])
		if !math.IsNaN(x) && x != px {
			return i
		}
	}
	return segmentStart(pts)
}

// jumpRatio is the largest ratio, within the latest segment, of one
// increment's rate to the median rate of the (up to 16) increments before
// it: a forged jump stays visible after the job resumes normal-looking
// reports. Increments over less than half the median report interval (two
// reports sent back to back, as at an evaluation followed by the run-end
// report) are merged into the next one, and increments no larger than
// minStep (rounding of a reported percentage) are not judged. NaN when
// there is too little history.
func jumpRatio(pts []progress.Point, value func(progress.Point) float64, minStep float64) float64 {
	med, _, ok := reportStats(pts)
	minDT := 1.0
	if ok {
		minDT = math.Max(minDT, med/2)
	}
	var rates []float64
	worst := math.NaN()
	prev := -1
	for i := range pts {
		v := value(pts[i])
		if math.IsNaN(v) {
			continue
		}
		if prev >= 0 && pts[i].Seg != pts[prev].Seg {
			rates, worst = rates[:0], math.NaN()
		} else if prev >= 0 {
			dv, dt := v-value(pts[prev]), pts[i].T-pts[prev].T
			if dt < minDT && dv >= 0 {
				continue // merge into the next increment: keep prev
			}
			if dv > 0 {
				r := dv / dt
				if len(rates) >= 3 && dv > minStep {
					if m := stats.Median(rates[max(0, len(rates)-16):]); m > 0 && (math.IsNaN(worst) || r/m > worst) {
						worst = r / m
					}
				}
				rates = append(rates, r)
			}
		}
		prev = i
	}
	return worst
}
