package admission

import (
	"math"
	"testing"

	"github.com/progress-planner/planner/simulator"
)

// oneQueue: an 8-GPU ClusterQueue that never preempts, job "run" holding
// it for an hour (80 % interval lo–hi when set), job "wait" arriving at
// 1 s for all 8 GPUs.
func oneQueue(lo, hi simulator.Seconds, plateauAt float64) *simulator.Scenario {
	return &simulator.Scenario{
		Name:   "t",
		Queues: []simulator.Queue{{Name: "q", GPUs: 8, WithinClusterQueue: simulator.PreemptNever}},
		Jobs: []simulator.JobSpec{
			{Name: "run", Queue: "q", GPUs: 8, Duration: 3600, DurationLo: lo, DurationHi: hi, PlateauAt: plateauAt},
			{Name: "wait", Queue: "q", GPUs: 8, Arrival: 1, Duration: 600},
		},
	}
}

// A point forecast gives a point estimate: the waiting job is admitted
// when the running one ends, in every future.
func TestPointForecast(t *testing.T) {
	es, err := Estimates(oneQueue(0, 0, 0), []string{"wait"}, Settings{Runs: 5, Policy: simulator.PolicyKueue, Options: simulator.DefaultOptions()})
	if err != nil {
		t.Fatal(err)
	}
	e := es[0]
	if e.Runs != 5 || e.Admitted != 5 || e.P10 != 3600 || e.Median != 3600 || e.P90 != 3600 {
		t.Errorf("estimate %+v, want every run admitted at 3600 s", e)
	}
	if e.Causes[CauseFinished] != 5 {
		t.Errorf("causes %v, want %q in every run", e.Causes, CauseFinished)
	}
}

// The running job's ETA interval becomes the admission interval: the
// median near the ETA, the 10–90 % range inside the forecast's, and the
// same estimate for the same input.
func TestIntervalFromForecast(t *testing.T) {
	s := Settings{Runs: 200, Policy: simulator.PolicyKueue, Options: simulator.DefaultOptions()}
	es, err := Estimates(oneQueue(1800, 7200, 0), []string{"wait"}, s)
	if err != nil {
		t.Fatal(err)
	}
	e := es[0]
	t.Logf("estimate %+v", e)
	if e.Admitted != 200 || math.Abs(e.Median-3600)/3600 > 0.15 {
		t.Errorf("median %v s, want about 3600 s (the ETA)", e.Median)
	}
	// 200 draws: the sample 10 % / 90 % quantiles of the draw within 20 %
	// of the interval's ends.
	if math.Abs(e.P10-1800)/1800 > 0.2 || math.Abs(e.P90-7200)/7200 > 0.2 {
		t.Errorf("10–90 %% range %v–%v s, want about the ETA interval 1800–7200 s", e.P10, e.P90)
	}
	again, err := Estimates(oneQueue(1800, 7200, 0), []string{"wait"}, s)
	if err != nil {
		t.Fatal(err)
	}
	if again[0].P10 != e.P10 || again[0].Median != e.Median || again[0].P90 != e.P90 {
		t.Errorf("not deterministic: %+v then %+v", e, again[0])
	}
}

// A running job the live planner has made yield (boost −100) gives way
// to the waiting job of the same priority at once under the planner; under
// Kueue alone the waiting job waits for it to end.
func TestLiveYieldHolds(t *testing.T) {
	sc := oneQueue(0, 0, 0)
	sc.Queues[0].WithinClusterQueue = simulator.PreemptLowerPriority
	yield := int32(-100)
	sc.Jobs[0].Boost = &yield
	opt := simulator.DefaultOptions()
	kueueOnly, err := Estimates(sc, []string{"wait"}, Settings{Runs: 3, Policy: simulator.PolicyKueue, Options: opt})
	if err != nil {
		t.Fatal(err)
	}
	planner, err := Estimates(sc, []string{"wait"}, Settings{Runs: 3, Policy: simulator.PolicyPlanner, Options: opt})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("kueue %+v; planner %+v", kueueOnly[0], planner[0])
	if kueueOnly[0].Median != 3600 || kueueOnly[0].Causes[CauseFinished] != 3 {
		t.Errorf("kueue: %+v, want admission at 3600 s when the running job finishes", kueueOnly[0])
	}
	if !(planner[0].Median < 60) || planner[0].Causes[CausePreempts] != 3 {
		t.Errorf("planner: %+v, want admission within a minute, preempting the yielding job, in every run", planner[0])
	}
}

// A job that never fits is never admitted: its quantiles are +Inf.
func TestNeverAdmitted(t *testing.T) {
	sc := oneQueue(0, 0, 0)
	sc.Jobs[1].GPUs = 16
	es, err := Estimates(sc, []string{"wait"}, Settings{Runs: 2, Policy: simulator.PolicyKueue, Options: simulator.DefaultOptions()})
	if err != nil {
		t.Fatal(err)
	}
	if e := es[0]; e.Admitted != 0 || !math.IsInf(e.Median, 1) || !math.IsInf(e.P10, 1) {
		t.Errorf("estimate %+v, want never admitted", e)
	}
}

func TestErrors(t *testing.T) {
	if _, err := Estimates(oneQueue(0, 0, 0), []string{"nope"}, Settings{Runs: 1, Policy: simulator.PolicyKueue, Options: simulator.DefaultOptions()}); err == nil {
		t.Error("unknown job: no error")
	}
	if _, err := Estimates(oneQueue(0, 0, 0), []string{"wait"}, Settings{Runs: -1}); err == nil {
		t.Error("-1 runs: no error")
	}
	bad := oneQueue(4000, 7200, 0) // lo above the run time
	if _, err := Estimates(bad, []string{"wait"}, Settings{Runs: 1, Policy: simulator.PolicyKueue, Options: simulator.DefaultOptions()}); err == nil {
		t.Error("durationLo above duration: no error")
	}
}
