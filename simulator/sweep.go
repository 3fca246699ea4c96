package simulator

import (
	"fmt"
	"math"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// fileCache keeps the trace and curve set a scenario read, so resolving it
// again (another seed of a sweep) parses neither again. A nil cache reads
// the files every time. Resolve only reads what it gets from here.
type fileCache struct {
	mu     sync.Mutex
	sets   map[string]*CurveSet
	traces map[string]*Trace
}

// KeepFiles makes later Resolves of s (and of copies of it) read each
// trace and curve directory once.
func (s *Scenario) KeepFiles() {
	if s.files == nil {
		s.files = &fileCache{sets: map[string]*CurveSet{}, traces: map[string]*Trace{}}
	}
}

func (c *fileCache) curves(dir string) (*CurveSet, error) {
	if c == nil {
		return LoadCurves(dir)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if cs, ok := c.sets[dir]; ok {
		return cs, nil
	}
	cs, err := LoadCurves(dir)
	if err == nil {
		c.sets[dir] = cs
	}
	return cs, err
}

func (c *fileCache) trace(path, format string, limit int) (*Trace, error) {
	if c == nil {
		return ReadTraceFile(path, format, limit)
	}
	key := fmt.Sprintf("%s\x00%s\x00%d", path, format, limit)
	c.mu.Lock()
	defer c.mu.Unlock()
	if tr, ok := c.traces[key]; ok {
		return tr, nil
	}
	tr, err := ReadTraceFile(path, format, limit)
	if err == nil {
		c.traces[key] = tr
	}
	return tr, err
}

// ResolveSeed resolves s as if its seed were seed (s is not changed).
func (s *Scenario) ResolveSeed(seed uint64) (*Input, error) {
	c := *s
	c.Seed = seed
	return c.Resolve()
}

// Axis is one knob swept over values, in the order given: "smallest" in a
// goal's answer means first in this order.
type Axis struct {
	Knob   string   `json:"knob"`
	Values []string `json:"values"`
}

// ParseAxis reads KNOB=V1,V2,... or KNOB=FROM:TO:STEP (integers, TO
// included; a sign on FROM makes every value relative: +0:+16:8 is +0,
// +8, +16).
func ParseAxis(s string) (Axis, error) {
	st, err := ParseSetting(s)
	if err != nil {
		return Axis{}, err
	}
	a := Axis{Knob: st.Knob}
	if parts := strings.Split(st.Value, ":"); len(parts) == 3 {
		var n [3]int
		for i, p := range parts {
			if n[i], err = strconv.Atoi(strings.TrimSpace(p)); err != nil {
				return Axis{}, fmt.Errorf("%q: range FROM:TO:STEP wants integers", s)
			}
		}
		if n[2] <= 0 || n[1] < n[0] || (n[1]-n[0])/n[2] >= maxAxisValues {
			return Axis{}, fmt.Errorf("%q: need STEP > 0, FROM <= TO and at most %d values", s, maxAxisValues)
		}
		signed := strings.HasPrefix(parts[0], "+") || strings.HasPrefix(parts[0], "-")
		for v := n[0]; v <= n[1]; v += n[2] {
			if signed {
				a.Values = append(a.Values, fmt.Sprintf("%+d", v))
			} else {
				a.Values = append(a.Values, strconv.Itoa(v))
			}
		}
		return a, nil
	}
	for _, v := range strings.Split(st.Value, ",") {
		if v = strings.TrimSpace(v); v != "" {
			a.Values = append(a.Values, v)
		}
	}
	if len(a.Values) == 0 || len(a.Values) > maxAxisValues {
		return Axis{}, fmt.Errorf("%q: want 1 to %d values", s, maxAxisValues)
	}
	return a, nil
}

const (
	maxAxisValues = 1000
	maxSeeds      = 1000
)

// SweepSpec is what a sweep runs: every point of the axes' grid (the first
// axis varies slowest) under every seed and policy, each with the Fixed
// settings applied first.
type SweepSpec struct {
	Axes     []Axis    `json:"axes"`
	Seeds    []uint64  `json:"seeds"`
	Policies []string  `json:"policies"`
	Fixed    []Setting `json:"fixed,omitempty"`
}

// Validate checks the shape of the sweep.
func (sp SweepSpec) Validate() error {
	switch {
	case len(sp.Axes) < 1 || len(sp.Axes) > 2:
		return fmt.Errorf("a sweep has one or two axes, not %d", len(sp.Axes))
	case len(sp.Seeds) < 1 || len(sp.Seeds) > maxSeeds:
		return fmt.Errorf("%d seeds: want 1 to %d", len(sp.Seeds), maxSeeds)
	case len(sp.Policies) == 0:
		return fmt.Errorf("no policy to run")
	case len(sp.Axes) == 2 && sp.Axes[0].Knob == sp.Axes[1].Knob:
		return fmt.Errorf("both axes sweep %s", sp.Axes[0].Knob)
	}
	for _, a := range sp.Axes {
		if len(a.Values) == 0 {
			return fmt.Errorf("axis %s has no values", a.Knob)
		}
	}
	return nil
}

// Points is the number of grid points.
func (sp SweepSpec) Points() int {
	n := 1
	for _, a := range sp.Axes {
		n *= len(a.Values)
	}
	return n
}

// Units is the number of (point, seed) pairs: the completion indexes of
// a sweep run as a Kubernetes Indexed Job.
func (sp SweepSpec) Units() int { return sp.Points() * len(sp.Seeds) }

// PointSettings are the settings of grid point p: Fixed, then one per axis.
func (sp SweepSpec) PointSettings(p int) []Setting {
	out := append([]Setting(nil), sp.Fixed...)
	stride := sp.Points()
	for _, a := range sp.Axes {
		stride /= len(a.Values)
		out = append(out, Setting{Knob: a.Knob, Value: a.Values[(p/stride)%len(a.Values)]})
	}
	return out
}

// SweepRun is one unit's outcome: a point under one seed, every policy.
type SweepRun struct {
	Unit      int       `json:"unit"`
	Point     int       `json:"point"`
	Seed      uint64    `json:"seed"`
	Settings  []Setting `json:"settings"`
	Summaries []Summary `json:"summaries"`
}

// RunUnit runs unit u (point u / seeds, seed u % seeds) of the sweep on in,
// the scenario resolved under that seed.
func (sp SweepSpec) RunUnit(in *Input, opt Options, u int) (SweepRun, error) {
	r := sp.newRun(u)
	for _, pol := range sp.Policies {
		s, err := sp.runOne(in, opt, r.Settings, pol)
		if err != nil {
			return r, err
		}
		r.Summaries = append(r.Summaries, s)
	}
	return r, nil
}

func (sp SweepSpec) newRun(u int) SweepRun {
	p := u / len(sp.Seeds)
	return SweepRun{Unit: u, Point: p, Seed: sp.Seeds[u%len(sp.Seeds)], Settings: sp.PointSettings(p)}
}

func (sp SweepSpec) runOne(in *Input, opt Options, settings []Setting, pol string) (Summary, error) {
	opt.Progress, opt.Observe, opt.RecordEvents = nil, nil, false // runs are concurrent and only their summary is kept
	win, wopt, err := ApplyWhatIf(in, opt, settings)
	if err != nil {
		return Summary{}, err
	}
	res, err := Run(win, pol, wopt)
	if err != nil {
		return Summary{}, fmt.Errorf("%s, policy %s: %w", joinSettings(settings), pol, err)
	}
	return res.Summary, nil
}

func joinSettings(ss []Setting) string {
	parts := make([]string, len(ss))
	for i, s := range ss {
		parts[i] = s.String()
	}
	return strings.Join(parts, " ")
}

// RunSweep resolves the scenario once per seed (resolve) and runs every
// (point, seed, policy) on workers goroutines (≤ 0: GOMAXPROCS). progress,
// when set, is called after each run from one goroutine at a time.
func RunSweep(resolve func(seed uint64) (*Input, error), opt Options, sp SweepSpec, workers int, progress func(done, total int)) (*Sweep, error) {
	if err := sp.Validate(); err != nil {
		return nil, err
	}
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	start := time.Now()
	inputs := make([]*Input, len(sp.Seeds))
	for i, seed := range sp.Seeds {
		in, err := resolve(seed)
		if err != nil {
			return nil, fmt.Errorf("seed %d: %w", seed, err)
		}
		inputs[i] = in
	}
	runs := make([]SweepRun, sp.Units())
	for u := range runs {
		runs[u] = sp.newRun(u)
		runs[u].Summaries = make([]Summary, len(sp.Policies))
	}
	// One task per (unit, policy): the planner's runs cost far more than
	// kueue's, so finer tasks keep every core busy to the end.
	type task struct{ unit, pol int }
	tasks := make(chan task)
	var (
		mu       sync.Mutex
		firstErr error
		done     int
		wg       sync.WaitGroup
	)
	total := len(runs) * len(sp.Policies)
	for range min(workers, total) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for t := range tasks {
				r := &runs[t.unit]
				s, err := sp.runOne(inputs[t.unit%len(sp.Seeds)], opt, r.Settings, sp.Policies[t.pol])
				mu.Lock()
				r.Summaries[t.pol] = s
				if err != nil && firstErr == nil {
					firstErr = err
				}
				done++
				if progress != nil {
					progress(done, total)
				}
				mu.Unlock()
			}
		}()
	}
	// The costly planner runs go first, so the short ones fill the last
	// gaps instead of one long run finishing alone.
	order := make([]int, len(sp.Policies))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool {
		return sp.Policies[order[a]] == PolicyPlanner && sp.Policies[order[b]] != PolicyPlanner
	})
	for _, pol := range order {
		for u := range runs {
			mu.Lock()
			stop := firstErr != nil
			mu.Unlock()
			if stop {
				break
			}
			tasks <- task{u, pol}
		}
	}
	close(tasks)
	wg.Wait()
	if firstErr != nil {
		return nil, firstErr
	}
	sw, err := NewSweep(SweepOf{Scenario: inputs[0].Name, Source: inputs[0].Source, Jobs: len(inputs[0].Jobs)}, sp, runs)
	if err != nil {
		return nil, err
	}
	sw.Workers, sw.WallSeconds = workers, time.Since(start).Seconds()
	return sw, nil
}

// Sweep is a sweep's outcome: every run and, per point and policy, each
// metric's spread across seeds.
type Sweep struct {
	Scenario string      `json:"scenario"`
	Source   string      `json:"source"`
	Jobs     int         `json:"jobs"`
	Spec     SweepSpec   `json:"spec"`
	Points   []PointStat `json:"points"`
	Goal     *GoalResult `json:"goal,omitempty"`
	Runs     []SweepRun  `json:"runs"`
	// Workers and WallSeconds: how the in-process sweep ran (0 when
	// collected from a Job's results).
	Workers     int     `json:"workers,omitempty"`
	WallSeconds float64 `json:"wallSeconds,omitempty"`
}

// PointStat is one point under one policy, across seeds.
type PointStat struct {
	Point    int               `json:"point"`
	Settings []Setting         `json:"settings"`
	Policy   string            `json:"policy"`
	Metrics  map[string]Spread `json:"metrics"`
	// Unfinished is the most jobs any seed left never admitted (a quota
	// too small for them): their waits are not in the queueing figures.
	Unfinished int `json:"unfinished"`
}

// Spread is a metric's mean, minimum and maximum over the seeds.
type Spread struct {
	Mean float64 `json:"mean"`
	Min  float64 `json:"min"`
	Max  float64 `json:"max"`
	// Values are the per-seed values, in the spec's seed order.
	Values []float64 `json:"values"`
}

// SweepMetric is a metric of a sweep's charts and goals.
type SweepMetric struct {
	Name, Label string
	// Hours: a time, written in hours and compared with a duration.
	Hours bool
	f     func(Summary) float64
}

// SweepMetrics are the metrics a sweep reports, charts and answers goals
// on.
var SweepMetrics = []SweepMetric{
	{"queueing.p50", "queueing median (h)", true, func(s Summary) float64 { return s.Queueing.Median }},
	{"queueing.p95", "queueing p95 (h)", true, func(s Summary) float64 { return s.Queueing.P95 }},
	{"queueing.mean", "queueing mean (h)", true, func(s Summary) float64 { return s.Queueing.Mean }},
	{"jct.mean", "JCT mean (h)", true, func(s Summary) float64 { return s.JCT.Mean }},
	{"jct.p95", "JCT p95 (h)", true, func(s Summary) float64 { return s.JCT.P95 }},
	{"plateau.gpuh", "GPU-hours after plateau", false, func(s Summary) float64 { return s.PlateauGPUHours }},
	{"early-stops", "stops before the true plateau", false, func(s Summary) float64 { return float64(s.EarlyStops) }},
	{"saved.gpuh", "GPU-hours saved by Deactivate", false, func(s Summary) float64 { return s.SavedGPUHours }},
	{"preemptions", "preemptions", false, func(s Summary) float64 { return float64(s.Preemptions) }},
	{"utilization", "utilization", false, func(s Summary) float64 { return s.Utilization }},
}

func sweepMetric(name string) (SweepMetric, bool) {
	for _, m := range SweepMetrics {
		if m.Name == name {
			return m, true
		}
	}
	return SweepMetric{}, false
}

// SweepOf names what a sweep ran on: the scenario, its source and its
// number of jobs (under the first seed).
type SweepOf struct {
	Scenario string `json:"scenario"`
	Source   string `json:"source"`
	Jobs     int    `json:"jobs"`
}

// NewSweep aggregates runs (one per unit, any order; from RunSweep or
// collected from a Job's pods) into a Sweep.
func NewSweep(of SweepOf, sp SweepSpec, runs []SweepRun) (*Sweep, error) {
	if err := sp.Validate(); err != nil {
		return nil, err
	}
	byUnit := make([]*SweepRun, sp.Units())
	for i := range runs {
		r := &runs[i]
		if r.Unit < 0 || r.Unit >= len(byUnit) {
			return nil, fmt.Errorf("run of unit %d: the sweep has units 0..%d", r.Unit, len(byUnit)-1)
		}
		if byUnit[r.Unit] != nil {
			return nil, fmt.Errorf("unit %d: two results", r.Unit)
		}
		if want := sp.newRun(r.Unit); r.Point != want.Point || r.Seed != want.Seed || joinSettings(r.Settings) != joinSettings(want.Settings) {
			return nil, fmt.Errorf("unit %d: result of point %d seed %d (%s), the sweep has point %d seed %d (%s) there",
				r.Unit, r.Point, r.Seed, joinSettings(r.Settings), want.Point, want.Seed, joinSettings(want.Settings))
		}
		if len(r.Summaries) != len(sp.Policies) {
			return nil, fmt.Errorf("unit %d: %d policy results, want %d", r.Unit, len(r.Summaries), len(sp.Policies))
		}
		byUnit[r.Unit] = r
	}
	sw := &Sweep{Scenario: of.Scenario, Source: of.Source, Jobs: of.Jobs, Spec: sp}
	for u, r := range byUnit {
		if r == nil {
			return nil, fmt.Errorf("unit %d (point %d, seed %d): no result", u, u/len(sp.Seeds), sp.Seeds[u%len(sp.Seeds)])
		}
		sw.Runs = append(sw.Runs, *r)
	}
	ns := len(sp.Seeds)
	for p := range sp.Points() {
		for pi, pol := range sp.Policies {
			ps := PointStat{Point: p, Settings: sp.PointSettings(p), Policy: pol, Metrics: map[string]Spread{}}
			for _, m := range SweepMetrics {
				sp := Spread{Min: math.Inf(1), Max: math.Inf(-1)}
				for si := range ns {
					v := m.f(byUnit[p*ns+si].Summaries[pi])
					sp.Values = append(sp.Values, v)
					sp.Mean += v / float64(ns)
					sp.Min, sp.Max = math.Min(sp.Min, v), math.Max(sp.Max, v)
				}
				ps.Metrics[m.Name] = sp
			}
			for si := range ns {
				ps.Unfinished = max(ps.Unfinished, byUnit[p*ns+si].Summaries[pi].Unfinished)
			}
			sw.Points = append(sw.Points, ps)
		}
	}
	return sw, nil
}
