package simulator

import (
	"fmt"
	"math"
	"strings"

	"github.com/progress-planner/planner/pkg/forecast"
	"github.com/progress-planner/planner/pkg/preempt"
)

// Policy names.
const (
	PolicyKueue   = "kueue"   // Kueue alone: no boosts
	PolicyPlanner = "planner" // forecast.Fit + preempt.Decide on each job's own history
	PolicyOracle  = "oracle"  // preempt.Decide on a forecast built from the ground truth
	PolicyLAS     = "las"     // least attained GPU service (Tiresias-style discretized LAS)
)

// AllPolicies in report order.
var AllPolicies = []string{PolicyKueue, PolicyPlanner, PolicyOracle, PolicyLAS}

// ParsePolicies reads a comma-separated policy list.
func ParsePolicies(s string) ([]string, error) {
	var out []string
	seen := map[string]bool{}
	for _, p := range strings.Split(s, ",") {
		p = strings.TrimSpace(p)
		if p == "" {
			continue
		}
		switch p {
		case PolicyKueue, PolicyPlanner, PolicyOracle, PolicyLAS:
		default:
			return nil, fmt.Errorf("unknown policy %q (want %s)", p, strings.Join(AllPolicies, ", "))
		}
		if !seen[p] {
			seen[p] = true
			out = append(out, p)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no policy named")
	}
	return out, nil
}

// policy is how a run sets boosts (and stops jobs). The engine calls it
// while a job runs; boosts are applied with engine.setBoost, stops with
// engine.deactivate.
type policy interface {
	// admitted: j was just admitted; it returns j's first tick (+Inf:
	// none).
	admitted(e *engine, j *jobState) float64
	// tick re-decides the running job j at e.now and returns its next tick.
	tick(e *engine, j *jobState) float64
	// evicted: j was just preempted and is about to be requeued;
	// byPlanner says its boost made it a victim.
	evicted(e *engine, j *jobState, byPlanner bool)
}

// arrivalHook is implemented by policies that act on a job when it is
// submitted, before its first scheduling pass.
type arrivalHook interface {
	arrived(e *engine, j *jobState)
}

func newPolicy(name string, o *Options) (policy, error) {
	switch name {
	case PolicyKueue:
		return kueueOnly{}, nil
	case PolicyLAS:
		return newLAS(o.LAS)
	case PolicyPlanner, PolicyOracle:
		p := o.Policy
		if o.Deactivate {
			p.Stop.Enabled = true
		}
		if err := p.Validate(); err != nil {
			return nil, err
		}
		return &decider{oracle: name == PolicyOracle, p: p}, nil
	}
	return nil, fmt.Errorf("unknown policy %q", name)
}

// kueueOnly: Kueue with no boosts.
type kueueOnly struct{}

func (kueueOnly) admitted(*engine, *jobState) float64 { return math.Inf(1) }
func (kueueOnly) tick(*engine, *jobState) float64     { return math.Inf(1) }
func (kueueOnly) evicted(*engine, *jobState, bool)    {}

// LASConfig is the discretized least-attained-service reference: a job's
// boost is -Step × the number of Thresholds (GPU-hours of attained service)
// it has passed, so jobs that received less GPU service go first and may
// preempt those that received more (as Tiresias' discretized 2D-LAS with
// its priority queues, here through Kueue's LowerPriority preemption).
type LASConfig struct {
	Thresholds []float64 `json:"thresholdsGPUHours"`
	Step       int32     `json:"step"`
}

// DefaultLAS: thresholds 1, 8 and 64 GPU-hours, 10 priority points apart
// (well below the 1000 between the built-in scenario's classes).
func DefaultLAS() LASConfig { return LASConfig{Thresholds: []float64{1, 8, 64}, Step: 10} }

type las struct{ c LASConfig }

func newLAS(c LASConfig) (*las, error) {
	for i, t := range c.Thresholds {
		if !(t > 0) || (i > 0 && t <= c.Thresholds[i-1]) || math.IsInf(t, 0) {
			return nil, fmt.Errorf("las.thresholdsGPUHours must be positive and increasing, got %v", c.Thresholds)
		}
	}
	if c.Step < 0 || int64(c.Step)*int64(len(c.Thresholds)) > preempt.MaxBoostMagnitude {
		return nil, fmt.Errorf("las.step %d: must be >= 0 and step × thresholds within %d", c.Step, preempt.MaxBoostMagnitude)
	}
	return &las{c}, nil
}

// attained is the GPU-seconds of service j received so far (evicted
// service included: Tiresias counts it too).
func attained(e *engine, j *jobState) float64 {
	s := j.usedGPUSec
	if j.state == phaseRunning {
		s += float64(j.GPUs) * (e.now - j.admitAt)
	}
	return s
}

func (l *las) next(e *engine, j *jobState) float64 {
	a := attained(e, j)
	for _, th := range l.c.Thresholds {
		if s := th * 3600; s > a+1e-6 {
			return e.now + (s-a)/float64(j.GPUs)
		}
	}
	return math.Inf(1)
}

func (l *las) admitted(e *engine, j *jobState) float64 { return l.next(e, j) }
func (l *las) evicted(*engine, *jobState, bool)        {}
func (l *las) tick(e *engine, j *jobState) float64 {
	a := attained(e, j)
	level := 0
	for _, th := range l.c.Thresholds {
		if a+1e-6 >= th*3600 {
			level++
		}
	}
	e.setBoost(j, -l.c.Step*int32(level))
	return l.next(e, j)
}

// Cadence bounds how often a job is re-decided. forecast.Fit costs about a
// millisecond, so, like the controller, the simulator forecasts a job at a
// bounded rate and only while it runs; reports go into the job's history
// at the report cadence whatever it is.
type Cadence struct {
	// First: the first forecast after an admission comes this long after
	// it (never before the policy's evidence.minAge: earlier, Decide can
	// only say Warming).
	First Seconds `json:"first"`
	// Growth, Min, Max: the next forecast is Growth × the job's running
	// time so far later, clamped to [Min, Max].
	Growth float64 `json:"growth"`
	Min    Seconds `json:"min"`
	Max    Seconds `json:"max"`
	// Urgent: a decision deadline (dwell, stop grace period, lease,
	// cooldown ends) wakes the job at once, but at most once per Urgent
	// after its last forecast (the controller's urgentMin).
	Urgent Seconds `json:"urgent"`
	// Oracle is the oracle's idle cadence; it is also woken at the true
	// plateau onset and near-done instants, and its forecast costs nothing.
	Oracle Seconds `json:"oracle"`
}

// DefaultCadence: see docs/simulator.md (the cadence that keeps the full
// Philly-derived trace within 60 s per policy).
func DefaultCadence() Cadence {
	return Cadence{First: 3600, Growth: 0.5, Min: 3600, Max: 12 * 3600, Urgent: 5 * 60, Oracle: 3600}
}

func (c Cadence) validate() error {
	switch {
	case !(c.First >= 0 && c.Min >= minInterval && c.Max >= c.Min && c.Max <= MaxSeconds && c.Urgent >= 0 && c.Oracle >= minInterval):
		return fmt.Errorf("cadence: need first >= 0, %d s <= min <= max <= %d s, urgent >= 0, oracle >= %d s (got first %v min %v max %v urgent %v oracle %v)",
			minInterval, MaxSeconds, minInterval, c.First, c.Min, c.Max, c.Urgent, c.Oracle)
	case !(c.Growth >= 0) || math.IsInf(c.Growth, 0):
		return fmt.Errorf("cadence.growth %g must be a finite number >= 0", c.Growth)
	}
	return nil
}

// decider runs preempt.Decide on every tick: on the planner's own forecast
// (forecast.Fit on the job's bounded history, fed with its reports) or, for
// the oracle, on a forecast built from the ground truth.
type decider struct {
	oracle bool
	p      preempt.Policy
}

func (d *decider) facts(e *engine, j *jobState, running bool) preempt.Facts {
	f := preempt.Facts{
		BasePriority: j.Priority, GPUs: j.GPUs, Evictions: j.evictions,
		LastPlannerEvictionAt: j.lastPlannerEvt, ClusterQueue: j.Queue, StopOptIn: e.opt.Deactivate,
	}
	if running {
		a := j.admitAt
		f.AdmittedAt = &a
	}
	f.NotRunning = !running
	return f
}

func (d *decider) forecast(e *engine, j *jobState) forecast.Forecast {
	if d.oracle {
		e.stats.oracleForecasts++
		return oracleForecast(e, j)
	}
	e.feedReports(j, e.now)
	e.stats.forecasts++
	return forecast.Fit(j.hist, j.Curve.Objective, e.now, e.opt.Forecast)
}

func (d *decider) decide(e *engine, j *jobState, running bool) {
	f := d.forecast(e, j)
	facts := d.facts(e, j, running)
	dec := preempt.Decide(f, facts, j.decision, d.p)
	e.stats.decisions++
	why := j.tickWhy
	if !running {
		why = tickEviction
	}
	e.stats.decisionsBy[why]++
	if e.opt.Observe != nil {
		e.opt.Observe(Observation{Policy: e.polName, Job: j.Job, Now: e.now, Work: j.workAt(e.now), Running: running, Forecast: &f, Decision: &dec})
	}
	j.decision = dec
	j.lastForecast = e.now
	e.setBoost(j, dec.Boost)
	if running && dec.Action == preempt.ActionDeactivate {
		e.deactivate(j, dec.GPUHoursSaved)
	}
}

// arrived applies a pinned job's live boost before it is first queued.
func (d *decider) arrived(e *engine, j *jobState) {
	if j.Pinned {
		j.boost = j.LiveBoost
	}
}

func (d *decider) admitted(e *engine, j *jobState) float64 {
	if j.Pinned {
		e.setBoost(j, j.LiveBoost)
		return math.Inf(1) // the live decision holds: no ticks
	}
	if j.boost != 0 {
		// Readmitted with the boost it was evicted with (a yield kept
		// while it waited): decide at once, as the controller does on a
		// Workload's admission, so the yield is lifted before the next
		// scheduling pass could preempt it again.
		j.tickWhy = tickReadmission
		return e.now
	}
	j.tickWhy = tickFirst
	first := math.Max(d.p.Evidence.MinAge.Seconds(), float64(e.opt.Cadence.First))
	if d.oracle {
		first = d.p.Evidence.MinAge.Seconds()
	}
	return e.now + math.Max(first, 1)
}

func (d *decider) evicted(e *engine, j *jobState, byPlanner bool) {
	if byPlanner {
		t := e.now
		j.lastPlannerEvt = &t
	}
	if j.Pinned {
		return // keeps its live boost while it waits
	}
	d.decide(e, j, false)
}

func (d *decider) tick(e *engine, j *jobState) float64 {
	d.decide(e, j, true)
	if j.state != phaseRunning {
		return math.Inf(1)
	}
	c := e.opt.Cadence
	var next float64
	j.tickWhy = tickCadence
	if d.oracle {
		next = e.now + float64(c.Oracle)
		if t := oracleTransition(e, j, &d.p); t < next {
			next, j.tickWhy = t, tickTruth
		}
	} else {
		run := j.usedGPUSec/float64(j.GPUs) + (e.now - j.admitAt)
		next = e.now + math.Min(float64(c.Max), math.Max(float64(c.Min), c.Growth*run))
	}
	facts := d.facts(e, j, true)
	if dl := j.decision.NextChange(facts, d.p); !math.IsNaN(dl) {
		urgent := float64(c.Urgent)
		if d.oracle {
			urgent = 1
		}
		if t := math.Max(dl, e.now+urgent); t < next {
			next, j.tickWhy = t, tickDeadline
		}
	}
	if nd := j.decision.NearDoneAt; nd != nil && *nd < next {
		// A yielding job crossing into the near-done range is decided
		// then, not an urgent interval later: a preemption in between
		// would catch it past the threshold. It happens at most once per
		// crossing, so it does not undo the cadence's bound on cost.
		next, j.tickWhy = math.Max(*nd, e.now+1), tickDeadline
	}
	return next
}

// oracleForecast is what a perfect forecaster would say about j at e.now:
// exact progress, step rate and ETA, the true plateau onset (probability 1
// past it, 0 before), the true remaining improvement, confidence 1.
func oracleForecast(e *engine, j *jobState) forecast.Forecast {
	now := e.now
	w := j.workAt(now)
	x := w / j.Duration
	step := math.Floor(x * j.TotalSteps)
	total := j.TotalSteps
	f := forecast.Forecast{
		Now: now, Objective: j.Curve.Objective, Reports: 1000, Segments: 1 + j.evictions, ObjectivePts: 1000,
		Step: &step, TotalSteps: &total, Progress: &x, LastReport: &now,
		Confidence: 1,
	}
	if j.state == phaseRunning {
		rate := j.TotalSteps / j.Duration
		f.StepRate = &rate
	}
	eta := j.Duration - w
	f.ETA = forecast.Estimate{Known: true, Value: eta, Lo: eta, Hi: eta, Basis: "oracle"}
	rel := j.Curve.RelRemaining(x)
	if !math.IsInf(rel, 0) {
		f.RelativeRemaining = &rel
	}
	if ow := oracleOnsetWork(e, j); w >= ow && j.Curve.Onset < 1 {
		onset := now - (w - ow)
		f.PlateauProbability, f.Plateaued, f.PlateauOnset = 1, true, &onset
		if f.RelativeRemaining == nil || *f.RelativeRemaining > PlateauEpsilon {
			r := 0.0 // the onset is defined by the best-so-far; between evaluations keep it consistent
			f.RelativeRemaining = &r
		}
	}
	return f
}

// oracleOnsetWork is the running time from which the oracle knows j has
// plateaued: the true onset, or with Options.OracleMinImprovement the
// first point past it with less than that share of the value to gain.
func oracleOnsetWork(e *engine, j *jobState) float64 {
	if e.opt.OracleMinImprovement <= 0 || j.Curve == nil {
		return j.PlateauWork()
	}
	return math.Min(1, j.Curve.MeaningfulOnset(e.opt.OracleMinImprovement)) * j.Duration
}

// oracleTransition is the next instant at which the truth changes what
// Decide could say about the running job j: the plateau onset, or entering
// the near-done window (progress and ETA thresholds).
func oracleTransition(e *engine, j *jobState, p *preempt.Policy) float64 {
	w := j.workAt(e.now)
	next := math.Inf(1)
	at := func(work float64) {
		if work > w+1e-9 && work < j.Duration {
			next = math.Min(next, e.now+(work-w))
		}
	}
	if j.Curve.Onset < 1 {
		at(oracleOnsetWork(e, j))
	}
	at(math.Max(p.NearDone.EnterProgress*j.Duration, j.Duration-p.NearDone.EnterMaxETA.Seconds()))
	return next
}
