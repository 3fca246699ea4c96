package simulator

import (
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/progress-planner/planner/pkg/forecast"
	"github.com/progress-planner/planner/pkg/preempt"
	"github.com/progress-planner/planner/pkg/progress"
	"github.com/progress-planner/planner/pkg/synth"
)

// Input is a resolved scenario: the queues and the jobs (curves attached).
type Input struct {
	Name   string   `json:"name"`
	Source string   `json:"source"`
	Queues []Queue  `json:"queues"`
	Jobs   []*Job   `json:"jobs"`
	Notes  []string `json:"notes,omitempty"`
}

// Capacity is the sum of the queues' nominal quotas.
func (in *Input) Capacity() int {
	n := 0
	for _, q := range in.Queues {
		n += q.GPUs
	}
	return n
}

// Options configure a run (the same for every policy of a comparison).
type Options struct {
	// Policy is the decision policy planner and oracle use
	// (preempt.DefaultPolicy()).
	Policy preempt.Policy
	// Deactivate is the what-if in which every queue opts in to the
	// policy's Deactivate action (Policy.Stop.Enabled).
	Deactivate bool
	// Forecast settings and the bound of each job's history.
	Forecast forecast.Settings
	History  progress.Limits
	Cadence  Cadence
	LAS      LASConfig
	// Checkpoint is the default running time between checkpoints.
	Checkpoint float64
	// Reports: a job reports every clamp(duration/ReportsPerRun,
	// ReportMin, ReportMax) seconds while it runs.
	ReportsPerRun int
	ReportMin     float64
	ReportMax     float64
	// RecordEvents keeps the ordered admission/preemption/finish log.
	RecordEvents bool
	// SeriesPoints is the resolution of the time series in the result.
	SeriesPoints int
	// Progress, when set, is called now and then with the policy being
	// run, the jobs finished so far and the total.
	Progress func(policy string, done, total int)
	// Observe, when set, is called after every planner or oracle decision
	// (before it is applied), for diagnostics (hack/oraclegap). nil costs
	// nothing.
	Observe func(o Observation)
	// OracleMinImprovement, when positive, bounds the oracle by the trust
	// rule: it calls a plateau only once less than this share of the
	// metric's own value is still to gain (Curve.MeaningfulOnset), so its
	// saving is the most a stop policy that never stops a job with that
	// much ahead can reach. The truth the metrics use is unchanged.
	OracleMinImprovement float64
	// StopOnceAdmitted, when set, ends the run at the instant the last of
	// these jobs (by name) is first admitted, after that instant's
	// admissions: an admission estimate needs nothing later, and running
	// a large cluster to its end costs minutes per future. Jobs not in
	// the input are ignored; the result's outcomes then describe a cut
	// run (jobs unfinished).
	StopOnceAdmitted []string
}

// Observation is one decision of the planner or oracle policy, for
// diagnostics: the job, the instant, its true progress (running seconds
// of work), and the forecast and decision.
type Observation struct {
	Policy   string
	Job      *Job
	Now      float64
	Work     float64
	Running  bool
	Forecast *forecast.Forecast
	Decision *preempt.Decision
}

// DefaultOptions are the documented defaults.
func DefaultOptions() Options {
	return Options{
		Policy:        preempt.DefaultPolicy(),
		Forecast:      forecast.DefaultSettings(),
		History:       progress.DefaultLimits(),
		Cadence:       DefaultCadence(),
		LAS:           DefaultLAS(),
		Checkpoint:    1800,
		ReportsPerRun: 100,
		ReportMin:     60,
		ReportMax:     3600,
		SeriesPoints:  400,
	}
}

// Validate range-checks the options (limits: docs/limits.md).
func (o *Options) Validate() error {
	if err := o.Cadence.validate(); err != nil {
		return err
	}
	switch {
	case checkSeconds("checkpoint interval", o.Checkpoint) != nil:
		return checkSeconds("checkpoint interval", o.Checkpoint)
	case o.ReportsPerRun < 1 || o.ReportsPerRun > maxReportsPerRun:
		return fmt.Errorf("reportsPerRun %d must be in [1, %d]", o.ReportsPerRun, maxReportsPerRun)
	case !(o.OracleMinImprovement >= 0 && o.OracleMinImprovement < 1):
		return fmt.Errorf("oracle min-improvement %v must be in [0, 1)", o.OracleMinImprovement)
	case !(o.ReportMin >= minInterval) || !(o.ReportMax >= o.ReportMin) || o.ReportMax > MaxSeconds:
		return fmt.Errorf("report interval bounds: need %d s <= min %v <= max %v <= %d s", minInterval, o.ReportMin, o.ReportMax, MaxSeconds)
	}
	return nil
}

// stats are a run's counters.
type stats struct {
	events, staleEvents   int
	forecasts, decisions  int
	oracleForecasts       int
	reports               int
	passes                int
	admissions, evictions int
	decisionsBy           [nTickReasons]int
}

type engine struct {
	opt      Options
	polName  string
	in       *Input
	jobs     []*jobState
	cl       *cluster
	q        eventQueue
	now      float64
	pol      policy
	stats    stats
	dirty    bool
	deferred []*jobState // victims evicted during a pass, requeued after it

	pending, running, gpus int
	done                   int
	// watched: jobs of StopOnceAdmitted; watchLeft of them not yet
	// admitted.
	watched   []bool
	watchLeft int
	series    rawSeries
	records   []Record
}

// Run simulates one policy on in.
func Run(in *Input, policyName string, opt Options) (*Result, error) {
	if err := opt.Validate(); err != nil {
		return nil, err
	}
	pol, err := newPolicy(policyName, &opt)
	if err != nil {
		return nil, err
	}
	e, err := newEngine(in, opt, pol, policyName)
	if err != nil {
		return nil, err
	}
	start := time.Now()
	e.loop()
	wall := time.Since(start).Seconds()
	return e.result(policyName, wall), nil
}

// newEngine sets up the cluster and the jobs of in, every job's arrival
// queued. Jobs keep a forecast history under the planner policy only (the
// oracle reads the ground truth).
func newEngine(in *Input, opt Options, pol policy, policyName string) (*engine, error) {
	cl, err := newCluster(in.Queues)
	if err != nil {
		return nil, err
	}
	e := &engine{opt: opt, in: in, cl: cl, pol: pol, polName: policyName}
	e.q = make(eventQueue, 0, len(in.Jobs)+64)
	work := 0.0
	for i, j := range in.Jobs {
		if j.ID != i {
			return nil, fmt.Errorf("job %q: id %d, want its index %d", j.Name, j.ID, i)
		}
		if err := j.validate(); err != nil {
			return nil, err
		}
		q := cl.byName[j.Queue]
		if q == nil {
			return nil, fmt.Errorf("job %q: unknown queue %q", j.Name, j.Queue)
		}
		s := newJobState(j)
		s.queue = q
		s.reportEvery = math.Min(opt.ReportMax, math.Max(opt.ReportMin, j.Duration/float64(opt.ReportsPerRun)))
		if policyName == PolicyPlanner {
			lim := opt.History
			lim.KeepMetrics = []string{j.Curve.Objective.Metric}
			s.hist = progress.NewHistory(lim)
			s.totalSteps = strconv.FormatFloat(j.TotalSteps, 'f', 0, 64)
			e.seedHistory(s)
		}
		e.jobs = append(e.jobs, s)
		e.q.push(event{t: j.Arrival, kind: evArrival, job: int32(i)})
		// Each limit alone allows a run of 10^6 ten-year jobs reporting
		// every second: bound the work itself (reports and forecast ticks
		// over each job's run, without the reruns evictions cause).
		work += j.Duration/s.reportEvery + j.Duration/float64(opt.Cadence.Min)
	}
	e.watch(opt.StopOnceAdmitted)
	if work > maxRunEvents {
		return nil, fmt.Errorf("the jobs would send about %.3g reports and forecasts (at most %g): replay fewer jobs (--limit) or report and forecast less often (reports.min/max, cadence.min)", work, float64(maxRunEvents))
	}
	return e, nil
}

// watch marks the jobs named (StopOnceAdmitted).
func (e *engine) watch(names []string) {
	if len(names) == 0 {
		return
	}
	byName := make(map[string]int, len(e.jobs))
	for i, j := range e.jobs {
		byName[j.Name] = i
	}
	e.watched = make([]bool, len(e.jobs))
	for _, n := range names {
		if i, ok := byName[n]; ok && !e.watched[i] {
			e.watched[i] = true
			e.watchLeft++
		}
	}
	if e.watchLeft == 0 {
		e.watched = nil // none of them here: run to the end
	}
}

func (j *Job) validate() error {
	switch {
	case !(j.Duration > 0 && j.Duration <= MaxSeconds):
		return fmt.Errorf("job %q: duration %v must be in (0, %d] seconds", j.Name, j.Duration, MaxSeconds)
	case !(j.Done >= 0 && j.Done < j.Duration):
		return fmt.Errorf("job %q: done %v must be in [0, duration %v)", j.Name, j.Done, j.Duration)
	case j.GPUs < 1 || j.GPUs > MaxGPUs:
		return fmt.Errorf("job %q: gpus %d must be in [1, %d]", j.Name, j.GPUs, MaxGPUs)
	case !(j.Arrival >= 0 && j.Arrival <= MaxSeconds):
		return fmt.Errorf("job %q: arrival %v must be in [0, %d] seconds", j.Name, j.Arrival, MaxSeconds)
	case j.Curve == nil || len(j.Curve.X) == 0:
		return fmt.Errorf("job %q: no learning curve", j.Name)
	case !(j.TotalSteps >= 1):
		return fmt.Errorf("job %q: totalSteps %v must be at least 1", j.Name, j.TotalSteps)
	}
	return nil
}

func (e *engine) loop() {
	total := len(e.jobs)
	for len(e.q) > 0 {
		ev := e.q.pop()
		j := e.jobs[ev.job]
		switch {
		case ev.kind == evFinish && (ev.gen != j.gen || j.state != phaseRunning),
			ev.kind == evTick && (ev.gen != j.tickGen || j.state != phaseRunning):
			e.stats.staleEvents++
		case ev.kind == evFinish:
			e.now = ev.t
			e.finish(j)
			e.stats.events++
		case ev.kind == evArrival:
			e.now = ev.t
			if h, ok := e.pol.(arrivalHook); ok {
				h.arrived(e, j)
			}
			j.state = phasePending
			j.queue.addPending(j)
			e.pending++
			e.dirty = true
			e.stats.events++
		default:
			e.now = ev.t
			e.scheduleTick(j, e.pol.tick(e, j))
			e.stats.events++
		}
		if len(e.q) == 0 || e.q.peek().t > e.now {
			for e.dirty {
				e.dirty = false
				e.pass()
			}
			e.series.add(e.now, e.pending, e.gpus)
			if e.watched != nil && e.watchLeft == 0 {
				break // StopOnceAdmitted: every watched job is admitted
			}
		}
		if e.opt.Progress != nil && e.stats.events&0xfff == 0 {
			e.opt.Progress(e.polName, e.done, total)
		}
	}
	if e.opt.Progress != nil {
		e.opt.Progress(e.polName, e.done, total)
	}
}

// pass runs one scheduling pass, then requeues its victims.
func (e *engine) pass() {
	e.stats.passes++
	e.cl.schedule(e.admit, e.evict)
	for _, v := range e.deferred {
		v.queue.addPending(v)
		e.dirty = true
	}
	e.deferred = e.deferred[:0]
}

func (e *engine) scheduleTick(j *jobState, t float64) {
	j.tickGen++
	if math.IsInf(t, 1) || math.IsNaN(t) {
		return
	}
	e.q.push(event{t: math.Max(t, e.now), kind: evTick, job: int32(j.ID), gen: j.tickGen})
}

func (e *engine) record(typ string, j *jobState, by *jobState) {
	if !e.opt.RecordEvents {
		return
	}
	r := Record{T: e.now, Type: typ, Job: j.Name, Queue: j.Queue, Priority: j.effective()}
	if by != nil {
		r.By = by.Name
	}
	e.records = append(e.records, r)
}

// admit starts j (already removed from its queue's pending list).
func (e *engine) admit(j *jobState) {
	e.stats.admissions++
	j.state = phaseRunning
	j.admitAt = e.now
	if math.IsNaN(j.firstAdmit) {
		j.firstAdmit = e.now
		if e.watched != nil && e.watched[j.ID] {
			e.watchLeft--
		}
	}
	j.queue.addRunning(j)
	e.pending--
	e.running++
	e.gpus += j.GPUs
	j.gen++
	e.q.push(event{t: e.now + (j.Duration - j.work), kind: evFinish, job: int32(j.ID), gen: j.gen})
	j.nextReport = e.now + j.reportEvery
	if first := j.firstEvalWork(); j.work < first && first-j.work < j.reportEvery {
		// A reporter reports when it logs: the job's first evaluation is
		// reported when it is made, not at the next report interval (the
		// gain a plateau is measured against starts there).
		j.nextReport = e.now + (first - j.work)
	}
	if j.hist != nil {
		j.hist.Resume() // readmitted: as the controller tells the history
	}
	e.record("admit", j, nil)
	e.scheduleTick(j, e.pol.admitted(e, j))
}

// stopRunning ends j's current admission at e.now.
func (e *engine) stopRunning(j *jobState) {
	j.account(e.now)
	j.queue.removeRunning(j)
	e.running--
	e.gpus -= j.GPUs
	j.gen++
	j.tickGen++
	e.dirty = true
}

func (e *engine) finish(j *jobState) {
	e.stopRunning(j)
	j.work = j.Duration
	j.state, j.end, j.endKind = phaseDone, e.now, endCompleted
	e.done++
	e.record("finish", j, nil)
}

// evict preempts v for by (evictionRule): v loses its work since its last
// checkpoint and is requeued once the pass is over.
func (e *engine) evict(v, by *jobState) {
	e.stats.evictions++
	e.feedReports(v, e.now)
	w := v.workAt(e.now)
	saved := v.checkpointed(e.now, v.checkpointEvery(e.opt.Checkpoint))
	progress := w / v.Duration
	e.stopRunning(v)
	v.lostGPUSec += float64(v.GPUs) * (w - saved)
	v.work = saved
	v.preempted++
	if progress >= 0.9 {
		v.preempted90++
	}
	v.evictions++
	v.state = phasePending
	e.pending++
	e.record("preempt", v, by)
	e.deferred = append(e.deferred, v)
	e.pol.evicted(e, v, v.boost < 0)
}

func (j *Job) checkpointEvery(def float64) float64 {
	if j.Checkpoint > 0 {
		return j.Checkpoint
	}
	return def
}

// deactivate stops the running job j (the policy's Deactivate action):
// its GPUs are freed and the rest of its planned run is saved.
func (e *engine) deactivate(j *jobState, estimatedHours float64) {
	if j.state != phaseRunning {
		return
	}
	w := j.workAt(e.now)
	e.stopRunning(j)
	j.savedGPUSec = float64(j.GPUs) * (j.Duration - w)
	j.estSavedHours = estimatedHours
	j.stopRemaining = j.Curve.RelRemaining(w / j.Duration)
	if onset := j.PlateauWork(); w < onset {
		j.earlyCutGPUSec = float64(j.GPUs) * (onset - w)
	}
	j.work = w
	j.state, j.end, j.endKind = phaseDone, e.now, endDeactivated
	e.done++
	e.record("deactivate", j, nil)
}

// setBoost applies a boost; a changed effective priority may let pending
// work preempt, so it triggers a scheduling pass.
func (e *engine) setBoost(j *jobState, b int32) {
	if j.boost == b {
		return
	}
	if j.state == phasePending && !e.isDeferred(j) {
		j.queue.removePending(j)
		j.boost = b
		j.queue.addPending(j)
	} else {
		j.boost = b
	}
	j.queue.minRunDirty = true
	e.dirty = true
}

func (e *engine) isDeferred(j *jobState) bool {
	for _, d := range e.deferred {
		if d == j {
			return true
		}
	}
	return false
}

// feedReports sends j's reports up to t into its history (planner only):
// one every reportEvery seconds of its current admission, carrying the
// step counter, the total, the reporter's percentage and ETA and the
// latest objective value of its curve.
func (e *engine) feedReports(j *jobState, t float64) {
	if j.hist == nil || j.state != phaseRunning {
		return
	}
	for ; j.nextReport <= t; j.nextReport += j.reportEvery {
		e.report(j, j.nextReport, math.Min(j.Duration, j.work+(j.nextReport-j.admitAt)))
	}
}

// seedHistory gives a job that had run before the simulation (Job.Done)
// the reports of that run, at its report interval, ending just before its
// arrival: the history the controller held at the snapshot.
func (e *engine) seedHistory(j *jobState) {
	if !(j.Done > 0) {
		return
	}
	start := j.Arrival - j.Done
	for w := math.Min(j.reportEvery, j.Done); w <= j.Done; w += j.reportEvery {
		e.report(j, start+w, w)
	}
}

// report is the job's report at time t, having run w: progress, ETA and
// step from w, the objective from its curve.
func (e *engine) report(j *jobState, t, w float64) {
	x := w / j.Duration
	pct := math.Min(math.Floor(x*100), 99)
	eta := math.Round(j.Duration - w)
	st := progress.TrainerStatus{ProgressPercentage: &pct, EstimatedRemainingSeconds: &eta}
	ms := make([]progress.MetricValue, 0, 3)
	if v, ok := j.Curve.At(x); ok {
		ms = append(ms, progress.MetricValue{Name: j.Curve.Objective.Metric, Value: synth.FormatValue(v)})
	}
	ms = append(ms,
		progress.MetricValue{Name: "current_step", Value: strconv.FormatFloat(math.Floor(x*j.TotalSteps), 'f', 0, 64)},
		progress.MetricValue{Name: "total_steps", Value: j.totalSteps})
	st.Metrics = ms
	j.hist.Observe(t, st)
	e.stats.reports++
}
