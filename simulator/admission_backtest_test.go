package simulator

import (
	"math"
	"reflect"
	"strings"
	"testing"
)

// TestRecentArrivals: each seed draws its own arrivals from the sample, at
// its rate, within its window; a seed's draw is reproducible.
func TestRecentArrivals(t *testing.T) {
	sc := &Scenario{Name: "r", Queues: []Queue{{Name: "q", GPUs: 4}},
		Jobs:   []JobSpec{{Name: "now", Queue: "q", GPUs: 1, Duration: 60}},
		Recent: &RecentArrivals{Window: 3600, Jobs: []JobSpec{{Name: "a", Queue: "q", GPUs: 1, Duration: 100}, {Name: "b", Queue: "q", GPUs: 2, Duration: 200}}}}
	total, seqs := 0, map[string]bool{}
	const seeds = 400
	for seed := uint64(1); seed <= seeds; seed++ {
		sc.Seed = seed
		in, err := sc.Resolve()
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, j := range in.Jobs[1:] {
			base, _, ok := strings.Cut(j.Name, "#")
			if !ok || (base == "a") != (j.GPUs == 1 && j.Duration == 100) || j.Arrival < 1 || j.Arrival > 3600 {
				t.Fatalf("seed %d: drawn job %+v", seed, j)
			}
			names = append(names, j.Name)
		}
		total += len(names)
		seqs[strings.Join(names, ",")] = true
		again, _ := sc.Resolve()
		if len(again.Jobs) != len(in.Jobs) {
			t.Fatalf("seed %d: not reproducible", seed)
		}
	}
	// Poisson with mean 2 per window: the mean over 400 seeds is within
	// 0.25 of 2 (5 standard errors), and the seeds differ.
	if mean := float64(total) / seeds; math.Abs(mean-2) > 0.25 || len(seqs) < 20 {
		t.Errorf("mean %.2f arrivals per seed, %d distinct sequences", mean, len(seqs))
	}
}

// TestUnknownDurationGivenRanFor: an unknown run time is drawn from the
// observed ones given how long the job has run, and the job runs the rest.
func TestUnknownDurationGivenRanFor(t *testing.T) {
	sc := &Scenario{Name: "u", Queues: []Queue{{Name: "q", GPUs: 4}}, RunTimes: []Seconds{100, 200, 300}, RunSoFar: []Seconds{50},
		Jobs: []JobSpec{{Name: "x", Queue: "q", GPUs: 1, Duration: 3600, UnknownDuration: true, RanFor: 250}}}
	for seed := uint64(1); seed <= 20; seed++ {
		sc.Seed = seed
		in, err := sc.Resolve()
		if err != nil {
			t.Fatal(err)
		}
		if d := in.Jobs[0].Duration; d != 50 { // only 300 is past 250
			t.Fatalf("seed %d: runs %v more, want 50", seed, d)
		}
	}
	sc.Jobs[0].UnknownDuration = false
	if _, err := sc.Resolve(); err == nil || !strings.Contains(err.Error(), "ranFor") {
		t.Errorf("ranFor on a known run time: %v", err)
	}
	sc.Jobs[0].UnknownDuration, sc.RunSoFar = true, []Seconds{0}
	if _, err := sc.Resolve(); err == nil || !strings.Contains(err.Error(), "runSoFar[0]") {
		t.Errorf("a zero runSoFar: %v", err)
	}
}

// TestAdmissionBacktestScoring: on one GPU, a runs 1000 s from 0; b (10 s)
// and c (20 s) wait for it. The captures show the cluster as it was, the
// scores compare the estimates with the real waits, and the run itself is
// the plain planner run.
func TestAdmissionBacktestScoring(t *testing.T) {
	sc := &Scenario{Name: "one", Queues: []Queue{{Name: "q", GPUs: 1}}, Jobs: []JobSpec{
		{Name: "a", Queue: "q", GPUs: 1, Duration: 1000},
		{Name: "b", Queue: "q", GPUs: 1, Arrival: 10, Duration: 100},
		{Name: "c", Queue: "q", GPUs: 1, Arrival: 20, Duration: 100},
	}}
	in, err := sc.Resolve()
	if err != nil {
		t.Fatal(err)
	}
	opt, err := sc.Options(DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	captured := map[string]*Scenario{}
	est := func(c *Scenario, jobs []string) ([]AdmissionInterval, error) {
		if len(jobs) != 1 {
			t.Fatalf("estimated %v together, want b then c: each once, at its arrival", jobs)
		}
		captured[jobs[0]] = c
		if jobs[0] == "b" { // b really waits 990 s; +1: it arrives 1 s into the capture
			return []AdmissionInterval{{901, 1001, 1101}}, nil
		}
		return []AdmissionInterval{{101, 201, 301}}, nil // c waits 1080 s (behind b): too early
	}
	var seen [][]AdmissionOutcome
	cal := func(past []AdmissionOutcome, _ float64, iv AdmissionInterval) (float64, float64, int) {
		seen = append(seen, past)
		return iv.P10, 2 * iv.P90, len(past)
	}
	r, err := AdmissionBacktest(in, opt, AdmissionBacktestOptions{Samples: 3}, est, cal)
	if err != nil {
		t.Fatal(err)
	}
	if r.Captured != 3 || r.Scored != 2 || r.Estimated != 2 || r.Futures.Inside != 1 || r.Futures.Above != 1 || r.Futures.Coverage != 0.5 {
		t.Fatalf("captured %d scored %d estimated %d, futures' interval %+v", r.Captured, r.Scored, r.Estimated, r.Futures)
	}
	// Calibrated (P90 doubled): c's 1080 s is still above its 600 s.
	if r.Inside != 1 || r.Above != 1 || r.Coverage != 0.5 {
		t.Errorf("calibrated %+v", r.AdmissionCoverage)
	}
	if s := r.Samples[0]; s.Job != "b" || s.Wait != 990 || s.Median != 1000 || s.P90 != 2200 || s.FuturesP90 != 1100 || !s.Inside || s.Outcomes != 0 {
		t.Errorf("b: %+v", s)
	}
	// At c's capture (20 s) b's estimate, made at 10 s, has waited 10 s
	// so far: the one outcome known, still waiting.
	if len(seen) != 2 || len(seen[0]) != 0 || len(seen[1]) != 1 || seen[1][0] != (AdmissionOutcome{P10: 900, P90: 1100, Wait: 10, Waiting: true, Age: 10}) {
		t.Errorf("outcomes the calibration saw: %+v", seen)
	}
	if got := r.MedianAbsErr; got != (10+880)/2.0 {
		t.Errorf("median |error| %v, want 445", got)
	}
	// c's capture: a running, b pending ahead of c, c arriving at 1 s;
	// the arrivals of the first 20 s are the sample to draw from.
	cc := captured["c"]
	if len(cc.Jobs) != 3 || cc.Jobs[0].Name != "a" || cc.Jobs[0].Arrival != 0 || cc.Jobs[1].Name != "b" || cc.Jobs[2].Name != "c" || cc.Jobs[2].Arrival != 1 ||
		cc.Recent == nil || cc.Recent.Window != 20 || len(cc.Recent.Jobs) != 2 {
		t.Errorf("c's capture: jobs %+v recent %+v", cc.Jobs, cc.Recent)
	}
	plain, err := Run(in, PolicyPlanner, opt)
	if err != nil {
		t.Fatal(err)
	}
	// Outcomes only: the work counters differ (the captures read the
	// jobs' reports early) and the rates are wall-clock.
	for _, s := range []*Summary{&plain.Summary, &r.Run} {
		s.WallSeconds, s.EventsPerSecond, s.ForecastsPerSecond, s.Reports = 0, 0, 0, 0
	}
	if !reflect.DeepEqual(plain.Summary, r.Run) {
		t.Errorf("the captures changed the run: %+v vs %+v", r.Run, plain.Summary)
	}
}

// TestStopOnceAdmitted: the run ends at the instant the last watched job
// is first admitted, with the same admissions up to then as the full
// run; a name not in the input is ignored (the run goes to its end).
func TestStopOnceAdmitted(t *testing.T) {
	in := input([]Queue{{Name: "q", GPUs: 1}},
		job("a", "q", 0, 1, 0, 100), job("b", "q", 10, 1, 0, 100), job("c", "q", 20, 1, 0, 100))
	full := run(t, in, PolicyKueue, nil)
	cut := run(t, in, PolicyKueue, func(o *Options) { o.StopOnceAdmitted = []string{"b"} })
	if b := cut.Jobs[1]; b.FirstAdmit != 100 || b.FirstAdmit != full.Jobs[1].FirstAdmit {
		t.Errorf("b admitted at %v in the cut run, %v in the full one; want 100", b.FirstAdmit, full.Jobs[1].FirstAdmit)
	}
	if c := cut.Jobs[2]; !math.IsNaN(c.FirstAdmit) || cut.Summary.Unfinished != 2 || full.Summary.Unfinished != 0 {
		t.Errorf("the cut run went on past b's admission: c admitted at %v, %d unfinished (full run: %d)", c.FirstAdmit, cut.Summary.Unfinished, full.Summary.Unfinished)
	}
	if r := run(t, in, PolicyKueue, func(o *Options) { o.StopOnceAdmitted = []string{"nobody"} }); r.Summary.Unfinished != 0 {
		t.Errorf("an unknown name cut the run: %d unfinished", r.Summary.Unfinished)
	}
}
