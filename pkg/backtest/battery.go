package backtest

import (
	"fmt"
	"io"
)

// The stress battery.
//
// The development corpus is what the constants were tuned on, and the
// held-out set is scored by others after a landing. In between, the
// stress tests recast the corpus as job kinds it lacks (fewer
// evaluations, pauses to evaluate, a target stop, a schedule the forecast
// cannot see) and the metamorphic checks change what must not matter (the
// objective's direction, the clock's scale). StressBattery runs the
// backtest once under each of StressVariants and checks every run against
// the forecast-trust bounds, in this order (trustBounds):
//
//  1. plateauFPMisses: at most 5 % of a dataset's runs.
//  2. prematureMisses: at most 1 % of a dataset's cutoff forecasts
//     Plateaued with at least 2 % of its value still to gain (3.7).
//  3. cleanAlarmMisses: at most 1 % of a dataset's clean cutoff forecasts Hung
//     or Diverging (3.5).
//  4. coverageMisses: the 80 % interval covers 70–90 % at every dataset's
//     cutoff with at least 10 runs.
//  5. etaBaselineMisses: the ETA at every cutoff no more than 1 point behind the
//     better baseline, every dataset together.
//  6. etaHalfwayMisses: the ETA at 50 % at most ⅓ of the reported ETA's error
//     and ½ of the linear step rate's.
//  7. tttMisses: the time to target at 50 % at most ½ of the line's
//     error on the runs where both predict a crossing.
//  8. hangMisses: every hang incident flagged on time, none before the hang.
//  9. divergenceMisses: every divergence incident flagged, 80 % before the
//     first NaN.
//  10. plateauExtMisses: 90 % of the plateau-extension incidents detected.
//
// A run that misses a bound names it with where and by how much; the
// figures behind it are the leave-one-dataset-out ones (LODOFigures), per
// dataset, so the two tables read alike (docs/backtest.md 7.53).

// StressVariant is one run of the battery: the backtest flags it stands
// for and the options they set.
type StressVariant struct {
	Name  string
	apply func(*Options)
}

// StressVariants: the stress tests of docs/backtest.md 7 (as recorded
// first), then the metamorphic checks of 7.20.
var StressVariants = []StressVariant{
	{"as recorded", func(*Options) {}},
	{"--eval-every 2", func(o *Options) { o.EvalEvery = 2 }},
	{"--eval-every 3", func(o *Options) { o.EvalEvery = 3 }},
	{"--eval-pause 30", func(o *Options) { o.EvalPause = 30 }},
	{"--loss-every 5 --eval-pause 24", func(o *Options) { o.LossEvery, o.EvalPause = 5, 24 }},
	{"--eval-every 3 --eval-pause 30", func(o *Options) { o.EvalEvery, o.EvalPause = 3, 30 }},
	{"--stop-at-gain 0.99", func(o *Options) { o.StopAtGain = 0.99 }},
	{"--stop-at-gain 0.99 --eval-every 2", func(o *Options) { o.StopAtGain, o.EvalEvery = 0.99, 2 }},
	{"--stop-at-gain 0.99 --eval-pause 30", func(o *Options) { o.StopAtGain, o.EvalPause = 0.99, 30 }},
	{"--drop-total", func(o *Options) { o.DropTotal = true }},
	{"--stop-at-gain 0.99 --drop-total", func(o *Options) { o.StopAtGain, o.DropTotal = 0.99, true }},
	{"--seen-from 0.3", func(o *Options) { o.SeenFrom = 0.3 }},
	{"--mirror-objective", func(o *Options) { o.Mirror = true }},
	{"--time-scale 10", func(o *Options) { o.TimeScale = 10 }},
	{"--time-scale 0.1", func(o *Options) { o.TimeScale = 0.1 }},
}

// StressReport is the battery's result (docs/backtest.md 7.53).
type StressReport struct {
	SchemaVersion int         `json:"schemaVersion"`
	Cutoffs       []float64   `json:"cutoffs"`
	Runs          []StressRun `json:"runs"`
}

// StressRun is one variant's run: every dataset's figures and the bounds
// it misses.
type StressRun struct {
	Variant  string          `json:"variant"`
	Files    int             `json:"files"`
	Datasets []StressDataset `json:"datasets"`
	Summary  StressSummary   `json:"summary"`
	// Misses lists "bound: where (figure)" for each bound missed, in
	// trustBounds order (empty when every bound holds).
	Misses []string `json:"misses"`
}

// StressDataset is one dataset's figures in one run.
type StressDataset struct {
	Dataset string `json:"dataset"`
	LODOFigures
}

// StressSummary is one run's figures over every dataset together.
type StressSummary struct {
	PlateauFalsePositives int `json:"plateauFalsePositives"`
	PlateauRuns           int `json:"plateauRuns"`
	Premature             int `json:"premature"`
	PrematureForecasts    int `json:"prematureForecasts"`
	Hung                  int `json:"hung"`
	Diverging             int `json:"diverging"`
	CleanForecasts        int `json:"cleanForecasts"`
	// Coverage cells: the dataset cutoffs with at least minCoverageRuns
	// runs, by where their coverage falls.
	CoverageInBand      int `json:"coverageInBand"`
	CoverageNarrow      int `json:"coverageNarrow"`
	CoverageWide        int `json:"coverageWide"`
	PlateauExtension    int `json:"plateauExtension"`
	PlateauExtensionHit int `json:"plateauExtensionDetected"`
	Hang                int `json:"hang"`
	HangOnTime          int `json:"hangOnTime"`
	HangEarly           int `json:"hangEarlyAlarms"`
	Divergence          int `json:"divergence"`
	DivergenceHit       int `json:"divergenceDetected"`
	DivergenceBefore    int `json:"divergenceBeforeNaN"`
	// The 50 % cutoff's ETA (planner / better baseline) and paired time to
	// target (planner / line); nil without that cutoff or without runs.
	ETA50Planner  *float64 `json:"eta50Planner,omitempty"`
	ETA50Baseline *float64 `json:"eta50Baseline,omitempty"`
	TTT50Planner  *float64 `json:"timeToTarget50Planner,omitempty"`
	TTT50Linear   *float64 `json:"timeToTarget50Linear,omitempty"`
}

// The bounds (docs/backtest.md 3, the forecast-trust issue).
const (
	maxPlateauFPRate  = 0.05
	maxPrematureShare = 0.01
	maxFalseAlarmRate = 0.01
	minCoverage       = 0.7
	maxCoverage       = 0.9
	minCoverageRuns   = 10
	etaBaselineSlack  = 0.01
	minBeforeNaN      = 0.8
	minPlateauExtHit  = 0.9
)

// StressBattery runs the backtest on inputs under each variant (on top of
// opt, whose stress options should be unset) and checks each run.
func StressBattery(inputs []Input, opt Options, variants []StressVariant) *StressReport {
	opt.PerJob = false
	out := &StressReport{SchemaVersion: SchemaVersion}
	for _, v := range variants {
		o := opt
		v.apply(&o)
		r := Run(inputs, o)
		out.Cutoffs = r.Cutoffs
		run := StressRun{Variant: v.Name, Files: r.FilesRead, Summary: summarize(r), Misses: []string{}}
		for _, ds := range datasetsOf(r) {
			run.Datasets = append(run.Datasets, StressDataset{Dataset: ds, LODOFigures: figuresOf(r, ds)})
		}
		for _, b := range trustBounds {
			for _, m := range b.misses(r) {
				run.Misses = append(run.Misses, b.name+": "+m)
			}
		}
		out.Runs = append(out.Runs, run)
	}
	return out
}

// summarize counts one run's figures over every dataset together.
func summarize(r *Report) StressSummary {
	var s StressSummary
	for _, g := range r.Plateau {
		if g.Dataset == allGroup {
			s.PlateauFalsePositives, s.PlateauRuns = g.FalsePositives, g.N
		}
	}
	s.Premature, s.PrematureForecasts = prematureOf(r, allGroup)
	for _, g := range r.CleanAlarms {
		if g.Dataset == allGroup {
			s.Hung, s.Diverging, s.CleanForecasts = g.Hung, g.Diverging, g.Forecasts
		}
	}
	for _, g := range r.FinalMetric {
		if g.Dataset == allGroup {
			continue
		}
		switch coverageBand(g.Coverage) {
		case tooNarrow:
			s.CoverageNarrow++
		case tooWide:
			s.CoverageWide++
		case inBand:
			s.CoverageInBand++
		}
	}
	inc := r.Incidents
	s.PlateauExtension, s.PlateauExtensionHit = inc.PlateauExtension.N, inc.PlateauExtension.Detected
	s.Hang, s.HangOnTime, s.HangEarly = inc.Hang.N, inc.Hang.OnTime, inc.Hang.EarlyAlarms
	s.Divergence, s.DivergenceHit, s.DivergenceBefore = inc.Divergence.N, inc.Divergence.Detected, inc.Divergence.BeforeNaN
	if g := etaAt(r, 0.5); g != nil {
		s.ETA50Planner, s.ETA50Baseline = g.Planner.Median, betterOf(g.Reported.Median, g.Linear.Median)
	}
	if g := tttAt(r, 0.5); g != nil {
		s.TTT50Planner, s.TTT50Linear = g.Paired.Planner.Median, g.Paired.Linear.Median
	}
	return s
}

// etaAt and tttAt are every dataset's ETA and time-to-target groups at a
// cutoff (nil when the planner was not scored there).
func etaAt(r *Report, cut float64) *ETAGroup {
	if g := etaGroupOf(r, allGroup, cut); g != nil && g.Planner.Median != nil {
		return g
	}
	return nil
}

func tttAt(r *Report, cut float64) *TTTGroup {
	if g := tttGroupOf(r.TimeToTarget, allGroup, cut); g != nil && g.Paired.Planner.Median != nil {
		return g
	}
	return nil
}

// prematureOf is one dataset's premature plateau calls and cutoff
// forecasts, its cutoffs together.
func prematureOf(r *Report, ds string) (premature, forecasts int) {
	for _, g := range r.PrematurePlateau {
		if g.Dataset == ds {
			premature, forecasts = premature+g.Premature, forecasts+g.Forecasts
		}
	}
	return premature, forecasts
}

// Where a dataset cutoff's interval coverage falls.
const (
	unscored  = "" // fewer than minCoverageRuns runs, or none covered or not
	inBand    = "in band"
	tooNarrow = "too narrow"
	tooWide   = "too wide"
)

// coverageBand places a coverage against the 70–90 % band.
func coverageBand(c Coverage) string {
	switch {
	case c.N < minCoverageRuns || c.Share == nil:
		return unscored
	case *c.Share < minCoverage:
		return tooNarrow
	case *c.Share > maxCoverage:
		return tooWide
	}
	return inBand
}

// trustBound is one bound of the battery: its phrase and where a run
// misses it ("where (figure)").
type trustBound struct {
	name   string
	misses func(r *Report) []string
}

var trustBounds = [...]trustBound{
	{"plateau false positives ≤ 5 %", plateauFPMisses},
	{"premature plateau calls ≤ 1 %", prematureMisses},
	{"false Hung/Diverging ≤ 1 %", cleanAlarmMisses},
	{"80 % interval coverage in 70–90 %", coverageMisses},
	{"ETA within 1 point of the better baseline", etaBaselineMisses},
	{"ETA at 50 % ≤ ⅓ reported and ≤ ½ linear", etaHalfwayMisses},
	{"time to target at 50 % ≤ ½ line", tttMisses},
	{"hangs all on time", hangMisses},
	{"divergences all flagged, 80 % before the NaN", divergenceMisses},
	{"plateau-extension incidents 90 % detected", plateauExtMisses},
}

func plateauFPMisses(r *Report) (out []string) {
	for _, g := range r.Plateau {
		if g.Dataset != allGroup && g.N > 0 && float64(g.FalsePositives) > maxPlateauFPRate*float64(g.N) {
			out = append(out, fmt.Sprintf("%s %d of %d", g.Dataset, g.FalsePositives, g.N))
		}
	}
	return out
}

// prematureMisses counts each dataset's cutoffs together, as the issue's
// bound is per dataset.
func prematureMisses(r *Report) (out []string) {
	for _, ds := range datasetsOf(r) {
		if k, n := prematureOf(r, ds); n > 0 && float64(k) > maxPrematureShare*float64(n) {
			out = append(out, fmt.Sprintf("%s %d of %d", ds, k, n))
		}
	}
	return out
}

func cleanAlarmMisses(r *Report) (out []string) {
	for _, g := range r.CleanAlarms {
		if g.Dataset != allGroup && g.Forecasts > 0 && float64(g.Hung+g.Diverging) > maxFalseAlarmRate*float64(g.Forecasts) {
			out = append(out, fmt.Sprintf("%s %d Hung + %d Diverging of %d", g.Dataset, g.Hung, g.Diverging, g.Forecasts))
		}
	}
	return out
}

func coverageMisses(r *Report) (out []string) {
	for _, g := range r.FinalMetric {
		if band := coverageBand(g.Coverage); g.Dataset != allGroup && (band == tooNarrow || band == tooWide) {
			out = append(out, fmt.Sprintf("%s at %s %s %% of %d, %s", g.Dataset, cutLabel(g.Cutoff), pct(g.Coverage.Share), g.Coverage.N, band))
		}
	}
	return out
}

func etaBaselineMisses(r *Report) (out []string) {
	for _, cut := range r.Cutoffs {
		g := etaAt(r, cut)
		if g == nil {
			continue
		}
		if b := betterOf(g.Reported.Median, g.Linear.Median); b != nil && *g.Planner.Median > *b+etaBaselineSlack {
			out = append(out, fmt.Sprintf("at %s %s against %s %%", cutLabel(cut), pct(g.Planner.Median), pct(b)))
		}
	}
	return out
}

func etaHalfwayMisses(r *Report) (out []string) {
	g := etaAt(r, 0.5)
	if g == nil {
		return nil
	}
	p := *g.Planner.Median
	if rep := g.Reported.Median; rep != nil && p > *rep/3 {
		out = append(out, fmt.Sprintf("%s against the reported ETA's %s %%", pct(g.Planner.Median), pct(rep)))
	}
	if lin := g.Linear.Median; lin != nil && p > *lin/2 {
		out = append(out, fmt.Sprintf("%s against the linear step rate's %s %%", pct(g.Planner.Median), pct(lin)))
	}
	return out
}

func tttMisses(r *Report) []string {
	g := tttAt(r, 0.5)
	if g == nil || g.Paired.Linear.Median == nil || *g.Paired.Planner.Median <= *g.Paired.Linear.Median/2 {
		return nil
	}
	return []string{fmt.Sprintf("%s against the line's %s %% (%d runs)", pct(g.Paired.Planner.Median), pct(g.Paired.Linear.Median), g.Paired.Planner.N)}
}

func hangMisses(r *Report) []string {
	h := r.Incidents.Hang
	if h.OnTime == h.N && h.EarlyAlarms == 0 {
		return nil
	}
	return []string{fmt.Sprintf("%d of %d on time, %d early alarms", h.OnTime, h.N, h.EarlyAlarms)}
}

func divergenceMisses(r *Report) []string {
	d := r.Incidents.Divergence
	if d.Detected == d.N && float64(d.BeforeNaN) >= minBeforeNaN*float64(d.N) {
		return nil
	}
	return []string{fmt.Sprintf("%d of %d flagged, %d before the NaN", d.Detected, d.N, d.BeforeNaN)}
}

func plateauExtMisses(r *Report) []string {
	p := r.Incidents.PlateauExtension
	if float64(p.Detected) >= minPlateauExtHit*float64(p.N) {
		return nil
	}
	return []string{fmt.Sprintf("%d of %d", p.Detected, p.N)}
}

// WriteJSON writes the battery as indented JSON.
func (s *StressReport) WriteJSON(w io.Writer) error { return writeJSON(w, s) }

// WriteTable writes one row per run, every dataset together, then the
// bounds each run misses.
func (s *StressReport) WriteTable(w io.Writer) error {
	t := &tw{w: w}
	t.f("# Stress battery\n\n")
	t.f("Every dataset together; coverage cells are the dataset cutoffs with at least %d runs (70–90 %% / under / over).\n\n", minCoverageRuns)
	t.header("variant", "files", "plateau FP", "premature", "false Hung / Diverging", "coverage cells in band / narrow / wide",
		"plateau-extension detected", "hangs on time (early)", "divergences flagged (before NaN)",
		"ETA 50% planner / better baseline", "time to target 50% planner / line", "bounds missed")
	for _, run := range s.Runs {
		m := run.Summary
		t.row(run.Variant, fmt.Sprint(run.Files),
			fmt.Sprintf("%d/%d", m.PlateauFalsePositives, m.PlateauRuns),
			fmt.Sprintf("%d/%d", m.Premature, m.PrematureForecasts),
			fmt.Sprintf("%d / %d of %d", m.Hung, m.Diverging, m.CleanForecasts),
			fmt.Sprintf("%d / %d / %d", m.CoverageInBand, m.CoverageNarrow, m.CoverageWide),
			fmt.Sprintf("%d/%d", m.PlateauExtensionHit, m.PlateauExtension),
			fmt.Sprintf("%d/%d (%d)", m.HangOnTime, m.Hang, m.HangEarly),
			fmt.Sprintf("%d/%d (%d)", m.DivergenceHit, m.Divergence, m.DivergenceBefore),
			pct(m.ETA50Planner)+" / "+pct(m.ETA50Baseline),
			pct(m.TTT50Planner)+" / "+pct(m.TTT50Linear),
			fmt.Sprint(len(run.Misses)))
	}
	for _, run := range s.Runs {
		if len(run.Misses) == 0 {
			continue
		}
		t.f("\n## %s: %d bound(s) missed\n\n", run.Variant, len(run.Misses))
		for _, m := range run.Misses {
			t.f("- %s\n", m)
		}
	}
	return t.err
}
