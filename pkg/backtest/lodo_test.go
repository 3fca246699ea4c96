package backtest

import (
	"math"
	"slices"
	"testing"
)

// plateauReport is a report whose only figures are plateau false-positive
// rates per dataset.
func plateauReport(fp map[string]float64) *Report {
	r := &Report{Cutoffs: []float64{0.5}}
	for ds, v := range fp {
		r.Plateau = append(r.Plateau, PlateauGroup{Dataset: ds, FalsePositiveRate: fptr(v)})
	}
	r.Plateau = append(r.Plateau, PlateauGroup{Dataset: allGroup})
	return r
}

// The choice for a held-out dataset never looks at that dataset: a grid
// point that is best only on the held-out dataset is not chosen for it.
func TestChooseLeavesTheDatasetOut(t *testing.T) {
	runs := []gridRun{
		{values: map[string]float64{"k": 1}, r: plateauReport(map[string]float64{"a": 0.10, "b": 0.10, "c": 0.00})},
		{values: map[string]float64{"k": 2}, r: plateauReport(map[string]float64{"a": 0.02, "b": 0.02, "c": 0.50})},
	}
	for _, tc := range []struct {
		heldOut string
		want    float64
	}{
		{"c", 2}, // on a and b, k=2 is better; c's own preference for k=1 must not count
		{"a", 1}, // on b and c: k=1 mean 0.05, k=2 mean 0.26
		{"b", 1},
	} {
		if got := choose(runs, tc.heldOut, plateauLoss).values["k"]; got != tc.want {
			t.Errorf("held out %s: chose k=%v, want %v", tc.heldOut, got, tc.want)
		}
	}
}

// figuresOf reads one dataset's rows only, and counts its own incidents.
func TestFiguresOfOneDataset(t *testing.T) {
	r := &Report{Cutoffs: []float64{0.25, 0.5}}
	r.Plateau = []PlateauGroup{{Dataset: "a", FalsePositiveRate: fptr(0.1)}, {Dataset: "b", FalsePositiveRate: fptr(0.3)}}
	r.PrematurePlateau = []PrematureGroup{{Dataset: "a", Cutoff: 0.5, Share: fptr(0.02)}, {Dataset: "b", Cutoff: 0.5, Share: fptr(0.9)}}
	r.FinalMetric = []FinalGroup{{Dataset: "a", Cutoff: 0.25, Coverage: Coverage{Share: fptr(0.7)}}}
	r.Incidents.PlateauExtension.Rows = []IncidentResult{{Dataset: "a", Detected: true}, {Dataset: "a"}, {Dataset: "b", Detected: true}}
	f := figuresOf(r, "a")
	if *f.PlateauFalsePositiveRate != 0.1 || f.PrematureShare[0] != nil || *f.PrematureShare[1] != 0.02 ||
		*f.Coverage[0] != 0.7 || f.Coverage[1] != nil || f.PlateauExtension != 2 || f.PlateauExtensionHit != 1 {
		t.Errorf("figures of a: %+v", f)
	}
	if l := plateauLoss(r, "a"); l < 0.1+0.02+0.5-1e-9 || l > 0.1+0.02+0.5+1e-9 {
		t.Errorf("plateau loss of a = %v, want 0.62", l)
	}
}

// Where the other datasets cannot tell two settings apart, the choice is
// the first in grid order, which the knobs make the most cautious.
func TestChooseTieKeepsTheCautiousFirst(t *testing.T) {
	same := map[string]float64{"a": 0.05, "b": 0.05, "c": 0.20}
	runs := []gridRun{
		{values: map[string]float64{"k": 1}, r: plateauReport(same)},
		{values: map[string]float64{"k": 2}, r: plateauReport(same)},
		{values: map[string]float64{"k": 3}, r: plateauReport(map[string]float64{"a": 0.05, "b": 0.05, "c": 0.00})},
	}
	// Without c the three tie; with c left in, k=3 would win.
	if got := choose(runs, "c", plateauLoss).values["k"]; got != 1 {
		t.Errorf("held out c: chose k=%v, want the first of the tie, 1", got)
	}
}

// Each knob lists its most cautious value first: the plateau knobs the one
// that holds a job longest (the smallest meaningful gain, the longest anneal
// hold), the interval knobs the one that gives the widest interval, the
// time-to-target knobs the one that puts the crossing nearest (plateau
// rule 4 holds a job whose crossing is near), the pace knob the one that
// gives a slowing job the longest ETA (NearDone protects it later).
func TestKnobsListTheCautiousValueFirst(t *testing.T) {
	descending := map[string]bool{"PlateauAnnealShare": true, "IntervalInflation": true,
		"IntervalAnnealShare": true, "IntervalHorizonPower": true, "MinImprovement": false,
		"StepJumpShare": false, "PlateauThreshold": true, "HangMultiple": true, "HangSlack": true, "DivergeNoise": true, "DivergeShare": true,
		"CrossingMultiple": false, "LineReplaceShare": true, "DampedTrend": true}
	for _, k := range slices.Concat(PlateauKnobs, IntervalKnobs, HangKnobs, DivergeKnobs, TTTKnobs, ETAKnobs) {
		desc, ok := descending[k.Name]
		if !ok {
			t.Errorf("knob %s: no caution order stated", k.Name)
			continue
		}
		for i := 1; i < len(k.Values); i++ {
			if (k.Values[i] < k.Values[i-1]) != desc {
				t.Errorf("knob %s: values %v are not listed most cautious first", k.Name, k.Values)
				break
			}
		}
	}
}

// The alarm figures read one dataset's clean forecasts and incidents, and
// a false alarm on 1 % of its clean forecasts weighs as much as missing
// every incident: a setting that buys an on-time hang with false Hung
// calls on healthy jobs is not chosen.
func TestAlarmFiguresAndLosses(t *testing.T) {
	yes, no := true, false
	r := &Report{Cutoffs: []float64{0.5}}
	r.CleanAlarms = []AlarmGroup{{Dataset: "a", Forecasts: 200, Hung: 2, Diverging: 1}, {Dataset: "b", Forecasts: 10, Hung: 5}}
	late := 500.0
	r.Incidents.Hang.Rows = []IncidentResult{
		{Dataset: "a", Detected: true, DelaySeconds: &late, OnTime: &yes},
		{Dataset: "a", Detected: true, DelaySeconds: &late, OnTime: &no, EarlyAlarmSeconds: &late},
		{Dataset: "b", Detected: true, DelaySeconds: &late, OnTime: &yes},
	}
	r.Incidents.Divergence.Rows = []IncidentResult{
		{Dataset: "a", Detected: true, DelaySeconds: &late, BeforeNaN: &no},
		{Dataset: "a"},
	}
	f := figuresOf(r, "a")
	if *f.FalseHungRate != 0.01 || *f.FalseDivergingRate != 0.005 || f.Hang != 2 || f.HangOnTime != 1 || f.HangEarly != 1 ||
		f.Divergence != 2 || f.DivergenceDetected != 1 || f.DivergenceBeforeNaN != 0 {
		t.Errorf("alarm figures of a: %+v", f)
	}
	// 100 × 1 % + (2 − 1 on time + 1 early) / 2
	if l := hangLoss(r, "a"); math.Abs(l-2) > 1e-9 {
		t.Errorf("hang loss of a = %v, want 2", l)
	}
	// 100 × 0.5 % + 1 missed of 2 + (80 % − 0 before the NaN)
	if l := divergeLoss(r, "a"); math.Abs(l-(0.5+0.5+0.8)) > 1e-9 {
		t.Errorf("divergence loss of a = %v, want 1.8", l)
	}
	// b has no divergence incident and no Diverging call.
	if l := divergeLoss(r, "b"); l != 0 {
		t.Errorf("divergence loss of b = %v, want 0", l)
	}
	// One setting flags a's late hang on time at the price of 1 % false
	// Hung calls on b; the other misses it and calls nothing on b.
	quiet := &Report{Cutoffs: []float64{0.5}, Plateau: []PlateauGroup{{Dataset: "a"}, {Dataset: "b"}, {Dataset: "c"}}}
	quiet.CleanAlarms = []AlarmGroup{{Dataset: "b", Forecasts: 100}}
	quiet.Incidents.Hang.Rows = []IncidentResult{{Dataset: "a", Detected: true, DelaySeconds: &late, OnTime: &no}}
	eager := &Report{Cutoffs: []float64{0.5}, Plateau: quiet.Plateau}
	eager.CleanAlarms = []AlarmGroup{{Dataset: "b", Forecasts: 100, Hung: 2}}
	eager.Incidents.Hang.Rows = []IncidentResult{{Dataset: "a", Detected: true, DelaySeconds: &late, OnTime: &yes}}
	runs := []gridRun{{values: map[string]float64{"k": 1}, r: quiet}, {values: map[string]float64{"k": 2}, r: eager}}
	if got := choose(runs, "c", hangLoss).values["k"]; got != 1 {
		t.Errorf("chose k=%v, want 1: 2 %% false Hung calls outweigh one hang on time", got)
	}
}

// The time-to-target figures are the dataset's own (MLPerf's benchmarks
// together, not the ALL row), and the loss is the planner's paired error
// over the line's plus its no-crossing share: a setting that gives up on
// the hard runs does not win by scoring only the easy ones.
func TestTimeToTargetFiguresAndLoss(t *testing.T) {
	r := &Report{Cutoffs: []float64{0.25, 0.5}}
	r.tttByDataset = []TTTGroup{
		{Benchmark: "a", Cutoff: 0.5, N: 10, PlannerNever: 1, Paired: PairedStat{Planner: Stat{N: 9, Median: fptr(0.1)}, Linear: Stat{N: 9, Median: fptr(0.4)}}},
		{Benchmark: "b", Cutoff: 0.5, N: 4, Paired: PairedStat{Planner: Stat{N: 4, Median: fptr(0.9)}, Linear: Stat{N: 4, Median: fptr(0.3)}}},
		{Benchmark: allGroup, Cutoff: 0.5, N: 14, Paired: PairedStat{Planner: Stat{N: 13, Median: fptr(0.2)}, Linear: Stat{N: 13, Median: fptr(0.35)}}},
	}
	f := figuresOf(r, "a")
	if f.TimeToTargetPlanner[0] != nil || *f.TimeToTargetPlanner[1] != 0.1 || *f.TimeToTargetLinear[1] != 0.4 || *f.TimeToTargetNever[1] != 0.1 {
		t.Errorf("time-to-target figures of a: %+v", f)
	}
	if l := tttLoss(r, "a"); math.Abs(l-(0.25+0.1)) > 1e-9 {
		t.Errorf("time-to-target loss of a = %v, want 0.35", l)
	}
	if l := tttLoss(r, "c"); l != 0 {
		t.Errorf("time-to-target loss of a dataset without targets = %v, want 0", l)
	}
	// Scoring the easy runs only: a paired error of 0.25 of the line's
	// rather than 0.625, but half the forecasts give up (0.75 against
	// 0.625).
	honest := &Report{Cutoffs: []float64{0.5}, Plateau: []PlateauGroup{{Dataset: "a"}, {Dataset: "b"}}}
	honest.tttByDataset = []TTTGroup{{Benchmark: "a", Cutoff: 0.5, N: 10, Paired: PairedStat{Planner: Stat{N: 10, Median: fptr(0.25)}, Linear: Stat{N: 10, Median: fptr(0.4)}}}}
	quitter := &Report{Cutoffs: []float64{0.5}, Plateau: honest.Plateau}
	quitter.tttByDataset = []TTTGroup{{Benchmark: "a", Cutoff: 0.5, N: 10, PlannerNever: 5, Paired: PairedStat{Planner: Stat{N: 5, Median: fptr(0.1)}, Linear: Stat{N: 5, Median: fptr(0.4)}}}}
	runs := []gridRun{{values: map[string]float64{"k": 1}, r: quitter}, {values: map[string]float64{"k": 2}, r: honest}}
	if got := choose(runs, "b", tttLoss).values["k"]; got != 2 {
		t.Errorf("chose k=%v, want 2: half the forecasts with no crossing outweigh a better paired error", got)
	}
}

// The ETA figures are the dataset's planner and better-baseline medians,
// and the loss is the planner's, averaged over the cutoffs it has.
func TestETAFiguresAndLoss(t *testing.T) {
	r := &Report{Cutoffs: []float64{0.25, 0.5}}
	r.ETA = []ETAGroup{
		{Dataset: "a", Cutoff: 0.25, Planner: Stat{Median: fptr(0.2)}, Reported: Stat{Median: fptr(0.5)}, Linear: Stat{Median: fptr(0.3)}},
		{Dataset: "a", Cutoff: 0.5, Planner: Stat{Median: fptr(0.1)}, Linear: Stat{Median: fptr(0.4)}},
		{Dataset: "b", Cutoff: 0.5, Planner: Stat{Median: fptr(0.9)}},
	}
	f := figuresOf(r, "a")
	if *f.ETAPlanner[0] != 0.2 || *f.ETABaseline[0] != 0.3 || *f.ETAPlanner[1] != 0.1 || *f.ETABaseline[1] != 0.4 {
		t.Errorf("ETA figures of a: planner %v, baseline %v", f.ETAPlanner, f.ETABaseline)
	}
	if l := etaLoss(r, "a"); math.Abs(l-0.15) > 1e-9 {
		t.Errorf("ETA loss of a = %v, want 0.15", l)
	}
	if f := figuresOf(r, "b"); f.ETAPlanner[0] != nil || f.ETABaseline[1] != nil {
		t.Errorf("ETA figures of b: planner %v, baseline %v", f.ETAPlanner, f.ETABaseline)
	}
}
