package humanize_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/progress-planner/planner/api/v1alpha1"
	"github.com/progress-planner/planner/internal/humanize"
	"github.com/progress-planner/planner/pkg/clusterview"
	"github.com/progress-planner/planner/pkg/forecast"
	"github.com/progress-planner/planner/pkg/kueueext"
	"github.com/progress-planner/planner/pkg/preempt"
	"github.com/progress-planner/planner/pkg/report"
)

// surfaceDurations run from 0 s to 30 days across every unit boundary.
func surfaceDurations() []float64 {
	var v []float64
	for s := 0.0; s <= 30*86400; s += 1 + s/9 {
		v = append(v, float64(int64(s)))
	}
	return append(v, 59.6, 599, 600, 3569, 3570, 48*3600-31, 48*3600-30, 30*86400)
}

// TestSurfacesFormatAlike: the same duration or share reads the same in
// the policy's reasons, the ProgressForecast printer columns, the report
// and planner explain — each surface renders a real value, and the text
// it shows is compared with humanize's.
func TestSurfacesFormatAlike(t *testing.T) {
	const now = 1.8e9
	p := preempt.DefaultPolicy()
	for _, sec := range surfaceDurations() {
		want := humanize.Duration(sec)
		// Printer columns: the summary's ETA.
		f := forecast.Forecast{Now: now, Reports: 10, ETA: forecast.Estimate{Known: true, Value: sec, Lo: sec, Hi: sec}, Progress: ptr(0.5)}
		if got := kueueext.Summarize(f).ETA; got != want {
			t.Fatalf("%gs: printer column ETA %q, humanize %q", sec, got, want)
		}
		// The report's ETA cell.
		var b bytes.Buffer
		r := report.Build(report.Input{GeneratedAt: time.Unix(0, 0), Interval: 0.8,
			Jobs: []report.JobInput{{Namespace: "ns", Name: "job", Queue: "q", GPUs: 1, State: report.Running, Forecast: &f}}})
		if err := r.Write(&b, "table"); err != nil {
			t.Fatal(err)
		}
		if cell := want + " [" + want + "–" + want + "]"; !strings.Contains(b.String(), cell) {
			t.Fatalf("%gs: the report's table lacks the ETA cell %q:\n%s", sec, cell, b.String())
		}
		// Explain: how long the verdict has held, from the stored decision.
		pf := &v1alpha1.ProgressForecast{}
		d := preempt.Decision{Verdict: preempt.Progressing, VerdictSince: now - sec}
		raw, err := json.Marshal(d)
		if err != nil {
			t.Fatal(err)
		}
		pf.Status.Decision = &runtime.RawExtension{Raw: raw}
		pf.Status.Forecast = &v1alpha1.ForecastSummary{Time: metav1.NewTime(time.Unix(int64(now), 0))}
		ev := strings.Join(clusterview.PlannerViewOf(pf, time.Unix(int64(now), 0)).Evidence, "; ")
		if s := "held for " + want; !strings.Contains(ev, s) {
			t.Fatalf("%gs: explain lacks %q: %s", sec, s, ev)
		}
		// The policy's reasons: a job admitted sec ago is Warming below
		// the 10-minute minimum, and its reason says for how long.
		if sec < p.Evidence.MinAge.Seconds() {
			admitted := now - sec
			dec := preempt.Decide(f, preempt.Facts{GPUs: 1, AdmittedAt: &admitted}, preempt.Decision{}, p)
			if s := "admitted " + want + " ago"; !strings.Contains(dec.Reason, s) {
				t.Fatalf("%gs: reason %q lacks %q", sec, dec.Reason, s)
			}
		}
	}
	for share := 0.0; share <= 1; share += 0.0007 {
		want := humanize.Percent(share)
		f := forecast.Forecast{Now: now, Reports: 10, Progress: ptr(share)}
		if got := kueueext.Summarize(f).Progress; got != want {
			t.Fatalf("%g: printer column progress %q, humanize %q", share, got, want)
		}
		var b bytes.Buffer
		r := report.Build(report.Input{GeneratedAt: time.Unix(0, 0), Interval: 0.8,
			Jobs: []report.JobInput{{Namespace: "ns", Name: "job", Queue: "q", GPUs: 1, State: report.Running, Forecast: &f}}})
		if err := r.Write(&b, "table"); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(b.String(), " "+want+" ") {
			t.Fatalf("%g: the report's table lacks the progress %q:\n%s", share, want, b.String())
		}
	}
}

func ptr(v float64) *float64 { return &v }
