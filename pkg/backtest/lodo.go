package backtest

import (
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"sort"

	"github.com/progress-planner/planner/pkg/forecast"
)

// Leave-one-dataset-out.
//
// The forecaster's tuned constants were chosen on the development corpus,
// so its in-sample figures flatter it. LeaveOneDatasetOut re-chooses them
// for each dataset D from a documented grid, using every dataset except D
// (and the incidents derived from them), and reports D's figures under
// that choice next to its figures under the shipped defaults. A dataset
// whose figures hold up only in-sample is one the constants were fitted to.

// Knob is one tuned constant and the values the selection may give it.
type Knob struct {
	Name   string
	Values []float64
	set    func(*forecast.Settings, float64)
}

// Knob groups: each is chosen by the measures it moves. The plateau knobs
// move plateau calls and nothing else, the interval knobs interval
// coverage, the hang knobs Hung calls, the divergence knobs Diverging
// calls, the time-to-target knobs the time to target and the pace knob the
// ETA, so each group is chosen separately. (The time to target also feeds
// plateau rule 4's hold and a target-stopped run's final, and the pace
// the time to target; the figures of those come from their own groups'
// runs, under the shipped values of the others.)
//
// Each knob lists its values from the most cautious to the least (a
// smaller meaningful gain holds every job a larger one holds, a longer
// anneal hold holds it longer, a smaller step share finds every jump a
// larger one finds, and a higher threshold needs a surer curve: each calls
// fewer plateaus; a larger inflation and anneal allowance widen the
// intervals, and so does a larger horizon power wherever the forecast
// reaches past the hindcast's span), and a tie keeps the first in grid
// order: where the other datasets cannot tell two settings apart, nothing
// they show earns the riskier one, and a wrong verdict costs a healthy job
// its GPUs.
var (
	PlateauKnobs = []Knob{
		{"MinImprovement", []float64{0.005, 0.01, 0.02}, func(s *forecast.Settings, v float64) { s.MinImprovement = v }},
		{"PlateauAnnealShare", []float64{0.25, 0.2, 0.15, 0.1}, func(s *forecast.Settings, v float64) { s.PlateauAnnealShare = v }},
		{"StepJumpShare", []float64{0.1, 0.2, 0.3}, func(s *forecast.Settings, v float64) { s.StepJumpShare = v }},
		{"PlateauThreshold", []float64{0.9, 0.8, 0.7}, func(s *forecast.Settings, v float64) { s.PlateauThreshold = v }},
	}
	IntervalKnobs = []Knob{
		{"IntervalInflation", []float64{3, 2, 1.5}, func(s *forecast.Settings, v float64) { s.IntervalInflation = v }},
		{"IntervalAnnealShare", []float64{0.5, 0.25, 0}, func(s *forecast.Settings, v float64) { s.IntervalAnnealShare = v }},
		{"IntervalHorizonPower", []float64{2, 1.5, 1}, func(s *forecast.Settings, v float64) { s.IntervalHorizonPower = v }},
	}
	// The hang knobs move Hung calls and nothing else, the divergence
	// knobs Diverging calls; a larger multiple, slack, noise or share
	// calls fewer, so each lists its largest value first.
	HangKnobs = []Knob{
		{"HangMultiple", []float64{3, 2, 1.5}, func(s *forecast.Settings, v float64) { s.HangMultiple = v }},
		{"HangSlack", []float64{90, 45, 20}, func(s *forecast.Settings, v float64) { s.HangSlack = v }},
	}
	DivergeKnobs = []Knob{
		{"DivergeNoise", []float64{8, 6, 4}, func(s *forecast.Settings, v float64) { s.DivergeNoise = v }},
		{"DivergeShare", []float64{0.3, 0.2, 0.1}, func(s *forecast.Settings, v float64) { s.DivergeShare = v }},
	}
	// The time-to-target knobs: a smaller crossing multiple holds a curve's
	// crossing nearer, and a larger line share lets the job's own line,
	// which runs early where a curve runs late (docs/backtest.md 7.34),
	// replace the curve more often; a nearer crossing holds more jobs short
	// of their target out of Plateaued (plateau rule 4), so each lists
	// that value first.
	TTTKnobs = []Knob{
		{"CrossingMultiple", []float64{1, 1.5, 2}, func(s *forecast.Settings, v float64) { s.CrossingMultiple = v }},
		{"LineReplaceShare", []float64{1, 0.5, 0.25}, func(s *forecast.Settings, v float64) { s.LineReplaceShare = v }},
	}
	// The pace knob: a larger share of a slowing pace's trend gives the
	// longer ETA for the usual job, whose pace slows in stages, and a
	// longer ETA comes later to NearDone's protection, so the largest is
	// listed first; 0 is the recent rate alone, as a straight line.
	ETAKnobs = []Knob{
		{"DampedTrend", []float64{1, 0.5, 0}, func(s *forecast.Settings, v float64) { s.DampedTrend = v }},
	}
)

// LODOReport is the leave-one-dataset-out result (docs/backtest.md 7).
type LODOReport struct {
	SchemaVersion int `json:"schemaVersion"`
	// Knobs lists the grid: each knob's name and values.
	Knobs    []KnobGrid    `json:"knobs"`
	Datasets []LODODataset `json:"datasets"`
}

// KnobGrid is one knob's candidate values.
type KnobGrid struct {
	Name   string    `json:"name"`
	Values []float64 `json:"values"`
}

// LODODataset is one held-out dataset: the knob values chosen without it
// and its figures under those values (LeaveOut) and under the defaults
// (InSample).
type LODODataset struct {
	Dataset  string             `json:"dataset"`
	Chosen   map[string]float64 `json:"chosen"`
	InSample LODOFigures        `json:"inSample"`
	LeaveOut LODOFigures        `json:"leaveOut"`
}

// LODOFigures are one dataset's trust figures under one setting.
type LODOFigures struct {
	PlateauFalsePositiveRate *float64 `json:"plateauFalsePositiveRate,omitempty"`
	// PrematureShare and Coverage are per cutoff, in Report.Cutoffs order
	// (nil where nothing was scored).
	PrematureShare []*float64 `json:"prematureShare"`
	Coverage       []*float64 `json:"coverage"`
	// PlateauExtension counts this dataset's plateau-extension incidents
	// and how many were detected in time.
	PlateauExtension    int `json:"plateauExtension"`
	PlateauExtensionHit int `json:"plateauExtensionDetected"`
	// FalseHungRate and FalseDivergingRate are the shares of the clean
	// runs' cutoff forecasts called Hung or Diverging (nil without one).
	FalseHungRate      *float64 `json:"falseHungRate,omitempty"`
	FalseDivergingRate *float64 `json:"falseDivergingRate,omitempty"`
	// Hang counts this dataset's hang incidents, how many were flagged on
	// time and how many were flagged before the hang began.
	Hang       int `json:"hang"`
	HangOnTime int `json:"hangOnTime"`
	HangEarly  int `json:"hangEarlyAlarms"`
	// Divergence counts this dataset's divergence incidents, how many were
	// flagged and how many of those before the first NaN.
	Divergence          int `json:"divergence"`
	DivergenceDetected  int `json:"divergenceDetected"`
	DivergenceBeforeNaN int `json:"divergenceBeforeNaN"`
	// TimeToTargetPlanner and TimeToTargetLinear are the paired median
	// errors of the time to target (the runs where both predict a
	// crossing), TimeToTargetNever the share of the planner's forecasts
	// with no crossing; per cutoff (nil where nothing was scored).
	TimeToTargetPlanner []*float64 `json:"timeToTargetPlanner"`
	TimeToTargetLinear  []*float64 `json:"timeToTargetLinear"`
	TimeToTargetNever   []*float64 `json:"timeToTargetNever"`
	// ETAPlanner is the planner's median ETA error and ETABaseline the
	// better baseline's (the reported ETA or the linear step rate), per
	// cutoff (nil where nothing was scored).
	ETAPlanner  []*float64 `json:"etaPlanner"`
	ETABaseline []*float64 `json:"etaBaseline"`
}

// LeaveOneDatasetOut runs the backtest once per grid point of each knob
// group (plateau, interval, hang, divergence, time to target, pace) and
// assembles the report.
func LeaveOneDatasetOut(inputs []Input, opt Options) *LODOReport {
	opt.PerJob = false
	runWith := func(s forecast.Settings) *Report {
		o := opt
		o.Engine = ForecastEngine{Settings: &s}
		return Run(inputs, o)
	}
	def := runWith(forecast.DefaultSettings())
	plateauRuns := gridRuns(PlateauKnobs, runWith)
	intervalRuns := gridRuns(IntervalKnobs, runWith)
	hangRuns := gridRuns(HangKnobs, runWith)
	divergeRuns := gridRuns(DivergeKnobs, runWith)
	tttRuns := gridRuns(TTTKnobs, runWith)
	etaRuns := gridRuns(ETAKnobs, runWith)

	out := &LODOReport{SchemaVersion: SchemaVersion}
	for _, k := range slices.Concat(PlateauKnobs, IntervalKnobs, HangKnobs, DivergeKnobs, TTTKnobs, ETAKnobs) {
		out.Knobs = append(out.Knobs, KnobGrid{Name: k.Name, Values: k.Values})
	}
	for _, ds := range datasetsOf(def) {
		d := LODODataset{Dataset: ds, Chosen: map[string]float64{}, InSample: figuresOf(def, ds)}
		pl := choose(plateauRuns, ds, plateauLoss)
		iv := choose(intervalRuns, ds, coverageLoss)
		hg := choose(hangRuns, ds, hangLoss)
		dv := choose(divergeRuns, ds, divergeLoss)
		tt := choose(tttRuns, ds, tttLoss)
		et := choose(etaRuns, ds, etaLoss)
		for _, g := range []gridRun{pl, iv, hg, dv, tt, et} {
			maps.Copy(d.Chosen, g.values)
		}
		// Each knob group moves only its own measures, so each figure comes
		// from the run of the group that moves it.
		pf, cf, hf, df := figuresOf(pl.r, ds), figuresOf(iv.r, ds), figuresOf(hg.r, ds), figuresOf(dv.r, ds)
		tf, ef := figuresOf(tt.r, ds), figuresOf(et.r, ds)
		d.LeaveOut = LODOFigures{PlateauFalsePositiveRate: pf.PlateauFalsePositiveRate, PrematureShare: pf.PrematureShare,
			PlateauExtension: pf.PlateauExtension, PlateauExtensionHit: pf.PlateauExtensionHit, Coverage: cf.Coverage,
			FalseHungRate: hf.FalseHungRate, Hang: hf.Hang, HangOnTime: hf.HangOnTime, HangEarly: hf.HangEarly,
			FalseDivergingRate: df.FalseDivergingRate, Divergence: df.Divergence, DivergenceDetected: df.DivergenceDetected,
			DivergenceBeforeNaN: df.DivergenceBeforeNaN, TimeToTargetPlanner: tf.TimeToTargetPlanner,
			TimeToTargetLinear: tf.TimeToTargetLinear, TimeToTargetNever: tf.TimeToTargetNever,
			ETAPlanner: ef.ETAPlanner, ETABaseline: ef.ETABaseline}
		out.Datasets = append(out.Datasets, d)
	}
	return out
}

type gridRun struct {
	values map[string]float64
	r      *Report
}

// gridRuns runs every combination of the knobs' values on top of the
// defaults.
func gridRuns(knobs []Knob, run func(forecast.Settings) *Report) []gridRun {
	combos := []map[string]float64{{}}
	for _, k := range knobs {
		var next []map[string]float64
		for _, c := range combos {
			for _, v := range k.Values {
				m := map[string]float64{k.Name: v}
				for n, x := range c {
					m[n] = x
				}
				next = append(next, m)
			}
		}
		combos = next
	}
	var out []gridRun
	for _, c := range combos {
		s := forecast.DefaultSettings()
		for _, k := range knobs {
			k.set(&s, c[k.Name])
		}
		out = append(out, gridRun{values: c, r: run(s)})
	}
	return out
}

// choose picks the grid run with the smallest loss over every dataset but
// heldOut (on ties the first in grid order: the most cautious, as the
// knobs list their values).
func choose(runs []gridRun, heldOut string, loss func(r *Report, ds string) float64) gridRun {
	best, bestLoss := runs[0], math.Inf(1)
	for _, g := range runs {
		var sum float64
		n := 0
		for _, ds := range datasetsOf(g.r) {
			if ds == heldOut {
				continue
			}
			sum += loss(g.r, ds)
			n++
		}
		if n > 0 && sum/float64(n) < bestLoss-1e-12 {
			best, bestLoss = g, sum/float64(n)
		}
	}
	return best
}

// plateauLoss: a wrong plateau call takes a healthy job's GPUs and a
// missed one wastes them: the false-positive rate plus the mean premature
// share plus the share of this dataset's plateau-extension incidents not
// detected in time.
func plateauLoss(r *Report, ds string) float64 {
	f := figuresOf(r, ds)
	l := deref(f.PlateauFalsePositiveRate)
	l += meanOfPtrs(f.PrematureShare)
	if f.PlateauExtension > 0 {
		l += 1 - float64(f.PlateauExtensionHit)/float64(f.PlateauExtension)
	}
	return l
}

// coverageLoss: the mean distance of the 80 % intervals' coverage from
// 80 % over the cutoffs, a shortfall counting twice: an interval too
// narrow makes the planner act on a certainty it does not have (the
// plateau probability reads the same spread), one too wide only delays.
func coverageLoss(r *Report, ds string) float64 {
	var sum float64
	n := 0
	for _, c := range figuresOf(r, ds).Coverage {
		if c != nil {
			sum += 2*math.Max(0, 0.8-*c) + math.Max(0, *c-0.8)
			n++
		}
	}
	if n == 0 {
		return 0
	}
	return sum / float64(n)
}

// alarmWeight: a false alarm on 1 % of a dataset's clean forecasts (the
// issue's bound) weighs as much as every one of its incidents missed. A
// Hung or Diverging call on a healthy job costs it its GPUs at once, while
// the incidents have no allowance at all, so neither side may buy the
// other cheaply.
const alarmWeight = 100

// hangLoss: the false Hung rate (weighted) plus the shares of this
// dataset's hang incidents not flagged on time and flagged early.
func hangLoss(r *Report, ds string) float64 {
	f := figuresOf(r, ds)
	l := alarmWeight * deref(f.FalseHungRate)
	if f.Hang > 0 {
		l += float64(f.Hang-f.HangOnTime+f.HangEarly) / float64(f.Hang)
	}
	return l
}

// divergeLoss: the false Diverging rate (weighted) plus the share of this
// dataset's divergence incidents missed, plus how far the share flagged
// before the first NaN falls short of the 80 %.
func divergeLoss(r *Report, ds string) float64 {
	f := figuresOf(r, ds)
	l := alarmWeight * deref(f.FalseDivergingRate)
	if f.Divergence > 0 {
		n := float64(f.Divergence)
		l += float64(f.Divergence-f.DivergenceDetected)/n + math.Max(0, 0.8-float64(f.DivergenceBeforeNaN)/n)
	}
	return l
}

// tttLoss: how the time to target compares with the plain line on the
// same runs, the planner's paired median error over the line's, averaged
// over the cutoffs, plus the share of its forecasts with no crossing
// (a forecast that gives up on a hard run scores no error in the pair).
func tttLoss(r *Report, ds string) float64 {
	f := figuresOf(r, ds)
	var sum float64
	n := 0
	for i := range f.TimeToTargetPlanner {
		p, l := f.TimeToTargetPlanner[i], f.TimeToTargetLinear[i]
		if p == nil || l == nil || *l <= 0 {
			continue
		}
		sum += *p / *l
		n++
	}
	if n == 0 {
		return 0
	}
	return sum/float64(n) + meanOfPtrs(f.TimeToTargetNever)
}

// etaLoss: the planner's median ETA error, averaged over the cutoffs.
func etaLoss(r *Report, ds string) float64 {
	return meanOfPtrs(figuresOf(r, ds).ETAPlanner)
}

// datasetsOf lists the original runs' datasets, sorted.
func datasetsOf(r *Report) []string {
	var out []string
	for _, g := range r.Plateau {
		if g.Dataset != allGroup {
			out = append(out, g.Dataset)
		}
	}
	sort.Strings(out)
	return out
}

// figuresOf extracts one dataset's trust figures from a report.
func figuresOf(r *Report, ds string) LODOFigures {
	var f LODOFigures
	for _, g := range r.Plateau {
		if g.Dataset == ds {
			f.PlateauFalsePositiveRate = g.FalsePositiveRate
		}
	}
	for _, cut := range r.Cutoffs {
		var prem, cov *float64
		for _, g := range r.PrematurePlateau {
			if g.Dataset == ds && g.Cutoff == cut {
				prem = g.Share
			}
		}
		for _, g := range r.FinalMetric {
			if g.Dataset == ds && g.Cutoff == cut {
				cov = g.Coverage.Share
			}
		}
		f.PrematureShare, f.Coverage = append(f.PrematureShare, prem), append(f.Coverage, cov)
		var tp, tl, tn *float64
		if g := tttGroupOf(r.tttByDataset, ds, cut); g != nil && g.N > 0 {
			tp, tl, tn = g.Paired.Planner.Median, g.Paired.Linear.Median, fptr(float64(g.PlannerNever)/float64(g.N))
		}
		f.TimeToTargetPlanner = append(f.TimeToTargetPlanner, tp)
		f.TimeToTargetLinear = append(f.TimeToTargetLinear, tl)
		f.TimeToTargetNever = append(f.TimeToTargetNever, tn)
		var ep, eb *float64
		if g := etaGroupOf(r, ds, cut); g != nil {
			ep, eb = g.Planner.Median, betterOf(g.Reported.Median, g.Linear.Median)
		}
		f.ETAPlanner, f.ETABaseline = append(f.ETAPlanner, ep), append(f.ETABaseline, eb)
	}
	for _, x := range r.Incidents.PlateauExtension.Rows {
		if x.Dataset == ds {
			f.PlateauExtension++
			if x.Detected {
				f.PlateauExtensionHit++
			}
		}
	}
	for _, g := range r.CleanAlarms {
		if g.Dataset == ds && g.Forecasts > 0 {
			f.FalseHungRate = fptr(float64(g.Hung) / float64(g.Forecasts))
			f.FalseDivergingRate = fptr(float64(g.Diverging) / float64(g.Forecasts))
		}
	}
	// The incident summaries' own counting, on this dataset's rows.
	h := hangSummary(rowsOf(r.Incidents.Hang.Rows, ds))
	f.Hang, f.HangOnTime, f.HangEarly = h.N, h.OnTime, h.EarlyAlarms
	d := divergenceSummary(rowsOf(r.Incidents.Divergence.Rows, ds))
	f.Divergence, f.DivergenceDetected, f.DivergenceBeforeNaN = d.N, d.Detected, d.BeforeNaN
	return f
}

// etaGroupOf is one dataset's ETA group at a cutoff (nil when none).
func etaGroupOf(r *Report, ds string, cut float64) *ETAGroup {
	for i, g := range r.ETA {
		if g.Dataset == ds && g.Cutoff == cut {
			return &r.ETA[i]
		}
	}
	return nil
}

// tttGroupOf is the time-to-target group of key (a benchmark in
// Report.TimeToTarget, a dataset in tttByDataset) at a cutoff (nil when
// none).
func tttGroupOf(groups []TTTGroup, key string, cut float64) *TTTGroup {
	for i, g := range groups {
		if g.Benchmark == key && g.Cutoff == cut {
			return &groups[i]
		}
	}
	return nil
}

// betterOf is the smaller of two errors (nil where neither was scored).
func betterOf(a, b *float64) *float64 {
	if a == nil || (b != nil && *b < *a) {
		return b
	}
	return a
}

// rowsOf keeps one dataset's incident rows.
func rowsOf(rows []IncidentResult, ds string) []IncidentResult {
	var out []IncidentResult
	for _, x := range rows {
		if x.Dataset == ds {
			out = append(out, x)
		}
	}
	return out
}

func deref(p *float64) float64 {
	if p == nil {
		return 0
	}
	return *p
}

func meanOfPtrs(v []*float64) float64 {
	var sum float64
	n := 0
	for _, p := range v {
		if p != nil {
			sum += *p
			n++
		}
	}
	if n == 0 {
		return 0
	}
	return sum / float64(n)
}

// WriteTable writes the report as Markdown.
func (l *LODOReport) WriteTable(w io.Writer, cutoffs []float64) error {
	t := &tw{w: w}
	t.f("# Leave-one-dataset-out\n\n")
	t.f("Each dataset's figures under the knob values chosen on the other datasets (leave-out) and under the shipped defaults (in-sample). Grid:")
	for _, k := range l.Knobs {
		t.f(" %s %v;", k.Name, k.Values)
	}
	t.f("\n\n")
	head := []string{"dataset", "chosen", "setting", "plateau FP"}
	for _, c := range cutoffs {
		head = append(head, "premature "+cutLabel(c))
	}
	for _, c := range cutoffs {
		head = append(head, "coverage "+cutLabel(c))
	}
	head = append(head, "plateau-extension detected", "false Hung", "hangs on time (early)", "false Diverging", "divergences flagged (before NaN)")
	for _, c := range cutoffs {
		head = append(head, "time to target "+cutLabel(c)+" planner / line (never)")
	}
	for _, c := range cutoffs {
		head = append(head, "ETA "+cutLabel(c)+" planner / better baseline")
	}
	t.header(head...)
	for _, d := range l.Datasets {
		var ks []string
		for k := range d.Chosen {
			ks = append(ks, k)
		}
		sort.Strings(ks)
		chosen := ""
		for _, k := range ks {
			chosen += fmt.Sprintf("%s=%g ", k, d.Chosen[k])
		}
		for _, row := range []struct {
			name string
			f    LODOFigures
		}{{"in-sample", d.InSample}, {"leave-out", d.LeaveOut}} {
			cells := []string{d.Dataset, chosen, row.name, pct(row.f.PlateauFalsePositiveRate)}
			for _, p := range row.f.PrematureShare {
				cells = append(cells, pct(p))
			}
			for _, c := range row.f.Coverage {
				cells = append(cells, pct(c))
			}
			cells = append(cells, fmt.Sprintf("%d/%d", row.f.PlateauExtensionHit, row.f.PlateauExtension),
				pct(row.f.FalseHungRate), fmt.Sprintf("%d/%d (%d)", row.f.HangOnTime, row.f.Hang, row.f.HangEarly),
				pct(row.f.FalseDivergingRate), fmt.Sprintf("%d/%d (%d)", row.f.DivergenceDetected, row.f.Divergence, row.f.DivergenceBeforeNaN))
			for i := range row.f.TimeToTargetPlanner {
				cells = append(cells, tttCell(row.f.TimeToTargetPlanner[i], row.f.TimeToTargetLinear[i], row.f.TimeToTargetNever[i]))
			}
			for i := range row.f.ETAPlanner {
				cells = append(cells, pct(row.f.ETAPlanner[i])+" / "+pct(row.f.ETABaseline[i]))
			}
			t.row(cells...)
		}
	}
	return t.err
}

// tttCell is one cutoff's time to target: "planner / line (never %)",
// "-" where nothing was scored.
func tttCell(planner, line, never *float64) string {
	if never == nil {
		return "-"
	}
	return fmt.Sprintf("%s / %s (%s)", pct(planner), pct(line), pct(never))
}

// WriteJSON writes the report as indented JSON.
func (l *LODOReport) WriteJSON(w io.Writer) error { return writeJSON(w, l) }
