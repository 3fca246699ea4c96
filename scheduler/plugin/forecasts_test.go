package plugin

import (
	"encoding/json"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/progress-planner/planner/api/v1alpha1"
	"github.com/progress-planner/planner/pkg/preempt"
)

func TestFromProgressForecast(t *testing.T) {
	until := float64(now.Add(time.Hour).Unix())
	raw, err := json.Marshal(preempt.Decision{At: float64(now.Unix()), Verdict: preempt.NearDone, Mode: preempt.ModeEnforce, Boost: 200, ProtectedUntil: &until})
	if err != nil {
		t.Fatal(err)
	}
	report := metav1.NewTime(now.Add(-3 * time.Minute))
	pf := &v1alpha1.ProgressForecast{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "job"},
		Status: v1alpha1.ProgressForecastStatus{Verdict: "NearDone", LastReportTime: &report, Decision: &runtime.RawExtension{Raw: raw}}}
	jf, err := FromProgressForecast(pf)
	if err != nil {
		t.Fatal(err)
	}
	if jf.Verdict != preempt.NearDone || jf.Boost != 200 || !jf.DecidedAt.Equal(now) || !jf.ProtectedUntil.Equal(now.Add(time.Hour)) || !jf.LastReport.Equal(report.Time) {
		t.Errorf("decoded %+v", jf)
	}
	if !jf.Leased(now) || jf.Leased(now.Add(time.Hour)) {
		t.Errorf("lease active now %v, at its end %v", jf.Leased(now), jf.Leased(now.Add(time.Hour)))
	}
	if jf.EffectiveBoost(now.Add(29*time.Minute), 30*time.Minute) != 200 || jf.EffectiveBoost(now.Add(31*time.Minute), 30*time.Minute) != 0 {
		t.Error("the boost should count while the decision is fresh, and only then")
	}

	pf.Status.Decision = nil
	if _, err := FromProgressForecast(pf); err == nil {
		t.Error("no decision: want an error (the job is then untracked)")
	}
	pf.Status.Decision = &runtime.RawExtension{Raw: []byte(`{"at":"soon"}`)}
	if _, err := FromProgressForecast(pf); err == nil {
		t.Error("undecodable decision: want an error")
	}
}

func TestDecodeArgs(t *testing.T) {
	s, err := decodeArgs(&runtime.Unknown{Raw: []byte(`{"gpuResource":"amd.com/gpu","protectionMargin":0,"maxForecastAge":"10m"}`)})
	if err != nil {
		t.Fatal(err)
	}
	if s.gpuResource != "amd.com/gpu" || s.protectionMargin != 0 || s.maxForecastAge != 10*time.Minute || s.minCandidateNodesAbsolute != DefaultMinCandidateNodesAbsolute {
		t.Errorf("decoded %+v", s)
	}
	if s, err := decodeArgs(nil); err != nil || s.protectionMargin != DefaultProtectionMargin || s.gpuResource != DefaultGPUResource {
		t.Errorf("defaults %+v, %v", s, err)
	}
	if _, err := decodeArgs(&runtime.Unknown{Raw: []byte(`{"protectionMargin":-1}`)}); err == nil {
		t.Error("a negative margin should be refused")
	}
}
