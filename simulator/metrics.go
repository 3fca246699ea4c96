package simulator

import (
	"encoding/json"
	"math"
	"sort"

	orderstats "github.com/progress-planner/planner/internal/stats"
)

// Summary is one policy's outcome. GPU-hours are GPUs × hours; times are
// hours.
type Summary struct {
	Policy string `json:"policy"`
	Jobs   int    `json:"jobs"`
	// Completed ran their planned budget; Deactivated were stopped by the
	// policy's Deactivate; Unfinished never finished (never fit).
	Completed   int `json:"completed"`
	Deactivated int `json:"deactivated"`
	Unfinished  int `json:"unfinished"`
	// PlateauGPUHours: GPU time spent while a job's progress was past its
	// (true) plateau onset, re-runs of lost work included.
	PlateauGPUHours float64 `json:"plateauGPUHours"`
	// LostGPUHours: work thrown away by evictions (since the victim's last
	// checkpoint).
	LostGPUHours float64 `json:"lostGPUHours"`
	// UsedGPUHours: all GPU time admitted jobs held.
	UsedGPUHours float64 `json:"usedGPUHours"`
	// SavedGPUHours: the planned run time Deactivate took away (truth);
	// EstimatedSavedGPUHours: the policy's own estimate at the time.
	SavedGPUHours          float64 `json:"savedGPUHours"`
	EstimatedSavedGPUHours float64 `json:"estimatedSavedGPUHours"`
	// EarlyStops are Deactivates before the job's true plateau onset (the
	// job had not finished learning); EarlyStopGPUHours is the pre-plateau
	// work they cut off (a quality loss, not a saving).
	EarlyStops        int     `json:"earlyStops"`
	EarlyStopGPUHours float64 `json:"earlyStopGPUHours"`
	// Preemptions in total and of jobs past 90 % progress at the time.
	Preemptions       int `json:"preemptions"`
	PreemptionsPast90 int `json:"preemptionsPast90"`
	// JCT (arrival to end) and queueing delay (arrival to first
	// admission), over the jobs that finished (completed or deactivated).
	JCT      Dist `json:"jctHours"`
	Queueing Dist `json:"queueingHours"`
	// Utilization: GPU time used over capacity × (first arrival .. last
	// end).
	Utilization float64 `json:"utilization"`
	Makespan    float64 `json:"makespanHours"`
	// Cost of the run.
	Events    int `json:"events"`
	Reports   int `json:"reports"`
	Forecasts int `json:"forecasts"`
	Decisions int `json:"decisions"`
	// DecisionsBy counts decisions by what triggered them: first (after an
	// admission), cadence, deadline (dwell, grace period, lease, cooldown),
	// truth (oracle: onset or near-done), eviction.
	DecisionsBy        map[string]int `json:"decisionsBy,omitempty"`
	Passes             int            `json:"schedulingPasses"`
	WallSeconds        float64        `json:"wallSeconds"`
	EventsPerSecond    float64        `json:"eventsPerSecond"`
	ForecastsPerSecond float64        `json:"forecastsPerSecond"`
}

// Dist is a mean, median and 95th percentile.
type Dist struct {
	Mean   float64 `json:"mean"`
	Median float64 `json:"median"`
	P95    float64 `json:"p95"`
}

func distOf(xs []float64) Dist {
	if len(xs) == 0 {
		return Dist{}
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	sum := 0.0
	for _, x := range s {
		sum += x
	}
	return Dist{Mean: sum / float64(len(s)), Median: orderstats.Quantile(s, 0.5), P95: orderstats.Quantile(s, 0.95)}
}

// JobOutcome is one job's fate in a run.
type JobOutcome struct {
	Name        string  `json:"name"`
	Queue       string  `json:"queue"`
	Arrival     float64 `json:"arrival"`
	FirstAdmit  float64 `json:"firstAdmit"` // NaN: never admitted
	End         float64 `json:"end"`        // NaN: never finished
	Outcome     string  `json:"outcome"`    // completed, deactivated, unfinished
	Preemptions int     `json:"preemptions"`
	Past90      int     `json:"preemptionsPast90"`
	// GPU-seconds.
	PostPlateau float64 `json:"postPlateauGPUSeconds"`
	Lost        float64 `json:"lostGPUSeconds"`
	Used        float64 `json:"usedGPUSeconds"`
	FinalBoost  int32   `json:"finalBoost"`
	// Reason is the policy's last decision's reason (planner, oracle):
	// for a deactivated job, why it was stopped.
	Reason string `json:"reason,omitempty"`
	// StopRemaining: for a deactivated job, the true improvement still to
	// come over the improvement made, when it was stopped.
	StopRemaining float64 `json:"-"`
	Curve         string  `json:"-"`
	Progress      float64 `json:"-"` // progress at the end
	Onset         float64 `json:"-"`
}

// Result is one policy's run.
type Result struct {
	Summary Summary      `json:"summary"`
	Series  Series       `json:"series"`
	Records []Record     `json:"events,omitempty"`
	Jobs    []JobOutcome `json:"-"`
}

// rawSeries is the step function of queue length and GPUs in use.
type rawSeries struct {
	t             []float64
	pending, gpus []int32
}

func (s *rawSeries) add(t float64, pending, gpus int) {
	n := len(s.t)
	if n > 0 && s.t[n-1] == t {
		s.pending[n-1], s.gpus[n-1] = int32(pending), int32(gpus)
		return
	}
	if n > 0 && s.pending[n-1] == int32(pending) && s.gpus[n-1] == int32(gpus) {
		return
	}
	s.t = append(s.t, t)
	s.pending = append(s.pending, int32(pending))
	s.gpus = append(s.gpus, int32(gpus))
}

// Series is the time-weighted average queue length (pending workloads) and
// GPUs in use over equal time bins.
type Series struct {
	Hours   []float64 `json:"hours"` // bin starts, hours since the first arrival
	Pending []float64 `json:"pending"`
	GPUs    []float64 `json:"gpus"`
}

func (s *rawSeries) resample(t0, t1 float64, bins int) Series {
	var out Series
	if len(s.t) == 0 || !(t1 > t0) || bins < 1 {
		return out
	}
	w := (t1 - t0) / float64(bins)
	out.Hours = make([]float64, bins)
	out.Pending = make([]float64, bins)
	out.GPUs = make([]float64, bins)
	for b := range bins {
		out.Hours[b] = float64(b) * w / 3600
	}
	for i := range s.t {
		a := math.Max(s.t[i], t0)
		z := t1
		if i+1 < len(s.t) {
			z = math.Min(s.t[i+1], t1)
		}
		for a < z {
			b := min(bins-1, int((a-t0)/w))
			if b < bins-1 && t0+float64(b+1)*w <= a { // rounding at a bin edge
				b++
			}
			end := z
			if b < bins-1 {
				end = math.Min(z, t0+float64(b+1)*w)
			}
			f := (end - a) / w
			out.Pending[b] += f * float64(s.pending[i])
			out.GPUs[b] += f * float64(s.gpus[i])
			a = end
		}
	}
	return out
}

func (e *engine) result(policy string, wall float64) *Result {
	s := Summary{Policy: policy, Jobs: len(e.jobs)}
	var jct, queueing []float64
	t0, t1 := math.Inf(1), math.Inf(-1)
	res := &Result{Jobs: make([]JobOutcome, len(e.jobs))}
	for i, j := range e.jobs {
		t0 = math.Min(t0, j.Arrival)
		switch j.endKind {
		case endCompleted:
			s.Completed++
		case endDeactivated:
			s.Deactivated++
		default:
			s.Unfinished++
		}
		if j.endKind != endNone {
			t1 = math.Max(t1, j.end)
			jct = append(jct, (j.end-j.Arrival)/3600)
			queueing = append(queueing, (j.firstAdmit-j.Arrival)/3600)
		}
		s.PlateauGPUHours += j.postPlateau / 3600
		s.LostGPUHours += j.lostGPUSec / 3600
		s.UsedGPUHours += j.usedGPUSec / 3600
		s.SavedGPUHours += j.savedGPUSec / 3600
		s.EstimatedSavedGPUHours += j.estSavedHours
		if j.earlyCutGPUSec > 0 {
			s.EarlyStops++
			s.EarlyStopGPUHours += j.earlyCutGPUSec / 3600
		}
		s.Preemptions += j.preempted
		s.PreemptionsPast90 += j.preempted90
		res.Jobs[i] = JobOutcome{
			Name: j.Name, Queue: j.Queue, Arrival: j.Arrival, FirstAdmit: j.firstAdmit, End: j.end,
			Outcome: j.endKind.String(), Preemptions: j.preempted, Past90: j.preempted90,
			PostPlateau: j.postPlateau, Lost: j.lostGPUSec, Used: j.usedGPUSec, FinalBoost: j.boost, Reason: j.decision.Reason,
			StopRemaining: j.stopRemaining, Curve: j.CurveName, Progress: j.work / j.Duration, Onset: j.Curve.Onset,
		}
	}
	s.JCT, s.Queueing = distOf(jct), distOf(queueing)
	if t1 > t0 {
		s.Makespan = (t1 - t0) / 3600
		if c := e.in.Capacity(); c > 0 {
			s.Utilization = s.UsedGPUHours / (float64(c) * s.Makespan)
		}
	}
	st := e.stats
	s.Events, s.Reports, s.Forecasts, s.Decisions, s.Passes = st.events, st.reports, st.forecasts, st.decisions, st.passes
	for i, n := range st.decisionsBy {
		if n > 0 {
			if s.DecisionsBy == nil {
				s.DecisionsBy = map[string]int{}
			}
			s.DecisionsBy[tickReasonNames[i]] = n
		}
	}
	s.WallSeconds = wall
	if wall > 0 {
		s.EventsPerSecond = float64(st.events) / wall
		s.ForecastsPerSecond = float64(st.forecasts) / wall
	}
	res.Summary = s
	if t1 > t0 {
		res.Series = e.series.resample(t0, t1, e.opt.SeriesPoints)
	}
	res.Records = e.records
	return res
}

// Delta compares one policy with a reference.
type Delta struct {
	Policy    string `json:"policy"`
	Reference string `json:"reference"`
	// Differences policy − reference, and relative differences (NaN when
	// the reference is 0).
	PlateauGPUHours   float64 `json:"plateauGPUHours"`
	PlateauPct        Float   `json:"plateauGPUHoursPct"`
	LostGPUHours      float64 `json:"lostGPUHours"`
	Preemptions       int     `json:"preemptions"`
	PreemptionsPast90 int     `json:"preemptionsPast90"`
	MeanJCT           float64 `json:"meanJCTHours"`
	MeanJCTPct        Float   `json:"meanJCTPct"`
	MedianJCT         float64 `json:"medianJCTHours"`
	P95JCT            float64 `json:"p95JCTHours"`
	MeanQueueing      float64 `json:"meanQueueingHours"`
	Utilization       float64 `json:"utilization"`
	UsedGPUHours      float64 `json:"usedGPUHours"`
}

func delta(p, ref Summary) Delta {
	return Delta{
		Policy: p.Policy, Reference: ref.Policy,
		PlateauGPUHours: p.PlateauGPUHours - ref.PlateauGPUHours, PlateauPct: Float(pct(p.PlateauGPUHours, ref.PlateauGPUHours)),
		LostGPUHours: p.LostGPUHours - ref.LostGPUHours,
		Preemptions:  p.Preemptions - ref.Preemptions, PreemptionsPast90: p.PreemptionsPast90 - ref.PreemptionsPast90,
		MeanJCT: p.JCT.Mean - ref.JCT.Mean, MeanJCTPct: Float(pct(p.JCT.Mean, ref.JCT.Mean)),
		MedianJCT: p.JCT.Median - ref.JCT.Median, P95JCT: p.JCT.P95 - ref.JCT.P95,
		MeanQueueing: p.Queueing.Mean - ref.Queueing.Mean,
		Utilization:  p.Utilization - ref.Utilization, UsedGPUHours: p.UsedGPUHours - ref.UsedGPUHours,
	}
}

func pct(x, ref float64) float64 {
	if ref == 0 {
		return math.NaN()
	}
	return 100 * (x - ref) / ref
}

// Check is one of the acceptance targets evaluated on a comparison
// (planner against kueue and oracle).
type Check struct {
	Name   string `json:"name"`
	Target string `json:"target"`
	Value  Float  `json:"value"`
	Met    bool   `json:"met"`
}

// checks evaluates the targets when planner, kueue and oracle all ran.
func checks(byName map[string]Summary) []Check {
	p, okP := byName[PolicyPlanner]
	k, okK := byName[PolicyKueue]
	if !okP || !okK {
		return nil
	}
	var out []Check
	red := -pct(p.PlateauGPUHours, k.PlateauGPUHours)
	out = append(out, Check{Name: "plateau GPU-hours, planner vs kueue", Target: ">= 30% fewer", Value: Float(red), Met: red >= 30})
	out = append(out, Check{Name: "mean JCT, planner vs kueue", Target: "no worse (<= 0%)", Value: Float(pct(p.JCT.Mean, k.JCT.Mean)), Met: p.JCT.Mean <= k.JCT.Mean})
	out = append(out, Check{Name: "preemptions of jobs past 90% progress, planner", Target: "0", Value: Float(p.PreemptionsPast90), Met: p.PreemptionsPast90 == 0})
	if o, ok := byName[PolicyOracle]; ok {
		rel := pct(p.PlateauGPUHours, o.PlateauGPUHours)
		out = append(out, Check{Name: "plateau GPU-hours, planner vs oracle", Target: "within 10% of oracle", Value: Float(rel), Met: math.Abs(rel) <= 10})
		share := math.NaN()
		if k.PlateauGPUHours != o.PlateauGPUHours {
			share = 100 * (k.PlateauGPUHours - p.PlateauGPUHours) / (k.PlateauGPUHours - o.PlateauGPUHours)
		}
		out = append(out, Check{Name: "share of oracle's plateau saving (vs kueue) the planner achieves", Target: ">= 90% (a reading of 'within 10% of oracle')", Value: Float(share), Met: share >= 90})
	}
	return out
}

// Float is a float64 that marshals NaN and ±Inf as null (encoding/json
// refuses them).
type Float float64

// MarshalJSON writes a non-finite value as null.
func (f Float) MarshalJSON() ([]byte, error) {
	if math.IsNaN(float64(f)) || math.IsInf(float64(f), 0) {
		return []byte("null"), nil
	}
	return json.Marshal(float64(f))
}
