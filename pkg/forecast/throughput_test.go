package forecast

import (
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/progress-planner/planner/internal/stats"
	"github.com/progress-planner/planner/pkg/progress"
)

// dampedTrend is the shipped share of the pace's trend carried forward.
var dampedTrend = DefaultSettings().DampedTrend

// The pace's trend share is weighed by the job's own hindcasts: a job that
// slowed down early and has kept a constant pace since is extrapolated
// flat; a job that keeps slowing down keeps the damped trend.
func TestSelectTrendByHindcast(t *testing.T) {
	samples := func(tau func(x float64) float64) []paceSample {
		var s []paceSample
		tm := 0.0
		for x := 0.0; x < 100; x++ {
			dt := tau(x + 0.5)
			tm += dt
			s = append(s, paceSample{x0: x, x1: x + 1, dt: dt, t1: tm})
		}
		return s
	}
	settled := samples(func(x float64) float64 { return 1 + math.Min(x, 30)/10 })
	if phi, _, _, _ := selectTrend(settled, dampedTrend); phi > 0.05 {
		t.Errorf("pace constant since x=30: trend share %v, want about 0", phi)
	}
	slowing := samples(func(x float64) float64 { return 1 + x/10 })
	if phi, _, _, _ := selectTrend(slowing, dampedTrend); phi < 0.6*dampedTrend {
		t.Errorf("pace still slowing: trend share %v, want mostly the damped %v", phi, dampedTrend)
	}
}

// stages are pace samples of 10 units of progress each, at the given
// seconds per unit.
func stages(taus ...float64) []paceSample {
	var s []paceSample
	x, tm := 0.0, 0.0
	for _, tau := range taus {
		tm += 10 * tau
		s = append(s, paceSample{x0: x, x1: x + 10, dt: 10 * tau, t1: tm})
		x += 10
	}
	return s
}

// The recent window's size is chosen by the same hindcasts: a job that
// reports rarely and has just entered a slower stage (batch or
// sequence-length schedules) is paced by its newest intervals alone,
// which the three-sample window would dilute with the faster stage; a job
// at an even pace keeps the wider window.
func TestSelectTrendWindowByHindcast(t *testing.T) {
	staged := stages(1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2)
	if _, _, w, _ := selectTrend(staged, dampedTrend); w != 1 {
		t.Errorf("a slower stage of two intervals: window %d, want 1", w)
	}
	if p, _ := fitPace(staged, dampedTrend); math.Abs(p.level-2) > 1e-9 {
		t.Errorf("a slower stage of two intervals: level %v, want the stage's 2 (three samples: 1.67)", p.level)
	}
	even := stages(1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1)
	if _, _, w, _ := selectTrend(even, dampedTrend); w != levelWindows[0] {
		t.Errorf("an even pace: window %d, want the wider %d", w, levelWindows[0])
	}
	if _, _, w, _ := selectTrend(staged[:7], dampedTrend); w != levelWindows[0] {
		t.Errorf("too few samples for a hindcast: window %d, want the wider %d", w, levelWindows[0])
	}
}

// Three pace samples already carry a trend: a short run that is slowing by
// its schedule a quarter of the way in is given more time than its recent
// rate alone would (half the fitted trend, with no hindcast to weigh it).
func TestFitPaceTrendFromThreeSamples(t *testing.T) {
	s := stages(1, 1.5, 2)
	p, ok := fitPace(s, dampedTrend)
	if !ok || p.phi != dampedTrend {
		t.Fatalf("fitPace: ok %v, trend share %v, want the damped %v", ok, p.phi, dampedTrend)
	}
	if math.Abs(p.slope-0.05) > 1e-9 {
		t.Errorf("slope %v, want 0.05 s per unit per unit", p.slope)
	}
	secs, _ := p.timeTo(100)
	if flat := p.level * 70; secs <= flat*1.5 {
		t.Errorf("time to 100: %v s, want well above the flat %v s of the recent rate", secs, flat)
	}
	if robustSlope(s[:2]) != 0 {
		t.Errorf("two samples: slope %v, want none", robustSlope(s[:2]))
	}
}

// The cost of a trend from few samples, on a job whose pace does not
// change: interval times with a 5 % log-normal spread, 16 intervals in
// all, forecast after the first 3, 4 and 6. The trend fitted to noise
// moves the ETA, so the flat rate erred least, the damped trend more and
// the full trend most; the pace as fitted (the damped trend, or the full
// one where clearTrend sees a change ten times the spread) stays within a
// point of the damped trend (docs/backtest.md 7.13 and 7.14 give the
// medians; `go test ./pkg/forecast -run TestPaceTrendCostOnAnEvenPace -v`
// prints them). It is the price of the trend that slowing jobs need.
func TestPaceTrendCostOnAnEvenPace(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	shares := []float64{0, dampedTrend, 1}
	for _, n := range []int{3, 4, 6} {
		errs := make([][]float64, len(shares)+1)
		for rep := 0; rep < 2000; rep++ {
			const total = 16
			s := make([]paceSample, total)
			tm := 0.0
			for i := range s {
				dt := math.Exp(0.05 * rng.NormFloat64())
				tm += dt
				s[i] = paceSample{x0: float64(i) / total, x1: float64(i+1) / total, dt: dt, t1: tm}
			}
			left := tm - s[n-1].t1
			p, _ := fitPace(s[:n], dampedTrend)
			secs, _ := p.timeTo(1)
			errs[len(shares)] = append(errs[len(shares)], math.Abs(secs-left)/left)
			for i, share := range shares {
				p.phi = share
				secs, _ := p.timeTo(1)
				errs[i] = append(errs[i], math.Abs(secs-left)/left)
			}
		}
		md := make([]float64, len(errs))
		for i := range errs {
			md[i] = stats.MedianInPlace(errs[i])
		}
		t.Logf("%d samples: median ETA error flat %.1f %%, damped trend %.1f %%, full trend %.1f %%, as fitted %.1f %%", n, 100*md[0], 100*md[1], 100*md[2], 100*md[3])
		if !(md[0] < md[1] && md[1] < md[2]) {
			t.Errorf("%d samples: medians %v, want flat < damped < full on an even pace", n, md[:3])
		}
		if md[3] > md[1]+0.01 {
			t.Errorf("%d samples: as fitted %.3f, want within a point of the damped trend's %.3f", n, md[3], md[1])
		}
	}
}

// A job too young for a hindcast that slows in stages, steady within each
// (one report every 5 s, step time 0.032 → 0.059 s like a modern nanoGPT
// record), carries its trend in full; a job at an even pace whose
// intervals alternate 5 % either side, and one that sped up once and then
// held its pace, keep the damped share.
func TestClearTrendWithoutHindcast(t *testing.T) {
	samples := func(taus ...float64) []paceSample {
		var s []paceSample
		x, tm := 0.0, 0.0
		for _, tau := range taus {
			tm += 5
			dx := 5 / tau / 1775
			s = append(s, paceSample{x0: x, x1: x + dx, dt: 5, t1: tm})
			x += dx
		}
		return s
	}
	if p, _ := fitPace(samples(0.032, 0.032, 0.032, 0.059, 0.059, 0.059), dampedTrend); p.phi != 1 {
		t.Errorf("steady stages: trend share %v, want 1", p.phi)
	}
	if p, _ := fitPace(samples(0.0336, 0.0304, 0.0336, 0.0304, 0.0336, 0.0304), dampedTrend); p.phi != dampedTrend {
		t.Errorf("an even pace, 5 %% either side: trend share %v, want the damped %v", p.phi, dampedTrend)
	}
	if p, _ := fitPace(samples(0.048, 0.04, 0.032, 0.032, 0.032, 0.032), dampedTrend); p.phi != dampedTrend {
		t.Errorf("a one-off speed-up: trend share %v, want the damped %v", p.phi, dampedTrend)
	}
}

// pausingJob reports every 5 s while it trains (10 steps a report) and
// stops for pause seconds after every 500 steps up to step pausesUntil to
// evaluate, going on reporting the same step as it waits; 10,000 steps in
// all. It returns the history up to upTo and the time the job reaches its
// last step.
func pausingJob(pause, upTo float64, pausesUntil int) (*progress.History, float64) {
	return evaluatingJob(500, 10000, pausesUntil, pause, upTo)
}

// evaluatingJob is pausingJob with an evaluation at the first report past
// every multiple of `every` steps and total steps in all.
func evaluatingJob(every, total, pausesUntil int, pause, upTo float64) (*progress.History, float64) {
	h := progress.NewHistory(progress.DefaultLimits())
	t, end := 0.0, 0.0
	for step := 0; step <= total; step += 10 {
		loss := 1 + 3/(1+float64(step)/2000)
		st := func() progress.TrainerStatus {
			return progress.TrainerStatus{ProgressPercentage: f64(math.Floor(100 * float64(step) / float64(total))),
				Metrics: metrics("loss", strconv.FormatFloat(loss, 'g', 6, 64), "current_step", strconv.Itoa(step), "total_steps", strconv.Itoa(total))}
		}
		if t <= upTo {
			h.Observe(t, st())
		}
		end = t
		t += 5
		if step > 0 && step/every > (step-10)/every && step < total && step <= pausesUntil {
			for w := 5.0; w < pause; w += 5 {
				if t <= upTo {
					h.Observe(t, st())
				}
				t += 5
			}
			t += 5
		}
	}
	return h, end
}

// A job that stops to evaluate runs in cycles of training and pause; its
// recent pace is taken over whole cycles (levelWindow), so the ETA counts
// the pauses ahead in their true share wherever in its cycle the job is:
// mid-training, just after a pause, mid-pause (within 4.5 % here). A
// window of the last fifth of the run, shorter than one cycle here, saw a
// stretch with or without a pause: 10 of these 12 forecasts erred by 13 to
// 28 %.
func TestETAOverWholePauseCycles(t *testing.T) {
	_, end := pausingJob(300, math.Inf(1), 10000)
	for _, frac := range []float64{0.35, 0.5, 0.65} {
		for _, into := range []float64{0, 100, 250, 400} { // seconds into a 550 s cycle
			now := math.Floor(frac*end/550)*550 + into
			h, _ := pausingJob(300, now, 10000)
			f := Fit(h, lossMin, now, DefaultSettings())
			want := end - now
			if !f.ETA.Known || math.Abs(f.ETA.Value-want)/want > 0.06 {
				t.Errorf("at %.0f s (%.0f s into a cycle): ETA %+v, want %.0f s ± 6 %%", now, into, f.ETA, want)
			}
			if !slices.ContainsFunc(f.Notes, func(n string) bool { return strings.Contains(n, "whole cycle") }) {
				t.Errorf("at %.0f s: no note on the cycles in %q", now, f.Notes)
			}
		}
	}
}

// A job that paused twice early and has trained without a pause since is
// paced by its recent window, not by the old cycle between its pauses.
func TestETAAfterTheJobStoppedPausing(t *testing.T) {
	_, end := pausingJob(300, math.Inf(1), 1000)
	for _, now := range []float64{0.5 * end, 0.75 * end} {
		h, _ := pausingJob(300, now, 1000)
		f := Fit(h, lossMin, now, DefaultSettings())
		if want := end - now; !f.ETA.Known || math.Abs(f.ETA.Value-want)/want > 0.06 {
			t.Errorf("at %.0f s: ETA %+v, want %.0f s ± 6 %%", now, f.ETA, want)
		}
		if slices.ContainsFunc(f.Notes, func(n string) bool { return strings.Contains(n, "whole cycle") }) {
			t.Errorf("at %.0f s: a note on cycles the job no longer keeps: %q", now, f.Notes)
		}
	}
}

// A job that has paused once, at its first evaluation, and trains on
// before the next: its recent window holds the pause whole (right after
// it) or not at all (later), and the ETA was off by the pause itself: the
// old window put each of these five cuts 57 to 74 % early. Paced over the
// longer stretch beside its one pause (onePauseWindow), they are 0 to 6 %
// late.
func TestETAOfAJobThatHasPausedOnce(t *testing.T) {
	for _, job := range []struct{ every, total int }{{100, 1000}, {200, 2000}} {
		_, end := evaluatingJob(job.every, job.total, job.total, 150, math.Inf(1))
		pauseEnd := float64(job.every)/2 + 155 // 5 s per 10 steps, then the pause
		for into := 30.0; into < float64(job.every)/2; into += 20 {
			now := pauseEnd + into
			h, _ := evaluatingJob(job.every, job.total, job.total, 150, now)
			f := Fit(h, lossMin, now, DefaultSettings())
			if want := end - now; !f.ETA.Known || math.Abs(f.ETA.Value-want)/want > 0.11 {
				t.Errorf("evaluating every %d steps, %.0f s after its first pause: ETA %+v, want %.0f s ± 11 %% (%+.0f %%)", job.every, into, f.ETA, want, 100*(f.ETA.Value-want)/want)
			}
		}
	}
}

// A job in its last pause before the end, with less than a cycle of
// work left: a level over whole cycles spreads the pauses over the work
// (one second a step here, pause included), so 100 steps were 100 s and
// the time already spent in the pause was taken off them: the old ETA
// was 56 to 100 % short at these cuts. The rest of a typical pause plus
// the training left at its own pace (pace.left) is exact here.
func TestETAInsideTheLastPause(t *testing.T) {
	_, end := evaluatingJob(300, 1000, 1000, 150, math.Inf(1))
	const pauseFrom = 750 // step 900: 450 s of training and two 150 s pauses
	for _, since := range []float64{20, 60, 100, 140} {
		now := pauseFrom + since
		h, _ := evaluatingJob(300, 1000, 1000, 150, now)
		f := Fit(h, lossMin, now, DefaultSettings())
		if want := end - now; !f.ETA.Known || math.Abs(f.ETA.Value-want)/want > 0.05 {
			t.Errorf("%.0f s into the pause at step 900: ETA %+v, want %.0f s ± 5 %%", since, f.ETA, want)
		}
	}
}

// The time to target of the job of TestETAInsideTheLastPause, whose
// target its loss crosses at step 945 and is seen crossed at step 950's
// report: inside the pause at step 900, it counts the rest of the pause
// the same way the ETA does (pace.left). The old subtraction gave 25 s
// at the first cut here and 0 s at the others, against 155, 115, 75 and
// 35 s.
func TestTimeToTargetInsideTheLastPause(t *testing.T) {
	target := 1 + 3/(1+945.0/2000)
	obj := progress.Objective{Metric: "loss", Direction: progress.Minimize, Target: &target}
	const pauseFrom, seenAt = 750, 925 // step 900 reached; step 950 reported
	for _, since := range []float64{20, 60, 100, 140} {
		now := pauseFrom + since
		h, _ := evaluatingJob(300, 1000, 1000, 150, now)
		f := Fit(h, obj, now, DefaultSettings())
		if want := seenAt - now; f.TimeToTarget == nil || !f.TimeToTarget.Known || math.Abs(f.TimeToTarget.Value-want) > 5 {
			t.Errorf("%.0f s into the pause at step 900: time to target %+v, want %.0f s ± 5 s", since, f.TimeToTarget, want)
		}
	}
}

// A job in its first evaluation pause, reporting as it waits: nothing
// says yet how long its pauses take, but every report says it has not
// moved, so the time it stands still does none of the work left. The old
// ETA took the whole pause off the training still to do (350 s) and fell
// by a second each second, to 0 s in a longer pause.
func TestETAWhileTheJobStandsStill(t *testing.T) {
	const pauseFrom = 150 // step 300: 150 s of training
	h, _ := evaluatingJob(300, 1000, 1000, 150, pauseFrom)
	at := Fit(h, lossMin, pauseFrom, DefaultSettings())
	for _, since := range []float64{15, 30, 45} {
		now := pauseFrom + since
		h, _ := evaluatingJob(300, 1000, 1000, 150, now)
		f := Fit(h, lossMin, now, DefaultSettings())
		if !f.ETA.Known || math.Abs(f.ETA.Value-at.ETA.Value) > 5 {
			t.Errorf("%.0f s into the first pause: ETA %+v, want %.0f s (as when it stopped) ± one report interval", since, f.ETA, at.ETA.Value)
		}
	}
}

// A job that evaluates every two or three reports (every 27 steps at 10 a
// report) and pauses far longer than it trains between evaluations: its
// pace samples are seconds of training or minutes of pause per step, and
// the cycles are uneven. A trend fitted through both kinds of sample
// follows where the pauses happen to fall: the old fit erred by 19, 20
// and 23 % at 20, 25 and 50 % of this run. Fitted on the training alone
// (trainingSamples) it is flat, as this job's training is, and the level
// counts the pauses: within 14 % at each cut here.
func TestETAOfAJobThatPausesAtEveryFewReports(t *testing.T) {
	_, end := evaluatingJob(27, 460, 460, 150, math.Inf(1))
	for _, frac := range []float64{0.2, 0.25, 0.3, 0.5, 0.75} {
		now := frac * end
		h, _ := evaluatingJob(27, 460, 460, 150, now)
		f := Fit(h, lossMin, now, DefaultSettings())
		if want := end - now; !f.ETA.Known || math.Abs(f.ETA.Value-want)/want > 0.15 {
			t.Errorf("at %.0f %% (%.0f s): ETA %+v, want %.0f s ± 15 %%", 100*frac, now, f.ETA, want)
		}
	}
}
