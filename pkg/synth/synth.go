// Package synth generates deterministic, clearly labelled synthetic progress
// histories in the history-file format (see progress.ReadHistoryFile and
// the corpus README): a training curve sampled at natural log points, sent
// through an emulation of the Kubeflow progress reporter (metric cache,
// 5-second throttle, progressPercentage and estimatedRemainingSeconds
// computed from the step counter), optionally turned into one of the
// labelled incident kinds (hang, divergence, plateau extension,
// preempt-and-resume).
//
// Everything is a pure function of the Spec: the same Spec always yields
// byte-identical files (the random draws come from a generator defined in
// this package, not from math/rand).
package synth

import (
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strconv"

	"github.com/progress-planner/planner/pkg/progress"
)

// Dataset is the source.dataset of every generated history.
const Dataset = "synthetic"

// Curve families (step s >= 0; every family starts at C+A and decreases
// towards C).
const (
	// FamilyInversePower: C + A / (1 + R s)^Alpha.
	FamilyInversePower = "inverse-power"
	// FamilyPowerLaw: C + A (1 + s)^-Alpha (R unused).
	FamilyPowerLaw = "power-law"
	// FamilyExponential: C + A exp(-R s). Converges early: a clear plateau.
	FamilyExponential = "exponential"
	// FamilyOptimus: C + 1 / (R s + 1/A).
	FamilyOptimus = "optimus"
)

// Incident types (the corpus README, section 4).
const (
	IncidentHang             = "hang"
	IncidentDivergence       = "divergence"
	IncidentPlateauExtension = "plateau_extension"
	IncidentPreemptResume    = "preempt_resume"
)

// Curve is the noiseless loss as a function of the step.
type Curve struct {
	Family string  `json:"family"`
	C      float64 `json:"c"`
	A      float64 `json:"a"`
	R      float64 `json:"r,omitempty"`
	Alpha  float64 `json:"alpha,omitempty"`
}

// Value is the noiseless curve at step s.
func (c Curve) Value(s float64) float64 {
	switch c.Family {
	case FamilyPowerLaw:
		return c.C + c.A*math.Pow(1+s, -c.Alpha)
	case FamilyExponential:
		return c.C + c.A*math.Exp(-c.R*s)
	case FamilyOptimus:
		return c.C + 1/(c.R*s+1/c.A)
	default: // FamilyInversePower
		return c.C + c.A/math.Pow(1+c.R*s, c.Alpha)
	}
}

// Spec describes one synthetic run. Zero values take the defaults noted.
type Spec struct {
	Name string `json:"name"`
	Seed uint64 `json:"seed"`
	// Curve drives both the training loss ("loss") and the objective
	// ("eval_loss" = curve + EvalOffset).
	Curve      Curve   `json:"curve"`
	TrainNoise float64 `json:"trainNoise,omitempty"` // sd of loss noise, fraction of Curve.A
	EvalNoise  float64 `json:"evalNoise,omitempty"`  // sd of eval_loss noise, fraction of Curve.A
	EvalOffset float64 `json:"evalOffset,omitempty"` // generalisation gap added to eval_loss
	// LearningRate, when > 0, adds a linearly decaying learning_rate metric.
	LearningRate float64 `json:"learningRate,omitempty"`

	TotalSteps  int     `json:"totalSteps"`
	StepSeconds float64 `json:"stepSeconds"` // step time at the start of the run
	// Slowdowns are run fractions (of TotalSteps) at which the step time is
	// multiplied by SlowdownFactor (default 2), e.g. a batch-size schedule
	// {1/3, 2/3}.
	Slowdowns      []float64 `json:"slowdowns,omitempty"`
	SlowdownFactor float64   `json:"slowdownFactor,omitempty"`
	// StepJitter is the relative sd of each log interval's duration.
	StepJitter float64 `json:"stepJitter,omitempty"`

	LogEvery    int  `json:"logEvery"`              // steps between training-log points
	EvalEvery   int  `json:"evalEvery"`             // steps between evaluations (a multiple of LogEvery)
	EvalAtStart bool `json:"evalAtStart,omitempty"` // an evaluation (and report) at step 0
	// StepsPerEpoch, when > 0, adds current_epoch.
	StepsPerEpoch int `json:"stepsPerEpoch,omitempty"`
	// MinReportInterval is the reporter's throttle (default 5 s).
	MinReportInterval float64 `json:"minReportInterval,omitempty"`

	// Target is the objective's quality target (header objective.target).
	Target *float64 `json:"target,omitempty"`
	// StopAtTarget ends the run at the first evaluation reaching Target
	// (status target_reached), like an MLPerf run.
	StopAtTarget bool `json:"stopAtTarget,omitempty"`
	// NoTotal: the job reports no fixed total (no total_steps, no
	// progressPercentage, no estimatedRemainingSeconds).
	NoTotal bool `json:"noTotal,omitempty"`
	// TruncateAt, in (0,1), stops the log at that fraction of TotalSteps
	// without a final report (status unknown, like a checkpoint snapshot).
	TruncateAt float64 `json:"truncateAt,omitempty"`
	GPUs       int     `json:"gpus,omitempty"`

	Incident *Incident `json:"incident,omitempty"`
}

// Incident turns the run described by the rest of the Spec into a derived
// incident history.
type Incident struct {
	Type string `json:"type"`
	// DerivedFrom is the name of the healthy run (header derivedFrom).
	DerivedFrom string `json:"derivedFrom"`
	// At is the run fraction (of the healthy duration) where it starts
	// (unused by plateau_extension, which starts at the original end).
	At float64 `json:"at,omitempty"`
	// hang: "stale" (heartbeats re-send the same values) or "silent".
	Variant     string  `json:"variant,omitempty"`
	HangSeconds float64 `json:"hangSeconds,omitempty"`
	// divergence: loss-like metrics grow up to GrowthFactor over ~15 % of
	// the remaining log points, then become "nan".
	GrowthFactor float64 `json:"growthFactor,omitempty"`
	// plateau_extension: the run goes on to ExtensionFactor × its duration
	// with flat metrics plus noise.
	ExtensionFactor float64 `json:"extensionFactor,omitempty"`
	// preempt_resume: the job is down for GapSeconds.
	GapSeconds float64 `json:"gapSeconds,omitempty"`
}

// metric names used by the generator
const (
	mLoss  = "loss"
	mEval  = "eval_loss"
	mLR    = "learning_rate"
	mStep  = "current_step"
	mTotal = "total_steps"
	mEpoch = "current_epoch"
)

// point is one natural log point of the emulated training loop.
type point struct {
	step float64
	t    float64
	vals []kv // metric updates logged at this point, in logging order
}

type kv struct {
	name string
	v    float64 // NaN is reported as "nan"
}

// Validate reports a Spec the generator cannot use.
func (s Spec) Validate() error {
	switch {
	case s.Name == "":
		return fmt.Errorf("synth: spec has no name")
	case s.TotalSteps <= 0:
		return fmt.Errorf("synth %s: totalSteps must be > 0", s.Name)
	case s.StepSeconds <= 0:
		return fmt.Errorf("synth %s: stepSeconds must be > 0", s.Name)
	case s.LogEvery <= 0 || s.EvalEvery <= 0 || s.EvalEvery%s.LogEvery != 0:
		return fmt.Errorf("synth %s: logEvery and evalEvery must be > 0, evalEvery a multiple of logEvery", s.Name)
	case s.Curve.A <= 0:
		return fmt.Errorf("synth %s: curve amplitude a must be > 0", s.Name)
	case s.StopAtTarget && s.Target == nil:
		return fmt.Errorf("synth %s: stopAtTarget needs a target", s.Name)
	case s.TruncateAt < 0 || s.TruncateAt >= 1:
		return fmt.Errorf("synth %s: truncateAt must be in [0,1)", s.Name)
	}
	if inc := s.Incident; inc != nil {
		if inc.DerivedFrom == "" {
			return fmt.Errorf("synth %s: incident.derivedFrom (the healthy run's name) is empty", s.Name)
		}
		if (inc.At <= 0 || inc.At >= 1) && inc.Type != IncidentPlateauExtension {
			return fmt.Errorf("synth %s: incident.at must be in (0,1)", s.Name)
		}
		switch inc.Type {
		case IncidentHang:
			if inc.Variant != "stale" && inc.Variant != "silent" {
				return fmt.Errorf("synth %s: hang variant must be stale or silent", s.Name)
			}
			if inc.HangSeconds <= 0 {
				return fmt.Errorf("synth %s: hangSeconds must be > 0", s.Name)
			}
		case IncidentDivergence:
			if inc.GrowthFactor <= 1 {
				return fmt.Errorf("synth %s: growthFactor must be > 1", s.Name)
			}
		case IncidentPlateauExtension:
			if inc.ExtensionFactor <= 1 {
				return fmt.Errorf("synth %s: extensionFactor must be > 1", s.Name)
			}
		case IncidentPreemptResume:
			if inc.GapSeconds <= 0 {
				return fmt.Errorf("synth %s: gapSeconds must be > 0", s.Name)
			}
		default:
			return fmt.Errorf("synth %s: unknown incident type %q", s.Name, inc.Type)
		}
		if s.StopAtTarget || s.TruncateAt > 0 {
			return fmt.Errorf("synth %s: incidents apply to runs that complete their budget", s.Name)
		}
	}
	return nil
}

func (s Spec) minInterval() float64 {
	if s.MinReportInterval > 0 {
		return s.MinReportInterval
	}
	return DefaultMinReportInterval
}

// DefaultMinReportInterval is the shared corpus reporter's report spacing
// in seconds (Spec.MinReportInterval when unset).
const DefaultMinReportInterval = 5

// Sends is the reporter's drop rule: a log point at t is sent when it is
// the first or the last, or at least minInterval after the previous sent
// report (at lastSent).
func Sends(t, lastSent, minInterval float64, first, last bool) bool {
	return first || last || t-lastSent >= minInterval
}

// ProgressETA is what the reporter derives from a position done of a
// planned total at time t: progress in whole percent, held at 99 until
// the last report of a run that ended its budget (100, ETA 0), and the
// ETA from the pace since origin (none before any progress).
func ProgressETA(t, origin, done, total float64, ended bool) (pct float64, eta *float64) {
	if ended {
		return 100, ptr(0)
	}
	pct = math.Min(math.Floor(done/total*100), 99)
	if done > 0 {
		eta = ptr(math.Round((t - origin) / done * (total - done)))
	}
	return pct, eta
}

func (s Spec) slowdownFactor() float64 {
	if s.SlowdownFactor > 0 {
		return s.SlowdownFactor
	}
	return 2
}

// stepTime is the duration of step i (0-based).
func (s Spec) stepTime(i int) float64 {
	d := s.StepSeconds
	for _, f := range s.Slowdowns {
		if float64(i) >= f*float64(s.TotalSteps) {
			d *= s.slowdownFactor()
		}
	}
	return d
}

func roundMS(t float64) float64 { return math.Round(t*1000) / 1000 }

// healthyPoints samples the run's natural log points. It returns the
// points, the status the run ends with and the planned total.
func (s Spec) healthyPoints(r *rng) (pts []point, status string) {
	status = "completed"
	last := s.TotalSteps
	if s.TruncateAt > 0 {
		last = int(math.Floor(s.TruncateAt*float64(s.TotalSteps)/float64(s.LogEvery))) * s.LogEvery
		if last < s.LogEvery {
			last = s.LogEvery
		}
		status = "unknown"
	}
	if s.EvalAtStart {
		pts = append(pts, point{step: 0, t: 0, vals: []kv{{mEval, s.evalValue(0, r)}}})
	}
	t := 0.0
	prev := 0
	for step := s.LogEvery; ; step += s.LogEvery {
		if step > last {
			step = last
		}
		dt := 0.0
		for i := prev; i < step; i++ {
			dt += s.stepTime(i)
		}
		if s.StepJitter > 0 {
			dt *= math.Max(0.2, 1+s.StepJitter*r.Norm())
		}
		t += dt
		prev = step
		p := point{step: float64(step), t: roundMS(t)}
		p.vals = append(p.vals, kv{mLoss, s.Curve.Value(float64(step)) + s.TrainNoise*s.Curve.A*r.Norm()})
		if s.LearningRate > 0 {
			p.vals = append(p.vals, kv{mLR, s.LearningRate * (1 - float64(step)/float64(s.TotalSteps))})
		}
		isEval := step%s.EvalEvery == 0 || step == last
		if isEval {
			ev := s.evalValue(float64(step), r)
			p.vals = append(p.vals, kv{mEval, ev})
			if s.StopAtTarget && ev <= *s.Target {
				pts = append(pts, p)
				return pts, "target_reached"
			}
		}
		pts = append(pts, p)
		if step >= last {
			break
		}
	}
	if s.StopAtTarget {
		status = "aborted" // budget exhausted without reaching the target
	}
	return pts, status
}

func (s Spec) evalValue(step float64, r *rng) float64 {
	return s.Curve.Value(step) + s.EvalOffset + s.EvalNoise*s.Curve.A*r.Norm()
}

// FormatValue renders a metric value as the shared corpus's reporter
// does ("%.6g", integers as integers, "nan"); hack/extcurves writes its
// recast logs and the simulator its jobs' reports with it too.
func FormatValue(v float64) string {
	if math.IsNaN(v) {
		return "nan"
	}
	if v == math.Trunc(v) && math.Abs(v) < 1e15 {
		return strconv.FormatInt(int64(v), 10)
	}
	return strconv.FormatFloat(v, 'g', 6, 64)
}

func ptr(v float64) *float64 { return &v }

// reporter emulates the Kubeflow progress callback: it caches the latest
// value of every metric, sends one candidate per log point, drops
// candidates less than minInterval after the previous sent report (except
// the first and the last), and derives progress and ETA from the step.
type reporter struct {
	spec     Spec
	total    float64 // planned total steps (extended for plateau_extension)
	complete bool    // the last point is the end of the budget: 100 % report
	// restartIdx/resumeT: the reporter restarts (empty cache, elapsed
	// counted from resumeT) before point restartIdx; -1 for none.
	restartIdx int
	resumeT    float64
}

func (rp reporter) run(pts []point) []reportRec {
	var out []reportRec
	var order []string
	cache := map[string]float64{}
	origin := 0.0
	lastSent := math.Inf(-1)
	minIv := rp.spec.minInterval()
	for k, p := range pts {
		if k == rp.restartIdx {
			out = append(out, reportRec{t: rp.resumeT, pct: ptr(0), resume: true})
			cache = map[string]float64{}
			order = nil
			origin = rp.resumeT
			lastSent = rp.resumeT
		}
		for _, u := range p.vals {
			if _, ok := cache[u.name]; !ok {
				order = append(order, u.name)
			}
			cache[u.name] = u.v
		}
		isLast := k == len(pts)-1
		if !Sends(p.t, lastSent, minIv, len(out) == 0, isLast) {
			continue
		}
		lastSent = p.t
		rec := reportRec{t: p.t, step: p.step}
		for _, n := range order {
			rec.metrics = append(rec.metrics, kv{n, cache[n]})
		}
		if !rp.spec.NoTotal {
			pct, eta := ProgressETA(p.t, origin, p.step, rp.total, isLast && rp.complete)
			rec.pct, rec.eta = &pct, eta
		}
		out = append(out, rec)
	}
	return out
}

// reportRec is a sent report before it is rendered.
type reportRec struct {
	t       float64
	step    float64
	pct     *float64
	eta     *float64
	metrics []kv
	resume  bool // the restarted reporter's train-begin report: no metrics
}

func (s Spec) render(rec reportRec, total float64) progress.FileReport {
	st := progress.TrainerStatus{ProgressPercentage: rec.pct, EstimatedRemainingSeconds: rec.eta}
	if rec.resume {
		return progress.FileReport{T: rec.t, TrainerStatus: st}
	}
	for _, m := range rec.metrics {
		st.Metrics = append(st.Metrics, progress.MetricValue{Name: m.name, Value: FormatValue(m.v)})
	}
	st.Metrics = append(st.Metrics, progress.MetricValue{Name: mStep, Value: FormatValue(rec.step)})
	if !s.NoTotal {
		st.Metrics = append(st.Metrics, progress.MetricValue{Name: mTotal, Value: FormatValue(total)})
	}
	if s.StepsPerEpoch > 0 {
		ep := math.Round(rec.step/float64(s.StepsPerEpoch)*1e4) / 1e4
		st.Metrics = append(st.Metrics, progress.MetricValue{Name: mEpoch, Value: FormatValue(ep)})
	}
	return progress.FileReport{T: rec.t, TrainerStatus: st}
}

// median of successive intervals of the sent reports.
func medianInterval(recs []reportRec) float64 {
	var d []float64
	for i := 1; i < len(recs); i++ {
		d = append(d, recs[i].t-recs[i-1].t)
	}
	if len(d) == 0 {
		return 0
	}
	sort.Float64s(d)
	if len(d)%2 == 1 {
		return d[len(d)/2]
	}
	return (d[len(d)/2-1] + d[len(d)/2]) / 2
}

// incidentStart is the index of the first sent report at or after the
// run fraction at, never the last one.
func incidentStart(recs []reportRec, at, end float64) int {
	for i, r := range recs {
		if r.t >= at*end && i < len(recs)-1 {
			return i
		}
	}
	return max(0, len(recs)-2)
}

func lossLike(name string) bool { return name == mLoss || name == mEval }

func rawJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // only plain values are marshalled here
	}
	return b
}
