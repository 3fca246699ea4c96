package forecast

import (
	"math"

	"github.com/progress-planner/planner/internal/stats"
	"github.com/progress-planner/planner/pkg/progress"
)

// Throughput estimation.
//
// A run's pace is measured as seconds per unit of progress (tau) from
// consecutive reports whose progress moved, segment by segment: intervals
// that span a restart are never used, and the first interval of a segment
// (compile, data loading, warm-up) is dropped when the segment has others.
// Reports that did not move progress (evaluations) fold their time into the
// next interval that did, so evaluation pauses are counted as the run's
// normal cost rather than as outliers.
//
// The forecast combines a recent level (the ratio estimator over the most
// recent fifth of observed time, stretched to at least three samples or,
// where the job's own hindcasts favour it, to its newest alone; for a job
// that pauses, over its latest whole cycles of training and pause:
// levelWindow) with a
// linear trend of tau against progress fitted robustly over the whole
// history, of which a share is carried forward: none and half (damped),
// weighed by how well each predicted the job's own recent past
// (selectTrend), or, for a job too young for that, the damped share unless
// its slowing is far beyond its noise (clearTrend). Runs often slow down
// as they go (batch-size or sequence-length schedules), which a whole-run
// average and a recent-window rate both miss; the damping (Gardner &
// McKenzie's damped trend) keeps the extrapolation from overshooting when
// the change was a one-off step.

// paceSample is one interval: progress from x0 to x1 took dt seconds.
type paceSample struct {
	x0, x1, dt float64
	t1         float64 // end time
	// pause: the interval holds a pause (markPauses).
	pause bool
}

// start is when the interval began.
func (q paceSample) start() float64 { return q.t1 - q.dt }

// pace is a fitted model of seconds per unit progress.
type pace struct {
	level   float64 // recent seconds per unit progress
	xLevel  float64 // progress at the centre of the recent window
	slope   float64 // d tau / d x (robust, over the whole history)
	relSD   float64 // relative spread of recent per-interval tau
	samples int
	xLast   float64 // progress at the latest point that moved
	tLast   float64 // time of that point
	phi     float64 // share of the trend carried forward (selectTrend)
	cycles  int     // whole pause cycles the level spans (levelWindow; 0: none)
	hindErr float64 // the weighted hindcast error (relative; 0: none)
	// perAxis: units of the pace's own axis per unit of the objective's
	// axis (1/total when the pace runs on the fraction done and the
	// objective on steps or epochs; 1 otherwise). Set by measurePace.
	perAxis float64
	// pauseCost: for a job that pauses, what a pause adds to its interval
	// (the median over its pauses) and its pace while training (0 for one
	// that never paused); its typical interval without a pause, seconds.
	pauseSecs, trainLevel, trainDT float64
}

// paceSamples extracts intervals along axis from points. axis returns the
// progress value of a point (NaN when absent).
func paceSamples(pts []progress.Point, axis func(progress.Point) float64) []paceSample {
	// At most one sample per point: one allocation each.
	out := make([]paceSample, 0, len(pts))
	seg := make([]paceSample, 0, len(pts))
	for i := 0; i < len(pts); {
		// One segment at a time.
		j := i
		for j < len(pts) && pts[j].Seg == pts[i].Seg {
			j++
		}
		seg = seg[:0]
		prev := -1
		for k := i; k < j; k++ {
			x := axis(pts[k])
			if math.IsNaN(x) {
				continue
			}
			if prev >= 0 {
				px := axis(pts[prev])
				if x > px && pts[k].T > pts[prev].T {
					seg = append(seg, paceSample{x0: px, x1: x, dt: pts[k].T - pts[prev].T, t1: pts[k].T})
				} else if x < px {
					// A counter that goes backwards inside a segment is
					// not a restart we recognised; start over.
					prev = k
					continue
				} else {
					continue // same progress: fold its time into the next move
				}
			}
			prev = k
		}
		kept := seg
		if len(kept) >= 3 {
			kept = kept[1:] // warm-up
		}
		out = append(out, kept...)
		i = j
	}
	markPauses(out)
	return out
}

// pauseMultiple: a sample whose seconds per unit progress exceed this
// multiple of the job's median holds a pause (an evaluation, a checkpoint)
// rather than training alone.
const pauseMultiple = 4

// markPauses flags the samples that hold a pause (pauseMultiple). The
// median is the whole history's, so the hindcasts' earlier windows see
// the same pauses as the forecast does. Three samples are enough: a job
// that evaluates early shows its first pause among its first few
// intervals, and its level needs to know it (onePauseWindow).
func markPauses(s []paceSample) {
	if len(s) < 3 {
		return
	}
	taus := make([]float64, len(s))
	for i, q := range s {
		taus[i] = q.dt / (q.x1 - q.x0)
	}
	thr := pauseMultiple * stats.MedianInPlace(taus) // taus is this call's own
	for i := range s {
		s[i].pause = s[i].dt/(s[i].x1-s[i].x0) > thr
	}
}

// fitPace fits the pace model and lets the job's own history weigh how
// much of the fitted trend to carry forward, up to damped
// (Settings.DampedTrend; selectTrend; clearTrend when the history is too
// short for that). ok is false with no samples.
func fitPace(s []paceSample, damped float64) (p pace, ok bool) {
	phi, hindErr, minSamples, judged := selectTrend(s, damped)
	p, ok = fitPaceLevel(s, minSamples)
	p.phi, p.hindErr = phi, hindErr
	if ok && !judged && p.clearTrend(s[0].x0) {
		p.phi = 1
	}
	if ok {
		p.pauseSecs, p.trainLevel, p.trainDT = pauseCost(s)
	}
	return p, ok
}

// pauseCost is, for a job with at least one pause sample and one without,
// the median seconds a pause adds to its interval (beyond the training it
// holds, at the training pace) and that pace (the ratio estimator over the
// samples without a pause), zeros otherwise; and, for every job, its
// median interval without a pause.
func pauseCost(s []paceSample) (pauseSecs, trainLevel, trainDT float64) {
	pauses := 0
	var sumDT, sumDX float64
	dts := make([]float64, 0, len(s))
	for _, q := range s {
		if q.pause {
			pauses++
		} else {
			sumDT += q.dt
			sumDX += q.x1 - q.x0
			dts = append(dts, q.dt)
		}
	}
	if len(dts) > 0 {
		trainDT = stats.MedianInPlace(dts)
	}
	if pauses == 0 || sumDX <= 0 {
		return 0, 0, trainDT
	}
	trainLevel = sumDT / sumDX
	extra := dts[:0] // the intervals' median is taken
	for _, q := range s {
		if q.pause {
			extra = append(extra, math.Max(0, q.dt-trainLevel*(q.x1-q.x0)))
		}
	}
	return stats.MedianInPlace(extra), trainLevel, trainDT
}

// pausingFor: a job standing still for more than this many of its
// training intervals since its latest move is taken to be in a pause.
const pausingFor = 2

// left is the time still to run from now to progress xEnd, given secs
// from the latest move (timeTo), since seconds gone since it and seen
// seconds since a report last showed the job where that move left it (a
// heartbeat, an evaluation at the same step; seen <= since).
//   - A level over whole cycles spreads the pauses over the work, so with
//     less than a cycle of work left and the job in a pause it says
//     "done" while the pause still runs: for a job that pauses and is
//     pausing now, the time left is at least what remains of a typical
//     pause plus the rest at its training pace.
//   - A job that has not paused before, standing still for longer than
//     its intervals take, has its pace from intervals without such a
//     stall, and the time it has been seen standing still did none of
//     the work: only the time since it was last seen comes off (in its
//     first evaluation pause the whole pause came off, and the ETA fell
//     to 0 s with most of the run ahead). A job whose every interval
//     holds a pause has it in its pace, and is not standing still for
//     longer than an interval.
func (p pace) left(secs, xEnd, since, seen float64) float64 {
	left := secs - since
	if p.trainDT <= 0 || since <= pausingFor*p.trainDT {
		return left // no pace, or not standing still
	}
	if p.pauseSecs > 0 {
		if xEnd > p.xLast {
			left = math.Max(left, math.Max(0, p.pauseSecs-since)+p.trainLevel*(xEnd-p.xLast))
		}
		return left
	}
	return secs - seen
}

// position moves the pace's latest point to where the job is now when
// that is newer than its last sample: a job restarted without a sample in
// its new segment yet (one report since the restart, or a first interval
// from the restart's 0 % report that counts no work) is at the position
// its new segment shows, reached at that report, not where its last
// sample before the restart ended; the time it has run since counts from
// there. Within a segment the newest move ends the last sample, so nothing
// changes.
func (p *pace) position(pts []progress.Point, axis func(progress.Point) float64) {
	i := len(pts) - 1
	for i >= 0 && math.IsNaN(axis(pts[i])) {
		i--
	}
	if i < 0 {
		return
	}
	x := axis(pts[i])
	for i > 0 && pts[i-1].Seg == pts[i].Seg && axis(pts[i-1]) == x {
		i-- // back to when x was reached
	}
	if pts[i].T > p.tLast {
		p.xLast, p.tLast = x, pts[i].T
	}
}

// clearTrendMultiple: how many times the recent spread of the pace the
// slowing its trend describes must exceed to be carried in full without a
// hindcast (clearTrend).
const clearTrendMultiple = 10

// clearTrend reports whether the pace has slowed over the history, from
// progress x0 on, by far more than its recent spread (clearTrendMultiple
// × relSD). A job too young for a hindcast gets the damped trend, a hedge
// against a one-off change; but a job whose pace is steady within each
// stage and slower from stage to stage (sequence-length or batch-size
// schedules) is seen slowing as clearly as a job can be, and it keeps
// slowing (docs/backtest.md 7.14). A speed-up is not carried: its usual
// causes (caches filling, autotuning) happen once, and a job cannot
// outrun its compute. A job at an even pace with noisy intervals rarely
// shows a change ten times its own spread (TestPaceTrendCostOnAnEvenPace).
func (p pace) clearTrend(x0 float64) bool {
	change := p.slope * (p.xLast - x0)
	return change > 0 && change > clearTrendMultiple*p.relSD*p.level
}

// trendShares are the two shares of the fitted trend weighed by
// selectTrend: none (the recent rate, as a straight line would) and the
// damped trend (Settings.DampedTrend).
func trendShares(damped float64) [2]float64 { return [2]float64{0, damped} }

// levelWindows are the two smallest sample counts of the recent window
// that selectTrend chooses between: three (robust to one odd interval)
// and one (the latest stage alone: a run that slows in stages is
// described by its newest interval, which older ones only dilute).
var levelWindows = [...]int{3, 1}

// minHindcastSamples: fewer pace samples than this and selectTrend has
// no origin to score from.
const minHindcastSamples = 8

// selectTrend scores the pace methods (the two window sizes, each with
// the two trend shares) on the job's own history with rolling-origin
// hindcasts — fitted on the samples up to 85, 90 and 95 % of the observed
// time, asked how long the rest took. It keeps the window whose better
// method erred less (the wider on a tie) and combines its two trend
// shares with inverse-squared-error weights (Bates–Granger): it returns
// the combined share, the weighted hindcast error and the window.
// The origins are recent on purpose: runs change pace in stages (batch or
// sequence-length schedules), and the question is which method describes
// the stage the job is in now. With too little history: the damped trend
// over the wider window, no error, and judged false.
func selectTrend(s []paceSample, damped float64) (phi, hindErr float64, window int, judged bool) {
	shares := trendShares(damped)
	var errs [len(levelWindows)][len(shares)]float64
	n := 0
	if len(s) >= minHindcastSamples {
		n = hindcastPace(s, shares, &errs)
	}
	if n == 0 {
		return damped, 0, levelWindows[0], false
	}
	best := 0
	for wi := range levelWindows {
		if min(errs[wi][0], errs[wi][1]) < min(errs[best][0], errs[best][1]) {
			best = wi
		}
	}
	// Inverse-squared-error weights over the two shares.
	e0, e1 := errs[best][0]/float64(n), errs[best][1]/float64(n)
	if e0+e1 <= 0 {
		return damped, 0, levelWindows[best], true
	}
	w := e0 * e0 / (e0*e0 + e1*e1)
	return w * shares[1], w*e1 + (1-w)*e0, levelWindows[best], true
}

// hindcastPace adds each method's relative error at each usable origin to
// errs and returns the number of origins.
func hindcastPace(s []paceSample, shares [2]float64, errs *[len(levelWindows)][2]float64) int {
	last := s[len(s)-1]
	t0 := s[0].start()
	n := 0
	for _, f := range [...]float64{0.85, 0.9, 0.95} {
		cut := t0 + f*(last.t1-t0)
		k := 0
		for k < len(s) && s[k].t1 <= cut {
			k++
		}
		if k < 4 || k == len(s) {
			continue
		}
		// One fit per origin (its level is the first window's); only the
		// level differs between windows.
		p0, ok := fitPaceLevel(s[:k], levelWindows[0])
		actual := last.t1 - p0.tLast
		if !ok || actual <= 0 {
			continue
		}
		for wi, window := range levelWindows {
			if wi > 0 {
				from, to, _ := levelWindow(s[:k], window)
				p0.level, p0.xLevel, _ = ratioLevel(s[from:to])
			}
			for i, share := range shares {
				p0.phi = share
				pred, _ := p0.timeTo(last.x1)
				errs[wi][i] += math.Abs(pred-actual) / actual
			}
		}
		n++
	}
	return n
}

// fitPaceLevel fits the recent level over the window of at least
// minSamples samples, the spread over the wider window (one sample has
// none) and the trend.
func fitPaceLevel(s []paceSample, minSamples int) (p pace, ok bool) {
	if len(s) < 1 {
		return pace{}, false
	}
	last := s[len(s)-1]
	p.xLast, p.tLast, p.samples = last.x1, last.t1, len(s)
	wideFrom, wideTo, wideCycles := levelWindow(s, levelWindows[0])
	wide := s[wideFrom:wideTo]
	wideLevel, wideX, ok := ratioLevel(wide)
	if !ok {
		return pace{}, false
	}
	// Relative spread of recent per-interval tau, weighted by progress.
	var v, sumDX float64
	for _, q := range wide {
		d := q.dt/(q.x1-q.x0)/wideLevel - 1
		v += d * d * (q.x1 - q.x0)
		sumDX += q.x1 - q.x0
	}
	p.relSD = math.Sqrt(v / sumDX)
	p.level, p.xLevel, p.cycles = wideLevel, wideX, wideCycles
	if from, to, cycles := levelWindow(s, minSamples); from != wideFrom || to != wideTo {
		if p.level, p.xLevel, ok = ratioLevel(s[from:to]); !ok {
			return pace{}, false
		}
		p.cycles = cycles
	}
	p.slope = robustSlope(trainingSamples(s))
	return p, true
}

// levelWindow is the recent level's window s[from:to]: recentStart's,
// or, for a job that pauses (at each evaluation, say) and whose recent
// window holds fewer than three pauses, its latest whole cycles: from
// just after its third-latest pause (or second-latest) to the end of its
// latest one. A window shorter than the job's cycle sees a stretch with
// or without a pause and is biased fast or slow by chance; whole cycles
// count the pauses in their true share. Only while the job keeps its
// rhythm: one that has run longer than its last cycle since its latest
// pause (two slow intervals early, say, and none since) is paced by its
// recent window. A job that has paused once is paced by onePauseWindow.
// cycles counts the whole cycles (0: the recent window; 1 for a single
// pause's stretch).
func levelWindow(s []paceSample, minSamples int) (from, to, cycles int) {
	from, to = recentStart(s, minSamples), len(s)
	var pauses [3]int // latest first
	n := 0
	for i := len(s) - 1; i >= 0 && n < len(pauses); i-- {
		if s[i].pause {
			pauses[n] = i
			n++
		}
	}
	if n == 1 {
		return onePauseWindow(s, pauses[0])
	}
	if n < 2 || (n == 3 && pauses[2] >= from) {
		return from, to, 0
	}
	cycle := s[pauses[0]].t1 - s[pauses[1]].t1
	if s[len(s)-1].t1-s[pauses[0]].t1 > cycle {
		return from, to, 0
	}
	return pauses[n-1] + 1, pauses[0] + 1, n - 1
}

// onePauseWindow is the level's window of a job that has paused once, at
// sample p: the longer, in progress, of the stretch that ends with the
// pause and the one that starts with it. Each holds one pause and as much
// training as the job has shown beside it, so the longer is the nearer to
// a whole cycle (at worst a part of one, and the pace reads slow); a
// window of the last fifth of the run holds the pause whole or not at all
// and is off by the pause itself.
func onePauseWindow(s []paceSample, p int) (from, to, cycles int) {
	if s[p].x1-s[0].x0 >= s[len(s)-1].x1-s[p].x0 {
		return 0, p + 1, 1
	}
	return p, len(s), 1
}

// trainingSamples is s as the trend should see it. For a job that pauses
// (two or more samples hold a pause) the samples are training alone or a
// pause, seconds against minutes per unit of progress, and a trend through
// both follows where the pauses happen to fall. The pauses cost about the
// same each time (an evaluation pass), so the slowing of such a job is
// the slowing of its training: the trend is fitted on the samples without
// a pause and carried on the level, which counts the pauses in their
// share. Other jobs' samples are returned as they are.
func trainingSamples(s []paceSample) []paceSample {
	pauses := 0
	for _, q := range s {
		if q.pause {
			pauses++
		}
	}
	if pauses < 2 {
		return s
	}
	out := make([]paceSample, 0, len(s)-pauses)
	for _, q := range s {
		if !q.pause {
			out = append(out, q)
		}
	}
	return out
}

// recentStart is where the recent window begins: the samples wholly
// within the last fifth of the observed time, at least minSamples (or
// all).
func recentStart(s []paceSample, minSamples int) int {
	last := s[len(s)-1]
	w0 := last.t1 - 0.2*(last.t1-s[0].start())
	k := len(s)
	for k > 0 && (s[k-1].start() >= w0 || len(s)-k < minSamples) {
		k--
	}
	return k
}

// ratioLevel is the ratio estimator of seconds per unit progress over s,
// and the progress-weighted centre of s.
func ratioLevel(s []paceSample) (level, xLevel float64, ok bool) {
	var sumDT, sumDX, sumX float64
	for _, q := range s {
		sumDT += q.dt
		sumDX += q.x1 - q.x0
		sumX += (q.x0 + q.x1) / 2 * (q.x1 - q.x0)
	}
	if sumDX <= 0 {
		return 0, 0, false
	}
	return sumDT / sumDX, sumX / sumDX, true
}

// minSlopeSamples is the fewest pace samples a trend is fitted from:
// three, the fewest with a residual. Early in a run the samples are few
// (a short run reports a handful by a quarter of the way), which is when a
// run that slows by schedule is furthest from its end; with no trend its
// pace is the recent rate, which underestimates what is left (docs/backtest.md
// 7.13: nanoGPT ETA at 25 % 28.8 → 15.0 % against linear's 20.7 %).
const minSlopeSamples = 3

// robustSlope fits tau = a + b x by weighted least squares (weights =
// progress covered) with two Huber reweighting rounds; it returns b, or 0
// when there are too few samples or too little spread in x to tell.
func robustSlope(s []paceSample) float64 {
	if len(s) < minSlopeSamples {
		return 0
	}
	n := len(s)
	// One allocation for the six columns (this runs at every forecast).
	buf := make([]float64, 6*n)
	x, y, w, rw, res, tmp := buf[:n], buf[n:2*n], buf[2*n:3*n], buf[3*n:4*n], buf[4*n:5*n], buf[5*n:]
	for i, q := range s {
		dx := q.x1 - q.x0
		x[i] = (q.x0 + q.x1) / 2
		y[i] = q.dt / dx
		w[i] = dx
	}
	for i := range rw {
		rw[i] = 1
	}
	var a, b float64
	for round := 0; round < 3; round++ {
		var sw, sx, sy, sxx, sxy float64
		for i := range x {
			ww := w[i] * rw[i]
			sw += ww
			sx += ww * x[i]
			sy += ww * y[i]
		}
		if sw <= 0 {
			return 0
		}
		mx, my := sx/sw, sy/sw
		for i := range x {
			ww := w[i] * rw[i]
			sxx += ww * (x[i] - mx) * (x[i] - mx)
			sxy += ww * (x[i] - mx) * (y[i] - my)
		}
		if sxx <= 0 {
			return 0
		}
		b = sxy / sxx
		a = my - b*mx
		// Huber weights on standardized residuals.
		for i := range x {
			res[i] = math.Abs(y[i] - a - b*x[i])
		}
		scale := 1.4826 * stats.MedianInPlace(append(tmp[:0], res...))
		if scale <= 0 {
			break
		}
		for i := range x {
			r := res[i] / scale
			if r > 1.345 {
				rw[i] = 1.345 / r
			} else {
				rw[i] = 1
			}
		}
	}
	return b
}

// timeTo returns the seconds, counted from the latest moving point, needed
// to reach progress xEnd, and its relative uncertainty.
// timeToAxis is timeTo for a position x on the objective's axis (a
// crossing of the target).
func (p pace) timeToAxis(x float64) (secs, rel float64) { return p.timeTo(x * p.perAxis) }

func (p pace) timeTo(xEnd float64) (secs, rel float64) {
	if xEnd <= p.xLast {
		return 0, p.relSD
	}
	d := xEnd - p.xLast
	flat := p.level * d
	// tau(x) = level + phi*slope*(x - xLevel), floored at a fifth of level.
	b := p.phi * p.slope
	trend := p.level*d + b*((xEnd-p.xLevel)*(xEnd-p.xLevel)-(p.xLast-p.xLevel)*(p.xLast-p.xLevel))/2
	secs = math.Max(trend, 0.2*flat)
	// Uncertainty: recent spread, shrinking with the number of samples, plus
	// the model disagreement between a flat and a trended pace.
	noise := p.relSD / math.Sqrt(math.Max(1, float64(p.samples)/4))
	model := math.Abs(trend-flat) / math.Max(secs, 1e-9)
	rel = math.Sqrt(noise*noise + model*model + 0.02*0.02)
	// The job's own hindcast error is a floor: it is how far this method
	// was off on this job.
	rel = math.Max(rel, p.hindErr)
	return secs, rel
}
