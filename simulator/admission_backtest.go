package simulator

import (
	"fmt"
	"io"
	"math"
	"time"

	orderstats "github.com/progress-planner/planner/internal/stats"
	"github.com/progress-planner/planner/pkg/forecast"
)

// The admission backtest scores the admission estimates of `planner
// explain` and the live page (pkg/admission) on a simulated cluster. The
// planner policy runs as in `planner simulate`; when a sampled job arrives,
// the cluster is captured as the scenario a live snapshot would give
// (clustersnap's rules: running jobs with their forecast's ETA and
// interval as run time, pending ones in queue order, the boosts in effect
// pinned, the last Horizon's arrivals as the sample future arrivals are
// drawn from, the observed run times for jobs without an ETA) and, after
// the run, the estimate from that scenario is compared with the time the
// job really waited. Jobs admitted on arrival are not scored: the question is "when
// will my waiting job start".

// AdmissionBacktestOptions configure the backtest.
type AdmissionBacktestOptions struct {
	// Samples: at most this many arrivals are captured, evenly spread
	// over the run (200 when 0); only those that then waited are scored.
	Samples int
	// DefaultDuration is the run time of a job without a known ETA
	// (explain's --default-duration, 1 h when 0).
	DefaultDuration float64
	// Horizon: future arrivals are drawn from those of the last Horizon
	// seconds
	// (explain's --arrivals-horizon; 24 h when 0, < 0 for none).
	Horizon float64
}

// AdmissionInterval is an admission estimate: seconds after the capture
// (+Inf: not within the simulated future).
type AdmissionInterval struct{ P10, Median, P90 float64 }

// AdmissionEstimator estimates the admission of jobs in a captured
// scenario, in one set of futures, as explain and the live page estimate
// every waiting job at once. pkg/admission provides it (it imports this
// package).
type AdmissionEstimator func(sc *Scenario, jobs []string) ([]AdmissionInterval, error)

// AdmissionOutcome is an earlier estimate and the wait that followed it,
// as the estimate's calibration reads it: Wait is all of the wait after
// the estimate was made, or, while Waiting, the wait so far; Age is how
// long ago the estimate was made (the calibration prefers recent ones).
type AdmissionOutcome struct {
	P10, P90 float64
	Wait     float64
	Waiting  bool
	Age      float64
}

// AdmissionCalibrator turns an estimate's interval into the one shown,
// from the outcomes of the estimates made before it (pkg/admission's
// calibration on its own past misses, preferring those made within
// horizon seconds), and says how many outcomes it used (0: the interval
// as it is).
type AdmissionCalibrator func(past []AdmissionOutcome, horizon float64, est AdmissionInterval) (lo, hi float64, used int)

// AdmissionSample is one captured waiting job.
type AdmissionSample struct {
	Job   string  `json:"job"`
	Queue string  `json:"queue"`
	T     float64 `json:"t"`
	// Wait is how long it really waited (+Inf, null in JSON: never
	// admitted); P10, Median, P90 the estimate as shown, calibrated on
	// Outcomes of the earlier estimates' outcomes (0: the futures'
	// interval as it is), FuturesP10 and FuturesP90 the futures' own
	// interval (same units).
	Wait       Float `json:"waitSeconds"`
	P10        Float `json:"p10Seconds"`
	Median     Float `json:"medianSeconds"`
	P90        Float `json:"p90Seconds"`
	FuturesP10 Float `json:"futuresP10Seconds"`
	FuturesP90 Float `json:"futuresP90Seconds"`
	Outcomes   int   `json:"outcomes"`
	Inside     bool  `json:"inside"`
	sc         *Scenario
	id         int
	pending    []int // ids of the jobs waiting in the capture, this one last
}

// AdmissionCoverage counts where the waits fell against an interval.
type AdmissionCoverage struct {
	Inside   int     `json:"inside"`
	Below    int     `json:"below"` // waited less than P10
	Above    int     `json:"above"` // waited more than P90
	Coverage float64 `json:"coverage"`
}

func (c *AdmissionCoverage) add(wait, lo, hi float64) bool {
	switch {
	case lo <= wait && wait <= hi:
		c.Inside++
		return true
	case wait < lo:
		c.Below++
	default:
		c.Above++
	}
	return false
}

func (c *AdmissionCoverage) finish() {
	if n := c.Inside + c.Below + c.Above; n > 0 {
		c.Coverage = float64(c.Inside) / float64(n)
	}
}

// AdmissionBacktestResult is the outcome.
type AdmissionBacktestResult struct {
	Scenario string `json:"scenario"`
	// Captured arrivals; Scored: those that waited.
	Captured int `json:"captured"`
	Scored   int `json:"scored"`
	// The interval as shown (calibrated), and the futures' own.
	AdmissionCoverage
	Futures AdmissionCoverage `json:"futures"`
	// Estimated: the waiting jobs' first estimates made (the scored ones
	// and the others waiting at the captures), the outcomes the
	// calibration reads.
	Estimated int `json:"estimated"`
	// MedianAbsErr is the median |median estimate − wait| (seconds) and
	// MedianRelErr the median of that over the wait, both over the jobs
	// admitted and estimated to be.
	MedianAbsErr float64           `json:"medianAbsErrSeconds"`
	MedianRelErr float64           `json:"medianRelErr"`
	MedianWait   float64           `json:"medianWaitSeconds"`
	Samples      []AdmissionSample `json:"samples"`
	Wall         float64           `json:"wallSeconds"`
	// Run is the planner run's summary (the captures must not change it).
	Run Summary `json:"run"`
}

// admissionProbe wraps the planner policy: it captures the cluster when a
// sampled job arrives.
type admissionProbe struct {
	policy
	o        AdmissionBacktestOptions
	stride   int
	arrivals int
	samples  []AdmissionSample
}

func (p *admissionProbe) arrived(e *engine, j *jobState) {
	if h, ok := p.policy.(arrivalHook); ok {
		h.arrived(e, j)
	}
	p.arrivals++
	if (p.arrivals-1)%p.stride != 0 {
		return
	}
	var pending []int
	for _, q := range e.cl.queues {
		for _, w := range q.pending {
			pending = append(pending, w.ID)
		}
	}
	pending = append(pending, j.ID)
	p.samples = append(p.samples, AdmissionSample{Job: j.Name, Queue: j.Queue, T: e.now, sc: p.capture(e, j), id: j.ID, pending: pending})
}

// capture is the cluster at e.now as a scenario: time 0 is now, the
// arriving job waits with the pending ones.
func (p *admissionProbe) capture(e *engine, arriving *jobState) *Scenario {
	sc := &Scenario{Name: "capture"}
	for _, q := range e.cl.queues {
		sc.Queues = append(sc.Queues, q.spec)
	}
	for _, q := range e.cl.queues {
		for _, j := range q.running {
			sc.Jobs = append(sc.Jobs, p.spec(e, j, 0))
		}
	}
	for _, q := range e.cl.queues {
		for _, j := range q.pending {
			sc.Jobs = append(sc.Jobs, p.spec(e, j, 1))
		}
	}
	sc.Jobs = append(sc.Jobs, p.spec(e, arriving, 1))
	// The window of past arrivals the next ones are drawn from: the last
	// Horizon, or all of the run when it is younger.
	window := math.Min(p.o.Horizon, e.now)
	if window >= 1 {
		sc.Recent = &RecentArrivals{Window: Seconds(math.Round(window))}
	}
	for _, j := range e.jobs {
		done := j.state == phaseDone && j.endKind == endCompleted
		switch ran := math.Round(j.workAt(e.now)); {
		case done && j.end > e.now-math.Max(p.o.Horizon, 0):
			sc.RunTimes = append(sc.RunTimes, Seconds(math.Max(1, math.Round(j.Duration)))) // an observed run time
		case !done && j.state != phaseWaiting && ran >= 1:
			sc.RunSoFar = append(sc.RunSoFar, Seconds(ran)) // still running, or evicted: at least this long
		}
		if sc.Recent == nil || j.Arrival <= e.now-window || j.Arrival > e.now {
			continue
		}
		js := JobSpec{Name: j.Name, Queue: j.Queue, GPUs: j.GPUs, Priority: j.Priority, Duration: Seconds(p.o.DefaultDuration), UnknownDuration: true}
		if done {
			js.Duration, js.UnknownDuration = Seconds(math.Max(1, math.Round(j.Duration))), false // its observed run time
		}
		sc.Recent.Jobs = append(sc.Recent.Jobs, js)
	}
	return sc
}

// spec is j as a live snapshot shows it: its forecast's ETA (as of now,
// from its own history) as run time with the ETA's interval, else
// unknown (drawn from the observed run times); its boost pinned.
func (p *admissionProbe) spec(e *engine, j *jobState, arrival Seconds) JobSpec {
	js := JobSpec{Name: j.Name, Queue: j.Queue, GPUs: j.GPUs, Priority: j.Priority, Arrival: arrival, Duration: Seconds(p.o.DefaultDuration), UnknownDuration: true}
	if j.hist != nil {
		e.feedReports(j, e.now) // the reports a live controller has seen by now
	}
	if j.hist != nil && j.hist.Len() > 0 {
		f := forecast.Fit(j.hist, j.Curve.Objective, e.now, e.opt.Forecast)
		if f.ETA.Known && f.ETA.Value > 0 && f.ETA.Value <= MaxSeconds {
			d := math.Max(1, math.Round(f.ETA.Value))
			js.Duration, js.UnknownDuration = Seconds(d), false
			if lo, hi := math.Round(f.ETA.Lo), math.Round(f.ETA.Hi); lo >= 1 && lo <= d && d <= hi && hi <= MaxSeconds && hi > lo {
				js.DurationLo, js.DurationHi = Seconds(lo), Seconds(hi)
			}
		}
		if f.Plateaued {
			js.PlateauAt = 0.02 // clustersnap's plateauedNow
		}
	}
	if js.UnknownDuration {
		js.RanFor = Seconds(math.Round(j.workAt(e.now)))
	}
	if j.boost != 0 {
		b := j.boost
		js.Boost = &b
	}
	return js
}

// AdmissionBacktest runs the planner policy on in with the probe, then
// estimates, capture by capture in time order, every waiting job not
// estimated before (as explain and the live page estimate all waiting
// jobs), and scores each captured arrival that waited: its interval as
// cal makes it from the outcomes known at its capture (nil: the futures'
// interval as it is), and the futures' own.
func AdmissionBacktest(in *Input, opt Options, o AdmissionBacktestOptions, est AdmissionEstimator, cal AdmissionCalibrator) (*AdmissionBacktestResult, error) {
	if o.Samples == 0 {
		o.Samples = 200
	}
	if o.DefaultDuration == 0 {
		o.DefaultDuration = 3600
	}
	if o.Horizon == 0 {
		o.Horizon = 24 * 3600
	}
	if o.Samples < 1 || !(o.DefaultDuration > 0) {
		return nil, fmt.Errorf("admission backtest: samples %d and default duration %v must be positive", o.Samples, o.DefaultDuration)
	}
	if err := opt.Validate(); err != nil {
		return nil, err
	}
	inner, err := newPolicy(PolicyPlanner, &opt)
	if err != nil {
		return nil, err
	}
	probe := &admissionProbe{policy: inner, o: o, stride: max(1, (len(in.Jobs)+o.Samples-1)/o.Samples)}
	e, err := newEngine(in, opt, probe, PolicyPlanner)
	if err != nil {
		return nil, err
	}
	start := time.Now()
	e.loop()
	r := &AdmissionBacktestResult{Scenario: in.Name, Captured: len(probe.samples)}
	r.Run = e.result(PolicyPlanner, time.Since(start).Seconds()).Summary
	firsts, err := firstEstimates(e, probe.samples, est)
	if err != nil {
		return nil, err
	}
	r.Estimated = len(firsts)
	var absErr, relErr, waits []float64
	for _, s := range probe.samples {
		wait := waitOf(e.jobs[s.id])
		f, ok := firsts[s.id]
		if !(wait > 0) || !ok || f.t != s.T {
			continue // admitted on arrival
		}
		lo, hi := f.iv.P10, f.iv.P90
		if cal != nil {
			lo, hi, s.Outcomes = cal(outcomesAt(e, firsts, s.T), o.Horizon, f.iv)
		}
		s.Wait, s.P10, s.Median, s.P90 = Float(wait), Float(lo), Float(f.iv.Median), Float(hi)
		s.FuturesP10, s.FuturesP90 = Float(f.iv.P10), Float(f.iv.P90)
		s.Inside = r.add(wait, lo, hi)
		r.Futures.add(wait, f.iv.P10, f.iv.P90)
		if med := f.iv.Median; !math.IsInf(wait, 1) && !math.IsInf(med, 1) {
			absErr = append(absErr, math.Abs(med-wait))
			relErr = append(relErr, math.Abs(med-wait)/wait)
		}
		waits = append(waits, wait)
		s.sc, s.pending = nil, nil
		r.Samples = append(r.Samples, s)
	}
	r.Scored = len(r.Samples)
	r.finish()
	r.Futures.finish()
	if r.Scored > 0 {
		r.MedianAbsErr, r.MedianRelErr, r.MedianWait = orderstats.Median(absErr), orderstats.Median(relErr), orderstats.Median(waits)
	}
	r.Wall = time.Since(start).Seconds()
	return r, nil
}

// waitOf is how long j waited for its first admission (+Inf: never).
func waitOf(j *jobState) float64 {
	if math.IsNaN(j.firstAdmit) {
		return math.Inf(1)
	}
	return j.firstAdmit - j.Arrival
}

// firstEstimate is a waiting job's first estimate, made at capture time t.
type firstEstimate struct {
	t  float64
	iv AdmissionInterval
}

// firstEstimates estimates, capture by capture, the jobs waiting in it
// for their first admission that went on to wait (not admitted on
// arrival) and were not estimated at an earlier capture, in one set of
// futures per capture. A job waiting again after a preemption is not
// estimated again (the live page tracks a Workload to its first
// admission).
func firstEstimates(e *engine, samples []AdmissionSample, est AdmissionEstimator) (map[int]firstEstimate, error) {
	firsts := map[int]firstEstimate{}
	for _, s := range samples {
		var names []string
		var ids []int
		for _, id := range s.pending {
			j := e.jobs[id]
			if _, done := firsts[id]; done || !(waitOf(j) > 0) || j.firstAdmit <= s.T {
				continue
			}
			names, ids = append(names, e.jobs[id].Name), append(ids, id)
		}
		if len(names) == 0 {
			continue
		}
		ivs, err := est(s.sc, names)
		if err != nil {
			return nil, fmt.Errorf("admission backtest: capture at %v: %w", Seconds(s.T), err)
		}
		for i, id := range ids {
			// The captured jobs arrive 1 s after the capture.
			iv := ivs[i]
			iv.P10, iv.Median, iv.P90 = math.Max(iv.P10-1, 0), math.Max(iv.Median-1, 0), math.Max(iv.P90-1, 0)
			firsts[id] = firstEstimate{t: s.T, iv: iv}
		}
	}
	return firsts, nil
}

// outcomesAt is what the estimates made before t show at t: the waits of
// the jobs admitted by then, and the waits so far of the others.
func outcomesAt(e *engine, firsts map[int]firstEstimate, t float64) []AdmissionOutcome {
	var out []AdmissionOutcome
	for id, f := range firsts {
		if f.t >= t {
			continue
		}
		o := AdmissionOutcome{P10: f.iv.P10, P90: f.iv.P90, Age: t - f.t}
		if admit := e.jobs[id].firstAdmit; !math.IsNaN(admit) && admit <= t {
			o.Wait = admit - f.t
		} else {
			o.Wait, o.Waiting = t-f.t, true
		}
		out = append(out, o)
	}
	return out
}

// WriteTable prints the backtest's summary.
func (r *AdmissionBacktestResult) WriteTable(w io.Writer) error {
	_, err := fmt.Fprintf(w, `admission backtest: scenario %s, planner policy; %d arrivals captured, %d waited and are scored (%d waiting jobs estimated in all)
80 %% interval coverage: %.1f%% (%d inside, %d waited less than P10, %d more than P90; target 70–90 %%)
  the futures' own interval, before calibration: %.1f%% (%d / %d / %d)
median |estimate − wait|: %s (%.0f%% of the wait); median wait %s; %.1fs
`, r.Scenario, r.Captured, r.Scored, r.Estimated, 100*r.Coverage, r.Inside, r.Below, r.Above,
		100*r.Futures.Coverage, r.Futures.Inside, r.Futures.Below, r.Futures.Above,
		Seconds(math.Round(r.MedianAbsErr)), 100*r.MedianRelErr, Seconds(math.Round(r.MedianWait)), r.Wall)
	return err
}
