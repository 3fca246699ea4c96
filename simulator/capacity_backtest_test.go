package simulator

import (
	"bytes"
	"testing"
)

// TestCapacityBacktestBuiltin runs the capacity backtest on the built-in
// scenario (what `planner simulate --capacity-backtest` prints) and checks
// its bookkeeping; docs/report.md quotes the coverage it measures.
func TestCapacityBacktestBuiltin(t *testing.T) {
	sc := DefaultScenario()
	opt, err := sc.Options(DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	in, err := sc.Resolve()
	if err != nil {
		t.Fatal(err)
	}
	r, err := CapacityBacktest(in, opt, CapacityBacktestOptions{Horizon: 3600, Every: 3600})
	if err != nil {
		t.Fatal(err)
	}
	if r.N == 0 || r.Inside+r.Below+r.Above != r.N || len(r.Samples) != r.N {
		t.Fatalf("bookkeeping: %+v", r)
	}
	for _, s := range r.Samples {
		if s.Predicted.Lo > s.Predicted.Median || s.Predicted.Median > s.Predicted.Hi || s.Actual < 0 {
			t.Errorf("sample %+v", s)
		}
	}
	// The probe only reads: the planner run is the one planner simulate
	// makes (feeding reports early changes nothing, as they are the same
	// reports in the same order).
	plain, err := Run(in, PolicyPlanner, opt)
	if err != nil {
		t.Fatal(err)
	}
	a, b0 := plain.Summary, r.Run
	if a.Completed != b0.Completed || a.Preemptions != b0.Preemptions || a.PlateauGPUHours != b0.PlateauGPUHours ||
		a.UsedGPUHours != b0.UsedGPUHours || a.LostGPUHours != b0.LostGPUHours {
		t.Errorf("the probe changed the run: plain %+v\nprobed %+v", a, b0)
	}
	var b bytes.Buffer
	if err := r.WriteTable(&b); err != nil {
		t.Fatal(err)
	}
	t.Logf("\n%s", b.String())
}
