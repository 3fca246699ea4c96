package forecast

import (
	"bytes"
	"encoding/json"
	"math"
	"testing"

	"github.com/progress-planner/planner/pkg/progress"
)

const fuzzHistoryFile = `{"kind":"ProgressHistory","version":1,"name":"demo","objective":{"metric":"eval_loss","direction":"minimize"}}
{"t":0,"trainerStatus":{"progressPercentage":0,"trainMetrics":[{"name":"eval_loss","value":"3"}]}}
{"t":10,"trainerStatus":{"progressPercentage":10,"trainMetrics":[{"name":"eval_loss","value":"2.5"}]}}
{"t":20,"trainerStatus":{"progressPercentage":20,"trainMetrics":[{"name":"eval_loss","value":"2.2"}]}}
{"t":30,"trainerStatus":{"progressPercentage":30,"trainMetrics":[{"name":"eval_loss","value":"2.1"}]}}
{"t":40,"trainerStatus":{"progressPercentage":40,"trainMetrics":[{"name":"eval_loss","value":"2.05"}]}}
`

// FuzzFitUntrustedHistory: Fit never panics on a history built from any
// history file (file) or decoded from any stored ProgressForecast history
// (stored) — both are tenant-writable — and its forecast always encodes
// (a NaN or Inf anywhere in it would fail the status write). progress's
// FuzzReadHistoryFile and FuzzUnmarshalHistory check the parsers
// themselves.
func FuzzFitUntrustedHistory(f *testing.F) {
	hf, err := progress.ReadHistoryFile(bytes.NewReader([]byte(fuzzHistoryFile)))
	if err != nil {
		f.Fatal(err)
	}
	h := progress.NewHistory(progress.DefaultLimits())
	for _, r := range hf.Reports {
		h.Observe(r.T, r.TrainerStatus)
	}
	stored, err := h.MarshalJSON()
	if err != nil {
		f.Fatal(err)
	}
	f.Add([]byte(fuzzHistoryFile), stored)
	f.Add([]byte(`{"kind":"ProgressHistory","version":1}`+"\n"+`{"t":1e308,"trainerStatus":{"progressPercentage":1e400}}`), []byte(`{"v":1,"t":[1e308,-1],"cols":{"m:loss":{}}}`))
	// A fixed budget with a learning rate and a target: the schedule rules
	// and the time to target.
	f.Add([]byte(`{"kind":"ProgressHistory","version":1,"objective":{"metric":"loss","direction":"minimize","target":0.5}}`+"\n"+
		`{"t":0,"trainerStatus":{"metrics":[{"name":"current_step","value":"0"},{"name":"total_steps","value":"100"},{"name":"loss","value":"3"},{"name":"learning_rate","value":"1e-4"}]}}`+"\n"+
		`{"t":10,"trainerStatus":{"metrics":[{"name":"current_step","value":"10"},{"name":"total_steps","value":"100"},{"name":"loss","value":"2"},{"name":"learning_rate","value":"1e-3"}]}}`+"\n"+
		`{"t":20,"trainerStatus":{"metrics":[{"name":"current_step","value":"20"},{"name":"total_steps","value":"100"},{"name":"loss","value":"1.9"},{"name":"learning_rate","value":"9e-4"}]}}`), []byte(`{}`))
	f.Fuzz(func(t *testing.T, file, stored []byte) {
		if hf, err := progress.ReadHistoryFile(bytes.NewReader(file)); err == nil {
			h := progress.NewHistory(progress.DefaultLimits())
			for _, r := range hf.Reports {
				h.Observe(r.T, r.TrainerStatus)
			}
			obj, ok := hf.Header.ObjectiveSpec()
			if !ok {
				obj = progress.Objective{Metric: "loss", Direction: progress.Minimize}
			}
			mustEncode(t, Fit(h, obj, afterLastReport(h), DefaultSettings()))
		}
		if h, err := progress.UnmarshalHistory(stored, progress.DefaultLimits()); err == nil {
			mustEncode(t, Fit(h, progress.Objective{Metric: "loss", Direction: progress.Minimize}, afterLastReport(h), DefaultSettings()))
		}
	})
}

// afterLastReport is a minute after the history's last report: a caller's
// clock is finite even when the history is empty (LastReport is NaN).
func afterLastReport(h *progress.History) float64 {
	if t := h.LastReport(); !math.IsNaN(t) {
		return t + 60
	}
	return 60
}

func mustEncode(t *testing.T, f Forecast) {
	t.Helper()
	if _, err := json.Marshal(f); err != nil {
		t.Fatalf("forecast does not encode: %v", err)
	}
}
