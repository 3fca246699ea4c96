package backtest

import (
	"sort"
)

// allGroup names the group of every dataset.
const allGroup = "ALL"

func statOf(v []float64) Stat {
	s := Stat{N: len(v)}
	if len(v) > 0 {
		s.Mean, s.Median = fptr(meanOf(v)), fptr(medianOf(v))
	}
	return s
}

func quantilesOf(v []float64) Quantiles {
	q := Quantiles{N: len(v)}
	if len(v) > 0 {
		q.Mean = fptr(meanOf(v))
		q.P10, q.P25, q.Median = fptr(percentile(v, 10)), fptr(percentile(v, 25)), fptr(percentile(v, 50))
		q.P75, q.P90 = fptr(percentile(v, 75)), fptr(percentile(v, 90))
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

// aggregate fills the summary sections of r from r's jobs.
func aggregate(r *Report, jobs []Job) {
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
	r.FilesScored = []SetCount{}
	for _, k := range sets {
		r.FilesScored = append(r.FilesScored, SetCount{Set: k, Files: counts[k]})
	}

	var rows []cutRow
	for _, j := range originals {
		for _, c := range j.Cuts {
			rows = append(rows, cutRow{j, c})
		}
	}
	var dsKeys, etaKeys, finalKeys, tttKeys []string
	for _, x := range rows {
		dsKeys = append(dsKeys, x.job.Dataset)
		if x.cut.ETA != nil {
			etaKeys = append(etaKeys, x.job.Dataset)
		}
		if x.cut.Final != nil {
			finalKeys = append(finalKeys, x.job.Dataset)
		}
		if x.cut.TimeToTarget != nil {
			tttKeys = append(tttKeys, x.job.bench())
		}
	}

	r.ETA = []ETAGroup{}
	for _, g := range groups(etaKeys) {
		for _, cut := range r.Cutoffs {
			grp := ETAGroup{Dataset: g, Cutoff: cut}
			var pl, rp, ln []float64
			for _, x := range rows {
				e := x.cut.ETA
				if e == nil || x.cut.Cutoff != cut || !in(g, x.job.Dataset) {
					continue
				}
				grp.N++
				if e.PlannerAPE != nil {
					pl = append(pl, *e.PlannerAPE)
				} else {
					grp.PlannerUnknown++
				}
				if e.ReportedAPE != nil {
					rp = append(rp, *e.ReportedAPE)
				}
				if e.LinearAPE != nil {
					ln = append(ln, *e.LinearAPE)
				}
			}
			if grp.N == 0 {
				continue
			}
			grp.Planner, grp.Reported, grp.Linear = statOf(pl), statOf(rp), statOf(ln)
			r.ETA = append(r.ETA, grp)
		}
	}

	r.FinalMetric = []FinalGroup{}
	for _, g := range groups(finalKeys) {
		for _, cut := range r.Cutoffs {
			grp := FinalGroup{Dataset: g, Cutoff: cut}
			var pl, last, opt []float64
			for _, x := range rows {
				f := x.cut.Final
				if f == nil || x.cut.Cutoff != cut || !in(g, x.job.Dataset) {
					continue
				}
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
				if f.Covered != nil {
					grp.Coverage.N++
					if *f.Covered {
						grp.Coverage.Covered++
					}
				}
			}
			if grp.N == 0 {
				continue
			}
			grp.Planner, grp.Last, grp.Optimus = statOf(pl), statOf(last), statOf(opt)
			if grp.Coverage.N > 0 {
				grp.Coverage.Share = fptr(float64(grp.Coverage.Covered) / float64(grp.Coverage.N))
			}
			r.FinalMetric = append(r.FinalMetric, grp)
		}
	}

	r.TimeToTarget = []TTTGroup{}
	for _, g := range groups(tttKeys) {
		for _, cut := range r.Cutoffs {
			grp := TTTGroup{Benchmark: g, Cutoff: cut}
			var pl, ln, ppl, pln []float64
			for _, x := range rows {
				t := x.cut.TimeToTarget
				if t == nil || x.cut.Cutoff != cut || !in(g, x.job.bench()) {
					continue
				}
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
			if grp.N == 0 {
				continue
			}
			grp.Planner, grp.Linear = statOf(pl), statOf(ln)
			grp.Paired = PairedStat{Planner: statOf(ppl), Linear: statOf(pln)}
			r.TimeToTarget = append(r.TimeToTarget, grp)
		}
	}

	r.Plateau = []PlateauGroup{}
	var platKeys []string
	for _, j := range originals {
		if j.Plateau != nil {
			platKeys = append(platKeys, j.Dataset)
		}
	}
	for _, g := range groups(platKeys) {
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
		r.Plateau = append(r.Plateau, grp)
	}

	r.CleanAlarms = []AlarmGroup{}
	for _, g := range groups(dsKeys) {
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
		r.CleanAlarms = append(r.CleanAlarms, grp)
	}

	r.PrematurePlateau = prematurePlateau(r.Cutoffs, dsKeys, rows)

	inc := &r.Incidents
	inc.Hang.Rows, inc.Divergence.Rows = []IncidentResult{}, []IncidentResult{}
	inc.PlateauExtension.Rows, inc.PreemptResume.Rows = []IncidentResult{}, []IncidentResult{}
	var hangDelay, divDelay, pextDelay, prPl, prRep, prLin []float64
	for _, j := range jobs {
		ir := j.IncidentResult
		if ir == nil {
			continue
		}
		row := *ir
		row.Forecast = nil
		switch ir.Type {
		case "hang":
			h := &inc.Hang
			h.N++
			h.Rows = append(h.Rows, row)
			if ir.EarlyAlarmSeconds != nil {
				h.EarlyAlarms++
			}
			if ir.Detected {
				h.Detected++
				hangDelay = append(hangDelay, *ir.DelaySeconds)
				if ir.OnTime != nil && *ir.OnTime {
					h.OnTime++
				}
			}
		case "divergence":
			d := &inc.Divergence
			d.N++
			d.Rows = append(d.Rows, row)
			if ir.EarlyAlarmSeconds != nil {
				d.EarlyAlarms++
			}
			if ir.Detected {
				d.Detected++
				divDelay = append(divDelay, *ir.DelaySeconds)
				if ir.BeforeNaN != nil && *ir.BeforeNaN {
					d.BeforeNaN++
				}
			}
		case "plateau_extension":
			p := &inc.PlateauExtension
			p.N++
			p.Rows = append(p.Rows, row)
			if ir.Detected {
				p.Detected++
				if ir.DetectedBeforeTruth != nil && *ir.DetectedBeforeTruth {
					p.DetectedBeforeTruth++
				}
			}
			if ir.DelayFraction != nil {
				pextDelay = append(pextDelay, *ir.DelayFraction)
			}
		case "preempt_resume":
			p := &inc.PreemptResume
			p.N++
			p.Rows = append(p.Rows, row)
			if e := ir.ETA; e != nil {
				if e.PlannerAPE != nil {
					prPl = append(prPl, *e.PlannerAPE)
				} else {
					p.PlannerUnknown++
				}
				if e.ReportedAPE != nil {
					prRep = append(prRep, *e.ReportedAPE)
				}
				if e.LinearAPE != nil {
					prLin = append(prLin, *e.LinearAPE)
				}
			}
		}
	}
	inc.Hang.Delay = quantilesOf(hangDelay)
	inc.Divergence.Delay = quantilesOf(divDelay)
	inc.PlateauExtension.Delay = quantilesOf(pextDelay)
	inc.PreemptResume.Planner = statOf(prPl)
	inc.PreemptResume.Reported = statOf(prRep)
	inc.PreemptResume.Linear = statOf(prLin)
}

// prematureGain is the improvement, as a share of the objective's own
// value, still to come after a cut: a Plateaued call with at least this
// much ahead is premature (docs/backtest.md 3.7).
const prematureGain = 0.02

// prematurePlateau groups the cutoff forecasts by dataset and cutoff and
// counts those flagged Plateaued while the objective still improved by
// prematureGain of its own value by the end of the run (the best at the cut
// against the true final value, as shared/eval/check_backtest.py does).
func prematurePlateau(cutoffs []float64, dsKeys []string, rows []cutRow) []PrematureGroup {
	out := []PrematureGroup{}
	for _, g := range groups(dsKeys) {
		for _, cut := range cutoffs {
			grp := PrematureGroup{Dataset: g, Cutoff: cut}
			for _, x := range rows {
				c := x.cut
				if !in(g, x.job.Dataset) || c.Cutoff != cut || c.GainAhead == nil {
					continue
				}
				grp.Forecasts++
				if !c.Plateaued {
					continue
				}
				grp.Plateaued++
				if *c.GainAhead >= prematureGain {
					grp.Premature++
				}
			}
			if grp.Forecasts > 0 {
				grp.Share = fptr(float64(grp.Premature) / float64(grp.Forecasts))
				out = append(out, grp)
			}
		}
	}
	return out
}
