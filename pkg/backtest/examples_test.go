package backtest

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/progress-planner/planner/examples"
)

// TestExamplesEndToEnd runs the real planner over the embedded synthetic
// examples: every section is filled, the JSON parses, and the output does
// not depend on the number of workers.
func TestExamplesEndToEnd(t *testing.T) {
	inputs, err := FilesFromFS(examples.FS, examples.Dir)
	if err != nil || len(inputs) == 0 {
		t.Fatalf("embedded examples: %v (%d files)", err, len(inputs))
	}
	var out [2]bytes.Buffer
	var r *Report
	for i, workers := range []int{1, 3} {
		r = Run(inputs, Options{Workers: workers, PerJob: true})
		r.Source = "synthetic examples"
		if err := r.WriteJSON(&out[i]); err != nil {
			t.Fatal(err)
		}
	}
	if !bytes.Equal(out[0].Bytes(), out[1].Bytes()) {
		t.Error("output depends on the number of workers")
	}
	if len(r.Skipped) != 0 {
		t.Fatalf("skipped: %+v", r.Skipped)
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(out[0].Bytes(), &m); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"schemaVersion", "cutoffs", "filesScored", "eta", "finalMetric", "timeToTarget", "plateau", "cleanAlarms", "incidents", "jobs"} {
		if v, ok := m[k]; !ok || string(v) == "[]" || string(v) == "null" {
			t.Errorf("section %q missing or empty", k)
		}
	}
	if len(r.ETA) == 0 || len(r.FinalMetric) == 0 || len(r.TimeToTarget) == 0 || len(r.Plateau) == 0 {
		t.Errorf("empty section: eta %d final %d ttt %d plateau %d", len(r.ETA), len(r.FinalMetric), len(r.TimeToTarget), len(r.Plateau))
	}
	inc := r.Incidents
	if inc.Hang.N != 2 || inc.Divergence.N != 2 || inc.PlateauExtension.N != 2 || inc.PreemptResume.N != 2 {
		t.Errorf("incident counts: hang %d divergence %d plateau-ext %d preempt %d",
			inc.Hang.N, inc.Divergence.N, inc.PlateauExtension.N, inc.PreemptResume.N)
	}
	if len(r.Jobs) != len(inputs) {
		t.Errorf("%d jobs for %d files", len(r.Jobs), len(inputs))
	}
	// Per-job entries carry the forecast.Forecast of every cut, encoded as
	// the forecast JSON contract.
	var parsed struct {
		Jobs []struct {
			Name string
			Cuts []struct {
				Now      float64
				Forecast map[string]json.RawMessage
			}
		}
	}
	if err := json.Unmarshal(out[0].Bytes(), &parsed); err != nil {
		t.Fatal(err)
	}
	for _, j := range parsed.Jobs {
		for _, c := range j.Cuts {
			if c.Forecast["eta"] == nil || c.Forecast["predictedFinal"] == nil || string(c.Forecast["now"]) == "" {
				t.Fatalf("%s: cut forecast is not a Forecast: %v", j.Name, c.Forecast)
			}
		}
	}
	var tb bytes.Buffer
	if err := r.WriteTable(&tb); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"synthetic examples", "## 1. ETA error", "## 2. Final-metric", "## 3. Time-to-target", "## 4. Plateau", "## 6. Incidents", "### hang", "### divergence", "### plateau_extension", "### preempt_resume"} {
		if !strings.Contains(tb.String(), s) {
			t.Errorf("table lacks %q", s)
		}
	}
}
