package backtest

import (
	"math"
	"sort"

	"github.com/progress-planner/planner/internal/stats"
)

// allGroup names the group of every dataset.
const allGroup = "ALL"

func statOf(v []float64) Stat {
	s := Stat{N: len(v)}
	if len(v) > 0 {
		s.Mean, s.Median = fptr(meanOf(v)), fptr(stats.Median(v))
	}
	return s
}

func quantilesOf(v []float64) Quantiles {
	q := Quantiles{N: len(v)}
	if len(v) > 0 {
		q.Mean = fptr(meanOf(v))
		q.P10, q.P25, q.Median = fptr(stats.Quantile(v, 0.10)), fptr(stats.Quantile(v, 0.25)), fptr(stats.Quantile(v, 0.50))
		q.P75, q.P90 = fptr(stats.Quantile(v, 0.75)), fptr(stats.Quantile(v, 0.90))
	}
	return q
}

// groups returns the sorted distinct keys followed by "ALL" (the
// baseline's _groups), or nothing when there are no keys.
func groups(keys []string) []string {
	set := map[string]bool{}
	for _, k := range keys {
		set[k] = true
	}
	if len(set) == 0 {
		return nil
	}
	out := make([]string, 0, len(set)+1)
	for k := range set {
		out = append(out, k)
	}
	sort.Strings(out)
	return append(out, allGroup)
}

func in(group, key string) bool { return group == allGroup || group == key }

func (j Job) bench() string {
	if j.Benchmark != "" {
		return j.Benchmark
	}
	return j.Dataset
}

// cutRow is one cutoff of one original run.
type cutRow struct {
	job Job
	cut CutResult
}

// aggregate fills the summary sections of r from r's jobs: the files
// scored, then the per-cutoff sections over the original runs' cuts, the
// per-run plateau section, and the incident files' summary.
func aggregate(r *Report, jobs []Job) {
	var originals []Job
	r.FilesScored, originals = filesScored(jobs)
	rows := cutRows(originals)

	r.ETA = byCell(r.Cutoffs, rows, Job.dataset, hasETA, etaGroup)
	r.FinalMetric = byCell(r.Cutoffs, rows, Job.dataset, hasFinal, finalGroup)
	r.CoverageByEvaluations = byColumn(evaluationBins, inBin, rows, Job.dataset, hasInterval, coverageGroup)
	r.TimeToTarget = byCell(r.Cutoffs, rows, Job.bench, hasTimeToTarget, tttGroup)
	r.tttByDataset = byCell(r.Cutoffs, rows, Job.dataset, hasTimeToTarget, tttGroup)
	r.Plateau = plateauGroups(originals)
	r.CleanAlarms = cleanAlarms(rows)
	r.PrematurePlateau = byCell(r.Cutoffs, rows, Job.dataset, hasGainAhead, prematureGroup)
	r.Incidents = summariseIncidents(jobs)
}

// filesScored counts the files per dataset (incident files per
// "incidents/TYPE") and returns them in name order, with the original
// runs: only those are scored per cutoff.
func filesScored(jobs []Job) ([]SetCount, []Job) {
	counts := map[string]int{}
	var originals []Job
	for _, j := range jobs {
		if j.IncidentResult != nil || j.Incident != "" {
			t := j.Incident
			if t == "" {
				t = "?"
			}
			counts["incidents/"+t]++
			continue
		}
		counts[j.Dataset]++
		originals = append(originals, j)
	}
	sets := make([]string, 0, len(counts))
	for k := range counts {
		sets = append(sets, k)
	}
	sort.Strings(sets)
	out := []SetCount{}
	for _, k := range sets {
		out = append(out, SetCount{Set: k, Files: counts[k]})
	}
	return out, originals
}

// cutRows flattens the original runs into one row per cutoff, in run
// order: the unit of every per-cutoff section.
func cutRows(originals []Job) []cutRow {
	var rows []cutRow
	for _, j := range originals {
		for _, c := range j.Cuts {
			rows = append(rows, cutRow{j, c})
		}
	}
	return rows
}

func (j Job) dataset() string { return j.Dataset }

func hasETA(c CutResult) bool          { return c.ETA != nil }
func hasFinal(c CutResult) bool        { return c.Final != nil }
func hasTimeToTarget(c CutResult) bool { return c.TimeToTarget != nil }
func hasGainAhead(c CutResult) bool    { return c.GainAhead != nil }

// byCell summarises the rows that have a result (has) per cell of group
// (the distinct keys, then ALL; see groups) and cutoff, in that order: the
// one grouping every per-cutoff section uses (byColumn).
func byCell[G any](cutoffs []float64, rows []cutRow, key func(Job) string,
	has func(CutResult) bool, summarise func(group string, cut float64, cell []cutRow) G) []G {
	return byColumn(cutoffs, func(c CutResult, cut float64) bool { return c.Cutoff == cut }, rows, key, has, summarise)
}

// byColumn summarises the rows that have a result (has) per cell of group
// (the distinct keys, then ALL) and column (those in holds), in that
// order. A cell without rows is left out; with no rows at all the result
// is empty, not nil (a JSON []).
func byColumn[C, G any](cols []C, holds func(CutResult, C) bool, rows []cutRow, key func(Job) string,
	has func(CutResult) bool, summarise func(group string, col C, cell []cutRow) G) []G {
	var keys []string
	for _, x := range rows {
		if has(x.cut) {
			keys = append(keys, key(x.job))
		}
	}
	out := []G{}
	for _, g := range groups(keys) {
		for _, col := range cols {
			var cell []cutRow
			for _, x := range rows {
				if has(x.cut) && holds(x.cut, col) && in(g, key(x.job)) {
					cell = append(cell, x)
				}
			}
			if len(cell) > 0 {
				out = append(out, summarise(g, col, cell))
			}
		}
	}
	return out
}

// etaGroup scores the ETAs of one cell: the planner's error (and how often
// it had no ETA) against the reported and linear baselines.
func etaGroup(g string, cut float64, cell []cutRow) ETAGroup {
	grp := ETAGroup{Dataset: g, Cutoff: cut, N: len(cell)}
	var errs etaErrors
	for _, x := range cell {
		errs.add(x.cut.ETA)
	}
	grp.Planner, grp.PlannerUnknown, grp.Reported, grp.Linear = errs.stats()
	return grp
}

// etaErrors collects ETA errors: the planner's (and how often it had no
// ETA), the reported ETA's and the linear baseline's.
type etaErrors struct {
	planner, reported, linear []float64
	plannerUnknown            int
}

func (a *etaErrors) add(e *ETAResult) {
	if e.PlannerAPE != nil {
		a.planner = append(a.planner, *e.PlannerAPE)
	} else {
		a.plannerUnknown++
	}
	if e.ReportedAPE != nil {
		a.reported = append(a.reported, *e.ReportedAPE)
	}
	if e.LinearAPE != nil {
		a.linear = append(a.linear, *e.LinearAPE)
	}
}

func (a *etaErrors) stats() (planner Stat, plannerUnknown int, reported, linear Stat) {
	return statOf(a.planner), a.plannerUnknown, statOf(a.reported), statOf(a.linear)
}

// finalGroup scores the final-value forecasts of one cell against the
// last-value and Optimus baselines, with the planner's interval coverage.
func finalGroup(g string, cut float64, cell []cutRow) FinalGroup {
	grp := FinalGroup{Dataset: g, Cutoff: cut}
	var pl, last, opt []float64
	for _, x := range cell {
		f := x.cut.Final
		grp.N++
		pl = append(pl, f.PlannerError)
		last = append(last, f.LastError)
		opt = append(opt, f.OptimusError)
		if f.PlannerFallback {
			grp.PlannerFallback++
		}
		if f.OptimusFallback {
			grp.OptimusFallback++
		}
		grp.Coverage.add(f)
	}
	grp.Planner, grp.Last, grp.Optimus = statOf(pl), statOf(last), statOf(opt)
	grp.Coverage.finish()
	return grp
}

// add counts one final-metric result with an interval (others are
// skipped).
func (c *Coverage) add(f *FinalResult) {
	if f.Covered == nil {
		return
	}
	c.N++
	switch {
	case *f.Covered:
		c.Covered++
	case f.Miss == "better":
		c.Better++
	default:
		c.Worse++
	}
}

// finish sets the share once every result is added.
func (c *Coverage) finish() {
	if c.N > 0 {
		c.Share = fptr(float64(c.Covered) / float64(c.N))
	}
}

// evaluationBin is one of CoverageGroup's bins of evaluations seen.
type evaluationBin struct {
	label  string
	lo, hi int
}

// evaluationBins: powers of two, so that no bin boundary is tuned to a
// dataset.
var evaluationBins = []evaluationBin{{"1-4", 1, 4}, {"5-8", 5, 8}, {"9-16", 9, 16}, {"17-32", 17, 32}, {"33+", 33, math.MaxInt}}

func hasInterval(c CutResult) bool { return c.Final != nil && c.Final.Covered != nil }

func inBin(c CutResult, b evaluationBin) bool {
	return c.Final.Observations >= b.lo && c.Final.Observations <= b.hi
}

// coverageGroup is the interval coverage of one cell of dataset (then
// ALL) and bin of evaluations seen, every cutoff together.
func coverageGroup(g string, b evaluationBin, cell []cutRow) CoverageGroup {
	grp := CoverageGroup{Dataset: g, Evaluations: b.label}
	for _, x := range cell {
		grp.Coverage.add(x.cut.Final)
	}
	grp.Coverage.finish()
	return grp
}

// tttGroup scores the time-to-target forecasts of one benchmark's cell
// against the linear baseline, also on the rows where both gave a value
// (the paired comparison).
func tttGroup(g string, cut float64, cell []cutRow) TTTGroup {
	grp := TTTGroup{Benchmark: g, Cutoff: cut}
	var pl, ln, ppl, pln []float64
	for _, x := range cell {
		t := x.cut.TimeToTarget
		grp.N++
		if t.PlannerAPE != nil {
			pl = append(pl, *t.PlannerAPE)
		} else {
			grp.PlannerNever++
		}
		if t.LinearRun {
			grp.LinearRuns++
			if t.LinearAPE != nil {
				ln = append(ln, *t.LinearAPE)
			} else {
				grp.LinearNever++
			}
		}
		if t.PlannerAPE != nil && t.LinearAPE != nil {
			ppl, pln = append(ppl, *t.PlannerAPE), append(pln, *t.LinearAPE)
		}
	}
	grp.Planner, grp.Linear = statOf(pl), statOf(ln)
	grp.Paired = PairedStat{Planner: statOf(ppl), Linear: statOf(pln)}
	return grp
}

// plateauGroups scores plateau detection per dataset over the whole runs
// (not per cutoff): misses, detection delay, early and false calls.
func plateauGroups(originals []Job) []PlateauGroup {
	out := []PlateauGroup{}
	var keys []string
	for _, j := range originals {
		if j.Plateau != nil {
			keys = append(keys, j.Dataset)
		}
	}
	for _, g := range groups(keys) {
		grp := PlateauGroup{Dataset: g}
		var truth, delay []float64
		for _, j := range originals {
			p := j.Plateau
			if p == nil || !in(g, j.Dataset) {
				continue
			}
			grp.N++
			truth = append(truth, p.TruthFraction)
			if p.DetectedSeconds == nil {
				grp.Missed++
				continue
			}
			grp.Detected++
			if p.DelayFraction != nil {
				delay = append(delay, *p.DelayFraction)
				if *p.DelayFraction < 0 {
					grp.Early++
				}
			}
			if p.FalsePositive {
				grp.FalsePositives++
			}
		}
		grp.Truth, grp.Delay = quantilesOf(truth), quantilesOf(delay)
		grp.FalsePositiveRate = fptr(float64(grp.FalsePositives) / float64(grp.N))
		out = append(out, grp)
	}
	return out
}

// cleanAlarms counts, per dataset over all cutoffs, the hang and
// divergence flags raised on original runs, none of which hung or
// diverged: every flag is a false alarm.
func cleanAlarms(rows []cutRow) []AlarmGroup {
	out := []AlarmGroup{}
	var keys []string
	for _, x := range rows {
		keys = append(keys, x.job.Dataset)
	}
	for _, g := range groups(keys) {
		grp := AlarmGroup{Dataset: g}
		for _, x := range rows {
			if !in(g, x.job.Dataset) {
				continue
			}
			grp.Forecasts++
			if x.cut.Hung {
				grp.Hung++
			}
			if x.cut.Diverging {
				grp.Diverging++
			}
		}
		out = append(out, grp)
	}
	return out
}

// prematureGain is the improvement, as a share of the objective's own
// value, still to come after a cut: a Plateaued call with at least this
// much ahead is premature (docs/backtest.md 3.7).
const prematureGain = 0.02

// prematureGroup counts, in one dataset-and-cutoff cell, the forecasts
// flagged Plateaued while the objective still improved by prematureGain of
// its own value by the end of the run (the best at the cut against the
// true final value, as shared/eval/check_backtest.py does).
func prematureGroup(g string, cut float64, cell []cutRow) PrematureGroup {
	grp := PrematureGroup{Dataset: g, Cutoff: cut}
	for _, x := range cell {
		c := x.cut
		grp.Forecasts++
		if !c.Plateaued {
			continue
		}
		grp.Plateaued++
		if *c.GainAhead >= prematureGain {
			grp.Premature++
		}
	}
	grp.Share = fptr(float64(grp.Premature) / float64(grp.Forecasts))
	return grp
}

// summariseIncidents summarises the incident files by type, each with
// its rows (without their forecasts) in file order.
func summariseIncidents(jobs []Job) Incidents {
	byType := map[string][]IncidentResult{}
	for _, j := range jobs {
		if ir := j.IncidentResult; ir != nil {
			row := *ir
			row.Forecast = nil
			byType[ir.Type] = append(byType[ir.Type], row)
		}
	}
	return Incidents{
		Hang:             hangSummary(byType["hang"]),
		Divergence:       divergenceSummary(byType["divergence"]),
		PlateauExtension: plateauExtSummary(byType["plateau_extension"]),
		PreemptResume:    preemptSummary(byType["preempt_resume"]),
	}
}

// hangSummary: how many hangs were flagged, how soon, how many in time,
// and how many flags came before the hang began.
func hangSummary(rows []IncidentResult) HangSummary {
	s := HangSummary{N: len(rows), Rows: append([]IncidentResult{}, rows...)}
	s.EarlyAlarms, s.Detected, s.OnTime, s.Delay = detections(rows,
		func(ir IncidentResult) bool { return ir.OnTime != nil && *ir.OnTime })
	return s
}

// divergenceSummary: how many divergences were flagged, how soon, how many
// before the first NaN, and how many flags came before the divergence.
func divergenceSummary(rows []IncidentResult) DivergenceSummary {
	s := DivergenceSummary{N: len(rows), Rows: append([]IncidentResult{}, rows...)}
	s.EarlyAlarms, s.Detected, s.BeforeNaN, s.Delay = detections(rows,
		func(ir IncidentResult) bool { return ir.BeforeNaN != nil && *ir.BeforeNaN })
	return s
}

// detections counts the hang or divergence incidents flagged before they
// began (early) and after (detected, with the delays' quantiles), and of
// the detected ones those that also pass good (in time, before the NaN).
func detections(rows []IncidentResult, good func(IncidentResult) bool) (early, detected, goodN int, delay Quantiles) {
	var delays []float64
	for _, ir := range rows {
		if ir.EarlyAlarmSeconds != nil {
			early++
		}
		if ir.Detected {
			detected++
			delays = append(delays, *ir.DelaySeconds)
			if good(ir) {
				goodN++
			}
		}
	}
	return early, detected, goodN, quantilesOf(delays)
}

// plateauExtSummary: how many extended plateaus were flagged, how many
// before the true plateau, and the delay as a fraction of the run.
func plateauExtSummary(rows []IncidentResult) PlateauExtSummary {
	s := PlateauExtSummary{N: len(rows), Rows: append([]IncidentResult{}, rows...)}
	var delay []float64
	for _, ir := range rows {
		if ir.Detected {
			s.Detected++
			if ir.DetectedBeforeTruth != nil && *ir.DetectedBeforeTruth {
				s.DetectedBeforeTruth++
			}
		}
		if ir.DelayFraction != nil {
			delay = append(delay, *ir.DelayFraction)
		}
	}
	s.Delay = quantilesOf(delay)
	return s
}

// preemptSummary: the ETA errors after the resume, the planner's against
// the reported and linear baselines.
func preemptSummary(rows []IncidentResult) PreemptSummary {
	s := PreemptSummary{N: len(rows), Rows: append([]IncidentResult{}, rows...)}
	var errs etaErrors
	for _, ir := range rows {
		if ir.ETA != nil {
			errs.add(ir.ETA)
		}
	}
	s.Planner, s.PlannerUnknown, s.Reported, s.Linear = errs.stats()
	return s
}
