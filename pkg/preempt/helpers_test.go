package preempt

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/progress-planner/planner/pkg/forecast"
	"github.com/progress-planner/planner/pkg/progress"
)

// t0 is an arbitrary origin: Decide must not care about the time base.
const t0 = 1_700_000_000.0

func fp(x float64) *float64 { return &x }

// fcProgressing is a healthy job at 40 %: learning, far from done.
func fcProgressing(now float64) forecast.Forecast {
	return forecast.Forecast{
		Now:                  now,
		Objective:            progress.Objective{Metric: "eval_loss", Direction: progress.Minimize},
		Reports:              50,
		Segments:             1,
		ObjectivePts:         50,
		Step:                 fp(4000),
		TotalSteps:           fp(10000),
		Progress:             fp(0.4),
		StepRate:             fp(1),
		SinceProgress:        30,
		ReportInterval:       fp(60),
		ETA:                  forecast.Estimate{Known: true, Value: 6000, Lo: 5500, Hi: 6600, Basis: "total-steps"},
		Current:              fp(1.2),
		Best:                 fp(1.2),
		PredictedFinal:       forecast.Estimate{Known: true, Value: 0.9, Lo: 0.85, Hi: 0.95},
		RemainingImprovement: fp(0.3),
		RelativeRemaining:    fp(0.25),
		PlateauProbability:   0.1,
		Confidence:           0.8,
	}
}

// fcPlateau: flat for hours, almost nothing left to gain, ETA 2h10m.
func fcPlateau(now float64) forecast.Forecast {
	f := fcProgressing(now)
	f.ETA = forecast.Estimate{Known: true, Value: 7800, Lo: 6600, Hi: 9600, Basis: "total-steps"}
	f.RemainingImprovement = fp(0.0031)
	f.RelativeRemaining = fp(0.004)
	f.PlateauProbability, f.Plateaued = 0.93, true
	f.PlateauOnset = fp(now - 3*3600)
	return f
}

// fcNearDone: step 9500 of 10000 at 1 step/s, planner ETA 500 s (Hi 600 s).
func fcNearDone(now float64) forecast.Forecast {
	f := fcProgressing(now)
	f.Step, f.Progress = fp(9500), fp(0.95)
	f.ETA = forecast.Estimate{Known: true, Value: 500, Lo: 450, Hi: 600, Basis: "total-steps"}
	f.RemainingImprovement, f.RelativeRemaining = fp(0.03), fp(0.05)
	f.PlateauProbability = 0.3
	return f
}

// fcHung: no step movement for 47 minutes.
func fcHung(now float64) forecast.Forecast {
	f := fcProgressing(now)
	f.Hung = true
	f.HangReason = "step counter unchanged over 47 report intervals"
	f.SinceProgress = 47 * 60
	f.ETA = forecast.Estimate{Known: false, Why: "no progress"}
	return f
}

// fcHungSilent: hung, its last progress silent seconds before now,
// against a hang threshold of threshold seconds.
func fcHungSilent(now, silent, threshold float64) forecast.Forecast {
	return with(fcHung(now), func(f *forecast.Forecast) { f.SinceProgress, f.HangAfter = silent, fp(threshold) })
}

// fcDiverging: loss rising.
func fcDiverging(now float64) forecast.Forecast {
	f := fcProgressing(now)
	f.Diverging = true
	f.DivergenceReason = "eval_loss rose 40% above its best over the last 20 reports"
	f.Current, f.Best = fp(1.68), fp(1.2)
	return f
}

// fcNaN: loss became NaN.
func fcNaN(now float64) forecast.Forecast {
	f := fcDiverging(now)
	f.DivergenceReason = "eval_loss is NaN in the last 3 reports"
	f.NonFinite = true
	return f
}

func with(f forecast.Forecast, m func(*forecast.Forecast)) forecast.Forecast {
	m(&f)
	return f
}

// running: admitted two hours before t0, 8 GPUs, priority 1000.
func running() Facts {
	return Facts{BasePriority: 1000, GPUs: 8, AdmittedAt: fp(t0 - 7200), Namespace: "team-a", ClusterQueue: "gpu"}
}

// job drives Decide over time the way the controller does: the decision is
// stored (through JSON, as in a CRD status) and passed back.
type job struct {
	t     *testing.T
	p     Policy
	facts Facts
	d     Decision
	log   []Decision
}

func newJob(t *testing.T, p Policy) *job { return &job{t: t, p: p, facts: running()} }

func (j *job) at(f forecast.Forecast) Decision {
	j.t.Helper()
	d := Decide(f, j.facts, j.d, j.p)
	checkDecision(j.t, j.p, d)
	j.d = roundTrip(j.t, d)
	j.log = append(j.log, j.d)
	return j.d
}

// run decides every dt seconds in [from, to) and returns the last decision.
func (j *job) run(from, to, dt float64, fc func(float64) forecast.Forecast) Decision {
	j.t.Helper()
	var d Decision
	for now := from; now < to; now += dt {
		d = j.at(fc(now))
	}
	return d
}

// checkDecision asserts the invariants every decision must satisfy.
func checkDecision(t *testing.T, p Policy, d Decision) {
	// No t.Helper(): this runs for every decision of the property tests.
	if d.Boost < p.Boosts.Min || d.Boost > p.Boosts.Max || d.AdvisedBoost < p.Boosts.Min || d.AdvisedBoost > p.Boosts.Max {
		t.Fatalf("boost %d / advised %d outside [%d, %d]: %s", d.Boost, d.AdvisedBoost, p.Boosts.Min, p.Boosts.Max, d.Reason)
	}
	if strings.ContainsAny(d.Reason, "\n\r") {
		t.Fatalf("reason is not one line: %q", d.Reason)
	}
	if !strings.HasPrefix(d.Reason, string(d.Verdict)+": ") {
		t.Fatalf("reason does not start with the verdict %s: %q", d.Verdict, d.Reason)
	}
	if d.Mode == ModeAdvise && (d.Boost != 0 || d.Action != ActionNone) {
		t.Fatalf("advise mode applied boost %d / action %s", d.Boost, d.Action)
	}
	if d.Mode == ModeEnforce && (d.Boost != d.AdvisedBoost || d.Action != d.AdvisedAction) {
		t.Fatalf("enforce mode: boost %d != advised %d or action %s != %s", d.Boost, d.AdvisedBoost, d.Action, d.AdvisedAction)
	}
	if d.AdvisedBoost > 0 && (d.Verdict != NearDone || d.ProtectedUntil == nil) {
		t.Fatalf("positive boost %d without NearDone and a lease: %s", d.AdvisedBoost, d.Reason)
	}
	if d.AdvisedAction == ActionDeactivate && !d.Verdict.Stalled() {
		t.Fatalf("Deactivate for verdict %s", d.Verdict)
	}
}

func roundTrip(t *testing.T, d Decision) Decision {
	t.Helper()
	b, err := json.Marshal(d)
	if err != nil {
		t.Fatalf("marshal decision: %v", err)
	}
	var back Decision
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatalf("unmarshal decision: %v", err)
	}
	if !reflect.DeepEqual(back, d) {
		t.Fatalf("decision changed through JSON:\n got %+v\nwant %+v", back, d)
	}
	return back
}

func wantContains(t *testing.T, s string, subs ...string) {
	t.Helper()
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			t.Errorf("%q\n  does not contain %q", s, sub)
		}
	}
}
