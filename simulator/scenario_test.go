package simulator

import (
	"bytes"
	"encoding/json"
	"math"
	"strings"
	"testing"
)

const smallScenario = `
name: small
seed: 7
queues:
  - {name: q, gpus: 4, cohort: c}
  - {name: r, gpus: 2, cohort: c, borrowingLimit: 2}
checkpointInterval: 10m
deactivate: true
policy:
  stop:
    gracePeriod: 1h
jobs:
  - {name: plateaus, queue: q, arrival: 0, gpus: 2, duration: 20h, plateauAt: 0.3}
  - {name: learns, queue: q, arrival: 0, gpus: 2, duration: 20h}
  - {name: late, queue: r, arrival: 1h30m, gpus: 2, duration: 2h, priority: 10}
`

func TestParseScenario(t *testing.T) {
	sc, err := ParseScenario([]byte(smallScenario))
	if err != nil {
		t.Fatal(err)
	}
	in, err := sc.Resolve()
	if err != nil {
		t.Fatal(err)
	}
	if len(in.Jobs) != 3 || in.Jobs[2].Arrival != 5400 || in.Jobs[0].Duration != 72000 || *in.Queues[1].BorrowingLimit != 2 {
		t.Fatalf("input %+v", in)
	}
	if on := in.Jobs[0].Curve.Onset; math.Abs(on-0.3) > 0.02 {
		t.Errorf("plateauAt 0.3 gave onset %v", on)
	}
	if on := in.Jobs[1].Curve.Onset; on < 0.95 {
		t.Errorf("a job without plateauAt should learn until (nearly) the end, onset %v", on)
	}
	o, err := sc.Options(DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	if o.Checkpoint != 600 || !o.Deactivate || o.Policy.Stop.GracePeriod.Seconds() != 3600 || o.Policy.Plateau.EnterProbability != 0.8 {
		t.Errorf("options: checkpoint %v deactivate %v policy %+v", o.Checkpoint, o.Deactivate, o.Policy.Stop)
	}

	for _, c := range []struct{ yaml, want string }{
		{"name: x\nqueues: [{name: q, gpus: 1}]\njobs: [{name: a, queue: q, gpus: 1, duration: 1h, bogus: 1}]", "unknown field"},
		{"name: x\nqueues: [{name: q, gpus: 1}]\njobs: [{name: a, queue: q, gpus: 1, duration: soon}]", `duration "soon"`},
		{"name: x\nqueues: [{name: q, gpus: 1}]", "exactly one of jobs, trace, generate"},
		{"name: x\ntrace: {path: t.csv, format: slurm}", `trace.format "slurm"`},
		{"name: x\nqueues: [{name: q, gpus: 1}]\njobs: [{name: a, queue: q, gpus: 1, duration: 1h}]\npolicy: {plateau: {enterProb: 1}}", "plateau.enterProb"},
		{"name: x\nqueues: [{name: q, gpus: 1}]\ngenerate: {jobs: 3, load: 1, durationQuantiles: [[0, 10], [0.5, 5], [1, 20]], gpus: [{gpus: 1, share: 1}]}", "must increase"},
	} {
		if _, err := ParseScenario([]byte(c.yaml)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: error %v, want %q", c.yaml, err, c.want)
		}
	}
	for in, want := range map[string]float64{"90": 90, "1h30m": 5400, "2d": 172800, "1.5d": 129600} {
		if got, err := ParseSeconds(in); err != nil || got != want {
			t.Errorf("ParseSeconds(%q) = %v, %v", in, got, err)
		}
	}
	if Seconds(1800).String() != "30m" || Seconds(7200).String() != "2h" || Seconds(90).String() != "1m30s" {
		t.Errorf("Seconds.String: %s %s %s", Seconds(1800), Seconds(7200), Seconds(90))
	}
}

// The planner (forecast.Fit + preempt.Decide on the job's own reports)
// stops the job that plateaued and lets the one still learning finish.
func TestPlannerStopsThePlateauedJob(t *testing.T) {
	sc, err := ParseScenario([]byte(smallScenario))
	if err != nil {
		t.Fatal(err)
	}
	in, _ := sc.Resolve()
	o, _ := sc.Options(DefaultOptions())
	o.RecordEvents = true
	r, err := Run(in, PolicyPlanner, o)
	if err != nil {
		t.Fatal(err)
	}
	p, l := outcome(t, r, "plateaus"), outcome(t, r, "learns")
	onset := in.Jobs[0].PlateauWork()
	if p.Outcome != "deactivated" || !(p.End > onset+3600) || !(p.End < 72000) {
		t.Errorf("plateaued job: %s at %.0f s (onset %.0f s, grace 1h)", p.Outcome, p.End, onset)
	}
	if l.Outcome != "completed" || l.End != 72000 {
		t.Errorf("learning job: %s at %.0f", l.Outcome, l.End)
	}
	s := r.Summary
	if s.Forecasts == 0 || s.Forecasts != s.Decisions || s.Reports == 0 || s.EarlyStops != 0 {
		t.Errorf("summary %+v", s)
	}
	// "late" borrows nothing (r has 2 GPUs of its own) and is not
	// delayed.
	if late := outcome(t, r, "late"); late.FirstAdmit != 5400 {
		t.Errorf("late admitted at %v", late.FirstAdmit)
	}
}

func TestSeedMakesRunsReproducible(t *testing.T) {
	sc := DefaultScenario()
	sc.Generate.Jobs = 60
	a, err := sc.Resolve()
	if err != nil {
		t.Fatal(err)
	}
	b, _ := sc.Resolve()
	sc.Seed++
	c, _ := sc.Resolve()
	same, diff := true, false
	for i := range a.Jobs {
		ja, jb, jc := a.Jobs[i], b.Jobs[i], c.Jobs[i]
		if ja.Arrival != jb.Arrival || ja.Duration != jb.Duration || ja.Curve.Onset != jb.Curve.Onset || ja.Priority != jb.Priority {
			same = false
		}
		if ja.Arrival != jc.Arrival || ja.Duration != jc.Duration {
			diff = true
		}
	}
	if !same || !diff {
		t.Errorf("same seed identical: %v; other seed different: %v", same, diff)
	}
	o := DefaultOptions()
	o.Deactivate = true
	ra, _ := Compare(a, []string{PolicyKueue, PolicyOracle, PolicyLAS}, 1, o)
	rb, _ := Compare(b, []string{PolicyKueue, PolicyOracle, PolicyLAS}, 1, o)
	for i := range ra.Results {
		x, y := ra.Results[i].Summary, rb.Results[i].Summary
		x.WallSeconds, y.WallSeconds, x.EventsPerSecond, y.EventsPerSecond = 0, 0, 0, 0
		xj, _ := json.Marshal(x)
		yj, _ := json.Marshal(y)
		if !bytes.Equal(xj, yj) {
			t.Errorf("%s differs:\n%s\n%s", x.Policy, xj, yj)
		}
	}
}

func TestGeneratorFollowsItsDistributions(t *testing.T) {
	g := DefaultScenario().Generate
	if d := g.duration(0.5); d != 1144 {
		t.Errorf("median duration %v, want 1144", d)
	}
	if d := g.duration(0.999); d != 172800 {
		t.Errorf("duration is truncated at maxDuration: %v", d)
	}
	if g.gpuDraw(0.5) != 1 || g.gpuDraw(0.999) != 16 {
		t.Errorf("gpu draws %d %d", g.gpuDraw(0.5), g.gpuDraw(0.999))
	}
}

func TestReports(t *testing.T) {
	sc, _ := ParseScenario([]byte(smallScenario))
	in, _ := sc.Resolve()
	o, _ := sc.Options(DefaultOptions())
	c, err := Compare(in, AllPolicies, sc.Seed, o)
	if err != nil {
		t.Fatal(err)
	}
	var js bytes.Buffer
	if err := c.WriteJSON(&js); err != nil {
		t.Fatal(err)
	}
	var back struct {
		Results []struct {
			Summary Summary
			Series  Series
		}
		VsKueue []map[string]any
		Checks  []map[string]any
	}
	if err := json.Unmarshal(js.Bytes(), &back); err != nil {
		t.Fatalf("JSON does not parse: %v", err)
	}
	if len(back.Results) != 4 || back.Results[1].Summary.Policy != PolicyPlanner || len(back.Results[0].Series.GPUs) != o.SeriesPoints || len(back.VsKueue) != 3 || len(back.Checks) == 0 {
		t.Errorf("JSON content: %d results, %d deltas, %d checks", len(back.Results), len(back.VsKueue), len(back.Checks))
	}

	var h bytes.Buffer
	if err := c.WriteHTML(&h); err != nil {
		t.Fatal(err)
	}
	html := h.String()
	plots, _ := c.Plots()
	if n := strings.Count(html, `<svg class="chart"`); n != len(plots) || n != 2*len(c.Results) {
		t.Errorf("HTML has %d <svg>, want one per plot (%d)", n, len(plots))
	}
	if strings.Contains(html, "<?xml") || strings.Contains(html, "src=\"http") || strings.Contains(html, "href=\"http") {
		t.Errorf("HTML is not self-contained")
	}
	var tb bytes.Buffer
	if err := c.WriteTable(&tb); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"GPU-hours after plateau", "preemptions past 90% progress", "Against kueue", "Distance to oracle", "Targets"} {
		if !strings.Contains(tb.String(), want) {
			t.Errorf("table lacks %q", want)
		}
	}
}

func TestObserveSeesEveryDecision(t *testing.T) {
	sc, _ := ParseScenario([]byte(smallScenario))
	in, _ := sc.Resolve()
	for _, pol := range []string{PolicyPlanner, PolicyOracle} {
		o, _ := sc.Options(DefaultOptions())
		n, stops := 0, 0
		o.Observe = func(ob Observation) {
			n++
			if ob.Policy != pol || ob.Job == nil || ob.Forecast == nil || ob.Decision == nil || ob.Decision.At != ob.Now ||
				ob.Work < 0 || ob.Work > ob.Job.Duration {
				t.Fatalf("%s: observation %+v", pol, ob)
			}
			if ob.Running && ob.Decision.Action == "Deactivate" {
				stops++
			}
		}
		r, err := Run(in, pol, o)
		if err != nil {
			t.Fatal(err)
		}
		if n != r.Summary.Decisions || stops != r.Summary.Deactivated {
			t.Errorf("%s: observed %d decisions and %d stops, summary %d and %d", pol, n, stops, r.Summary.Decisions, r.Summary.Deactivated)
		}
	}
}
