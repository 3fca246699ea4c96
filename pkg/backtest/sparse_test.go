package backtest

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/progress-planner/planner/pkg/progress"
)

// An original run evaluated three times less often keeps its objective at
// the 3rd and 6th of its eight evaluations and at its last report, and
// everything else it reported; an incident file is left as recorded.
func TestSparseEvaluations(t *testing.T) {
	var b strings.Builder
	b.WriteString(`{"kind":"ProgressHistory","version":1,"name":"r","objective":{"metric":"eval_loss","direction":"minimize"},"derivedFrom":null}` + "\n")
	for i := 1; i <= 8; i++ {
		fmt.Fprintf(&b, `{"t":%d,"trainerStatus":{"metrics":[{"name":"loss","value":"1"},{"name":"eval_loss","value":"%d"}]}}`+"\n", 10*i, 10-i)
	}
	f, err := progress.ReadHistoryFile(bytes.NewReader([]byte(b.String())))
	if err != nil {
		t.Fatal(err)
	}
	got := sparseEvaluations(f, 3)
	var kept []float64
	for _, r := range got.Reports {
		if len(r.TrainerStatus.Metrics) == 0 || r.TrainerStatus.Metrics[0].Name != "loss" {
			t.Fatalf("t=%v: the other metrics were not kept: %+v", r.T, r.TrainerStatus.Metrics)
		}
		if slices.ContainsFunc(r.TrainerStatus.Metrics, func(m progress.MetricValue) bool { return m.Name == "eval_loss" }) {
			kept = append(kept, r.T)
		}
	}
	if want := []float64{30, 60, 80}; !slices.Equal(kept, want) {
		t.Errorf("objective kept at %v, want %v", kept, want)
	}
	if len(f.Reports[0].TrainerStatus.Metrics) != 2 {
		t.Errorf("the input file was modified: %+v", f.Reports[0].TrainerStatus.Metrics)
	}
	derived := "r0"
	f.Header.DerivedFrom = &derived
	if sparseEvaluations(f, 3) != f {
		t.Error("an incident file was thinned")
	}
}
