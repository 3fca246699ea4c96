package backtest

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/progress-planner/planner/examples"
	"github.com/progress-planner/planner/pkg/forecast"
	"github.com/progress-planner/planner/pkg/progress"
)

// TestScoresDoNotDependOnUnitsOrDirection: the planner's verdicts and its
// scored errors do not depend on which way the objective points
// (Options.Mirror) nor on the unit of time (Options.TimeScale). With time
// scaled, so is Settings.HangSlack, the one time among the settings: a
// fixed allowance for scheduling jitter, which rightly does not grow with
// the job's cadence, so without it only the hang delays would move. The
// same relations hold on the whole development corpus, where only the
// delays in seconds move (docs/backtest.md 7.20); this test keeps them on
// the embedded examples, to rounding.
func TestScoresDoNotDependOnUnitsOrDirection(t *testing.T) {
	base, err := FilesFromFS(examples.FS, examples.Dir)
	if err != nil || len(base) == 0 {
		t.Fatalf("embedded examples: %v (%d files)", err, len(base))
	}
	want := scoredFacts(t, Run(base, Options{Workers: 2, PerJob: true}), 1)
	for _, tc := range []struct {
		name   string
		mirror bool
		time   float64
	}{
		{"mirror", true, 1},
		{"time x10", false, 10},
		{"time x0.1", false, 0.1},
		{"mirror, time x100", true, 100},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := forecast.DefaultSettings()
			s.HangSlack *= tc.time
			r := Run(base, Options{Workers: 2, PerJob: true, Engine: ForecastEngine{Settings: &s}, Mirror: tc.mirror, TimeScale: tc.time})
			got := scoredFacts(t, r, tc.time)
			if len(got) != len(want) {
				t.Fatalf("%d scored facts, want %d", len(got), len(want))
			}
			for i := range want {
				if got[i] != want[i] {
					t.Errorf("%s\n  got  %s", want[i], got[i])
				}
			}
		})
	}
}

// scoredFacts lists, per job and cut, what the backtest scores: verdicts,
// relative errors and interval coverage, and the incident and plateau
// results with their times divided by timeScale. Numbers are rounded to
// six significant digits, so the comparison tolerates floating-point
// rounding and nothing else.
func scoredFacts(t *testing.T, r *Report, timeScale float64) []string {
	t.Helper()
	if len(r.Skipped) != 0 {
		t.Fatalf("skipped: %+v", r.Skipped)
	}
	g := func(p *float64, scale float64) string {
		if p == nil {
			return "-"
		}
		return strconv.FormatFloat(*p/scale, 'g', 6, 64)
	}
	var out []string
	for _, j := range r.Jobs {
		for _, c := range j.Cuts {
			var b strings.Builder
			fmt.Fprintf(&b, "%s@%g hung=%v div=%v plateau=%v", j.Name, c.Cutoff, c.Hung, c.Diverging, c.Plateaued)
			if e := c.ETA; e != nil {
				fmt.Fprintf(&b, " eta=%s/%s", g(e.PlannerAPE, 1), e.PlannerBasis)
			}
			if f := c.Final; f != nil {
				cov := "-"
				if f.Covered != nil {
					cov = strconv.FormatBool(*f.Covered)
				}
				fmt.Fprintf(&b, " final=%s fallback=%v covered=%s", g(&f.PlannerError, 1), f.PlannerFallback, cov)
			}
			if x := c.TimeToTarget; x != nil {
				fmt.Fprintf(&b, " ttt=%s/%s", g(x.PlannerAPE, 1), x.PlannerBasis)
			}
			out = append(out, b.String())
		}
		if p := j.Plateau; p != nil {
			out = append(out, fmt.Sprintf("%s plateau truth=%s detected=%s delay=%s fp=%v",
				j.Name, g(&p.TruthSeconds, timeScale), g(p.DetectedSeconds, timeScale), g(p.DelayFraction, 1), p.FalsePositive))
		}
		if i := j.IncidentResult; i != nil {
			out = append(out, fmt.Sprintf("%s incident detected=%v at=%s delay=%s", j.Name, i.Detected,
				g(i.DetectedSeconds, timeScale), g(i.DelaySeconds, timeScale)))
		}
	}
	return out
}

// TestRecastMovesEveryValueAndKeepsTheInput: the mirror reaches the target
// and the final value as well as the reports, the time scale reaches the
// end and the incident's times, and neither touches the file it is given
// (an Input's Load may hand out the same file twice).
func TestRecastMovesEveryValueAndKeepsTheInput(t *testing.T) {
	in := `{"kind":"ProgressHistory","version":1,"name":"x","objective":{"metric":"acc","direction":"maximize","target":0.7},` +
		`"outcome":{"status":"target_reached","endSeconds":100,"final":{"acc":0.71,"loss":"nan"}},"derivedFrom":"y",` +
		`"incident":{"type":"hang","atSeconds":50,"hangSeconds":20,"variant":"stale"}}
{"t":10,"trainerStatus":{"estimatedRemainingSeconds":90,"metrics":[{"name":"acc","value":"0.5"},{"name":"loss","value":"2"}]}}
{"t":100,"trainerStatus":{"metrics":[{"name":"acc","value":"0.71"},{"name":"loss","value":"nan"}]}}
`
	f, err := progress.ReadHistoryFile(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	before := fmt.Sprintf("%+v %+v %v %v", *f.Header.Objective, *f.Header.Outcome, f.Header.Incident, f.Reports)
	m := mirroredObjective(f)
	if o := m.Header.Objective; o.Direction != "minimize" || *o.Target != -0.7 {
		t.Errorf("objective %+v", *o)
	}
	if got := string(m.Header.Outcome.Final["acc"]) + " " + string(m.Header.Outcome.Final["loss"]); got != `-0.71 "nan"` {
		t.Errorf("final %s", got)
	}
	if got := fmt.Sprint(m.Reports[0].TrainerStatus.Metrics); got != "[{acc -0.5} {loss 2}]" {
		t.Errorf("reports %s", got)
	}
	s := scaledTime(f, 10)
	if s.Header.Outcome.EndSeconds != 1000 || s.Reports[1].T != 1000 || *s.Reports[0].TrainerStatus.EstimatedRemainingSeconds != 900 {
		t.Errorf("times: end %g, t %g, eta %g", s.Header.Outcome.EndSeconds, s.Reports[1].T, *s.Reports[0].TrainerStatus.EstimatedRemainingSeconds)
	}
	if got := string(s.Header.Incident["atSeconds"]) + " " + string(s.Header.Incident["hangSeconds"]) + " " + string(s.Header.Incident["variant"]); got != `500 200 "stale"` {
		t.Errorf("incident %s", got)
	}
	if after := fmt.Sprintf("%+v %+v %v %v", *f.Header.Objective, *f.Header.Outcome, f.Header.Incident, f.Reports); after != before {
		t.Errorf("the input moved:\n%s\n%s", before, after)
	}
}
