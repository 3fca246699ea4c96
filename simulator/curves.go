package simulator

import (
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/progress-planner/planner/internal/splitmix"
	"github.com/progress-planner/planner/pkg/progress"
	"github.com/progress-planner/planner/pkg/synth"
)

// PlateauEpsilon is the ground truth's plateau definition, the forecast's
// own (forecast.DefaultSettings().PlateauEpsilon): a job has plateaued once
// the improvement still to come before its planned end is below 1 % of the
// improvement made so far.
const PlateauEpsilon = 0.01

// Curve is a learning curve on the run-fraction axis: the objective values
// an evaluation log shows, at run fractions in (0, 1] (1 = the planned
// end). A job's reports carry the latest value at or before their own run
// fraction, so a curve scales to any job duration.
type Curve struct {
	Name      string             `json:"name"`
	Objective progress.Objective `json:"objective"`
	X         []float64          `json:"x"`
	V         []float64          `json:"v"` // NaN: a non-finite report (divergence)
	// SourceSeconds is the recorded run's duration (0 for families).
	SourceSeconds float64 `json:"sourceSeconds,omitempty"`
	// Onset is the ground-truth plateau onset as a run fraction: the first
	// evaluation after which the best value so far improves by less than
	// PlateauEpsilon of the improvement made so far; 1 when that only
	// holds at the end.
	Onset float64 `json:"onset"`
	// truth is the oriented (smaller is better) best-so-far the onset and
	// RelRemaining are computed from: the noiseless curve for families,
	// the observations for recorded curves.
	truth []float64
}

// At returns the latest value at or before run fraction x (ok=false before
// the first evaluation).
func (c *Curve) At(x float64) (float64, bool) {
	i := sort.SearchFloat64s(c.X, x+1e-12) - 1
	if i < 0 {
		return 0, false
	}
	return c.V[i], true
}

// RelRemaining is the true improvement still to come after run fraction x
// (to the planned end) over the improvement made by x; +Inf before any.
func (c *Curve) RelRemaining(x float64) float64 {
	if len(c.truth) == 0 {
		return math.Inf(1)
	}
	i := sort.SearchFloat64s(c.X, x+1e-12) - 1
	if i < 0 {
		return math.Inf(1)
	}
	first, now, final := c.truth[0], c.truth[i], c.truth[len(c.truth)-1]
	gain := first - now
	if !(gain > 0) {
		if now-final > 0 {
			return math.Inf(1)
		}
		return 0
	}
	return (now - final) / gain
}

// MeaningfulOnset is the first run fraction at or after Onset from which
// less than share of the metric's own value is still to gain by the end
// (true best-so-far): where a stop first obeys the trust rule that a job
// with that much still to gain is not plateaued (docs/policy.md,
// MinImprovement). 1 when the curve never plateaus; Onset when share ≤ 0.
func (c *Curve) MeaningfulOnset(share float64) float64 {
	if c.Onset >= 1 || share <= 0 || len(c.truth) == 0 {
		return c.Onset
	}
	final := c.truth[len(c.truth)-1]
	for i := sort.SearchFloat64s(c.X, c.Onset-1e-12); i < len(c.truth)-1; i++ {
		if c.truth[i]-final < share*math.Abs(c.truth[i]) {
			return c.X[i]
		}
	}
	return 1
}

// finish computes truth and Onset from oriented values (NaN skipped).
func (c *Curve) finish(truthValues []float64) {
	sign := c.Objective.Sign()
	c.truth = make([]float64, len(truthValues))
	best := math.Inf(1)
	for i, v := range truthValues {
		if o := sign * v; !math.IsNaN(o) && o < best {
			best = o
		}
		c.truth[i] = best
	}
	// Before the first finite value the best is +Inf: use the first finite.
	firstFinite := math.Inf(1)
	for _, b := range c.truth {
		if !math.IsInf(b, 1) {
			firstFinite = b
			break
		}
	}
	for i := range c.truth {
		if math.IsInf(c.truth[i], 1) {
			c.truth[i] = firstFinite
		}
	}
	c.Onset = 1
	if len(c.truth) == 0 {
		return
	}
	first, final := c.truth[0], c.truth[len(c.truth)-1]
	for i, b := range c.truth {
		gain := first - b
		if gain > 0 && b-final <= PlateauEpsilon*gain {
			c.Onset = c.X[i]
			if i == len(c.truth)-1 {
				c.Onset = 1
			}
			return
		}
	}
}

// CurveFromHistory turns a progress-history file into a curve: the
// objective's distinct observations at t / endSeconds. It fails when the
// file names no objective or has fewer than three finite observations.
func CurveFromHistory(f *progress.HistoryFile) (*Curve, error) {
	obj, ok := f.Header.ObjectiveSpec()
	if !ok {
		return nil, fmt.Errorf("%s: no objective in the header", f.Header.Name)
	}
	obj.Target = nil // a simulated job runs its trace duration, whatever its target
	end := 0.0
	if f.Header.Outcome != nil {
		end = f.Header.Outcome.EndSeconds
	}
	if n := len(f.Reports); n > 0 {
		end = math.Max(end, f.Reports[n-1].T)
	}
	if !(end > 0) {
		return nil, fmt.Errorf("%s: zero duration", f.Header.Name)
	}
	c := &Curve{Name: f.Header.Name, Objective: obj, SourceSeconds: end}
	prev := ""
	finite := 0
	for _, r := range f.Reports {
		for _, m := range r.TrainerStatus.Metrics {
			if progress.CanonicalMetric(m.Name) != obj.Metric || m.Value == prev {
				continue
			}
			prev = m.Value
			v, err := strconv.ParseFloat(strings.TrimSpace(m.Value), 64)
			if err != nil {
				continue
			}
			if math.IsInf(v, 0) {
				v = math.NaN()
			}
			if !math.IsNaN(v) {
				finite++
			}
			x := math.Max(r.T/end, 1e-6)
			if n := len(c.X); n > 0 && x <= c.X[n-1] {
				x = c.X[n-1] + 1e-9 // same instant: keep the later value
			}
			c.X = append(c.X, math.Min(x, 1))
			c.V = append(c.V, v)
		}
	}
	if finite < 3 {
		return nil, fmt.Errorf("%s: %d finite observations of %s (need 3)", f.Header.Name, finite, obj.Metric)
	}
	c.finish(c.V)
	return c, nil
}

// Duration classes used to match trace jobs with recorded curves: a job is
// given a curve recorded for a run of similar length, then time-scaled.
var durationClassBounds = []float64{600, 3600, 6 * 3600, 24 * 3600}

// DurationClassNames label the classes (for reports).
var DurationClassNames = []string{"<10m", "10m-1h", "1h-6h", "6h-1d", ">=1d"}

func durationClass(seconds float64) int {
	return sort.SearchFloat64s(durationClassBounds, seconds+1e-9)
}

// CurveSet is the recorded curves by duration class.
type CurveSet struct {
	Dir     string
	Classes [][]*Curve
	Skipped map[string]int // reason -> files
}

// Count is the number of curves.
func (s *CurveSet) Count() int {
	n := 0
	for _, c := range s.Classes {
		n += len(c)
	}
	return n
}

// skippedIncidents are incident types whose recorded shape is not a
// learning curve the simulator can time-scale: a hang is no progress at all
// (the simulator's jobs always progress), preempt_resume duplicates its
// original. Divergence and plateau_extension are kept.
var skippedIncidents = map[string]bool{synth.IncidentHang: true, synth.IncidentPreemptResume: true}

// LoadCurves reads every *.jsonl history under dir (recursively).
func LoadCurves(dir string) (*CurveSet, error) {
	set := &CurveSet{Dir: dir, Classes: make([][]*Curve, len(DurationClassNames)), Skipped: map[string]int{}}
	var paths []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && strings.HasSuffix(p, ".jsonl") {
			paths = append(paths, p)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("curves: %w", err)
	}
	sort.Strings(paths)
	for _, p := range paths {
		fh, err := os.Open(p)
		if err != nil {
			return nil, fmt.Errorf("curves: %w", err)
		}
		f, err := progress.ReadHistoryFile(fh)
		fh.Close()
		if err != nil {
			return nil, fmt.Errorf("curves: %s: %w", p, err)
		}
		if t := f.Header.IncidentType(); skippedIncidents[t] {
			set.Skipped["incident "+t]++
			continue
		}
		c, err := CurveFromHistory(f)
		if err != nil {
			set.Skipped["too few objective observations or no objective"]++
			continue
		}
		k := durationClass(c.SourceSeconds)
		set.Classes[k] = append(set.Classes[k], c)
	}
	if set.Count() == 0 {
		return nil, fmt.Errorf("curves: no usable history file under %s", dir)
	}
	return set, nil
}

// Pick matches a job of the given duration with a curve of its duration
// class (the nearest non-empty class, shorter first on ties), chosen by
// the draw u in [0,1).
func (s *CurveSet) Pick(duration, u float64) *Curve {
	k := durationClass(duration)
	for d := 0; d < len(s.Classes); d++ {
		for _, c := range []int{k - d, k + d} {
			if c >= 0 && c < len(s.Classes) && len(s.Classes[c]) > 0 {
				list := s.Classes[c]
				return list[min(len(list)-1, int(u*float64(len(list))))]
			}
		}
	}
	return nil
}

// Families are the built-in parametric curves.
type Families struct {
	// PlateauShare of jobs follow an exponential curve that plateaus at a
	// run fraction drawn uniformly from [OnsetMin, OnsetMax]; the others
	// follow a slowly converging inverse-power curve (onset late or never).
	PlateauShare float64 `json:"plateauShare"`
	OnsetMin     float64 `json:"onsetMin"`
	OnsetMax     float64 `json:"onsetMax"`
	// Noise is the evaluation noise's standard deviation as a fraction of
	// the curve's amplitude.
	Noise float64 `json:"noise"`
	// Points is the number of evaluations over a run.
	Points int `json:"points"`
}

// DefaultFamilies: the assumptions of the built-in scenario (not Philly
// statistics; the Philly trace has no learning curves).
func DefaultFamilies() Families {
	return Families{PlateauShare: 0.6, OnsetMin: 0.2, OnsetMax: 0.8, Noise: 0.004, Points: 60}
}

func (f Families) validate() error {
	switch {
	case !(f.PlateauShare >= 0 && f.PlateauShare <= 1):
		return fmt.Errorf("families.plateauShare %g must be in [0,1]", f.PlateauShare)
	case !(f.OnsetMin > 0 && f.OnsetMin <= f.OnsetMax && f.OnsetMax <= 1):
		return fmt.Errorf("families: need 0 < onsetMin %g <= onsetMax %g <= 1", f.OnsetMin, f.OnsetMax)
	case !(f.Noise >= 0 && f.Noise < 1):
		return fmt.Errorf("families.noise %g must be in [0,1)", f.Noise)
	case f.Points < 4 || f.Points > 10000:
		return fmt.Errorf("families.points %d must be in [4, 10000]", f.Points)
	}
	return nil
}

// exponential curves plateau where exp(-R s) ≈ ε/(1+ε) of the amplitude.
var expRate = math.Log((1 + PlateauEpsilon) / PlateauEpsilon)

// FamilyCurve draws one parametric curve (pkg/synth families) from r.
func (f Families) FamilyCurve(name string, r *rng) *Curve {
	const steps = 10000.0
	sc := synth.Curve{C: 1 + r.Float64(), A: 2 + 2*r.Float64()}
	if r.Float64() < f.PlateauShare {
		onset := f.OnsetMin + (f.OnsetMax-f.OnsetMin)*r.Float64()
		sc.Family, sc.R = synth.FamilyExponential, expRate/(onset*steps)
	} else {
		sc.Family = synth.FamilyInversePower
		sc.R = (2 + 18*r.Float64()) / steps
		sc.Alpha = 0.3 + 0.4*r.Float64()
	}
	c := &Curve{Name: name + "/" + sc.Family, Objective: progress.Objective{Metric: "eval_loss", Direction: progress.Minimize}}
	clean := make([]float64, f.Points)
	for i := range f.Points {
		x := float64(i+1) / float64(f.Points)
		clean[i] = sc.Value(x * steps)
		c.X = append(c.X, x)
		c.V = append(c.V, roundSig(clean[i]+f.Noise*sc.A*r.Norm(), 6))
	}
	c.finish(clean)
	return c
}

func roundSig(v float64, n int) float64 {
	s := strconv.FormatFloat(v, 'g', n, 64)
	out, _ := strconv.ParseFloat(s, 64)
	return out
}

// rng is the shared deterministic source (a seed means the same draws on
// every Go version).
type rng = splitmix.Source

func newRNG(seed uint64) *rng { return splitmix.New(seed ^ 0x2545f4914f6cdd1d) }

// jobRNG is a generator for one job's draws, independent of the order in
// which jobs are drawn.
func jobRNG(seed uint64, id int, stream uint64) *rng {
	r := newRNG(seed ^ (uint64(id)+1)*0x9e3779b97f4a7c15 ^ stream*0xd1b54a32d192ed03)
	r.Uint64()
	return r
}
