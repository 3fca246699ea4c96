package backtest

import (
	"encoding/json"
	"errors"
	"math"
	"sort"
	"strings"

	"github.com/progress-planner/planner/internal/stats"
	"github.com/progress-planner/planner/pkg/forecast"
	"github.com/progress-planner/planner/pkg/progress"
)

// Stream limits (docs/backtest.md).
const (
	// maxStreamEvals: runs with more reports are evaluated at this many
	// evenly spaced report times plus the last.
	maxStreamEvals = 400
	// maxGridPerGap bounds the hang grid inside one reporting gap; the grid
	// step widens beyond it.
	maxGridPerGap = 2000
	// plateauFPGain: a plateau flag is a false positive when the run's
	// best-so-far improves by more than this share of its total
	// improvement after the flag.
	plateauFPGain = 0.05
	// plateauExtWindow: a plateau_extension is detected when flagged no
	// later than this share of the run's duration after the true plateau.
	plateauExtWindow = 0.10
)

// evaluator scores one file at a time; it is safe for concurrent use (it
// holds no mutable state).
type evaluator struct {
	cutoffs []float64
	engine  Engine
	optimus CurveFitter
	perJob  bool
	// evalEvery, evalPause, lossEvery, stopAtGain, dropTotal, seenFrom:
	// Options.EvalEvery, EvalPause, LossEvery, StopAtGain, DropTotal and
	// SeenFrom (stressed).
	evalEvery  int
	evalPause  float64
	lossEvery  float64
	stopAtGain float64
	dropTotal  bool
	seenFrom   float64
	// mirror, timeScale: Options.Mirror and TimeScale (recast; Run sets
	// the scale's default, 1).
	mirror    bool
	timeScale float64
}

// raw keeps a forecast for the per-job entries (nil when per-job output is
// off). A forecast that cannot be encoded as JSON (a non-finite number) is
// dropped so that it cannot break the report.
func (e *evaluator) raw(f forecast.Forecast) *forecast.Forecast {
	if !e.perJob {
		return nil
	}
	if _, err := json.Marshal(f); err != nil {
		return nil
	}
	return &f
}

// stream feeds a file's reports to an engine run in time order and asks
// for forecasts at non-decreasing instants.
type stream struct {
	run   Replay
	reps  []progress.FileReport
	next  int
	evals int
	head  progress.FileHeader // for its readmission (FileHeader.ReadmittedBefore)
	// one-entry cache: repeated questions at the same instant
	haveLast bool
	lastNow  float64
	lastFc   forecast.Forecast
}

func newStream(e Engine, f *progress.HistoryFile) *stream {
	obj, ok := f.Header.ObjectiveSpec()
	return &stream{run: e.NewRun(obj, ok), reps: f.Reports, head: f.Header}
}

func (s *stream) advance(now float64) {
	for s.next < len(s.reps) && progress.AtOrBefore(s.reps[s.next].T, now) {
		r := s.reps[s.next]
		prev := math.Inf(-1)
		if s.next > 0 {
			prev = s.reps[s.next-1].T
		}
		if s.head.ReadmittedBefore(prev, r.T) {
			s.run.Readmitted()
		}
		s.run.Observe(r.T, r.TrainerStatus)
		s.next++
	}
}

// at is the default-settings forecast at now.
func (s *stream) at(now float64) forecast.Forecast {
	if s.haveLast && s.lastNow == now {
		return s.lastFc
	}
	s.advance(now)
	s.evals++
	s.lastFc, s.lastNow, s.haveLast = s.run.Forecast(now, nil), now, true
	return s.lastFc
}

// atEnd is the forecast at now with the planned end overridden.
func (s *stream) atEnd(now, endStep float64) forecast.Forecast {
	s.advance(now)
	s.evals++
	return s.run.Forecast(now, &endStep)
}

// streamIndices are the report indices a streaming evaluation visits:
// every report, or maxStreamEvals evenly spaced ones plus the last.
func streamIndices(n int) []int {
	if n <= maxStreamEvals {
		out := make([]int, n)
		for i := range out {
			out[i] = i
		}
		return out
	}
	out := make([]int, 0, maxStreamEvals+1)
	for k := 0; k < maxStreamEvals; k++ {
		out = append(out, k*n/maxStreamEvals)
	}
	return append(out, n-1)
}

func fptr(v float64) *float64 {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return nil
	}
	return &v
}

func bptr(b bool) *bool { return &b }

func ape(pred, truth float64) *float64 { return fptr(math.Abs(pred-truth) / truth) }

// objectiveInfo is the header objective as the baseline reads it: the raw
// metric name, sign = +1 only for "minimize", and the target.
func objectiveInfo(hd progress.FileHeader) (metric string, sign float64, target *float64) {
	if hd.Objective == nil {
		return "", 1, nil
	}
	sign = -1
	if hd.Objective.Direction == "minimize" {
		sign = 1
	}
	return hd.Objective.Metric, sign, hd.Objective.Target
}

// isIncident: a derived file (derivedFrom set) or one with an incident.
func isIncident(hd progress.FileHeader) bool {
	return (hd.DerivedFrom != nil && *hd.DerivedFrom != "") || hd.IncidentType() != ""
}

var errNoReports = errors.New("no reports")

// evalFile scores one history file.
func (e *evaluator) evalFile(name string, f *progress.HistoryFile) (Job, error) {
	hd := f.Header
	if len(f.Reports) == 0 {
		return Job{}, errNoReports
	}
	if hd.Outcome == nil {
		return Job{}, errors.New("header has no outcome")
	}
	job := Job{
		File: name, Name: hd.Name, Dataset: hd.Dataset(), Benchmark: hd.RunInfoString("benchmark"),
		Status: hd.Outcome.Status, EndSeconds: hd.Outcome.EndSeconds, Reports: len(f.Reports),
	}
	reps := toReps(f)
	if isIncident(hd) {
		job.Incident = hd.IncidentType()
		job.IncidentResult = e.incident(f, reps)
		return job, nil
	}
	e.original(&job, f, reps)
	return job, nil
}

// original scores an original run: the cutoff forecasts (ETA, final
// metric, time to target) and the streaming plateau detection, from one
// pass over the reports.
func (e *evaluator) original(job *Job, f *progress.HistoryFile, reps []rep) {
	run := newRunTruth(f.Header, reps)
	scan := newPlateauScan(run)
	st := newStream(e.engine, f)
	cuts := map[int]CutResult{}
	for _, rq := range e.requests(run, scan.res != nil) {
		if rq.plateau {
			e.plateauStep(&scan, run, st, rq.now)
			continue
		}
		cuts[rq.cut] = e.cutResult(run, st, rq.cut, rq.now)
	}
	for k := range e.cutoffs {
		if cr, ok := cuts[k]; ok {
			job.Cuts = append(job.Cuts, cr)
		}
	}
	job.Plateau = scan.res
}

// runTruth is what an original run's header and reports say about it: the
// truths its forecasts are scored against, read once per file.
type runTruth struct {
	hd     progress.FileHeader
	reps   []rep
	end    float64 // the run's end (Outcome.EndSeconds)
	status string
	metric string
	sign   float64 // +1 for a minimized objective, else -1
	target *float64
	obs    []obsPoint // the objective's observations on the x axis
	// hasTotal: some report gives progress, so the run had a fixed total.
	hasTotal bool
	// ended: the run finished on its own (completed, aborted, target reached).
	ended bool
	// finalY is the objective's final value (finalOK when the header has one);
	// firstY its first observation.
	finalY  float64
	finalOK bool
	firstY  float64
	// xEnd is the x axis at the end of the run (set when there are
	// observations).
	xEnd float64
	// setEndStep: the run's end is not its planned end, so the final-value
	// forecast is asked at xEnd.
	setEndStep bool
}

func newRunTruth(hd progress.FileHeader, reps []rep) *runTruth {
	run := &runTruth{hd: hd, reps: reps, end: hd.Outcome.EndSeconds, status: hd.Outcome.Status}
	run.metric, run.sign, run.target = objectiveInfo(hd)
	xk := xkey(hd, reps)
	if run.metric != "" {
		run.obs = series(reps, run.metric, xk)
	}
	for _, r := range reps {
		if r.p != nil {
			run.hasTotal = true
			break
		}
	}
	run.ended = run.status == "completed" || run.status == "aborted" || run.status == "target_reached"
	run.finalY, run.finalOK = hd.Outcome.FinalValue(run.metric)
	if len(run.obs) > 0 {
		run.firstY = run.obs[0].y
		run.xEnd = axisEnd(run, xk)
	}
	run.setEndStep = run.status == "unknown" || run.status == "aborted"
	return run
}

// axisEnd is the x axis at the run's end: the last report's value on the
// axis, else the last observation's (the end time on the time axis).
func axisEnd(run *runTruth, xk string) float64 {
	if xk == "" {
		return run.end
	}
	if x, ok := run.reps[len(run.reps)-1].num(xk); ok {
		return x
	}
	return run.obs[len(run.obs)-1].x
}

// streamRequest is one instant the stream is asked for a forecast.
type streamRequest struct {
	now     float64
	cut     int // index into e.cutoffs, or -1 for a plateau evaluation
	plateau bool
}

// requests lists, in time order, the cutoffs that saw a report and, when
// the run has a true plateau, the streaming plateau evaluations.
func (e *evaluator) requests(run *runTruth, plateau bool) []streamRequest {
	var reqs []streamRequest
	for k, fr := range e.cutoffs {
		c := fr * run.end
		if len(seen(run.reps, c)) == 0 {
			continue
		}
		reqs = append(reqs, streamRequest{now: c, cut: k})
	}
	if plateau {
		for _, i := range streamIndices(len(run.reps)) {
			reqs = append(reqs, streamRequest{now: run.reps[i].t, cut: -1, plateau: true})
		}
	}
	sort.SliceStable(reqs, func(i, j int) bool { return reqs[i].now < reqs[j].now })
	return reqs
}

// plateauScan follows the streaming plateau evaluations of a run up to the
// first Plateaued flag.
type plateauScan struct {
	res     *PlateauResult // nil when the run has no true plateau
	total   float64        // the run's total improvement
	done    bool
	lastNow float64
}

// newPlateauScan sets the ground truth: the run's plateau time, when it
// has at least three observations and one.
func newPlateauScan(run *runTruth) plateauScan {
	scan := plateauScan{lastNow: math.NaN()}
	if len(run.obs) >= 3 && run.end > 0 {
		if tp, ok := plateauTime(run.obs, run.sign); ok {
			scan.res = &PlateauResult{TruthSeconds: tp, TruthFraction: tp / run.end}
			_, scan.total = bestTotal(run.obs, run.sign, math.Inf(1))
		}
	}
	return scan
}

// plateauStep evaluates the plateau at now, once per instant until the
// first flag, which it scores: the delay, and whether the best-so-far
// still improved by more than plateauFPGain of the total after it.
func (e *evaluator) plateauStep(scan *plateauScan, run *runTruth, st *stream, now float64) {
	if scan.done || now == scan.lastNow {
		return
	}
	scan.lastNow = now
	fc := st.at(now)
	plat := scan.res
	plat.Evaluations++
	if !fc.Plateaued {
		return
	}
	scan.done = true
	plat.DetectedSeconds = fptr(now)
	plat.DelayFraction = fptr((now - plat.TruthSeconds) / run.end)
	if scan.total > 0 {
		bestAt, _ := bestTotal(run.obs, run.sign, now)
		bestEnd, _ := bestTotal(run.obs, run.sign, math.Inf(1))
		gain := (bestAt - bestEnd) / scan.total
		if math.IsInf(bestAt, 1) { // flagged before any observation
			gain = 1
		}
		plat.GainAfterFlag = fptr(gain)
		plat.FalsePositive = gain > plateauFPGain
	}
	plat.Forecast = e.raw(fc)
}

// cutResult scores the forecast at cutoff k (instant c): the flags, the
// gain still ahead, then the ETA, the final metric and the time to target
// where the run allows each.
func (e *evaluator) cutResult(run *runTruth, st *stream, k int, c float64) CutResult {
	fc := st.at(c)
	cr := CutResult{Cutoff: e.cutoffs[k], Now: c, Hung: fc.Hung, Diverging: fc.Diverging, Plateaued: fc.Plateaued, Forecast: e.raw(fc)}
	if fc.Best != nil && *fc.Best != 0 && run.finalOK && !math.IsNaN(run.finalY) {
		// The gain still to come, as a share of the objective's own value
		// (docs/backtest.md 3.7).
		cr.GainAhead = fptr(run.sign * (*fc.Best - run.finalY) / math.Abs(*fc.Best))
	}
	// 1. ETA (runs with a fixed total that ended).
	if run.hasTotal && run.ended && run.end-c > 0 {
		er := e.etaResult(run.hd, seen(run.reps, c), c, run.end-c, fc)
		if er.Reported != nil || er.Linear != nil {
			cr.ETA = er
		}
	}
	var ob []obsPoint
	for _, o := range run.obs {
		if progress.AtOrBefore(o.t, c) {
			ob = append(ob, o)
		}
	}
	// 2. Final metric.
	cr.Final, cr.FinalForecast = e.finalAt(run, st, c, ob, fc)
	// 3. Time to target (runs that reached their target), from two
	// observations on: one has no rate of improvement for any method (the
	// linear baseline needs two), so counting it as the planner's "never"
	// would compare its no-crossing share over other runs than the line's.
	if run.target != nil && run.status == "target_reached" && len(ob) >= 2 {
		cr.TimeToTarget = tttResult(run, c, ob, fc)
	}
	return cr
}

// finalAt scores the final-value forecast at c from the observations ob
// seen by then, when the run has a final value that differs from its
// first; for a run whose end is not its planned end, the forecast is asked
// again with the planned end at xEnd (and returned).
func (e *evaluator) finalAt(run *runTruth, st *stream, c float64, ob []obsPoint, fc forecast.Forecast) (*FinalResult, *forecast.Forecast) {
	scored := run.finalOK && len(run.obs) > 0 && len(ob) >= 1 && math.Abs(run.firstY-run.finalY) > 1e-12 &&
		!math.IsNaN(run.finalY)
	if !scored {
		return nil, nil
	}
	var endFc *forecast.Forecast
	fr := &FinalResult{Truth: run.finalY, First: run.firstY, XEnd: run.xEnd, Observations: len(ob)}
	if run.setEndStep {
		fc = st.atEnd(c, run.xEnd)
		fr.EndStep = fptr(run.xEnd)
		endFc = e.raw(fc)
	}
	e.finalResult(fr, ob, run.sign, fc)
	return fr, endFc
}

// tttResult scores the planner's time to target at c, and the linear
// baseline's, against the run's end.
func tttResult(run *runTruth, c float64, ob []obsPoint, fc forecast.Forecast) *TTTResult {
	tr := &TTTResult{Truth: run.end, Observations: len(ob), LinearRun: len(ob) >= 2}
	if fc.TimeToTarget != nil {
		tr.PlannerBasis = fc.TimeToTarget.Basis
	}
	if lin, ok := linearTimeToTarget(ob, run.sign, *run.target, c); ok {
		tr.LinearStop = fptr(lin)
		tr.LinearAPE = ape(lin, run.end)
	}
	if tt := fc.TimeToTarget; tt != nil && tt.Known {
		stop := c + tt.Value
		tr.PlannerStop = fptr(stop)
		tr.PlannerAPE = ape(stop, run.end)
	}
	return tr
}

// etaResult scores the planner's ETA and the two baselines at cut c.
func (e *evaluator) etaResult(hd progress.FileHeader, sn []rep, c, truth float64, fc forecast.Forecast) *ETAResult {
	er := &ETAResult{Truth: truth, PlannerBasis: fc.ETA.Basis}
	if v, ok := reportedETA(sn, c); ok {
		er.Reported, er.ReportedAPE = fptr(v), ape(v, truth)
	}
	if v, ok := linearETA(hd, sn, c); ok {
		er.Linear, er.LinearAPE = fptr(v), ape(v, truth)
	}
	if fc.ETA.Known {
		er.Planner, er.PlannerAPE = fptr(fc.ETA.Value), ape(fc.ETA.Value, truth)
	}
	return er
}

// finalResult fills the final-metric predictions: the planner's
// PredictedFinal (last value when unknown), the last value and the
// Optimus-only fit (last value when it fails).
func (e *evaluator) finalResult(fr *FinalResult, ob []obsPoint, sign float64, fc forecast.Forecast) {
	denom := math.Abs(fr.First - fr.Truth)
	last := ob[len(ob)-1].y
	errOf := func(v float64) float64 { return math.Abs(v-fr.Truth) / denom }
	fr.Last, fr.LastError = last, errOf(last)

	pf := fc.PredictedFinal
	if pf.Known && !math.IsNaN(pf.Value) && !math.IsInf(pf.Value, 0) {
		fr.Planner = pf.Value
		lo, hi := math.Min(pf.Lo, pf.Hi), math.Max(pf.Lo, pf.Hi)
		fr.Lo, fr.Hi = fptr(lo), fptr(hi)
		fr.Covered = bptr(fr.Truth >= lo && fr.Truth <= hi)
		switch {
		case *fr.Covered:
		case sign*fr.Truth < math.Min(sign*lo, sign*hi):
			fr.Miss = "better"
		default:
			fr.Miss = "worse"
		}
	} else {
		fr.Planner, fr.PlannerFallback = last, true
	}
	fr.PlannerError = errOf(fr.Planner)

	fr.Optimus, fr.OptimusFallback = last, true
	if e.optimus != nil && len(ob) >= 4 {
		xs := make([]float64, len(ob))
		zs := make([]float64, len(ob))
		for i, o := range ob {
			xs[i], zs[i] = o.x, sign*o.y
		}
		if v, ok := e.optimus(xs, zs, fr.XEnd); ok && !math.IsNaN(v) && !math.IsInf(v, 0) {
			fr.Optimus, fr.OptimusFallback = sign*v, false
		}
	}
	fr.OptimusError = errOf(fr.Optimus)
}

// bestTotal returns the best-so-far oriented value over the observations
// with t <= until (+Inf when none) and the run's total improvement
// |z0 - best_end| (as plateau_time defines it).
func bestTotal(obs []obsPoint, sign, until float64) (best, total float64) {
	best = math.Inf(1)
	end := math.Inf(1)
	for _, o := range obs {
		z := sign * o.y
		end = math.Min(end, z)
		if progress.AtOrBefore(o.t, until) {
			best = math.Min(best, z)
		}
	}
	if len(obs) > 0 {
		total = math.Abs(sign*obs[0].y - end)
	}
	return best, total
}

// hasNaN reports whether any metric value of the report is "nan".
func hasNaN(r rep) bool {
	for _, v := range r.m {
		if strings.EqualFold(strings.TrimSpace(v), "nan") {
			return true
		}
	}
	return false
}

// medianInterval is the median of successive report intervals of reps
// (0 with fewer than two reports).
func medianInterval(reps []rep) float64 {
	if len(reps) < 2 {
		return 0
	}
	d := make([]float64, len(reps)-1)
	for i := range d {
		d[i] = reps[i+1].t - reps[i].t
	}
	return stats.Median(d)
}
