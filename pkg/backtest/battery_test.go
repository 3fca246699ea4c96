package backtest

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/progress-planner/planner/examples"
)

// TestStressBatteryRunsWhatEachVariantNames: each run of the battery is
// the backtest under the options its flags stand for, its per-dataset
// figures are the leave-one-dataset-out figures of that backtest, and its
// misses are the bounds that backtest misses.
func TestStressBatteryRunsWhatEachVariantNames(t *testing.T) {
	inputs, err := FilesFromFS(examples.FS, examples.Dir)
	if err != nil || len(inputs) == 0 {
		t.Fatalf("embedded examples: %v (%d files)", err, len(inputs))
	}
	// The options each variant's flags stand for, written out here from
	// the flags, not from the variants.
	want := map[string]Options{
		"as recorded":                         {},
		"--eval-every 2":                      {EvalEvery: 2},
		"--eval-every 3":                      {EvalEvery: 3},
		"--eval-pause 30":                     {EvalPause: 30},
		"--loss-every 5 --eval-pause 24":      {LossEvery: 5, EvalPause: 24},
		"--eval-every 3 --eval-pause 30":      {EvalEvery: 3, EvalPause: 30},
		"--stop-at-gain 0.99":                 {StopAtGain: 0.99},
		"--stop-at-gain 0.99 --eval-every 2":  {StopAtGain: 0.99, EvalEvery: 2},
		"--stop-at-gain 0.99 --eval-pause 30": {StopAtGain: 0.99, EvalPause: 30},
		"--drop-total":                        {DropTotal: true},
		"--stop-at-gain 0.99 --drop-total":    {StopAtGain: 0.99, DropTotal: true},
		"--seen-from 0.3":                     {SeenFrom: 0.3},
		"--mirror-objective":                  {Mirror: true},
		"--time-scale 10":                     {TimeScale: 10},
		"--time-scale 0.1":                    {TimeScale: 0.1},
	}
	if len(want) != len(StressVariants) {
		t.Fatalf("%d variants, %d expected", len(StressVariants), len(want))
	}
	// One cutoff keeps the 28 backtests of this test quick.
	base := Options{Cutoffs: []float64{0.5}}
	s := StressBattery(inputs, base, StressVariants)
	if len(s.Runs) != len(StressVariants) {
		t.Fatalf("%d runs for %d variants", len(s.Runs), len(StressVariants))
	}
	for i, run := range s.Runs {
		if run.Variant != StressVariants[i].Name {
			t.Errorf("run %d is %q, want %q", i, run.Variant, StressVariants[i].Name)
		}
		o, ok := want[run.Variant]
		if !ok {
			t.Errorf("variant %q not expected", run.Variant)
			continue
		}
		o.Cutoffs = base.Cutoffs
		r := Run(inputs, o)
		if run.Files != len(inputs) || r.FilesRead != len(inputs) {
			t.Errorf("%s: %d files read, want %d", run.Variant, run.Files, len(inputs))
		}
		if !reflect.DeepEqual(run.Summary, summarize(r)) {
			t.Errorf("%s: summary %+v, the backtest's %+v", run.Variant, run.Summary, summarize(r))
		}
		var ds []StressDataset
		for _, d := range datasetsOf(r) {
			ds = append(ds, StressDataset{Dataset: d, LODOFigures: figuresOf(r, d)})
		}
		if !reflect.DeepEqual(run.Datasets, ds) {
			t.Errorf("%s: per-dataset figures differ from the backtest's", run.Variant)
		}
		var misses []string
		for _, b := range trustBounds {
			for _, m := range b.misses(r) {
				misses = append(misses, b.name+": "+m)
			}
		}
		if strings.Join(run.Misses, "\n") != strings.Join(misses, "\n") {
			t.Errorf("%s: misses\n%s\nwant\n%s", run.Variant, strings.Join(run.Misses, "\n"), strings.Join(misses, "\n"))
		}
	}
	// The stress tests change what is scored: the sparser evaluations
	// leave fewer objective observations to the time to target.
	if reflect.DeepEqual(s.Runs[0].Summary, s.Runs[2].Summary) {
		t.Error("--eval-every 3 scored exactly as recorded")
	}
	var buf bytes.Buffer
	if err := s.WriteJSON(&buf); err != nil {
		t.Fatal(err)
	}
	var back StressReport
	if err := json.Unmarshal(buf.Bytes(), &back); err != nil || len(back.Runs) != len(s.Runs) {
		t.Fatalf("JSON round trip: %v, %d runs", err, len(back.Runs))
	}
	buf.Reset()
	if err := s.WriteTable(&buf); err != nil {
		t.Fatal(err)
	}
	for _, v := range StressVariants {
		if !strings.Contains(buf.String(), "| "+v.Name+" | ") {
			t.Errorf("table has no row for %q", v.Name)
		}
	}
}

// TestTrustBoundsAtTheirLimits: each bound holds at its limit and is
// missed just past it.
func TestTrustBoundsAtTheirLimits(t *testing.T) {
	f := fptr
	r := &Report{
		Cutoffs: []float64{0.25, 0.5},
		Plateau: []PlateauGroup{
			{Dataset: "a", N: 20, FalsePositives: 1}, // 5 %: holds
			{Dataset: "b", N: 20, FalsePositives: 2}, // 10 %
			{Dataset: allGroup, N: 40, FalsePositives: 3},
		},
		PrematurePlateau: []PrematureGroup{
			{Dataset: "a", Cutoff: 0.25, Forecasts: 50, Premature: 1},
			{Dataset: "a", Cutoff: 0.5, Forecasts: 50}, // 1 of 100: holds
			{Dataset: "b", Cutoff: 0.25, Forecasts: 50, Premature: 1},
			{Dataset: "b", Cutoff: 0.5, Forecasts: 50, Premature: 1}, // 2 of 100
		},
		CleanAlarms: []AlarmGroup{
			{Dataset: "a", Forecasts: 100, Hung: 1}, // 1 %: holds
			{Dataset: "b", Forecasts: 60, Diverging: 1},
		},
		FinalMetric: []FinalGroup{
			{Dataset: "a", Cutoff: 0.25, Coverage: Coverage{N: 10, Covered: 7, Share: f(0.7)}},   // holds
			{Dataset: "a", Cutoff: 0.5, Coverage: Coverage{N: 9, Covered: 9, Share: f(1)}},       // too few runs
			{Dataset: "b", Cutoff: 0.25, Coverage: Coverage{N: 20, Covered: 19, Share: f(0.95)}}, // too wide
			{Dataset: "b", Cutoff: 0.5, Coverage: Coverage{N: 20, Covered: 13, Share: f(0.65)}},  // too narrow
			{Dataset: allGroup, Cutoff: 0.25, Coverage: Coverage{N: 30, Covered: 30, Share: f(1)}},
		},
		ETA: []ETAGroup{
			{Dataset: allGroup, Cutoff: 0.25, Planner: Stat{Median: f(0.205)}, Reported: Stat{Median: f(0.3)}, Linear: Stat{Median: f(0.2)}}, // within 1 point: holds
			{Dataset: allGroup, Cutoff: 0.5, Planner: Stat{Median: f(0.125)}, Reported: Stat{Median: f(0.3)}, Linear: Stat{Median: f(0.11)}},
		},
		TimeToTarget: []TTTGroup{
			{Benchmark: allGroup, Cutoff: 0.5, Paired: PairedStat{Planner: Stat{N: 9, Median: f(0.16)}, Linear: Stat{N: 9, Median: f(0.3)}}},
		},
		Incidents: Incidents{
			Hang:             HangSummary{N: 8, OnTime: 8, EarlyAlarms: 1},
			Divergence:       DivergenceSummary{N: 10, Detected: 10, BeforeNaN: 8}, // holds
			PlateauExtension: PlateauExtSummary{N: 10, Detected: 8},
		},
	}
	var got []string
	for _, b := range trustBounds {
		for _, m := range b.misses(r) {
			got = append(got, b.name+": "+m)
		}
	}
	want := []string{
		"plateau false positives ≤ 5 %: b 2 of 20",
		"premature plateau calls ≤ 1 %: b 2 of 100",
		"false Hung/Diverging ≤ 1 %: b 0 Hung + 1 Diverging of 60",
		"80 % interval coverage in 70–90 %: b at 25% 95.0 % of 20, too wide",
		"80 % interval coverage in 70–90 %: b at 50% 65.0 % of 20, too narrow",
		"ETA within 1 point of the better baseline: at 50% 12.5 against 11.0 %",
		"ETA at 50 % ≤ ⅓ reported and ≤ ½ linear: 12.5 against the reported ETA's 30.0 %",
		"ETA at 50 % ≤ ⅓ reported and ≤ ½ linear: 12.5 against the linear step rate's 11.0 %",
		"time to target at 50 % ≤ ½ line: 16.0 against the line's 30.0 % (9 runs)",
		"hangs all on time: 8 of 8 on time, 1 early alarms",
		"plateau-extension incidents 90 % detected: 8 of 10",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("misses:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	s := summarize(r)
	if s.CoverageInBand != 1 || s.CoverageWide != 1 || s.CoverageNarrow != 1 {
		t.Errorf("coverage cells %d / %d / %d, want 1 / 1 / 1 (the 9-run cell and ALL left out)", s.CoverageInBand, s.CoverageNarrow, s.CoverageWide)
	}
}
