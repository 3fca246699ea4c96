package simulator

import (
	"bytes"
	"fmt"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/progress-planner/planner/pkg/preempt"
)

// eightJobs: eight 1-GPU jobs of one hour, all at 0, in one queue. With g
// GPUs job k waits floor(k/g) hours, so the mean wait is known for every
// g: 8→0, 7→1/8, 6→2/8, 5→3/8, 4→4/8, 3→7/8, 2→12/8, 1→28/8 hours.
const eightJobs = `
name: eight
queues: [{name: q, gpus: 8}]
jobs:
` + `  - {queue: q, gpus: 1, duration: 1h}
  - {queue: q, gpus: 1, duration: 1h}
  - {queue: q, gpus: 1, duration: 1h}
  - {queue: q, gpus: 1, duration: 1h}
  - {queue: q, gpus: 1, duration: 1h}
  - {queue: q, gpus: 1, duration: 1h}
  - {queue: q, gpus: 1, duration: 1h}
  - {queue: q, gpus: 1, duration: 1h}
`

func TestSweepGoalKnownAnswer(t *testing.T) {
	sc, err := ParseScenario([]byte(eightJobs))
	if err != nil {
		t.Fatal(err)
	}
	ax, err := ParseAxis("gpus=1:8:1")
	if err != nil {
		t.Fatal(err)
	}
	sp := SweepSpec{Axes: []Axis{ax}, Seeds: []uint64{1, 2, 3}, Policies: []string{PolicyKueue}}
	sw, err := RunSweep(sc.ResolveSeed, DefaultOptions(), sp, 3, nil)
	if err != nil {
		t.Fatal(err)
	}
	wantMean := []float64{28, 12, 7, 4, 3, 2, 1, 0}
	for i, ps := range sw.Points {
		if got := ps.Metrics["queueing.mean"]; got.Min != wantMean[i]/8 || got.Max != wantMean[i]/8 {
			t.Errorf("gpus=%s: mean queueing %+v, want %g h", ps.Settings[0].Value, got, wantMean[i]/8)
		}
	}
	g, err := ParseGoal("queueing.mean<=45m")
	if err != nil {
		t.Fatal(err)
	}
	a := sw.AnswerGoal(g).Answers[0]
	if a.Smallest != "4" || a.Optimistic != "4" || a.Spread.Mean != 0.5 {
		t.Errorf("answer %+v, want gpus=4 in every seed at 0.5 h", a)
	}
	if s := a.Sentence(g, "gpus"); !strings.Contains(s, "gpus=4 is the smallest setting that meets queueing.mean<=45m in every seed") {
		t.Errorf("sentence %q", s)
	}
	// A bound no setting reaches.
	g2, _ := ParseGoal("queueing.mean<0")
	if a := sw.AnswerGoal(g2).Answers[0]; a.Smallest != "" || a.Optimistic != "" {
		t.Errorf("impossible goal answered %+v", a)
	}
}

// The uncertainty across seeds, by construction: seed 1 meets the goal
// from gpus=2 on, seed 2 only from gpus=3.
func TestGoalUncertaintyAcrossSeeds(t *testing.T) {
	sp := SweepSpec{Axes: []Axis{{Knob: "gpus", Values: []string{"1", "2", "3"}}}, Seeds: []uint64{1, 2}, Policies: []string{PolicyKueue}}
	p95 := map[[2]int]float64{{0, 0}: 3, {0, 1}: 4, {1, 0}: 0.5, {1, 1}: 2, {2, 0}: 0.2, {2, 1}: 0.9}
	var runs []SweepRun
	for u := range sp.Units() {
		r := sp.newRun(u)
		s := Summary{Policy: PolicyKueue}
		s.Queueing.P95 = p95[[2]int{r.Point, u % 2}]
		r.Summaries = []Summary{s}
		runs = append(runs, r)
	}
	sw, err := NewSweep(SweepOf{Scenario: "made"}, sp, runs)
	if err != nil {
		t.Fatal(err)
	}
	g, _ := ParseGoal("queueing.p95<=1h")
	a := sw.AnswerGoal(g).Answers[0]
	if a.Smallest != "3" || a.Optimistic != "2" || a.OptimisticSeed != "1/2" || a.Spread.Min != 0.2 || a.Spread.Max != 0.9 {
		t.Errorf("answer %+v", a)
	}
	// A unit missing or given twice is an error, not a silent gap.
	if _, err := NewSweep(SweepOf{}, sp, runs[1:]); err == nil || !strings.Contains(err.Error(), "unit 0") {
		t.Errorf("missing unit: %v", err)
	}
	if _, err := NewSweep(SweepOf{}, sp, append(runs, runs[0])); err == nil || !strings.Contains(err.Error(), "two results") {
		t.Errorf("duplicate unit: %v", err)
	}
}

// A parallel sweep gives what one unit at a time gives, in any order of
// completion, and leaves the shared Input untouched.
func TestSweepParallelEqualsSequential(t *testing.T) {
	sc := DefaultScenario()
	sc.Generate.Jobs = 60
	a1, _ := ParseAxis("gpus=24,32")
	a2, _ := ParseAxis("arrival-rate=1,1.5")
	sp := SweepSpec{Axes: []Axis{a1, a2}, Seeds: []uint64{1, 2}, Policies: []string{PolicyKueue, PolicyPlanner}, Fixed: []Setting{{"deactivate", "true"}}}
	opt := DefaultOptions()
	sw, err := RunSweep(sc.ResolveSeed, opt, sp, 4, nil)
	if err != nil {
		t.Fatal(err)
	}
	for u := range sp.Units() {
		in, err := sc.ResolveSeed(sp.Seeds[u%2])
		if err != nil {
			t.Fatal(err)
		}
		before := fmt.Sprint(in.Queues, in.Jobs[5].Arrival)
		r, err := sp.RunUnit(in, opt, u)
		if err != nil {
			t.Fatal(err)
		}
		if after := fmt.Sprint(in.Queues, in.Jobs[5].Arrival); after != before {
			t.Errorf("unit %d changed the input: %s -> %s", u, before, after)
		}
		if !reflect.DeepEqual(stripWall(r), stripWall(sw.Runs[u])) {
			t.Errorf("unit %d: sequential and parallel differ:\n%+v\n%+v", u, stripWall(r).Summaries[1], stripWall(sw.Runs[u]).Summaries[1])
		}
	}
	var tab, js, page bytes.Buffer
	sw.AnswerGoal(Goal{Text: "queueing.p95<=1h", Metric: "queueing.p95", Op: "<=", Value: 1})
	if err := sw.WriteTable(&tab); err != nil {
		t.Fatal(err)
	}
	if err := sw.WriteJSON(&js); err != nil {
		t.Fatal(err)
	}
	if err := sw.WriteHTML(&page); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(page.String(), `<svg class="chart"`); n != len(sweepColumns) {
		t.Errorf("%d charts, want %d", n, len(sweepColumns))
	}
	if !strings.Contains(tab.String(), "Goal queueing.p95<=1h") || strings.Count(tab.String(), "planner") < 4 {
		t.Errorf("table:\n%s", tab.String())
	}
}

// stripWall zeroes what depends on the machine, not the model.
func stripWall(r SweepRun) SweepRun {
	r.Summaries = append([]Summary(nil), r.Summaries...)
	for i := range r.Summaries {
		r.Summaries[i].WallSeconds, r.Summaries[i].EventsPerSecond, r.Summaries[i].ForecastsPerSecond = 0, 0, 0
	}
	return r
}

func TestWhatIfKnobs(t *testing.T) {
	in := &Input{Queues: []Queue{{Name: "a", GPUs: 16}, {Name: "b", GPUs: 8}, {Name: "c", GPUs: 8}},
		Jobs: []*Job{{Name: "x", Arrival: 100}, {Name: "y", Arrival: 400}}}
	set := func(ss ...string) (*Input, Options, error) {
		var st []Setting
		for _, s := range ss {
			x, err := ParseSetting(s)
			if err != nil {
				return nil, Options{}, err
			}
			st = append(st, x)
		}
		return ApplyWhatIf(in, DefaultOptions(), st)
	}
	out, _, err := set("gpus=+16")
	if err != nil || out.Queues[0].GPUs != 24 || out.Queues[1].GPUs != 12 || out.Queues[2].GPUs != 12 {
		t.Errorf("gpus=+16: %v %+v", err, out)
	}
	out, _, err = set("gpus=10") // 5, 2.5, 2.5: one remainder goes to b (first of the ties)
	if err != nil || out.Queues[0].GPUs != 5 || out.Queues[1].GPUs+out.Queues[2].GPUs != 5 || out.Capacity() != 10 {
		t.Errorf("gpus=10: %v %+v", err, out.Queues)
	}
	out, _, err = set("gpus.b=-8", "borrowingLimit.a=4")
	if err != nil || out.Queues[1].GPUs != 0 || *out.Queues[0].BorrowingLimit != 4 || in.Queues[1].GPUs != 8 || in.Queues[0].BorrowingLimit != nil {
		t.Errorf("per-queue: %v %+v (input %+v)", err, out.Queues, in.Queues)
	}
	out, _, err = set("arrival-rate=2")
	if err != nil || out.Jobs[1].Arrival != 250 || in.Jobs[1].Arrival != 400 {
		t.Errorf("arrival-rate: %v %v", err, out.Jobs[1].Arrival)
	}
	_, opt, err := set("deactivate.b=true", "policy.stability.minDwell=30m", "policy.boosts.plateaued=-50")
	if err != nil {
		t.Fatal(err)
	}
	if e := opt.Policy.Effective("ns", "b"); !e.Stop {
		t.Errorf("deactivate.b: queue b does not stop: %+v", e)
	}
	if e := opt.Policy.Effective("ns", "a"); e.Stop {
		t.Errorf("deactivate.b: queue a stops too")
	}
	if opt.Policy.Stability.MinDwell.Duration != 30*time.Minute || opt.Policy.Boosts.Plateaued != -50 {
		t.Errorf("policy knobs: %+v %+v", opt.Policy.Stability, opt.Policy.Boosts)
	}
	if len(preempt.DefaultPolicy().Overrides) != 0 {
		t.Error("the default policy was changed")
	}
	for _, bad := range []string{"gpus.zz=1", "gpus=-40", "policy.nope=1", "policy.boosts.plateaued=5", "arrival-rate=0", "deactivate=maybe", "color=red", "gpus"} {
		if _, _, err := set(bad); err == nil {
			t.Errorf("%s: no error", bad)
		}
	}
}

func TestParseAxisAndGoal(t *testing.T) {
	for s, want := range map[string][]string{
		"gpus=32:64:16":       {"32", "48", "64"},
		"gpus.a=+0:+16:8":     {"+0", "+8", "+16"},
		"arrival-rate=1,1.5 ": {"1", "1.5"},
	} {
		a, err := ParseAxis(s)
		if err != nil || !reflect.DeepEqual(a.Values, want) {
			t.Errorf("%s: %v %v", s, a.Values, err)
		}
	}
	for _, bad := range []string{"gpus=8:1:1", "gpus=1:8:0", "gpus=", "x=1"} {
		if _, err := ParseAxis(bad); err == nil {
			t.Errorf("%s: no error", bad)
		}
	}
	g, err := ParseGoal("queueing.p95 <= 90m")
	if err != nil || g.Value != 1.5 || g.Op != "<=" {
		t.Errorf("goal: %+v %v", g, err)
	}
	if g, err := ParseGoal("early-stops<5"); err != nil || g.Value != 5 {
		t.Errorf("goal: %+v %v", g, err)
	}
	for _, bad := range []string{"queueing.p95", "nope<=1", "queueing.p95<=soon"} {
		if _, err := ParseGoal(bad); err == nil {
			t.Errorf("%s: no error", bad)
		}
	}
}

func TestJobChanges(t *testing.T) {
	nan := math.NaN()
	base := &Result{Jobs: []JobOutcome{
		{Name: "a", Arrival: 0, FirstAdmit: 0, Outcome: "completed"},
		{Name: "b", Arrival: 0, FirstAdmit: 100, Outcome: "completed"},
		{Name: "c", Arrival: 0, FirstAdmit: 0, Outcome: "completed"},
		{Name: "d", Arrival: 0, FirstAdmit: 50, Outcome: "completed"},
		{Name: "e", Arrival: 0, FirstAdmit: 0, Outcome: "completed"},
	}}
	what := &Result{Jobs: []JobOutcome{
		{Name: "a", Arrival: 0, FirstAdmit: 0, Outcome: "deactivated", Reason: "Plateaued: …"},
		{Name: "b", Arrival: 0, FirstAdmit: 3700, Outcome: "completed"}, // one hour later
		{Name: "c", Arrival: 0, FirstAdmit: nan, Outcome: "unfinished"},
		{Name: "d", Arrival: 0, FirstAdmit: 600, Outcome: "completed"}, // 550 s: under 10m
		{Name: "e", Arrival: 0, FirstAdmit: 7200, Outcome: "completed"},
	}}
	cs, err := JobChanges(base, what, 600)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range cs {
		got = append(got, c.Job+" "+c.Change+" "+c.Reason)
	}
	if want := "a stopped Plateaued: …|c never admitted |e delayed |b delayed "; strings.Join(got, "|") != want {
		t.Errorf("changes %q, want %q", strings.Join(got, "|"), want)
	}
	var b bytes.Buffer
	if err := WriteJobChanges(&b, KeepJobChanges("planner", cs, 2)); err != nil || !strings.Contains(b.String(), "… 2 more") || !strings.Contains(b.String(), "never admitted") {
		t.Errorf("table: %v\n%s", err, b.String())
	}

	// With both runs' events, a delay says what ended each wait and how
	// many jobs the queue admitted meanwhile.
	base.Records = []Record{{T: 0, Type: "admit", Job: "a", Queue: "q"}, {T: 0, Type: "admit", Job: "c", Queue: "q"},
		{T: 0, Type: "admit", Job: "e", Queue: "q"}, {T: 100, Type: "finish", Job: "a", Queue: "q"}, {T: 100, Type: "admit", Job: "b", Queue: "q"}}
	what.Records = []Record{{T: 0, Type: "admit", Job: "a", Queue: "q"}, {T: 3600, Type: "deactivate", Job: "a", Queue: "q"},
		{T: 3700, Type: "admit", Job: "b", Queue: "q"}, {T: 7000, Type: "finish", Job: "b", Queue: "q"}, {T: 7200, Type: "admit", Job: "e", Queue: "q"}}
	for i := range base.Jobs {
		base.Jobs[i].Queue, what.Jobs[i].Queue = "q", "q"
	}
	cs, err = JobChanges(base, what, 600)
	if err != nil {
		t.Fatal(err)
	}
	reasons := map[string]string{}
	for _, c := range cs {
		reasons[c.Job] = c.Reason
	}
	if want := "admitted when a running job finished, 2 other admissions in q while it waited; before: admitted when GPUs already free, 0 other admissions in q while it waited"; reasons["e"] != want {
		t.Errorf("e's reason %q, want %q", reasons["e"], want)
	}
	if want := "admitted when a stalled job was stopped, 1 other admission in q while it waited; before: admitted when a running job finished, 3 other admissions in q while it waited"; reasons["b"] != want {
		t.Errorf("b's reason %q, want %q", reasons["b"], want)
	}
	if !strings.HasPrefix(reasons["c"], "not admitted by the run's end, 3 other admissions in q while it waited;") {
		t.Errorf("c's reason %q", reasons["c"])
	}
}
