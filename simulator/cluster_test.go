package simulator

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/progress-planner/planner/pkg/progress"
)

// job builds a job with a curve that never plateaus (onset 1).
func job(name, queue string, arrival float64, gpus int, prio int32, duration float64) *Job {
	c := SimpleCurve(0)
	return &Job{Name: name, Queue: queue, Arrival: arrival, GPUs: gpus, Priority: prio, Duration: duration, TotalSteps: 1000, Curve: c, CurveName: c.Name}
}

func input(qs []Queue, jobs ...*Job) *Input {
	for i, j := range jobs {
		j.ID = i
	}
	return &Input{Name: "test", Queues: qs, Jobs: jobs}
}

func run(t *testing.T, in *Input, policy string, mod func(*Options)) *Result {
	t.Helper()
	o := DefaultOptions()
	o.RecordEvents = true
	if mod != nil {
		mod(&o)
	}
	r, err := Run(in, policy, o)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// trail renders the event log as "t type job[/by]" lines.
func trail(r *Result) string {
	var b strings.Builder
	for _, e := range r.Records {
		fmt.Fprintf(&b, "%g %s %s", e.T, e.Type, e.Job)
		if e.By != "" {
			fmt.Fprintf(&b, "/%s", e.By)
		}
		b.WriteByte('\n')
	}
	return b.String()
}

func wantTrail(t *testing.T, r *Result, want string) {
	t.Helper()
	if got := trail(r); got != strings.TrimLeft(want, "\n") {
		t.Errorf("event order:\n%s\nwant:\n%s", got, strings.TrimLeft(want, "\n"))
	}
}

func outcome(t *testing.T, r *Result, name string) JobOutcome {
	t.Helper()
	for _, j := range r.Jobs {
		if j.Name == name {
			return j
		}
	}
	t.Fatalf("no job %s", name)
	return JobOutcome{}
}

func one(gpus int) []Queue { return []Queue{{Name: "q", GPUs: gpus}} }

// Three jobs, one 4-GPU queue, equal priority: FIFO by arrival; the two
// waiting jobs start together when the first ends.
func TestFIFOAdmissionOrderAndCompletionTimes(t *testing.T) {
	in := input(one(4),
		job("a", "q", 0, 4, 0, 3600),
		job("b", "q", 600, 2, 0, 3600),
		job("c", "q", 1200, 2, 0, 1800))
	r := run(t, in, PolicyKueue, nil)
	wantTrail(t, r, `
0 admit a
3600 finish a
3600 admit b
3600 admit c
5400 finish c
7200 finish b
`)
	s := r.Summary
	if s.Completed != 3 || s.Preemptions != 0 || s.LostGPUHours != 0 {
		t.Errorf("summary %+v", s)
	}
	// JCT: a 1h, b 6600 s, c 4200 s; queueing: 0, 3000 s, 2400 s.
	if got, want := s.JCT.Mean*3600, (3600.0+6600+4200)/3; math.Abs(got-want) > 1e-6 {
		t.Errorf("mean JCT %v s, want %v", got, want)
	}
	if got, want := s.Queueing.Median*3600, 2400.0; math.Abs(got-want) > 1e-6 {
		t.Errorf("median queueing %v s, want %v", got, want)
	}
	// 4×1h + 2×1h + 2×0.5h = 7 GPU-hours over 2h on 4 GPUs.
	if math.Abs(s.UsedGPUHours-7) > 1e-9 || math.Abs(s.Utilization-7.0/8) > 1e-9 {
		t.Errorf("used %v GPU-h, utilization %v", s.UsedGPUHours, s.Utilization)
	}
}

// A higher-priority arrival preempts; the victim loses the work since its
// last checkpoint and finishes later.
func TestPreemptionLosesWorkSinceCheckpoint(t *testing.T) {
	in := input(one(4),
		job("low", "q", 0, 4, 0, 7200),
		job("high", "q", 3000, 2, 100, 3600))
	r := run(t, in, PolicyKueue, func(o *Options) { o.Checkpoint = 1800 })
	// low ran 3000 s, kept 1800 (one checkpoint), lost 1200 s × 4 GPUs;
	// it restarts at 6600 with 5400 s to go.
	wantTrail(t, r, `
0 admit low
3000 preempt low/high
3000 admit high
6600 finish high
6600 admit low
12000 finish low
`)
	s := r.Summary
	if s.Preemptions != 1 || s.PreemptionsPast90 != 0 {
		t.Errorf("preemptions %d, past 90%% %d", s.Preemptions, s.PreemptionsPast90)
	}
	if want := 4 * 1200.0 / 3600; math.Abs(s.LostGPUHours-want) > 1e-9 {
		t.Errorf("lost %v GPU-h, want %v", s.LostGPUHours, want)
	}
	if o := outcome(t, r, "low"); o.End != 12000 || o.Preemptions != 1 {
		t.Errorf("low: %+v", o)
	}
}

// A job evicted past 90 % progress is counted as such; without
// checkpoints it loses everything.
func TestPreemptionPast90AndNoCheckpoint(t *testing.T) {
	in := input(one(1),
		job("low", "q", 0, 1, 0, 1000),
		job("high", "q", 950, 1, 1, 100))
	r := run(t, in, PolicyKueue, func(o *Options) { o.Checkpoint = 0 })
	wantTrail(t, r, `
0 admit low
950 preempt low/high
950 admit high
1050 finish high
1050 admit low
2050 finish low
`)
	if s := r.Summary; s.PreemptionsPast90 != 1 || math.Abs(s.LostGPUHours-950.0/3600) > 1e-9 {
		t.Errorf("past 90%% %d, lost %v GPU-h", s.PreemptionsPast90, s.LostGPUHours)
	}
}

// Victims: lowest priority first, most recently admitted first; the
// minimal set.
func TestPreemptionVictimOrderAndMinimalSet(t *testing.T) {
	in := input(one(4),
		job("l1", "q", 0, 1, 0, 36000),
		job("l2", "q", 10, 1, 0, 36000),
		job("m", "q", 20, 2, 50, 36000),
		job("h", "q", 100, 2, 100, 3600))
	r := run(t, in, PolicyKueue, nil)
	wantTrail(t, r, `
0 admit l1
10 admit l2
20 admit m
100 preempt l2/h
100 preempt l1/h
100 admit h
3700 finish h
3700 admit l1
3700 admit l2
36020 finish m
39700 finish l1
39700 finish l2
`) // l1, l2 ran 100 s and 90 s: no checkpoint yet, all lost

	// Greedy takes the 1-GPU job then the 2-GPU one; the minimal set keeps
	// only the 2-GPU one.
	in = input(one(4),
		job("l1", "q", 0, 1, 0, 36000),
		job("m2", "q", 5, 2, 10, 36000),
		job("x", "q", 6, 1, 50, 36000),
		job("h", "q", 100, 2, 100, 3600))
	r = run(t, in, PolicyKueue, nil)
	if got := trail(r); !strings.Contains(got, "100 preempt m2/h\n100 admit h\n") || strings.Contains(got, "preempt l1") {
		t.Errorf("minimal set: got\n%s", got)
	}
}

// withinClusterQueue: Never: no preemption, the high-priority job waits.
func TestPreemptionNever(t *testing.T) {
	in := input([]Queue{{Name: "q", GPUs: 1, WithinClusterQueue: PreemptNever}},
		job("low", "q", 0, 1, 0, 1000),
		job("high", "q", 10, 1, 100, 100))
	r := run(t, in, PolicyKueue, nil)
	wantTrail(t, r, `
0 admit low
1000 finish low
1000 admit high
1100 finish high
`)
}

// BestEffortFIFO: a head that does not fit does not block smaller work
// behind it.
func TestBestEffortFIFOSkipsBlockedHead(t *testing.T) {
	in := input(one(4),
		job("a", "q", 0, 3, 0, 1000),
		job("big", "q", 10, 4, 0, 100),
		job("small", "q", 20, 1, 0, 100))
	r := run(t, in, PolicyKueue, nil)
	wantTrail(t, r, `
0 admit a
20 admit small
120 finish small
1000 finish a
1000 admit big
1100 finish big
`)
}

// Cohort borrowing: a queue uses its neighbour's idle quota; the neighbour
// waits for it (no reclaim); a borrowing limit caps it; without a cohort
// an oversized job never runs.
func TestCohortBorrowing(t *testing.T) {
	qs := []Queue{{Name: "a", GPUs: 2, Cohort: "c"}, {Name: "b", GPUs: 2, Cohort: "c"}}
	in := input(qs,
		job("a1", "a", 0, 4, 0, 3600),
		job("b1", "b", 10, 2, 0, 100))
	r := run(t, in, PolicyKueue, nil)
	wantTrail(t, r, `
0 admit a1
3600 finish a1
3600 admit b1
3700 finish b1
`)

	limit := 1
	qs[0].BorrowingLimit = &limit
	in = input(qs,
		job("a1", "a", 0, 3, 0, 3600),
		job("a2", "a", 0, 4, 0, 3600),
		job("b1", "b", 10, 1, 0, 100))
	r = run(t, in, PolicyKueue, nil)
	wantTrail(t, r, `
0 admit a1
10 admit b1
110 finish b1
3600 finish a1
`)
	if s := r.Summary; s.Unfinished != 1 || outcome(t, r, "a2").Outcome != "unfinished" {
		t.Errorf("a2 (4 GPUs > 2 + borrowing limit 1) should never run: %+v", s)
	}

	in = input([]Queue{{Name: "a", GPUs: 2}, {Name: "b", GPUs: 2}}, job("a1", "a", 0, 4, 0, 3600), job("b1", "b", 0, 2, 0, 60))
	r = run(t, in, PolicyKueue, nil)
	if s := r.Summary; s.Unfinished != 1 || s.Completed != 1 {
		t.Errorf("without a cohort nothing is borrowed: %+v", s)
	}
}

// LAS: a job that has received an hour of GPU service drops a level; a
// newcomer preempts it.
func TestLASPreemptsTheJobWithMoreService(t *testing.T) {
	in := input(one(1),
		job("long", "q", 0, 1, 0, 3*3600),
		job("short", "q", 2*3600, 1, 0, 1800))
	r := run(t, in, PolicyLAS, func(o *Options) { o.Checkpoint = 1800 })
	// long ran 7200 s (four whole checkpoints: nothing lost).
	wantTrail(t, r, `
0 admit long
7200 preempt long/short
7200 admit short
9000 finish short
9000 admit long
12600 finish long
`)
	if r.Summary.LostGPUHours != 0 {
		t.Errorf("lost %v", r.Summary.LostGPUHours)
	}
	if r.Jobs[0].FinalBoost != -10 {
		t.Errorf("long's LAS boost %d, want -10 (one threshold passed)", r.Jobs[0].FinalBoost)
	}
}

// The oracle makes a plateaued job yield after the dwell and, with
// Deactivate, stops it exactly one grace period after its true onset.
func TestOracleDeactivatesAtOnsetPlusGrace(t *testing.T) {
	j := job("p", "q", 0, 2, 0, 36000)
	j.Curve = SimpleCurve(0.3)
	in := input(one(2), j)
	r := run(t, in, PolicyOracle, func(o *Options) { o.Deactivate = true })
	onset := j.PlateauWork()
	if j.Curve.Onset < 0.25 || j.Curve.Onset > 0.35 {
		t.Fatalf("curve onset %v, want about 0.3", j.Curve.Onset)
	}
	o := outcome(t, r, "p")
	want := onset + 7200 // stop.gracePeriod
	if o.Outcome != "deactivated" || math.Abs(o.End-want) > 1e-6 {
		t.Fatalf("outcome %s at %v, want deactivated at %v", o.Outcome, o.End, want)
	}
	s := r.Summary
	if want := 2 * (36000 - (onset + 7200)) / 3600; math.Abs(s.SavedGPUHours-want) > 1e-6 {
		t.Errorf("saved %v GPU-h, want %v", s.SavedGPUHours, want)
	}
	if want := 2 * 7200.0 / 3600; math.Abs(s.PlateauGPUHours-want) > 1e-6 {
		t.Errorf("plateau GPU-h %v, want %v (the grace period)", s.PlateauGPUHours, want)
	}
	if s.EarlyStops != 0 {
		t.Errorf("oracle stopped early")
	}
	// Without Deactivate the job runs to its end and all its
	// post-plateau time counts.
	r = run(t, in, PolicyOracle, nil)
	if s := r.Summary; s.Completed != 1 || math.Abs(s.PlateauGPUHours-2*(36000-onset)/3600) > 1e-6 {
		t.Errorf("without deactivate: %+v", s)
	}
}

// The oracle's -100 for a plateaued job lets same-priority waiting work
// preempt it (Kueue's LowerPriority on effective priority).
func TestOracleYieldLetsWaitingWorkPreempt(t *testing.T) {
	p := job("plateaued", "q", 0, 1, 0, 20000)
	p.Curve = SimpleCurve(0.2)
	in := input(one(1), p, job("waiting", "q", 100, 1, 0, 1000))
	r := run(t, in, PolicyOracle, nil)
	onset := p.PlateauWork()
	// Plateaued at the onset, boost after the 5 m dwell.
	yield := onset + 300
	wantTrail(t, r, fmt.Sprintf(`
0 admit plateaued
%g preempt plateaued/waiting
%g admit waiting
%g finish waiting
%g admit plateaued
%g finish plateaued
`, yield, yield, yield+1000, yield+1000, yield+1000+20000-math.Floor(yield/1800)*1800))
	if r.Summary.Preemptions != 1 {
		t.Errorf("preemptions %d", r.Summary.Preemptions)
	}
}

// The same inputs give the same run.
func TestRunIsDeterministic(t *testing.T) {
	in := input(one(2), job("a", "q", 0, 1, 0, 5000), job("b", "q", 0, 1, 0, 5000), job("c", "q", 0, 1, 0, 5000))
	a, b := trail(run(t, in, PolicyKueue, nil)), trail(run(t, in, PolicyKueue, nil))
	if a != b || !strings.HasPrefix(a, "0 admit a\n0 admit b\n") {
		t.Errorf("ties must break by job id:\n%s\n%s", a, b)
	}
}

func TestInputErrors(t *testing.T) {
	o := DefaultOptions()
	if _, err := Run(input(one(1), job("a", "nope", 0, 1, 0, 10)), PolicyKueue, o); err == nil || !strings.Contains(err.Error(), `unknown queue "nope"`) {
		t.Errorf("unknown queue: %v", err)
	}
	if _, err := Run(input(one(1), job("a", "q", 0, 0, 0, 10)), PolicyKueue, o); err == nil {
		t.Errorf("0 GPUs accepted")
	}
	if _, err := Run(input([]Queue{{Name: "q", GPUs: 1, WithinClusterQueue: "Sometimes"}}, job("a", "q", 0, 1, 0, 10)), PolicyKueue, o); err == nil {
		t.Errorf("bad preemption policy accepted")
	}
	if _, err := Run(input(one(1), job("a", "q", 0, 1, 0, 10)), "fifo", o); err == nil {
		t.Errorf("unknown policy accepted")
	}
	if _, err := ParsePolicies("kueue,bogus"); err == nil {
		t.Errorf("ParsePolicies accepted bogus")
	}
}

// A stale event as the last one at an instant must not skip the
// scheduling pass that instant owes (regression: the waiting job was never
// admitted).
func TestStaleLastEventStillSchedules(t *testing.T) {
	in := input(one(1), job("a", "q", 0, 1, 0, 3600), job("b", "q", 10, 1, 0, 60))
	// LAS ticks a at 3600 (one GPU-hour), the instant it finishes.
	r := run(t, in, PolicyLAS, func(o *Options) { o.LAS = LASConfig{Thresholds: []float64{1}, Step: 10} })
	wantTrail(t, r, `
0 admit a
3600 finish a
3600 admit b
3660 finish b
`)
}

func TestFirstReportCarriesTheFirstEvaluation(t *testing.T) {
	for _, tc := range []struct {
		name      string
		firstX    float64 // the curve's first evaluation (run fraction)
		duration  float64
		wantFirst float64 // time of the history's first point
		wantValue float64 // the objective it carries
	}{
		// reports every 12m (duration/100): the first evaluation at 1m12s
		// is reported then, with the value it logged.
		{"early first evaluation", 0.001, 20 * 3600, 72, 9},
		// at 0: the first regular report carries it.
		{"evaluation at the start", 0, 20 * 3600, 720, 9},
		// later than one report interval: the usual cadence.
		{"late first evaluation", 0.05, 20 * 3600, 720, math.NaN()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &Curve{Objective: progress.Objective{Metric: "eval_loss", Direction: progress.Minimize},
				X: []float64{tc.firstX, 0.5, 1}, V: []float64{9, 2, 1}}
			c.finish(c.V)
			j := &Job{Name: "a", Queue: "q", GPUs: 1, Duration: tc.duration, TotalSteps: 1000, Curve: c}
			o := DefaultOptions()
			e, err := newEngine(input(one(1), j), o, &decider{p: o.Policy}, PolicyPlanner)
			if err != nil {
				t.Fatal(err)
			}
			e.loop()
			h := e.jobs[0].hist
			if h.Len() == 0 {
				t.Fatal("no reports")
			}
			if got := h.Points()[0].T; math.Abs(got-tc.wantFirst) > 1e-6 {
				t.Errorf("first report at %v, want %v", got, tc.wantFirst)
			}
			v := h.Value(0, "eval_loss")
			if v != tc.wantValue && !(math.IsNaN(v) && math.IsNaN(tc.wantValue)) {
				t.Errorf("first report's eval_loss %v, want %v", v, tc.wantValue)
			}
		})
	}
}

// MeaningfulOnset: from the true onset (1 % of the gain so far still to
// come) on, the first point with less than the share of the metric's own
// value still to gain.
func TestMeaningfulOnset(t *testing.T) {
	// Loss 10 → 1.08 → 1.05 → 1.03 → 1.02 → 1.0: the onset (within 1 % of
	// the gain so far) is at x 0.2. Still to gain, as a share of the
	// value: 7.4 % at 0.2, 4.8 % at 0.4, 2.9 % at 0.5, 1.96 % at 0.6.
	c := &Curve{Objective: progress.Objective{Metric: "loss", Direction: progress.Minimize},
		X: []float64{0.01, 0.2, 0.4, 0.5, 0.6, 1}, V: []float64{10, 1.08, 1.05, 1.03, 1.02, 1.0}}
	c.finish(c.V)
	if c.Onset != 0.2 {
		t.Fatalf("onset %v, want 0.2", c.Onset)
	}
	for _, tc := range []struct{ share, want float64 }{
		{0, 0.2},    // no bound: the onset
		{0.1, 0.2},  // 7.4 % ahead at the onset
		{0.04, 0.5}, // 2.9 %
		{0.02, 0.6}, // 1.96 %
		{0.001, 1},  // never before the end
	} {
		if got := c.MeaningfulOnset(tc.share); got != tc.want {
			t.Errorf("share %v: %v, want %v", tc.share, got, tc.want)
		}
	}
	// A curve that never plateaus stays at 1.
	never := &Curve{Objective: c.Objective, X: []float64{0.1, 0.5, 1}, V: []float64{3, 2, 1}}
	never.finish(never.V)
	if got := never.MeaningfulOnset(0.02); got != 1 {
		t.Errorf("never-plateauing curve: %v, want 1", got)
	}
}

// With OracleMinImprovement the oracle stops at the trust-bound point
// (plus its grace), and the truth the metrics use stays the onset.
func TestOracleMinImprovementStopsLater(t *testing.T) {
	c := &Curve{Objective: progress.Objective{Metric: "loss", Direction: progress.Minimize},
		X: []float64{0.01, 0.2, 0.4, 0.5, 0.6, 1}, V: []float64{10, 1.08, 1.05, 1.03, 1.02, 1.0}}
	c.finish(c.V)
	j := job("p", "q", 0, 2, 0, 100000)
	j.Curve = c
	in := input(one(2), j)
	base := outcome(t, run(t, in, PolicyOracle, func(o *Options) { o.Deactivate = true }), "p")
	r := run(t, in, PolicyOracle, func(o *Options) { o.Deactivate = true; o.OracleMinImprovement = 0.02 })
	bound := outcome(t, r, "p")
	if want := 0.2*100000 + 7200; base.Outcome != "deactivated" || math.Abs(base.End-want) > 1e-6 {
		t.Fatalf("unbounded oracle: %s at %v, want deactivated at %v", base.Outcome, base.End, want)
	}
	if want := 0.6*100000 + 7200; bound.Outcome != "deactivated" || math.Abs(bound.End-want) > 1e-6 {
		t.Fatalf("bounded oracle: %s at %v, want deactivated at %v", bound.Outcome, bound.End, want)
	}
	// Plateau GPU-hours are still counted from the true onset.
	if want := 2 * (0.4*100000 + 7200) / 3600; math.Abs(r.Summary.PlateauGPUHours-want) > 1e-6 {
		t.Errorf("plateau GPU-h %v, want %v", r.Summary.PlateauGPUHours, want)
	}
	if r.Summary.EarlyStops != 0 {
		t.Errorf("early stops %d", r.Summary.EarlyStops)
	}
}
