package admission

import (
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/progress-planner/planner/pkg/report"
)

// TestTracker: ten Workloads estimated at 0–100 s and admitted ten minutes
// later are ten known misses; a Workload whose estimate has no upper end
// is tracked from its first bounded one; one deleted and one finished
// while waiting are not outcomes; a Workload keeps its first estimate;
// past the horizon only the ten most recent admitted ones are kept, the
// calibration's fallback.
func TestTracker(t *testing.T) {
	t0 := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	f := func(x float64) *float64 { return &x }
	view := func(name string, st report.State) report.WorkloadView {
		return report.WorkloadView{Namespace: "ns", Name: name, State: st}
	}
	var views []report.WorkloadView
	est := map[string]*report.AdmissionEstimate{}
	for i := range 10 {
		v := view(fmt.Sprintf("w%d", i), report.Waiting)
		views = append(views, v)
		est[v.Key()] = &report.AdmissionEstimate{FuturesP10: f(0), FuturesP90: f(100), P10: f(0), P90: f(100)}
	}
	views = append(views, view("unbounded", report.Waiting), view("gone", report.Waiting), view("fin", report.Waiting))
	est["ns/unbounded"] = &report.AdmissionEstimate{FuturesP10: f(0), P10: f(0)}
	est["ns/gone"] = &report.AdmissionEstimate{FuturesP10: f(0), FuturesP90: f(100), P10: f(0), P90: f(100)}
	est["ns/fin"] = &report.AdmissionEstimate{FuturesP10: f(0), FuturesP90: f(100), P10: f(0), P90: f(100)}
	var tr Tracker
	tr.Observe(t0, views, est)
	if c := tr.Calibration(t0); c.Outcomes != 0 {
		t.Fatalf("calibrated on %d outcomes before any wait is known", c.Outcomes)
	}

	// A minute later the estimates differ: the first ones stay, and
	// "unbounded" gets its first bounded one (1000–2000 s).
	for k := range est {
		est[k] = &report.AdmissionEstimate{FuturesP10: f(1000), FuturesP90: f(2000), P10: f(1000), P90: f(2000)}
	}
	tr.Observe(t0.Add(time.Minute), views, est)

	// Ten minutes in: the ten are running, "gone" was deleted, "fin"
	// finished without being seen running.
	var later []report.WorkloadView
	for _, v := range views[:10] {
		later = append(later, view(v.Name, report.Running))
	}
	later = append(later, view("unbounded", report.Waiting), view("fin", report.Finished))
	t10 := t0.Add(10 * time.Minute)
	if sc := tr.Observe(t10, later, nil); sc != (Scored{Above: 10}) {
		t.Errorf("scored %+v, want the ten above the range shown (0–100 s)", sc)
	}
	// An hour after that "unbounded" still waits, past its P90 of 2000 s
	// by less than the ten: the 10th smallest of 11 scores (⌈12 · 0.8⌉)
	// is theirs.
	c := tr.Calibration(t10.Add(time.Hour))
	want := math.Log((600 + calibrationScale) / (100 + calibrationScale))
	if c.Outcomes != 11 || math.Abs(c.Shift-want) > 1e-9 {
		t.Errorf("calibration %+v, want 11 outcomes and shift %v (ten waited 600 s for a P90 of 100 s)", c, want)
	}

	tr.Observe(t0.Add(25*time.Hour), later, nil)
	if c := tr.Calibration(t0.Add(25 * time.Hour)); c.Outcomes != 10 || math.Abs(c.Shift-want) > 1e-9 || len(tr.tracked) != 10 {
		t.Errorf("past the 24 h horizon: calibration %+v from %d kept, want the ten admitted (shift %v)", c, len(tr.tracked), want)
	}
	// Five more admitted a day later: still ten kept, the newest.
	var more []report.WorkloadView
	for i := range 5 {
		v := view(fmt.Sprintf("n%d", i), report.Waiting)
		more = append(more, v)
		est[v.Key()] = &report.AdmissionEstimate{FuturesP10: f(0), FuturesP90: f(100), P10: f(0), P90: f(100)}
	}
	t26 := t0.Add(26 * time.Hour)
	tr.Observe(t26, more, est)
	for i := range more {
		more[i].State = report.Running
	}
	tr.Observe(t26.Add(time.Minute), more, nil)
	tr.Observe(t0.Add(52*time.Hour), nil, nil)
	if len(tr.tracked) != 10 {
		t.Errorf("%d estimates kept past the horizon, want 10", len(tr.tracked))
	}
	for i := range 5 {
		if tr.tracked[fmt.Sprintf("ns/n%d", i)] == nil {
			t.Errorf("the newer n%d was dropped before older ones", i)
		}
	}
}
