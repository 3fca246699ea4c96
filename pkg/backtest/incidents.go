package backtest

import (
	"math"
	"sort"
	"strings"

	"github.com/progress-planner/planner/pkg/progress"
)

// incident scores one derived incident file (docs/backtest.md, section 5).
func (e *evaluator) incident(f *progress.HistoryFile, reps []rep) *IncidentResult {
	hd := f.Header
	at, _ := hd.IncidentFloat("atSeconds")
	ir := &IncidentResult{
		Name: hd.Name, Dataset: hd.Dataset(), Type: hd.IncidentType(), AtSeconds: at,
		EndSeconds: hd.Outcome.EndSeconds,
	}
	if v := hd.Incident["variant"]; len(v) > 0 {
		ir.Variant = strings.Trim(string(v), `"`)
	}
	switch ir.Type {
	case "hang":
		e.hang(ir, f, reps)
	case "divergence":
		e.divergence(ir, f, reps)
	case "plateau_extension":
		e.plateauExt(ir, f, reps)
	case "preempt_resume":
		e.preempt(ir, f, reps)
	}
	return ir
}

// hangTimes are the instants a hang is looked for: every report time, and
// a grid inside every reporting gap. A gap opens one median interval m
// after a report; from there the grid steps by min(10 s, m/2) up to the
// next report (or to endSeconds after the last report), at most
// maxGridPerGap points per gap.
func hangTimes(reps []rep, m, end float64) []float64 {
	step := math.Min(10, m/2)
	if !(step > 0) {
		step = 10
	}
	var out []float64
	for i, r := range reps {
		out = append(out, r.t)
		last := i+1 == len(reps)
		next := end // the grid after the last report runs up to end, inclusive
		if !last {
			next = reps[i+1].t
		}
		open := r.t + math.Max(m, 0)
		if open > next || (!last && open == next) {
			continue
		}
		st := step
		if (next-open)/st > maxGridPerGap {
			st = (next - open) / maxGridPerGap
		}
		for k := 0; ; k++ {
			g := open + float64(k)*st
			if g > next || (!last && g == next) {
				break
			}
			out = append(out, g)
		}
	}
	sort.Float64s(out)
	return out
}

// hang: the first instant after atSeconds at which Forecast.Hung is set;
// on time when the delay is at most 3 × the median report interval before
// the incident + 60 s.
func (e *evaluator) hang(ir *IncidentResult, f *progress.HistoryFile, reps []rep) {
	pre := seen(reps, ir.AtSeconds)
	m := medianInterval(pre)
	if len(pre) < 2 {
		m = medianInterval(reps)
	}
	allow := 3*m + 60
	ir.MedianIntervalSeconds, ir.AllowanceSeconds = fptr(m), fptr(allow)
	st := newStream(e.engine, f)
	for _, now := range hangTimes(reps, m, ir.EndSeconds) {
		fc := st.at(now)
		if !fc.Hung {
			continue
		}
		if now <= ir.AtSeconds {
			if ir.EarlyAlarmSeconds == nil {
				ir.EarlyAlarmSeconds = fptr(now)
			}
			continue
		}
		d := now - ir.AtSeconds
		ir.Detected = true
		ir.DetectedSeconds, ir.DelaySeconds = fptr(now), fptr(d)
		ir.OnTime = bptr(d <= allow)
		ir.Forecast = e.raw(fc)
		break
	}
	ir.Evaluations = st.evals
	if !ir.Detected {
		ir.OnTime = bptr(false)
	}
}

// divergence: the first report time at or after atSeconds with
// Forecast.Diverging, and whether it came before the first report that
// carries a "nan" metric value.
func (e *evaluator) divergence(ir *IncidentResult, f *progress.HistoryFile, reps []rep) {
	firstNaN := math.NaN()
	for _, r := range reps {
		if hasNaN(r) {
			firstNaN = r.t
			break
		}
	}
	ir.FirstNaNSeconds = fptr(firstNaN)
	st := newStream(e.engine, f)
	prev := math.NaN()
	for _, i := range streamIndices(len(reps)) {
		now := reps[i].t
		if now == prev {
			continue
		}
		prev = now
		fc := st.at(now)
		if !fc.Diverging {
			continue
		}
		if now < ir.AtSeconds {
			if ir.EarlyAlarmSeconds == nil {
				ir.EarlyAlarmSeconds = fptr(now)
			}
			continue
		}
		ir.Detected = true
		ir.DetectedSeconds, ir.DelaySeconds = fptr(now), fptr(now-ir.AtSeconds)
		ir.BeforeNaN = bptr(math.IsNaN(firstNaN) || now < firstNaN)
		ir.Forecast = e.raw(fc)
		break
	}
	ir.Evaluations = st.evals
	if !ir.Detected {
		ir.BeforeNaN = bptr(false)
	}
}

// plateauExt: the true plateau of the whole derived history (the
// baseline's plateau_time); the first report time with
// Forecast.Plateaued; detected when that is no later than the true
// plateau + 10 % of the run's duration (flags before the true plateau
// count as detected and are marked DetectedBeforeTruth).
func (e *evaluator) plateauExt(ir *IncidentResult, f *progress.HistoryFile, reps []rep) {
	metric, sign, _ := objectiveInfo(f.Header)
	obs := series(reps, metric, xkey(f.Header, reps))
	tp, ok := plateauTime(obs, sign)
	if !ok || metric == "" {
		return
	}
	T := ir.EndSeconds
	ir.PlateauSeconds = fptr(tp)
	st := newStream(e.engine, f)
	prev := math.NaN()
	for _, i := range streamIndices(len(reps)) {
		now := reps[i].t
		if now == prev {
			continue
		}
		prev = now
		fc := st.at(now)
		if !fc.Plateaued {
			continue
		}
		ir.DetectedSeconds = fptr(now)
		ir.DelaySeconds = fptr(now - tp)
		if T > 0 {
			ir.DelayFraction = fptr((now - tp) / T)
		}
		ir.Detected = now <= tp+plateauExtWindow*T
		ir.DetectedBeforeTruth = bptr(now < tp)
		ir.Forecast = e.raw(fc)
		break
	}
	ir.Evaluations = st.evals
}

// preemptCut is the instant the ETA after a resume is scored at: 50 % of
// endSeconds when that is after resumeSeconds, else the first report
// after resumeSeconds (the restarted reporter's 0 % report is at
// resumeSeconds itself, so this is the first report with progress).
func preemptCut(reps []rep, end, resume float64) (float64, bool) {
	c := 0.5 * end
	if c > resume {
		return c, true
	}
	for _, r := range reps {
		if r.t > resume {
			return r.t, true
		}
	}
	return 0, false
}

// preempt: ETA error at preemptCut against the truth endSeconds - cut,
// for the planner, the reported ETA and the linear step rate (the
// baseline's definitions).
func (e *evaluator) preempt(ir *IncidentResult, f *progress.HistoryFile, reps []rep) {
	resume, ok := f.Header.IncidentFloat("resumeSeconds")
	if !ok {
		return
	}
	ir.ResumeSeconds = fptr(resume)
	T := ir.EndSeconds
	c, ok := preemptCut(reps, T, resume)
	if !ok || !(T-c > 0) {
		return
	}
	ir.CutSeconds = fptr(c)
	st := newStream(e.engine, f)
	fc := st.at(c)
	ir.Evaluations = st.evals
	ir.ETA = e.etaResult(f.Header, seen(reps, c), c, T-c, fc)
	ir.Detected = fc.ETA.Known
	ir.Forecast = e.raw(fc)
}
