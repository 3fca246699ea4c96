package plugin

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/progress-planner/planner/api/v1alpha1"
	"github.com/progress-planner/planner/pkg/preempt"
)

func TestFromProgressForecast(t *testing.T) {
	until := float64(now.Add(time.Hour).Unix())
	report := metav1.NewTime(now.Add(-3 * time.Minute))
	pf := &v1alpha1.ProgressForecast{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "job"},
		Status: v1alpha1.ProgressForecastStatus{Verdict: "NearDone", Mode: "enforce", AdvisedBoost: 200, LastReportTime: &report}}
	pf.Status.SetDecision(float64(now.Unix()), float64(now.Unix()), nil, &until)
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
	// advise-only: the policy enforces, the planner does not write; the
	// decision still stands for the scheduler.
	pf.Status.Mode = "advise-only"
	if jf, err := FromProgressForecast(pf); err != nil || !jf.Tracked() || jf.Boost != 200 {
		t.Errorf("advise-only: %+v, %v", jf, err)
	}
	pf.Status.Mode = "advise"
	if jf, err := FromProgressForecast(pf); err != nil || jf.Tracked() || jf.Boost != 0 {
		t.Errorf("advise: %+v, %v (want untracked, boost 0)", jf, err)
	}
	// The blob is never read: a forged or unknown one changes nothing.
	pf.Status.Mode = "enforce"
	pf.Status.Decision = &runtime.RawExtension{Raw: []byte(`{"at":"soon","boost":2000000000}`)}
	if jf2, err := FromProgressForecast(pf); err != nil || jf2 != jf {
		t.Errorf("with a garbage blob: %+v, %v; want %+v", jf2, err, jf)
	}
}

// TestDecisionVersions: the plugin reads the decision version it knows;
// a ProgressForecast from a planner older than the typed fields, or newer
// than this plugin, makes the job untracked (the default scheduler's
// behaviour), with an error that says which to upgrade.
func TestDecisionVersions(t *testing.T) {
	pf := &v1alpha1.ProgressForecast{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "job"},
		Status: v1alpha1.ProgressForecastStatus{Verdict: "Plateaued", Mode: "enforce", AdvisedBoost: -100}}
	// An older planner wrote only the blob.
	raw, err := json.Marshal(preempt.Decision{At: float64(now.Unix()), Verdict: preempt.Plateaued, Mode: preempt.ModeEnforce, Boost: -100})
	if err != nil {
		t.Fatal(err)
	}
	pf.Status.Decision = &runtime.RawExtension{Raw: raw}
	if _, err := FromProgressForecast(pf); err == nil || !strings.Contains(err.Error(), "no typed decision") {
		t.Errorf("blob only: %v, want an error naming the missing typed decision", err)
	}
	pf.Status.SetDecision(float64(now.Unix()), float64(now.Unix()), nil, nil)
	if jf, err := FromProgressForecast(pf); err != nil || jf.Boost != -100 || !jf.Tracked() {
		t.Errorf("version %d: %+v, %v", v1alpha1.DecisionVersion, jf, err)
	}
	pf.Status.DecisionVersion = v1alpha1.DecisionVersion + 1
	if _, err := FromProgressForecast(pf); err == nil || !strings.Contains(err.Error(), "upgrade planner-scheduler") {
		t.Errorf("a newer version: %v, want an error asking to upgrade planner-scheduler", err)
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
