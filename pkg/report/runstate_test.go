package report

import (
	"bytes"
	"regexp"
	"strings"
	"testing"

	"github.com/progress-planner/planner/pkg/forecast"
	"github.com/progress-planner/planner/pkg/preempt"
	"github.com/progress-planner/planner/pkg/progress"
)

func fp(x float64) *float64 { return &x }

// fc is a forecast as of now=1000 whose last report was at last, with the
// step counter at step of total (progress nil without a total).
func fc(step, total, last float64, issues ...string) *forecast.Forecast {
	f := &forecast.Forecast{Now: 1000, Reports: 40, LastReport: fp(last), ReportInterval: fp(30), Step: fp(step),
		Objective: progress.Objective{Metric: "eval_loss"}}
	if total > 0 {
		f.TotalSteps, f.Progress = fp(total), fp(step/total)
	}
	f.Integrity.Issues = issues
	return f
}

func TestRunStateOf(t *testing.T) {
	for _, c := range []struct {
		name    string
		state   State
		f       *forecast.Forecast
		outcome string
		want    State
		ended   bool
		note    string // a substring of the note; "" wants no note
	}{
		{"no forecast", Running, nil, "", Running, false, ""},
		{"running on time", Running, fc(1500, 3000, 990), "", Running, false, ""},
		{"counter at its total", Running, fc(3000, 3000, 1000), "", Finished, true, "progress 100% (step 3000 of 3000)"},
		{"forged 100%: not finished", Running, fc(3000, 3000, 1000, "progress ahead of the counters"), "", Running, false, ""},
		{"forged 100% with a completed outcome", Running, fc(3000, 3000, 1000, "x"), "completed", Running, false, ""},
		{"outcome completed", Running, fc(2990, 3000, 1000), "completed", Finished, true, "the run completed, progress 99.7%"},
		{"target reached without a total", Running, fc(700, 0, 1000), "target_reached", Finished, true, "finished: the run reached its target"},
		{"aborted", Running, fc(1200, 3000, 1000), "aborted", Stopped, true, "stopped: the run was aborted at progress 40%"},
		{"unknown outcome short of the total", Running, fc(1500, 3000, 1000), "unknown", Stopped, true, "the run ended (outcome unknown) at progress 50%"},
		{"unknown outcome at the total", Running, fc(3000, 3000, 1000), "unknown", Finished, true, "finished: progress 100%"},
		{"late: the last report's age", Running, fc(1500, 3000, 1000-7200), "", Running, false, "last report 2h ago"},
		{"not late within three intervals", Running, fc(1500, 3000, 1000-80), "", Running, false, ""},
		{"waiting keeps its state", Waiting, fc(3000, 3000, 1000), "", Waiting, false, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := RunStateOf(c.state, c.f, c.outcome)
			if got.State != c.want || got.Ended != c.ended {
				t.Errorf("state %s ended %v, want %s %v (note %q)", got.State, got.Ended, c.want, c.ended, got.Note)
			}
			if (c.note == "") != (got.Note == "") || !strings.Contains(got.Note, c.note) {
				t.Errorf("note %q, want %q", got.Note, c.note)
			}
		})
	}
}

// TestEndedRunsInTheReport: a finished run shows as finished, without the
// running-job verdict that would contradict it (the issue's "Warming:
// confidence below floor" on a completed run), keeps a plateau verdict
// with the forecast's own evidence, draws no forecast fan, and — known to
// have ended — holds no GPUs in the capacity forecast.
func TestEndedRunsInTheReport(t *testing.T) {
	warm := preempt.Decision{Verdict: preempt.Warming, Reason: "Warming: confidence 0.25 below floor 0.5; boost 0"}
	plat := preempt.Decision{Verdict: preempt.Plateaued, Reason: "Plateaued: yields its GPUs (boost -100)"}
	done := fc(3000, 3000, 1000)
	done.ETA = forecast.Estimate{Known: true}
	done.PredictedFinal = forecast.Estimate{Known: true, Value: 2, Lo: 1.9, Hi: 2.1}
	done.Current = fp(2)
	flat := fc(3000, 3000, 1000)
	flat.PlateauReason = "stall: best gained 0.1% in the last 20% of the run"
	running := fc(1500, 3000, 990)
	running.ETA = forecast.Estimate{Known: true, Value: 600, Lo: 500, Hi: 700}
	running.PredictedFinal = forecast.Estimate{Known: true, Value: 2, Lo: 1.8, Hi: 2.2}
	running.Current = fp(2.5)
	// A running job whose ETA has run down to now (silent since its last
	// report): its fan must still have a width on the live page.
	stale := *running
	stale.ETA = forecast.Estimate{Known: true}
	h := progress.NewHistory(progress.DefaultLimits())
	h.Observe(0, progress.TrainerStatus{Metrics: []progress.MetricValue{{Name: "eval_loss", Value: "3"}, {Name: "current_step", Value: "0"}, {Name: "total_steps", Value: "3000"}}})
	h.Observe(900, progress.TrainerStatus{Metrics: []progress.MetricValue{{Name: "eval_loss", Value: "2"}, {Name: "current_step", Value: "1500"}, {Name: "total_steps", Value: "3000"}}})
	r := Build(Input{Jobs: []JobInput{
		{Name: "done", Queue: "q", GPUs: 8, State: Running, Forecast: done, Decision: &warm, History: h, Outcome: "completed"},
		{Name: "flat", Queue: "q", GPUs: 4, State: Running, Forecast: flat, Decision: &plat, History: h},
		{Name: "live", Queue: "q", GPUs: 2, State: Running, Forecast: running, Decision: &warm, History: h},
		{Name: "aborted", Queue: "q", GPUs: 2, State: Running, Forecast: running, Decision: &warm, History: h, Outcome: "aborted"},
		{Name: "stale", Queue: "q2", GPUs: 2, State: Running, Forecast: &stale, Decision: &warm, History: h},
	}, Queues: []QueueInput{{Name: "q", QuotaGPUs: 16}}})
	byName := map[string]JobRow{}
	for _, j := range r.Jobs {
		byName[j.Name] = j
	}
	if j := byName["done"]; j.State != Finished || j.Verdict != "" || strings.Contains(j.Reason, "Warming") || !strings.HasPrefix(j.Reason, "finished: the run completed") {
		t.Errorf("finished run: state %s verdict %q reason %q", j.State, j.Verdict, j.Reason)
	}
	if j := byName["flat"]; j.State != Finished || j.Verdict != string(preempt.Plateaued) || strings.Contains(j.Reason, "yields") || !strings.Contains(j.Reason, "stall: best gained") {
		t.Errorf("finished plateaued run: state %s verdict %q reason %q", j.State, j.Verdict, j.Reason)
	}
	if j := byName["aborted"]; j.State != Stopped || j.ETA != nil || j.Verdict != "" {
		t.Errorf("aborted run: state %s ETA %v verdict %q", j.State, j.ETA, j.Verdict)
	}
	var order []string
	for _, j := range r.Jobs {
		order = append(order, j.Name)
	}
	if got := strings.Join(order, ","); got != "live,aborted,done,flat,stale" {
		t.Errorf("job order %s: in each queue the runs that ended come after the running one", got)
	}
	if j := byName["live"]; j.State != Running || j.Verdict != "Warming" {
		t.Errorf("running job: state %s verdict %q", j.State, j.Verdict)
	}
	// Only the run known to have ended (Outcome) leaves the queue's use:
	// "flat" is at 100% but its Workload still holds its quota.
	if q := r.Queues[0]; q.UsedGPUs != 6 || q.Running != 2 {
		t.Errorf("queue: used %d running %d, want 6 and 2", q.UsedGPUs, q.Running)
	}
	for _, c := range r.jobCharts {
		if band := !isNaN(c.End); band != (c.Key == "live" || c.Key == "stale") {
			t.Errorf("chart %s: forecast fan drawn %v", c.Key, band)
		}
	}
	var b bytes.Buffer
	if err := r.Write(&b, "html"); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(b.String(), `data-series="forecast-band"`); n != 2 {
		t.Errorf("%d forecast bands in the page, want 2 (the running jobs')", n)
	}
	// The stale job's fan runs from its last observation (900 s) to now
	// (1000 s): its band path spans a width, not a vertical line.
	page := b.String()
	i := strings.Index(page, `data-job="stale"`)
	j := strings.Index(page[i:], `data-series="forecast-band"`)
	k := strings.Index(page[i+j:], "</svg>")
	band := page[i+j : i+j+k]
	xs := map[string]bool{}
	for _, m := range regexp.MustCompile(`[ML]([0-9.]+),`).FindAllStringSubmatch(band, -1) {
		xs[m[1]] = true
	}
	if len(xs) < 2 {
		t.Errorf("the stale job's fan has no width: %s", band)
	}
}

func isNaN(x float64) bool { return x != x }
