package simulator

import (
	"fmt"
	"math"
	"strings"
	"testing"
)

// curveYAML is a scenario curve of 100 evaluations over a whole run:
// eval_loss falling from 4 to 1, flat from run fraction flatFrom on but
// for an evaluation noise of ±0.002.
func curveYAML(flatFrom float64) string {
	var xs, vs []string
	for i := 1; i <= 100; i++ {
		x := float64(i) / 100
		v := 1 + 3*(1-math.Min(x, flatFrom)/flatFrom) + 0.002*float64(i%3-1)
		xs, vs = append(xs, fmt.Sprint(x)), append(vs, fmt.Sprintf("%.4f", v))
	}
	return fmt.Sprintf("{objective: {metric: eval_loss, direction: minimize}, x: [%s], v: [%s]}", strings.Join(xs, ", "), strings.Join(vs, ", "))
}

// A job that had run before the snapshot continues its own curve from
// where it was: it finishes its remaining time, its history already holds
// the earlier reports (so the planner judges it at its first decision on
// them), and only the GPU time past its onset in the simulation counts as
// plateau time.
func TestJobContinuesItsOwnHistory(t *testing.T) {
	yaml := `
name: replay
queues: [{name: q, gpus: 4}]
deactivate: true
policy: {stop: {gracePeriod: 30m}}
jobs:
  - {name: flat, queue: q, gpus: 2, ranFor: 10h, duration: 10h, curve: ` + curveYAML(0.2) + `}
  - {name: learns, queue: q, gpus: 2, ranFor: 10h, duration: 10h, curve: ` + curveYAML(1) + `}
`
	sc, err := ParseScenario([]byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	in, err := sc.Resolve()
	if err != nil {
		t.Fatal(err)
	}
	if j := in.Jobs[0]; j.Done != 36000 || j.Duration != 72000 || math.Abs(j.Curve.Onset-0.2) > 0.03 {
		t.Fatalf("flat job: done %v of %v, onset %v", j.Done, j.Duration, j.Curve.Onset)
	}
	o, err := sc.Options(DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	firstReports := map[string]int{}
	o.Observe = func(ob Observation) {
		if _, seen := firstReports[ob.Job.Name]; !seen {
			firstReports[ob.Job.Name] = ob.Forecast.Reports
			if ob.Work < ob.Job.Done {
				t.Errorf("%s: work %v before its %v done", ob.Job.Name, ob.Work, ob.Job.Done)
			}
		}
	}
	r, err := Run(in, PolicyPlanner, o)
	if err != nil {
		t.Fatal(err)
	}
	flat, learns := outcome(t, r, "flat"), outcome(t, r, "learns")
	if learns.Outcome != "completed" || learns.End != 36000 {
		t.Errorf("learning job: %s at %v, want completed at 36000 (its 10h left)", learns.Outcome, learns.End)
	}
	// The seeded history: the first decision comes minutes after
	// admission, yet the forecast rests on the ten hours before it.
	for name, n := range firstReports {
		if n < 20 {
			t.Errorf("%s: first forecast on %d reports, want the seeded history's", name, n)
		}
	}
	if flat.Outcome != "deactivated" || !(flat.End < 3*3600) {
		t.Errorf("flat job (plateaued before the snapshot): %s at %v (%s), want stopped within the grace and dwell", flat.Outcome, flat.End, flat.Reason)
	}
	if want := 2 * flat.End; math.Abs(flat.PostPlateau-want) > 1 || math.Abs(flat.Used-want) > 1 {
		t.Errorf("flat job: plateau GPU-s %v and used %v, want %v (all of its simulated run)", flat.PostPlateau, flat.Used, want)
	}
	if learns.PostPlateau > 0.05*learns.Used {
		t.Errorf("learning job: plateau GPU-s %v of %v used", learns.PostPlateau, learns.Used)
	}
}

func TestCurveSpecChecks(t *testing.T) {
	head := "name: x\nqueues: [{name: q, gpus: 1}]\njobs: [{name: a, queue: q, gpus: 1, duration: 1h, "
	for _, c := range []struct{ job, want string }{
		{"ranFor: 1h}]", "only with unknownDuration or a curve"},
		{"unknownDuration: true, curve: " + curveYAML(1) + "}]", "needs a known duration"},
		{"curve: {objective: {metric: loss, direction: minimize}, x: [0.5, 0.4], v: [2, 1]}}]", "increase strictly"},
		{"curve: {objective: {metric: loss, direction: minimize}, x: [0.5, 1.5], v: [2, 1]}}]", "within (0, 1]"},
		{"curve: {objective: {metric: loss, direction: minimize}, x: [0.5], v: [2, 1]}}]", "same length"},
		{"curve: {objective: {metric: loss, direction: sideways}, x: [0.5], v: [2]}}]", "objective"},
		{"ranFor: 3650d, curve: " + curveYAML(1) + "}]", "ranFor"},
	} {
		if _, err := ParseScenario([]byte(head + c.job)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want %q", c.job, err, c.want)
		}
	}
}
