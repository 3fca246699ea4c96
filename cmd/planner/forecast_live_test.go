package main

import (
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/progress-planner/planner/api/v1alpha1"
	"github.com/progress-planner/planner/pkg/preempt"
	"github.com/progress-planner/planner/pkg/progress"
)

// livePF builds a ProgressForecast the way the controller stores one: a
// history in the compact codec (Unix-second times), the objective string
// and the latest decision.
func livePF(t *testing.T, t0 float64, reports int) *v1alpha1.ProgressForecast {
	t.Helper()
	h := progress.NewHistory(progress.DefaultLimits())
	for i := 0; i < reports; i++ {
		step := i * 50
		loss := 1 + 3/(1+float64(step)/2000)
		pct := math.Floor(100 * float64(step) / 10000)
		h.Observe(t0+float64(i)*10, progress.TrainerStatus{ProgressPercentage: &pct, Metrics: []progress.MetricValue{
			{Name: "loss", Value: fmt.Sprintf("%.5g", loss)}, {Name: "current_step", Value: fmt.Sprint(step)},
			{Name: "total_steps", Value: "10000"}}})
	}
	hist, err := h.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	dec, _ := json.Marshal(preempt.Decision{At: t0 + float64(reports-1)*10, Verdict: preempt.Progressing, Reason: "Progressing: controller's reason"})
	return &v1alpha1.ProgressForecast{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "llama"},
		Status: v1alpha1.ProgressForecastStatus{Objective: "loss,minimize", ObjectiveSource: "default",
			History: &runtime.RawExtension{Raw: hist}, Decision: &runtime.RawExtension{Raw: dec}},
	}
}

func TestLiveForecastFromProgressForecast(t *testing.T) {
	t0 := 1.7e9
	pf := livePF(t, t0, 100)
	now := t0 + 995
	out, err := buildLiveForecastOutput(pf, now, nil)
	if err != nil {
		t.Fatal(err)
	}
	if out.Name != "team-a/llama" || out.AtBasis != "now" || out.At != now || out.Forecast.Now != now {
		t.Errorf("header: %+v", out)
	}
	if out.Objective.Metric != "loss" || !strings.HasPrefix(out.Objective.Source, "controller") {
		t.Errorf("objective %+v", out.Objective)
	}
	// 4950 of 10000 steps at 5 steps/s: about 1010 s left, counted from now.
	if eta := out.Forecast.ETA; !eta.Known || math.Abs(eta.Value-1010) > 60 {
		t.Errorf("ETA %+v, want about 1010 s", eta)
	}
	if out.Decision.Reason != "Progressing: controller's reason" {
		t.Errorf("decision is not the controller's: %+v", out.Decision)
	}
	// Judged at now: an hour without reports is a hang.
	late, err := buildLiveForecastOutput(pf, t0+4600, nil)
	if err != nil || !late.Forecast.Hung {
		t.Errorf("an hour of silence not judged hung: %v %+v", err, late.Forecast.HangReason)
	}
	var b strings.Builder
	if err := writeForecast(&b, out, "table"); err != nil || !strings.Contains(b.String(), "team-a/llama") {
		t.Errorf("table: %v\n%s", err, b.String())
	}
}

func TestLiveForecastBadStatus(t *testing.T) {
	pf := livePF(t, 1.7e9, 10)
	for name, mutate := range map[string]func(*v1alpha1.ProgressForecast){
		"no history":     func(p *v1alpha1.ProgressForecast) { p.Status.History = nil },
		"forged history": func(p *v1alpha1.ProgressForecast) { p.Status.History.Raw = []byte(`{"v":1,"t":[5,3]}`) },
		"bad objective":  func(p *v1alpha1.ProgressForecast) { p.Status.Objective = "loss,upward" },
		"bad decision":   func(p *v1alpha1.ProgressForecast) { p.Status.Decision.Raw = []byte(`{"at":"x"}`) },
	} {
		t.Run(name, func(t *testing.T) {
			c := pf.DeepCopy()
			mutate(c)
			if _, err := buildLiveForecastOutput(c, 1.7e9+100, nil); err == nil || !strings.Contains(err.Error(), "team-a/llama") {
				t.Errorf("want an error naming the object, got %v", err)
			}
		})
	}
}
