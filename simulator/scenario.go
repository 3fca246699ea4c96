package simulator

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"sigs.k8s.io/yaml"

	orderstats "github.com/progress-planner/planner/internal/stats"
	"github.com/progress-planner/planner/pkg/preempt"
	"github.com/progress-planner/planner/pkg/progress"
)

// Scenario is a simulation set-up, read from YAML (ParseScenario). Its jobs
// come from one of: an explicit list (Jobs), a cluster trace (Trace), or
// the generator (Generate). Their curves come from recorded histories
// (Curves) or the built-in parametric families (Families).
type Scenario struct {
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	// Seed drives every draw (priorities, curves, generated jobs).
	Seed uint64 `json:"seed"`
	// Queues are the ClusterQueues. With a trace and no queues, one queue
	// per trace group (Philly virtual cluster, Alibaba QoS) is made, all in
	// one cohort (see TraceSource.ClusterGPUs).
	Queues []Queue `json:"queues,omitempty"`
	// LocalQueues record which LocalQueue fed which ClusterQueue in a
	// scenario read from a cluster (jobs name their ClusterQueue).
	LocalQueues []LocalQueue `json:"localQueues,omitempty"`
	// Priorities is the priority mix of generated and trace jobs (shares
	// are normalized). Empty: every job has priority 0.
	Priorities []PriorityClass `json:"priorities,omitempty"`
	// CheckpointInterval: running time between checkpoints (default 30m).
	CheckpointInterval *Seconds `json:"checkpointInterval,omitempty"`
	// Reports: how often jobs report (see Options).
	Reports *ReportSettings `json:"reports,omitempty"`
	// Cadence of forecasts (see Cadence).
	Cadence *Cadence `json:"cadence,omitempty"`
	// LAS thresholds (see LASConfig).
	LAS *LASConfig `json:"las,omitempty"`
	// Policy is the decision policy (preempt.ParsePolicy form; fields left
	// out keep their defaults).
	Policy json.RawMessage `json:"policy,omitempty"`
	// Deactivate: the what-if in which every queue opts in to Deactivate.
	Deactivate bool `json:"deactivate,omitempty"`

	Jobs []JobSpec `json:"jobs,omitempty"`
	// RunTimes are observed run times (recently finished jobs, from a
	// cluster snapshot): the empirical distribution a job whose run time
	// is unknown (JobSpec.UnknownDuration) draws from.
	RunTimes []Seconds `json:"runTimes,omitempty"`
	// RunSoFar are how long jobs that have not finished have run (right-
	// censored run times): with them the draw corrects for the long jobs
	// that are still running (a Kaplan–Meier estimate, stats.Survival).
	RunSoFar []Seconds `json:"runSoFar,omitempty"`
	// Recent (with explicit jobs: a cluster snapshot's) is a sample of
	// the arrival process that each seed draws the next arrivals from.
	Recent   *RecentArrivals `json:"recent,omitempty"`
	Trace    *TraceSource    `json:"trace,omitempty"`
	Generate *Generator      `json:"generate,omitempty"`
	// Curves, when set, gives trace and generated jobs recorded curves
	// (matched by duration class and time-scaled) instead of families.
	Curves   *CurveSource `json:"curves,omitempty"`
	Families *Families    `json:"families,omitempty"`

	// files, when set (KeepFiles), keeps the trace and curves Resolve
	// reads, for a sweep resolving one scenario under many seeds.
	files *fileCache
}

// PriorityClass is one class of the priority mix.
type PriorityClass struct {
	Name  string  `json:"name"`
	Value int32   `json:"value"`
	Share float64 `json:"share"`
}

// ReportSettings: a job reports every clamp(duration/perRun, min, max).
type ReportSettings struct {
	PerRun int     `json:"perRun"`
	Min    Seconds `json:"min"`
	Max    Seconds `json:"max"`
}

// JobSpec is an explicitly listed job.
type JobSpec struct {
	Name     string  `json:"name"`
	Queue    string  `json:"queue"`
	Arrival  Seconds `json:"arrival"`
	GPUs     int     `json:"gpus"`
	Priority int32   `json:"priority"`
	Duration Seconds `json:"duration"`
	// DurationLo and DurationHi, when set, are an 80 % interval of the run
	// time around Duration (a forecast's ETA interval, --from-cluster):
	// each seed then draws the run time from a log-normal with median
	// Duration and these 10 % / 90 % quantiles (split at the median, so
	// the interval may be lopsided). Unset: the run time is Duration.
	DurationLo Seconds `json:"durationLo,omitempty"`
	DurationHi Seconds `json:"durationHi,omitempty"`
	// UnknownDuration: nothing forecasts this job's run time (it has not
	// run, or reports no ETA); each seed draws it from the scenario's
	// RunTimes, Duration standing in when there are none.
	UnknownDuration bool `json:"unknownDuration,omitempty"`
	// RanFor: the job has already run this long. An unknown-duration
	// job draws its run time given that, and runs the rest (Duration then
	// is what remains); a job with a Curve starts at that point of it.
	RanFor Seconds `json:"ranFor,omitempty"`
	// Curve, when set, is the job's own learning curve over its whole
	// run, RanFor plus Duration (--from-cluster: its stored history, then
	// its forecast as the continuation). The job starts RanFor into it;
	// under the planner policy its history holds the curve's reports up
	// to there before its first admission, as the controller's did.
	Curve *CurveSpec `json:"curve,omitempty"`
	// TotalSteps defaults to 10000.
	TotalSteps float64 `json:"totalSteps,omitempty"`
	// CheckpointInterval overrides the scenario's for this job.
	CheckpointInterval Seconds `json:"checkpointInterval,omitempty"`
	// PlateauAt is the run fraction where the job's (exponential) curve
	// plateaus; 0 or >= 1: a curve that improves until the end.
	PlateauAt float64 `json:"plateauAt,omitempty"`
	// Boost, when set, is the priority boost the live planner had applied
	// at the snapshot (--from-cluster: a yield or a near-done protection).
	// The planner and oracle policies keep it for the whole run instead of
	// re-deciding the job: the simulation lacks the decision state (dwell,
	// hysteresis, grace) it rests on, even where it has the job's history
	// (Curve). Kueue alone and LAS ignore it.
	Boost *int32 `json:"boost,omitempty"`
}

// CurveSpec is a learning curve written in a scenario: the objective's
// values V at run fractions X (strictly increasing, in (0, 1]).
type CurveSpec struct {
	Objective progress.Objective `json:"objective"`
	X         []float64          `json:"x"`
	V         []float64          `json:"v"`
}

// maxCurvePoints bounds a written curve (a stored history holds at most
// progress.DefaultLimits' points, a few hundred).
const maxCurvePoints = 10_000

// check: an objective, matching finite columns within maxCurvePoints, X
// strictly increasing in (0, 1].
func (c *CurveSpec) check(where string) error {
	if err := c.Objective.Validate(); err != nil {
		return fmt.Errorf("%s.objective: %w", where, err)
	}
	if len(c.X) == 0 || len(c.X) != len(c.V) || len(c.X) > maxCurvePoints {
		return fmt.Errorf("%s: x and v need the same length, 1 to %d (have %d and %d)", where, maxCurvePoints, len(c.X), len(c.V))
	}
	prev := 0.0
	for i, x := range c.X {
		if !(x > prev && x <= 1) {
			return fmt.Errorf("%s.x[%d] %g: run fractions must increase strictly within (0, 1]", where, i, x)
		}
		if v := c.V[i]; math.IsNaN(v) || math.IsInf(v, 0) {
			return fmt.Errorf("%s.v[%d]: not a finite number", where, i)
		}
		prev = x
	}
	return nil
}

// curve is the simulator's curve of c (its truth from the values).
func (c *CurveSpec) curve(name string) *Curve {
	out := &Curve{Name: name, Objective: c.Objective, X: slices.Clone(c.X), V: slices.Clone(c.V)}
	out.Objective.Target = nil // a simulated job runs its planned duration
	out.finish(out.V)
	return out
}

// TraceSource names a cluster trace.
type TraceSource struct {
	Path   string `json:"path"`
	Format string `json:"format"`
	// Limit keeps the first Limit jobs (0: all).
	Limit int `json:"limit,omitempty"`
	// ClusterGPUs is the capacity when queues are made from the trace;
	// 0: the trace's mean GPU demand (GPU-hours over its span) divided by
	// TargetLoad.
	ClusterGPUs int     `json:"clusterGPUs,omitempty"`
	TargetLoad  float64 `json:"targetLoad,omitempty"`
	// SingleQueue puts every job into one ClusterQueue instead of one per
	// trace group.
	SingleQueue bool `json:"singleQueue,omitempty"`
}

// CurveSource is a directory of progress-history files.
type CurveSource struct {
	Dir string `json:"dir"`
}

// Generator draws jobs from distributions (the built-in scenario's are
// taken from the Philly-derived trace; see docs/simulator.md).
type Generator struct {
	Jobs int `json:"jobs"`
	// Load is the offered load: arrivals are Poisson at Load × capacity /
	// (mean GPUs × mean duration).
	Load float64 `json:"load"`
	// DurationQuantiles are (quantile, seconds) points of the run-time
	// distribution, interpolated log-linearly; MaxDuration truncates it.
	DurationQuantiles [][2]float64 `json:"durationQuantiles"`
	MaxDuration       Seconds      `json:"maxDuration,omitempty"`
	// GPUs is the job-size mix.
	GPUs []GPUShare `json:"gpus"`
}

// GPUShare is one job size of the mix.
type GPUShare struct {
	GPUs  int     `json:"gpus"`
	Share float64 `json:"share"`
}

// Seconds reads a number of seconds or a Go duration string ("90s",
// "1h30m", also "2d" for days) and writes a duration string.
type Seconds float64

// UnmarshalJSON accepts 3600, "3600", "1h" or "1.5d".
func (s *Seconds) UnmarshalJSON(b []byte) error {
	var f float64
	if err := json.Unmarshal(b, &f); err == nil {
		if err := checkSeconds("duration", f); err != nil {
			return err
		}
		*s = Seconds(f)
		return nil
	}
	var str string
	if err := json.Unmarshal(b, &str); err != nil {
		return fmt.Errorf("duration %s: want seconds or a string such as \"90s\", \"5m\", \"1h30m\", \"2d\"", b)
	}
	v, err := ParseSeconds(str)
	if err != nil {
		return err
	}
	*s = Seconds(v)
	return nil
}

// MarshalJSON writes a duration string.
func (s Seconds) MarshalJSON() ([]byte, error) { return json.Marshal(s.String()) }

func (s Seconds) String() string {
	d := time.Duration(float64(s) * float64(time.Second))
	str := d.String()
	if strings.HasSuffix(str, "m0s") {
		str = strings.TrimSuffix(str, "0s")
	}
	if strings.HasSuffix(str, "h0m") {
		str = strings.TrimSuffix(str, "0m")
	}
	return str
}

// ParseSeconds parses seconds ("3600"), a Go duration ("1h30m") or days
// ("2d", "1.5d"), at most MaxSeconds.
func ParseSeconds(str string) (float64, error) {
	str = strings.TrimSpace(str)
	v, err := parseSeconds(str)
	if err != nil {
		return 0, err
	}
	return v, checkSeconds(fmt.Sprintf("duration %q =", str), v)
}

func parseSeconds(str string) (float64, error) {
	if v, err := strconv.ParseFloat(str, 64); err == nil && v >= 0 && !math.IsInf(v, 0) {
		return v, nil
	}
	if d, ok := strings.CutSuffix(str, "d"); ok {
		if v, err := strconv.ParseFloat(d, 64); err == nil && v >= 0 && !math.IsInf(v, 0) {
			return v * 86400, nil
		}
	}
	d, err := time.ParseDuration(str)
	if err != nil || d < 0 {
		return 0, fmt.Errorf("duration %q: want seconds or a string such as \"90s\", \"5m\", \"1h30m\", \"2d\"", str)
	}
	return d.Seconds(), nil
}

//go:embed default.yaml
var defaultScenarioYAML []byte

// RecentArrivals are the jobs that arrived in the last Window. Each seed
// draws the arrivals of the Window after time 0 from them: a Poisson
// process at the observed rate (len(Jobs)/Window), each arrival a copy of
// a job drawn with replacement (its arrival time ignored). Replaying the
// one observed sequence in every seed left the arrivals' own chance out
// of the admission estimates' intervals (docs/simulator.md, "Admission
// estimates").
type RecentArrivals struct {
	Window Seconds   `json:"window"`
	Jobs   []JobSpec `json:"jobs"`
}

// DefaultScenario is the embedded built-in scenario (default.yaml), its
// description generated from its parameters (Describe).
func DefaultScenario() *Scenario {
	s, err := ParseScenario(defaultScenarioYAML)
	if err != nil {
		panic("simulator: embedded default.yaml: " + err.Error())
	}
	s.Description = s.Describe()
	return s
}

// DefaultScenarioYAML is the embedded scenario's text (what
// --print-default prints), with its description generated from its
// parameters: a hand-written one went stale when the parameters changed.
func DefaultScenarioYAML() []byte { return withDescription(defaultScenarioYAML, DefaultScenario()) }

// ParseScenario reads a YAML (or JSON) scenario; unknown fields are errors.
func ParseScenario(data []byte) (*Scenario, error) {
	var s Scenario
	if err := yaml.UnmarshalStrict(data, &s); err != nil {
		return nil, fmt.Errorf("scenario: %w", err)
	}
	if err := s.validate(); err != nil {
		return nil, err
	}
	return &s, nil
}

// LoadScenario reads a scenario file.
func LoadScenario(path string) (*Scenario, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	s, err := ParseScenario(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return s, nil
}

// validate runs scenarioChecks in order; the first problem is the error.
func (s *Scenario) validate() error {
	for _, check := range scenarioChecks {
		if err := check(s); err != nil {
			return err
		}
	}
	return nil
}

// scenarioChecks are validate's checks, in order: the one source of jobs
// first, then each part of the scenario as it appears in the file.
var scenarioChecks = [...]func(*Scenario) error{
	(*Scenario).checkSource,
	(*Scenario).checkJobs,
	(*Scenario).checkQueues,
	(*Scenario).checkPriorities,
	(*Scenario).checkFamilies,
	(*Scenario).checkGenerate,
	(*Scenario).checkTrace,
	(*Scenario).checkPolicy,
}

// checkSource: exactly one of jobs, trace and generate.
func (s *Scenario) checkSource() error {
	sources := 0
	if len(s.Jobs) > 0 || s.Recent != nil {
		sources++
	}
	if s.Trace != nil {
		sources++
	}
	if s.Generate != nil {
		sources++
	}
	if sources != 1 {
		return fmt.Errorf("scenario %q: give exactly one of jobs, trace, generate (got %d)", s.Name, sources)
	}
	return nil
}

// checkJobs: at most MaxJobs, each with GPUs, a total within
// maxTotalSteps and a finite, non-negative plateau fraction.
func (s *Scenario) checkJobs() error {
	if len(s.Jobs) > MaxJobs {
		return fmt.Errorf("scenario: %d jobs: at most %d", len(s.Jobs), MaxJobs)
	}
	for _, f := range []struct {
		name string
		l    []Seconds
	}{{"runTimes", s.RunTimes}, {"runSoFar", s.RunSoFar}} {
		name, l := f.name, f.l
		if len(l) > MaxJobs {
			return fmt.Errorf("scenario: %d %s: at most %d", len(l), name, MaxJobs)
		}
		for i, d := range l {
			if !(d >= 1 && d <= MaxSeconds) {
				return fmt.Errorf("scenario: %s[%d] %v: want 1 s to %d s", name, i, d, MaxSeconds)
			}
		}
	}
	for i, j := range s.Jobs {
		if err := j.check(fmt.Sprintf("scenario: jobs[%d]", i)); err != nil {
			return err
		}
	}
	if r := s.Recent; r != nil {
		if !(r.Window >= 1 && r.Window <= MaxSeconds) || len(r.Jobs) > MaxJobs {
			return fmt.Errorf("scenario: recent: window %v (1 s to %d s) with %d jobs (at most %d)", r.Window, MaxSeconds, len(r.Jobs), MaxJobs)
		}
		for i, j := range r.Jobs {
			if err := j.check(fmt.Sprintf("scenario: recent.jobs[%d]", i)); err != nil {
				return err
			}
		}
	}
	return nil
}

// check: GPUs, a total within maxTotalSteps, a finite, non-negative
// plateau fraction and a consistent run-time interval.
func (j JobSpec) check(where string) error {
	if err := checkGPUs(where+".gpus", j.GPUs, 1); err != nil {
		return err
	}
	if !(j.TotalSteps >= 0 && j.TotalSteps <= maxTotalSteps) {
		return fmt.Errorf("%s.totalSteps %g: must be in [0, %g]", where, j.TotalSteps, maxTotalSteps)
	}
	if !(j.PlateauAt >= 0) || math.IsInf(j.PlateauAt, 0) {
		return fmt.Errorf("%s.plateauAt %g: must be a finite run fraction >= 0", where, j.PlateauAt)
	}
	if j.UnknownDuration && j.DurationLo != 0 {
		return fmt.Errorf("%s: unknownDuration with a durationLo/durationHi interval", where)
	}
	if !(j.RanFor >= 0 && j.RanFor <= MaxSeconds) || (j.RanFor > 0 && !j.UnknownDuration && j.Curve == nil) {
		return fmt.Errorf("%s.ranFor %v: 0 to %d s, and only with unknownDuration or a curve", where, j.RanFor, MaxSeconds)
	}
	if c := j.Curve; c != nil {
		if j.UnknownDuration {
			return fmt.Errorf("%s: a curve needs a known duration (not unknownDuration)", where)
		}
		if float64(j.RanFor)+float64(max(j.Duration, j.DurationHi)) > MaxSeconds {
			return fmt.Errorf("%s: ranFor %v plus the run time left must be within %d s", where, j.RanFor, MaxSeconds)
		}
		if err := c.check(where + ".curve"); err != nil {
			return err
		}
	}
	if (j.DurationLo != 0 || j.DurationHi != 0) && !(j.DurationLo > 0 && j.DurationLo <= j.Duration && j.Duration <= j.DurationHi && j.DurationHi <= MaxSeconds) {
		return fmt.Errorf("%s: durationLo %v <= duration %v <= durationHi %v <= %d s, with durationLo > 0, or neither set", where, j.DurationLo, j.Duration, j.DurationHi, MaxSeconds)
	}
	return nil
}

// checkQueues: GPU counts and borrowing limits within range, at most
// MaxGPUs in all.
func (s *Scenario) checkQueues() error {
	capacity := 0
	for i, q := range s.Queues {
		if err := checkGPUs(fmt.Sprintf("scenario: queues[%d].gpus", i), q.GPUs, 0); err != nil {
			return err
		}
		if q.BorrowingLimit != nil {
			if err := checkGPUs(fmt.Sprintf("scenario: queues[%d].borrowingLimit", i), *q.BorrowingLimit, 0); err != nil {
				return err
			}
		}
		if capacity += q.GPUs; capacity > MaxGPUs {
			return fmt.Errorf("scenario: the queues hold %d GPUs or more: at most %d", capacity, MaxGPUs)
		}
	}
	return nil
}

// checkPriorities: finite, non-negative shares that add up to more than 0.
func (s *Scenario) checkPriorities() error {
	total := 0.0
	for i, p := range s.Priorities {
		if !(p.Share >= 0) || math.IsInf(p.Share, 0) {
			return fmt.Errorf("scenario: priorities[%d].share %g must be >= 0", i, p.Share)
		}
		total += p.Share
	}
	if len(s.Priorities) > 0 && !(total > 0) {
		return fmt.Errorf("scenario: the priority shares add up to 0")
	}
	return nil
}

// checkFamilies: the curve families, when given.
func (s *Scenario) checkFamilies() error {
	if s.Families == nil {
		return nil
	}
	return s.Families.validate()
}

// checkGenerate: a valid generator, which needs queues to fill.
func (s *Scenario) checkGenerate() error {
	g := s.Generate
	if g == nil {
		return nil
	}
	if err := g.validate(); err != nil {
		return err
	}
	if len(s.Queues) == 0 {
		return fmt.Errorf("scenario: generate needs queues")
	}
	return nil
}

// checkTrace: a path, a known format, a limit within MaxJobs, a cluster
// size within range and a target load in [0, 10].
func (s *Scenario) checkTrace() error {
	t := s.Trace
	if t == nil {
		return nil
	}
	if t.Path == "" {
		return fmt.Errorf("scenario: trace.path is empty")
	}
	if t.Format != FormatPhilly && t.Format != FormatAlibaba {
		return fmt.Errorf("scenario: trace.format %q: want %s or %s", t.Format, FormatPhilly, FormatAlibaba)
	}
	if t.Limit < 0 || t.Limit > MaxJobs {
		return fmt.Errorf("scenario: trace.limit %d: must be in [0, %d]", t.Limit, MaxJobs)
	}
	if err := checkGPUs("scenario: trace.clusterGPUs", t.ClusterGPUs, 0); err != nil {
		return err
	}
	if !(t.TargetLoad >= 0 && t.TargetLoad <= 10) {
		return fmt.Errorf("scenario: trace.targetLoad %g: must be in [0, 10]", t.TargetLoad)
	}
	return nil
}

// checkPolicy: the policy section, when given, parses and is valid.
func (s *Scenario) checkPolicy() error {
	if len(s.Policy) == 0 {
		return nil
	}
	if _, err := preempt.ParsePolicy(s.Policy); err != nil {
		return fmt.Errorf("scenario: %w", err)
	}
	return nil
}

func (g *Generator) validate() error {
	switch {
	case g.Jobs < 1 || g.Jobs > MaxJobs:
		return fmt.Errorf("generate.jobs %d must be in [1, %d]", g.Jobs, MaxJobs)
	case !(g.Load > 0) || g.Load > 100:
		return fmt.Errorf("generate.load %g must be in (0, 100]", g.Load)
	case len(g.DurationQuantiles) < 2:
		return fmt.Errorf("generate.durationQuantiles needs at least two points")
	case len(g.GPUs) == 0:
		return fmt.Errorf("generate.gpus is empty")
	}
	for i, p := range g.DurationQuantiles {
		if !(p[0] >= 0 && p[0] <= 1) || !(p[1] > 0 && p[1] <= MaxSeconds) {
			return fmt.Errorf("generate.durationQuantiles[%d] = %v: want [quantile in 0..1, seconds > 0]", i, p)
		}
		if i > 0 && (p[0] <= g.DurationQuantiles[i-1][0] || p[1] < g.DurationQuantiles[i-1][1]) {
			return fmt.Errorf("generate.durationQuantiles[%d]: quantiles and durations must increase", i)
		}
	}
	if q := g.DurationQuantiles; q[0][0] != 0 || q[len(q)-1][0] != 1 {
		return fmt.Errorf("generate.durationQuantiles must start at quantile 0 and end at 1")
	}
	total := 0.0
	for i, x := range g.GPUs {
		if x.GPUs < 1 || x.GPUs > MaxGPUs || !(x.Share >= 0) || math.IsInf(x.Share, 0) {
			return fmt.Errorf("generate.gpus[%d]: gpus must be in [1, %d] and share a finite number >= 0", i, MaxGPUs)
		}
		total += x.Share
	}
	if !(total > 0) {
		return fmt.Errorf("generate.gpus: the shares add up to 0")
	}
	return nil
}

// duration is the quantile function at u (log-linear interpolation),
// truncated at MaxDuration.
func (g *Generator) duration(u float64) float64 {
	q := g.DurationQuantiles
	i := sort.Search(len(q), func(i int) bool { return q[i][0] >= u })
	var d float64
	switch {
	case i == 0:
		d = q[0][1]
	case i >= len(q):
		d = q[len(q)-1][1]
	default:
		a, b := q[i-1], q[i]
		f := (u - a[0]) / (b[0] - a[0])
		d = math.Exp(math.Log(a[1]) + f*(math.Log(b[1])-math.Log(a[1])))
	}
	if g.MaxDuration > 0 {
		d = math.Min(d, float64(g.MaxDuration))
	}
	return math.Max(1, math.Round(d))
}

func (g *Generator) meanDuration() float64 {
	const n = 20000
	sum := 0.0
	for i := range n {
		sum += g.duration((float64(i) + 0.5) / n)
	}
	return sum / n
}

func (g *Generator) gpuDraw(u float64) int {
	total := 0.0
	for _, x := range g.GPUs {
		total += x.Share
	}
	acc := 0.0
	for _, x := range g.GPUs {
		acc += x.Share / total
		if u < acc {
			return x.GPUs
		}
	}
	return g.GPUs[len(g.GPUs)-1].GPUs
}

func (g *Generator) meanGPUs() float64 {
	total, sum := 0.0, 0.0
	for _, x := range g.GPUs {
		total += x.Share
		sum += x.Share * float64(x.GPUs)
	}
	return sum / total
}

// Options returns the run options the scenario sets on top of base.
func (s *Scenario) Options(base Options) (Options, error) {
	o := base
	if s.CheckpointInterval != nil {
		o.Checkpoint = float64(*s.CheckpointInterval)
	}
	if r := s.Reports; r != nil {
		o.ReportsPerRun, o.ReportMin, o.ReportMax = r.PerRun, float64(r.Min), float64(r.Max)
	}
	if s.Cadence != nil {
		o.Cadence = *s.Cadence
	}
	if s.LAS != nil {
		o.LAS = *s.LAS
	}
	if len(s.Policy) > 0 {
		p, err := preempt.ParsePolicy(s.Policy)
		if err != nil {
			return o, fmt.Errorf("scenario: %w", err)
		}
		o.Policy = p
	}
	o.Deactivate = o.Deactivate || s.Deactivate
	return o, o.Validate()
}

// Resolve builds the jobs and queues. Jobs are numbered in arrival order
// (ties: source order).
func (s *Scenario) Resolve() (*Input, error) {
	if err := s.validate(); err != nil { // again: the command line may have changed it since parsing
		return nil, err
	}
	in := &Input{Name: s.Name, Queues: append([]Queue(nil), s.Queues...)}
	fam := DefaultFamilies()
	if s.Families != nil {
		fam = *s.Families
	}
	var curves *CurveSet
	if s.Curves != nil && s.Curves.Dir != "" && len(s.Jobs) == 0 {
		var err error
		if curves, err = s.files.curves(s.Curves.Dir); err != nil {
			return nil, err
		}
		in.Notes = append(in.Notes, fmt.Sprintf("curves: %d recorded histories from %s by duration class %s: %s",
			curves.Count(), curves.Dir, strings.Join(DurationClassNames, " "), classCounts(curves)))
		// Sorted: the output is deterministic, map order is not.
		for _, reason := range slices.Sorted(maps.Keys(curves.Skipped)) {
			in.Notes = append(in.Notes, fmt.Sprintf("curves: skipped %d files (%s)", curves.Skipped[reason], reason))
		}
	}
	switch {
	case len(s.Jobs) > 0 || s.Recent != nil:
		in.Source = "explicit jobs"
		surv := s.runTimes()
		for i, js := range s.Jobs {
			j, err := s.explicitJob(js, i, surv)
			if err != nil {
				return nil, err
			}
			in.Jobs = append(in.Jobs, j)
		}
		next, err := s.recentArrivals(len(in.Jobs), surv)
		if err != nil {
			return nil, err
		}
		in.Jobs = append(in.Jobs, next...)
	case s.Trace != nil:
		if err := s.fromTrace(in); err != nil {
			return nil, err
		}
	default:
		s.generate(in)
	}
	sort.SliceStable(in.Jobs, func(a, b int) bool { return in.Jobs[a].Arrival < in.Jobs[b].Arrival })
	for i, j := range in.Jobs {
		j.ID = i
		if j.Curve == nil {
			r := jobRNG(s.Seed, i, 2)
			if curves != nil {
				j.Curve = curves.Pick(j.Duration, r.Float64())
			} else {
				j.Curve = fam.FamilyCurve(fmt.Sprintf("family-%d", i), r)
			}
			j.CurveName = j.Curve.Name
		}
	}
	if curves == nil && len(s.Jobs) == 0 {
		in.Notes = append(in.Notes, fmt.Sprintf("curves: built-in families (%.0f%% plateau between %.0f%% and %.0f%% of the run)",
			100*fam.PlateauShare, 100*fam.OnsetMin, 100*fam.OnsetMax))
	}
	return in, nil
}

// runTimes is the run-time distribution of RunTimes and RunSoFar.
func (s *Scenario) runTimes() orderstats.Survival {
	conv := func(l []Seconds) []float64 {
		out := make([]float64, len(l))
		for i, d := range l {
			out[i] = float64(d)
		}
		return out
	}
	return orderstats.KaplanMeier(conv(s.RunTimes), conv(s.RunSoFar))
}

// explicitJob is the scenario's i-th explicit job with this seed's run
// time: drawn from its interval, or, when unknown, from surv given what
// it has run (Duration standing in when nothing finished).
func (s *Scenario) explicitJob(js JobSpec, i int, surv orderstats.Survival) (*Job, error) {
	j, err := js.job(i)
	if err != nil {
		return nil, err
	}
	switch {
	case js.DurationLo > 0:
		j.Duration = j.Done + drawDuration(float64(js.Duration), float64(js.DurationLo), float64(js.DurationHi), jobRNG(s.Seed, i, 3))
	case js.UnknownDuration && !surv.Empty():
		ran := float64(js.RanFor)
		j.Duration = math.Min(math.Max(1, math.Round(surv.DrawAfter(ran, jobRNG(s.Seed, i, 3).Float64())-ran)), MaxSeconds)
	}
	return j, nil
}

// recentArrivals are this seed's draw from Recent (RecentArrivals),
// numbered on from first, at most MaxJobs jobs in all.
func (s *Scenario) recentArrivals(first int, surv orderstats.Survival) ([]*Job, error) {
	r := s.Recent
	if r == nil || len(r.Jobs) == 0 {
		return nil, nil
	}
	window := float64(r.Window)
	rate := float64(len(r.Jobs)) / window
	g := jobRNG(s.Seed, -1, 4)
	var out []*Job
	for t := -math.Log(g.Float64()) / rate; t < window && first+len(out) < MaxJobs; t += -math.Log(g.Float64()) / rate {
		js := r.Jobs[int(g.Float64()*float64(len(r.Jobs)))]
		js.Name = fmt.Sprintf("%s#%d", js.Name, len(out)+1)
		js.Arrival = Seconds(math.Max(1, math.Round(t)))
		j, err := s.explicitJob(js, first+len(out), surv)
		if err != nil {
			return nil, err
		}
		out = append(out, j)
	}
	return out, nil
}

func classCounts(c *CurveSet) string {
	var parts []string
	for i, l := range c.Classes {
		parts = append(parts, fmt.Sprintf("%s=%d", DurationClassNames[i], len(l)))
	}
	return strings.Join(parts, " ")
}

func (js JobSpec) job(i int) (*Job, error) {
	if js.Name == "" {
		js.Name = fmt.Sprintf("job-%d", i)
	}
	if js.TotalSteps == 0 {
		js.TotalSteps = 10000
	}
	j := &Job{Name: js.Name, Queue: js.Queue, Arrival: float64(js.Arrival), GPUs: js.GPUs, Priority: js.Priority,
		Duration: float64(js.Duration), TotalSteps: js.TotalSteps, Checkpoint: float64(js.CheckpointInterval)}
	j.Curve = SimpleCurve(js.PlateauAt)
	if js.Curve != nil {
		j.Curve = js.Curve.curve("own history and forecast")
		j.Done = float64(js.RanFor)
		j.Duration += j.Done
	}
	j.CurveName = j.Curve.Name
	if js.Boost != nil {
		j.Pinned, j.LiveBoost = true, *js.Boost
	}
	return j, j.validate()
}

// drawDuration draws a run time with median d and 10 % / 90 % quantiles
// lo and hi: a log-normal split at the median, so a lopsided forecast
// interval stays lopsided. The draw is clamped to [1 s, MaxSeconds].
func drawDuration(d, lo, hi float64, r *rng) float64 {
	z := orderstats.CentralZ(0.8)
	u := r.Norm()
	sigma := math.Log(hi/d) / z
	if u < 0 {
		sigma = math.Log(d/lo) / z
	}
	return math.Min(math.Max(math.Round(d*math.Exp(u*sigma)), 1), MaxSeconds)
}

// SimpleCurve is a noiseless curve: exponential with its plateau onset at
// run fraction plateauAt, or, for plateauAt outside (0,1), a line that
// improves until the end.
func SimpleCurve(plateauAt float64) *Curve {
	const points = 100
	c := &Curve{Objective: progress.Objective{Metric: "eval_loss", Direction: progress.Minimize}}
	vals := make([]float64, points)
	for i := range points {
		x := float64(i+1) / points
		c.X = append(c.X, x)
		if plateauAt > 0 && plateauAt < 1 {
			vals[i] = 1 + 3*math.Exp(-expRate*x/plateauAt)
		} else {
			vals[i] = 4 - 3*x
		}
	}
	c.V = vals
	c.finish(vals)
	if plateauAt > 0 && plateauAt < 1 {
		c.Name = fmt.Sprintf("exponential(plateau %.2f)", c.Onset)
	} else {
		c.Name = "linear"
	}
	return c
}

func (s *Scenario) priorityDraw(u float64) int32 {
	if len(s.Priorities) == 0 {
		return 0
	}
	total := 0.0
	for _, p := range s.Priorities {
		total += p.Share
	}
	acc := 0.0
	for _, p := range s.Priorities {
		acc += p.Share / total
		if u < acc {
			return p.Value
		}
	}
	return s.Priorities[len(s.Priorities)-1].Value
}

func (s *Scenario) generate(in *Input) {
	g := s.Generate
	in.Source = fmt.Sprintf("generated: %d jobs at load %.2f", g.Jobs, g.Load)
	capacity := in.Capacity()
	rate := g.Load * float64(capacity) / (g.meanGPUs() * g.meanDuration()) // arrivals per second
	r := newRNG(s.Seed)
	t := 0.0
	cl, _ := newCluster(in.Queues) // validated by Run; only used for the largest request a queue can hold
	for i := range g.Jobs {
		t += -math.Log(r.Float64()) / rate
		jr := jobRNG(s.Seed, i, 1)
		j := &Job{
			Name:       fmt.Sprintf("job-%05d", i),
			Arrival:    math.Round(t),
			Duration:   g.duration(jr.Float64()),
			GPUs:       g.gpuDraw(jr.Float64()),
			Priority:   s.priorityDraw(jr.Float64()),
			TotalSteps: 10000,
		}
		// Queues in proportion to their nominal quota.
		u := jr.Float64() * float64(capacity)
		for _, q := range in.Queues {
			j.Queue = q.Name
			if u < float64(q.GPUs) {
				break
			}
			u -= float64(q.GPUs)
		}
		// A job larger than its queue can ever hold is cut to what it can.
		if cl != nil {
			if q := cl.byName[j.Queue]; q != nil {
				for j.GPUs > 1 && !q.everFits(j.GPUs) {
					j.GPUs /= 2
				}
			}
		}
		in.Jobs = append(in.Jobs, j)
	}
}

func (s *Scenario) fromTrace(in *Input) error {
	ts := s.Trace
	tr, err := s.files.trace(ts.Path, ts.Format, ts.Limit)
	if err != nil {
		return err
	}
	jobs := tr.Jobs
	st := tr.Stats()
	in.Source = fmt.Sprintf("trace %s (%s): %d jobs over %.0f h, %.0f GPU-hours, mean demand %.0f GPUs",
		ts.Path, ts.Format, st.Jobs, st.SpanHours, st.GPUHours, st.MeanDemand)
	for reason, n := range tr.Skipped {
		in.Notes = append(in.Notes, fmt.Sprintf("trace: skipped %d rows (%s)", n, reason))
	}
	if len(in.Queues) == 0 {
		capacity := ts.ClusterGPUs
		if capacity == 0 {
			load := ts.TargetLoad
			if load == 0 {
				load = 0.85
			}
			// Clamped before the conversion: a trace spanning one second
			// can claim more GPU-hours than an int holds.
			capacity = int(math.Min(math.Ceil(st.MeanDemand/load), MaxGPUs))
			in.Notes = append(in.Notes, fmt.Sprintf("cluster: %d GPUs = mean demand %.1f GPUs / target load %.2f (at most %d)", capacity, st.MeanDemand, load, MaxGPUs))
		}
		capacity = max(capacity, st.MaxGPUs, 1)
		if err := checkGPUs("cluster GPUs", capacity, 1); err != nil {
			return err
		}
		in.Queues = traceQueues(tr, capacity, ts.SingleQueue)
	}
	known := map[string]bool{}
	for _, q := range in.Queues {
		known[q.Name] = true
	}
	for i, tj := range jobs {
		q := tj.Group
		if len(in.Queues) == 1 {
			q = in.Queues[0].Name
		}
		if !known[q] {
			return fmt.Errorf("%s:%d: group %q has no queue of that name", ts.Path, tj.Line, tj.Group)
		}
		jr := jobRNG(s.Seed, i, 1)
		in.Jobs = append(in.Jobs, &Job{
			Name: tj.Name, Queue: q, Arrival: tj.Arrival, GPUs: tj.GPUs, Duration: tj.Duration,
			Priority: s.priorityDraw(jr.Float64()), TotalSteps: 10000,
		})
	}
	return nil
}

// traceQueues makes one ClusterQueue per trace group, nominal quota in
// proportion to the group's GPU-hours (largest remainder), all in cohort
// "cluster" with unlimited borrowing; or one queue for everything.
func traceQueues(tr *Trace, capacity int, single bool) []Queue {
	if single {
		return []Queue{{Name: "cluster", GPUs: capacity}}
	}
	hours := map[string]float64{}
	var names []string
	total := 0.0
	for _, j := range tr.Jobs {
		if _, ok := hours[j.Group]; !ok {
			names = append(names, j.Group)
		}
		h := float64(j.GPUs) * j.Duration
		hours[j.Group] += h
		total += h
	}
	sort.Strings(names)
	if !(total > 0) { // no GPU-hours (cannot come from ReadTrace): equal shares
		total = float64(len(names))
		for _, n := range names {
			hours[n] = 1
		}
	}
	type share struct {
		name string
		n    int
		rem  float64
	}
	var sh []share
	used := 0
	for _, n := range names {
		exact := float64(capacity) * hours[n] / total
		k := int(math.Floor(exact))
		sh = append(sh, share{n, k, exact - float64(k)})
		used += k
	}
	order := make([]int, len(sh))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool { return sh[order[a]].rem > sh[order[b]].rem })
	for i := 0; used < capacity; i = (i + 1) % len(order) {
		sh[order[i]].n++
		used++
	}
	var qs []Queue
	for _, s := range sh {
		qs = append(qs, Queue{Name: s.name, GPUs: s.n, Cohort: "cluster"})
	}
	return qs
}
