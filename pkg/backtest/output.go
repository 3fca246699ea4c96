package backtest

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strings"

	"github.com/progress-planner/planner/internal/textsafe"
)

// WriteJSON writes the report as indented JSON (docs/backtest.md).
func (r *Report) WriteJSON(w io.Writer) error { return writeJSON(w, r) }

// writeJSON is every report's JSON form: indented, one document.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func pct(v *float64) string {
	if v == nil {
		return "-"
	}
	return fmt.Sprintf("%.1f", 100**v)
}

func secs(v *float64) string {
	if v == nil {
		return "-"
	}
	return fmt.Sprintf("%.0f", *v)
}

func yesNo(b *bool) string {
	switch {
	case b == nil:
		return "-"
	case *b:
		return "yes"
	default:
		return "no"
	}
}

func cutLabel(c float64) string { return fmt.Sprintf("%d%%", int(math.Round(c*100))) }

func share(k, n int) string {
	if n == 0 {
		return fmt.Sprintf("%d", k)
	}
	return fmt.Sprintf("%d (%.0f%%)", k, 100*float64(k)/float64(n))
}

type tw struct {
	w   io.Writer
	err error
}

// f writes a formatted piece of the report; names, datasets and errors
// quoting file contents are tenant text, so everything is escaped
// (textsafe) on the way out.
func (t *tw) f(format string, a ...any) {
	if t.err == nil {
		_, t.err = io.WriteString(t.w, textsafe.Text(fmt.Sprintf(format, a...)))
	}
}

func (t *tw) row(cells ...string) {
	esc := make([]string, len(cells))
	for i, c := range cells {
		esc[i] = textsafe.Markdown(c)
	}
	t.f("| %s |\n", strings.Join(esc, " | "))
}

func (t *tw) header(cells ...string) {
	t.row(cells...)
	sep := make([]string, len(cells))
	for i := range sep {
		sep[i] = "---"
	}
	t.f("|%s|\n", strings.Join(sep, "|"))
}

// WriteTable writes the report as Markdown tables: the same numbers as
// the JSON, errors in percent, one section after the other.
func (r *Report) WriteTable(w io.Writer) error {
	t := &tw{w: w}
	t.intro(r)
	t.filesScored(r.FilesScored)
	t.etaSection(r.ETA)
	t.finalSection(r.FinalMetric)
	t.coverageSection(r.CoverageByEvaluations)
	t.tttSection(r.TimeToTarget)
	t.plateauSection(r.Plateau)
	t.alarmSection(r.CleanAlarms, r.PrematurePlateau)
	t.f("\n## 6. Incidents\n\n")
	t.hangSection(r.Incidents.Hang)
	t.divergenceSection(r.Incidents.Divergence)
	t.plateauExtSection(r.Incidents.PlateauExtension)
	t.preemptSection(r.Incidents.PreemptResume)
	return t.err
}

// intro: the source, the cutoffs and the files skipped.
func (t *tw) intro(r *Report) {
	cuts := make([]string, len(r.Cutoffs))
	for i, c := range r.Cutoffs {
		cuts[i] = cutLabel(c)
	}
	src := r.Source
	if len(r.Paths) > 0 {
		src += ": " + strings.Join(r.Paths, " ")
	}
	t.f("# Planner backtest (%s)\n\n", src)
	t.f("%d files read, %d skipped. Cutoffs at %s of each run's outcome.endSeconds; only reports with t <= cut are used.\n",
		r.FilesRead, len(r.Skipped), strings.Join(cuts, ", "))
	if r.EvalEvery > 1 {
		t.f("Stress test (--eval-every %d): each original run's objective kept at one of every %d evaluations and at its last report (docs/backtest.md 7.8).\n", r.EvalEvery, r.EvalEvery)
	}
	if r.EvalPause > 0 {
		t.f("Stress test (--eval-pause %g): each original run stops training at each evaluation for %g of its median report intervals, reporting as it waits (docs/backtest.md 7.10).\n", r.EvalPause, r.EvalPause)
	}
	if r.DropTotal {
		t.f("Stress test (--drop-total): each original run with a target and a fixed total stops at that target, with no fixed total (docs/backtest.md 7.34).\n")
	}
	if r.StopAtGain > 0 {
		t.f("Stress test (--stop-at-gain %g): each original run without a target stops at the level where it had made %g of its whole improvement, with no fixed total (docs/backtest.md 7.26).\n", r.StopAtGain, r.StopAtGain)
	}
	if r.SeenFrom > 0 {
		t.f("Stress test (--seen-from %g): each original run as the planner sees a job it first saw at %g of its run, every report before dropped (docs/backtest.md 7.56).\n", r.SeenFrom, r.SeenFrom)
	}
	if r.LossEvery > 0 {
		t.f("Stress test (--loss-every %g): each original run without a fixed total also logs a training loss every %g s between its recorded reports (docs/backtest.md 7.15).\n", r.LossEvery, r.LossEvery)
	}
	if r.Mirror {
		t.f("Metamorphic check (--mirror-objective): every file's objective mirrored, v -> -v with its direction flipped (docs/backtest.md 7.20).\n")
	}
	if r.TimeScale != 1 {
		t.f("Metamorphic check (--time-scale %g): every time in every file multiplied by %g (docs/backtest.md 7.20).\n", r.TimeScale, r.TimeScale)
	}
	t.f("Errors are percentages; definitions in docs/backtest.md (the same as shared/eval/baseline.py).\n\n")
	for _, s := range r.Skipped {
		t.f("- skipped %s: %s\n", s.File, s.Error)
	}
	if len(r.Skipped) > 0 {
		t.f("\n")
	}
}

// filesScored: the files per set.
func (t *tw) filesScored(sets []SetCount) {
	t.f("## Files scored\n\n")
	t.header("set", "files")
	for _, s := range sets {
		t.row(s.Set, fmt.Sprint(s.Files))
	}
}

// etaSection: section 1, the ETA errors per dataset and cutoff.
func (t *tw) etaSection(groups []ETAGroup) {
	t.f("\n## 1. ETA error (%% of true remaining time; runs with a fixed total that ended)\n\n")
	t.header("dataset", "cut", "n", "planner MAPE", "planner MdAPE", "planner unknown", "reported ETA MAPE", "reported ETA MdAPE", "linear step-rate MAPE", "linear step-rate MdAPE")
	for _, g := range groups {
		t.row(g.Dataset, cutLabel(g.Cutoff), fmt.Sprint(g.N), pct(g.Planner.Mean), pct(g.Planner.Median), fmt.Sprint(g.PlannerUnknown),
			pct(g.Reported.Mean), pct(g.Reported.Median), pct(g.Linear.Mean), pct(g.Linear.Median))
	}
}

// finalSection: section 2, the final-metric errors per dataset and cutoff.
func (t *tw) finalSection(groups []FinalGroup) {
	t.f("\n## 2. Final-metric error (%% of the run's total improvement |first - final|; mean / median)\n\n")
	t.f("Planner = Forecast.PredictedFinal (the last value when unknown: 'planner fallback'). Optimus-only = curve.Fit with the optimus family alone (< 4 observations or a failed fit: last value). Coverage = share of runs with a known PredictedFinal whose true final lies in [lo, hi].\n\n")
	t.header("dataset", "cut", "n", "planner", "planner fallback", "last value", "Optimus-only", "Optimus fallback", "interval coverage")
	for _, g := range groups {
		t.row(g.Dataset, cutLabel(g.Cutoff), fmt.Sprint(g.N), pct(g.Planner.Mean)+" / "+pct(g.Planner.Median), fmt.Sprint(g.PlannerFallback),
			pct(g.Last.Mean)+" / "+pct(g.Last.Median), pct(g.Optimus.Mean)+" / "+pct(g.Optimus.Median), fmt.Sprint(g.OptimusFallback), g.Coverage.cell())
	}
}

// coverageSection: section 2's interval coverage by evaluations seen.
func (t *tw) coverageSection(groups []CoverageGroup) {
	t.f("\nInterval coverage by the number of evaluations the forecast had seen, every cutoff together; misses by the side the run ended on (better or worse than the interval).\n\n")
	t.header("dataset", "evaluations", "interval coverage")
	for _, g := range groups {
		t.row(g.Dataset, g.Evaluations, g.Coverage.cell())
	}
}

// cell is a coverage as one table cell: the share, the counts and the
// sides of the misses.
func (c Coverage) cell() string {
	if c.N == 0 {
		return "-"
	}
	return fmt.Sprintf("%s (%d/%d; missed %d better, %d worse)", pct(c.Share), c.Covered, c.N, c.Better, c.Worse)
}

// tttSection: section 3, the time-to-target errors per benchmark and cutoff.
func (t *tw) tttSection(groups []TTTGroup) {
	t.f("\n## 3. Time-to-target error (%% of the actual stop time; runs that reached their target)\n\n")
	t.f("Planner: now + TimeToTarget when known (basis \"target\": the curve's crossing; \"target-linear\": the recent line's, stretched by the job's own hindcast; docs/backtest.md 3.3); otherwise 'never' (no crossing predicted). Linear: the baseline's line through the observations in [0.8c, c].\n\n")
	t.header("benchmark", "cut", "n", "planner MAPE", "planner MdAPE", "planner never", "n line (>=2 obs)", "linear MAPE", "linear MdAPE", "linear never", "paired n", "paired planner / linear MdAPE")
	for _, g := range groups {
		t.row(g.Benchmark, cutLabel(g.Cutoff), fmt.Sprint(g.N), pct(g.Planner.Mean), pct(g.Planner.Median), share(g.PlannerNever, g.N),
			fmt.Sprint(g.LinearRuns), pct(g.Linear.Mean), pct(g.Linear.Median), share(g.LinearNever, g.LinearRuns),
			fmt.Sprint(g.Paired.Planner.N), pct(g.Paired.Planner.Median)+" / "+pct(g.Paired.Linear.Median))
	}
}

// plateauSection: section 4, plateau detection per dataset.
func (t *tw) plateauSection(groups []PlateauGroup) {
	t.f("\n## 4. Plateau detection (original runs; Fit at report times, first Plateaued)\n\n")
	t.f("Truth = first t after which the best-so-far gains < 1 %% of the total improvement. Delay = (flag - truth) / duration, %% (negative = flagged early). False positive = the best-so-far still improved by > 5 %% of the total after the flag.\n\n")
	t.header("dataset", "n", "truth median (frac)", "detected", "missed", "delay p10", "p25", "median", "p75", "p90", "flagged before truth", "false positives")
	for _, g := range groups {
		fp := share(g.FalsePositives, g.N)
		t.row(g.Dataset, fmt.Sprint(g.N), frac(g.Truth.Median), fmt.Sprint(g.Detected), fmt.Sprint(g.Missed),
			pct(g.Delay.P10), pct(g.Delay.P25), pct(g.Delay.Median), pct(g.Delay.P75), pct(g.Delay.P90), fmt.Sprint(g.Early), fp)
	}
}

// alarmSection: section 5, the hang and divergence alarms and the
// premature plateau calls on clean runs.
func (t *tw) alarmSection(alarms []AlarmGroup, premature []PrematureGroup) {
	t.f("\n## 5. Alarms on clean runs (the cutoff forecasts of original runs)\n\n")
	t.header("dataset", "forecasts", "hung", "diverging")
	for _, g := range alarms {
		t.row(g.Dataset, fmt.Sprint(g.Forecasts), share(g.Hung, g.Forecasts), share(g.Diverging, g.Forecasts))
	}

	t.f("\n### Premature plateau calls (cutoff forecasts Plateaued while the objective still improved by >= 2 %% of its own value)\n\n")
	t.header("dataset", "cutoff", "forecasts", "plateaued", "premature")
	for _, g := range premature {
		t.row(g.Dataset, cutLabel(g.Cutoff), fmt.Sprint(g.Forecasts), fmt.Sprint(g.Plateaued), share(g.Premature, g.Forecasts))
	}
}

// hangSection: the hang incidents, summary line then one row each.
func (t *tw) hangSection(h HangSummary) {
	t.f("### hang: detected %d/%d, on time %d/%d (delay <= 3 x median report interval + 60 s), early alarms %d; delay median %s s\n\n",
		h.Detected, h.N, h.OnTime, h.N, h.EarlyAlarms, secs(h.Delay.Median))
	if h.N > 0 {
		t.header("incident", "dataset", "variant", "at (s)", "detected (s)", "delay (s)", "allowance (s)", "on time", "early alarm (s)")
		for _, x := range h.Rows {
			t.row(x.Name, x.Dataset, x.Variant, fmt.Sprintf("%.0f", x.AtSeconds), secs(x.DetectedSeconds), secs(x.DelaySeconds), secs(x.AllowanceSeconds), yesNo(x.OnTime), secs(x.EarlyAlarmSeconds))
		}
		t.f("\n")
	}
}

// divergenceSection: the divergence incidents, summary line then one row each.
func (t *tw) divergenceSection(d DivergenceSummary) {
	t.f("### divergence: detected %d/%d, before the first nan %d/%d, early alarms %d; delay median %s s\n\n",
		d.Detected, d.N, d.BeforeNaN, d.N, d.EarlyAlarms, secs(d.Delay.Median))
	if d.N > 0 {
		t.header("incident", "dataset", "at (s)", "first nan (s)", "detected (s)", "delay (s)", "before nan", "early alarm (s)")
		for _, x := range d.Rows {
			t.row(x.Name, x.Dataset, fmt.Sprintf("%.0f", x.AtSeconds), secs(x.FirstNaNSeconds), secs(x.DetectedSeconds), secs(x.DelaySeconds), yesNo(x.BeforeNaN), secs(x.EarlyAlarmSeconds))
		}
		t.f("\n")
	}
}

// plateauExtSection: the plateau_extension incidents, summary line then
// one row each.
func (t *tw) plateauExtSection(p PlateauExtSummary) {
	t.f("### plateau_extension: detected %d/%d (Plateaued no later than the true plateau + 10 %% of the run; %d of them flagged before the true plateau, which counts as detected)\n\n",
		p.Detected, p.N, p.DetectedBeforeTruth)
	if p.N > 0 {
		t.header("incident", "dataset", "true plateau (s)", "end (s)", "flagged (s)", "delay (% of run)", "detected", "before truth")
		for _, x := range p.Rows {
			t.row(x.Name, x.Dataset, secs(x.PlateauSeconds), fmt.Sprintf("%.0f", x.EndSeconds), secs(x.DetectedSeconds), pct(x.DelayFraction), yesNo(&x.Detected), yesNo(x.DetectedBeforeTruth))
		}
		t.f("\n")
	}
}

// preemptSection: the preempt_resume incidents, the ETA errors after the
// resume then one row each.
func (t *tw) preemptSection(pr PreemptSummary) {
	t.f("### preempt_resume: ETA error after the resume (cut at 50 %% of endSeconds, or the first report after the resume when that is later)\n\n")
	t.f("planner MAPE %s / MdAPE %s (n %d, unknown %d); reported ETA MAPE %s / MdAPE %s (n %d); linear step-rate MAPE %s / MdAPE %s (n %d)\n\n",
		pct(pr.Planner.Mean), pct(pr.Planner.Median), pr.Planner.N, pr.PlannerUnknown,
		pct(pr.Reported.Mean), pct(pr.Reported.Median), pr.Reported.N, pct(pr.Linear.Mean), pct(pr.Linear.Median), pr.Linear.N)
	if pr.N > 0 {
		t.header("incident", "dataset", "resume (s)", "cut (s)", "true remaining (s)", "planner (s)", "planner APE", "reported APE", "linear APE")
		for _, x := range pr.Rows {
			var truth, pl, plA, rpA, lnA *float64
			if x.ETA != nil {
				truth, pl, plA, rpA, lnA = &x.ETA.Truth, x.ETA.Planner, x.ETA.PlannerAPE, x.ETA.ReportedAPE, x.ETA.LinearAPE
			}
			t.row(x.Name, x.Dataset, secs(x.ResumeSeconds), secs(x.CutSeconds), secs(truth), secs(pl), pct(plA), pct(rpA), pct(lnA))
		}
		t.f("\n")
	}
}

func frac(v *float64) string {
	if v == nil {
		return "-"
	}
	return fmt.Sprintf("%.2f", *v)
}
