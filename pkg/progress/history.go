package progress

import (
	"math"
	"slices"
	"sort"

	"github.com/progress-planner/planner/internal/stats"
)

// Limits bound one job's history. The defaults keep at most 512 points:
// the most recent TailPoints untouched (a dense recent tail for rates and
// plateau tests) and older points thinned, dropping uninformative reports
// (no value changed) first and then every other one, so the early shape
// of the curve survives at decreasing density.
type Limits struct {
	MaxPoints  int // hard cap on stored points
	TailPoints int // most recent points never thinned
	MaxMetrics int // metric series kept per job (first seen wins, objective-like names first)
	// KeepMetrics are always kept, beyond MaxMetrics: the job's objective
	// when it is known before the first report. eval_loss, loss, val_loss
	// and train_loss are always kept too, so a job reporting dozens of
	// metrics cannot crowd out the default objective.
	KeepMetrics []string
	// MaxRejections bounds the recent rejections kept verbatim (counts by
	// reason are always complete).
	MaxRejections int
}

// DefaultLimits are documented in docs/architecture.md.
func DefaultLimits() Limits {
	return Limits{MaxPoints: 512, TailPoints: 256, MaxMetrics: 12, MaxRejections: 16}
}

// Point is one accepted report in a History. Absent values are NaN.
type Point struct {
	T           float64 // planner-observed time
	Seg         int     // segment: increments when progress/step resets (restart)
	Step        float64 // progress counter (step, else samples/epochs)
	TotalSteps  float64
	Epoch       float64
	TotalEpochs float64
	Progress    float64 // reported progressPercentage / 100
	ReportedETA float64 // reported estimatedRemainingSeconds
	NonFinite   bool    // a loss-like metric reported NaN/Inf here
	// NaNMetrics names other metrics that reported NaN/Inf here.
	NaNMetrics []string
	vals       []float64
}

// Fraction is the planner's own progress measure at this point: step over
// total steps, else epoch over total epochs, else NaN.
func (p Point) Fraction() float64 {
	return Snapshot{Step: p.Step, TotalSteps: p.TotalSteps, Epoch: p.Epoch, TotalEpochs: p.TotalEpochs}.Fraction()
}

// History is one job's bounded, ordered progress history. It is not safe
// for concurrent use; the controller keeps one per job behind its own lock.
type History struct {
	limits     Limits
	points     []Point
	names      []string       // metric column names
	index      map[string]int // name -> column
	lastReport float64        // time of the latest accepted report, heartbeat or not
	heartbeats int            // reports that repeated the previous one (collapsed)
	rejCount   map[RejectReason]int
	rejRecent  []Rejection
	thinned    int // points dropped by the bound
	// longestGap is the longest interval between consecutive stored points
	// of the last segment, measured as they arrived, so thinning does not
	// erase it.
	longestGap float64
	firstNaN   float64
	// resumed: the next point starts a new segment (Resume).
	resumed bool
}

// NewHistory returns an empty history with the given limits (zero fields
// take the defaults).
func NewHistory(l Limits) *History {
	d := DefaultLimits()
	if l.MaxPoints <= 0 {
		l.MaxPoints = d.MaxPoints
	}
	if l.TailPoints <= 0 || l.TailPoints >= l.MaxPoints {
		l.TailPoints = l.MaxPoints / 2
	}
	if l.MaxMetrics <= 0 {
		l.MaxMetrics = d.MaxMetrics
	}
	if l.MaxRejections <= 0 {
		l.MaxRejections = d.MaxRejections
	}
	return &History{limits: l, index: map[string]int{}, rejCount: map[RejectReason]int{}, lastReport: math.NaN(), firstNaN: math.NaN()}
}

// Len is the number of stored points.
func (h *History) Len() int { return len(h.points) }

// MetricColumn is the column of metric name in every Point (see
// Point.Metric); ok is false when the metric is not stored.
func (h *History) MetricColumn(name string) (c int, ok bool) { c, ok = h.index[name]; return c, ok }

// Points returns the stored points (read-only; do not modify).
func (h *History) Points() []Point { return h.points }

// LastReport is the time of the latest accepted report (including
// heartbeats that repeated the previous values); NaN when empty.
func (h *History) LastReport() float64 { return h.lastReport }

// Heartbeats counts reports that only repeated the previous values.
func (h *History) Heartbeats() int { return h.heartbeats }

// Thinned counts points dropped to respect the bound.
func (h *History) Thinned() int { return h.thinned }

// LongestGap is the longest interval between consecutive stored points of
// the last segment, as the reports arrived (heartbeats collapsed): the
// longest silence the job came back from in this segment, which thinning
// would otherwise hide.
func (h *History) LongestGap() float64 { return h.longestGap }

// IntactFrom is the index of the first stored point from which on no point
// was ever dropped by the bound: gaps between later points are gaps in the
// job's reports, not in storage. Thinning touches only the head, so the
// last TailPoints points are intact once anything was thinned.
func (h *History) IntactFrom() int {
	if h.thinned == 0 {
		return 0
	}
	return max(0, len(h.points)-h.limits.TailPoints)
}

// FirstNonFinite is the first time a loss-like metric reported NaN/Inf, or NaN.
func (h *History) FirstNonFinite() float64 { return h.firstNaN }

// Rejections returns the count of refused reports/values by reason.
func (h *History) Rejections() map[RejectReason]int {
	out := make(map[RejectReason]int, len(h.rejCount))
	for k, v := range h.rejCount {
		out[k] = v
	}
	return out
}

// RecentRejections returns the latest rejections kept verbatim.
func (h *History) RecentRejections() []Rejection { return append([]Rejection(nil), h.rejRecent...) }

// MetricNames lists the stored metric series.
func (h *History) MetricNames() []string { return append([]string(nil), h.names...) }

// HasMetric reports whether a metric series is stored.
func (h *History) HasMetric(name string) bool { _, ok := h.index[name]; return ok }

// Value returns point i's value of metric name (NaN when absent).
func (h *History) Value(i int, name string) float64 {
	c, ok := h.index[name]
	if !ok {
		return math.NaN()
	}
	return h.points[i].val(c)
}

// Metric is the point's value in column c (History.MetricColumn); NaN
// when absent.
func (p *Point) Metric(c int) float64 { return p.val(c) }

func (p *Point) val(c int) float64 {
	if c < len(p.vals) {
		return p.vals[c]
	}
	return math.NaN()
}

func (h *History) addRejections(rs []Rejection) {
	for _, r := range rs {
		h.rejCount[r.Reason]++
		if len(h.rejRecent) == h.limits.MaxRejections {
			copy(h.rejRecent, h.rejRecent[1:])
			h.rejRecent = h.rejRecent[:len(h.rejRecent)-1]
		}
		h.rejRecent = append(h.rejRecent, r)
	}
}

// metricPriority orders which metric series are kept when a job reports
// more than Limits.MaxMetrics: objective candidates first.
func metricPriority(name string) int {
	switch {
	case name == "eval_loss" || name == "loss" || name == "val_loss" || name == "train_loss" || name == "learning_rate":
		// learning_rate: the plateau rules read the schedule.
		return 0
	case len(name) > 5 && name[:5] == "eval_":
		return 1
	case name == "learning_rate" || name == "grad_norm" || name == "epoch":
		return 3
	default:
		return 2
	}
}

// alwaysKept: names admitted beyond MaxMetrics (bounded: the default
// objective names plus Limits.KeepMetrics).
func (h *History) alwaysKept(name string) bool {
	return metricPriority(name) == 0 || slices.Contains(h.limits.KeepMetrics, name)
}

// Observe validates a report observed at planner time t and appends it.
// Invalid values are rejected with a counted reason and never stored; a
// report that would corrupt the history (out-of-order time, impossible
// progress or counters) is refused whole. A report that repeats the
// previous one is collapsed into a heartbeat. A drop of step or progress,
// or a report after a long silence (resumedAfterPause), starts a new
// segment (a restart from checkpoint).
func (h *History) Observe(t float64, s TrainerStatus) (accepted bool, rejections []Rejection) {
	if math.IsNaN(t) || math.IsInf(t, 0) {
		r := []Rejection{{T: t, Reason: RejectNonFinite, Field: "t"}}
		h.addRejections(r)
		return false, r
	}
	if n := len(h.points); n > 0 && t < h.lastReport {
		r := []Rejection{{T: t, Reason: RejectOutOfOrder, Field: "t", Detail: "observed before the latest accepted report"}}
		h.addRejections(r)
		return false, r
	}
	snap, rejs, ok := Parse(t, s)
	h.addRejections(rejs)
	if !ok {
		return false, rejs
	}
	p := Point{T: t, Step: snap.Step, TotalSteps: snap.TotalSteps, Epoch: snap.Epoch, TotalEpochs: snap.TotalEpochs,
		Progress: snap.Progress, ReportedETA: snap.ReportedETA, NonFinite: len(snap.NonFinite) > 0}
	if len(snap.NonFiniteOther) > 0 {
		p.NaNMetrics = snap.NonFiniteOther[:min(len(snap.NonFiniteOther), h.limits.MaxMetrics)]
		slices.Sort(p.NaNMetrics)
	}
	if p.NonFinite && math.IsNaN(h.firstNaN) {
		h.firstNaN = t
	}
	// Metric columns: admit new names while there is room, by priority
	// within this report so objective-like names win.
	names := make([]string, 0, len(snap.Metrics))
	for k := range snap.Metrics {
		names = append(names, k)
	}
	sort.Slice(names, func(i, j int) bool {
		pi, pj := metricPriority(names[i]), metricPriority(names[j])
		if pi != pj {
			return pi < pj
		}
		return names[i] < names[j]
	})
	for _, k := range names {
		if _, ok := h.index[k]; !ok && (len(h.names) < h.limits.MaxMetrics || h.alwaysKept(k)) {
			h.index[k] = len(h.names)
			h.names = append(h.names, k)
		}
	}
	p.vals = make([]float64, len(h.names))
	for i := range p.vals {
		p.vals[i] = math.NaN()
	}
	for k, v := range snap.Metrics {
		if c, ok := h.index[k]; ok {
			p.vals[c] = v
		}
	}
	if n := len(h.points); n > 0 {
		last := &h.points[n-1]
		p.Seg = last.Seg
		if isRestart(last, &p) || h.resumed || h.resumedAfterPause(t) {
			p.Seg++
		} else if sameReport(last, &p) {
			h.lastReport = t
			h.heartbeats++
			return true, rejs
		}
	}
	if n := len(h.points); n > 0 && h.points[n-1].Seg == p.Seg {
		h.longestGap = max(h.longestGap, t-h.points[n-1].T)
	} else {
		h.longestGap = 0
	}
	h.points = append(h.points, p)
	h.lastReport = t
	h.resumed = false
	if len(h.points) > h.limits.MaxPoints {
		h.thin()
	}
	return true, rejs
}

// isRestart: the step counter went backwards, reported progress fell back
// (to 0 % on a resume) by more than a rounding step, or a 0 % report
// arrived after the counter had moved (the train-begin report of a resumed
// job whose reporter did not report progress before).
func isRestart(last, p *Point) bool {
	if !math.IsNaN(p.Step) && !math.IsNaN(last.Step) && p.Step < last.Step {
		return true
	}
	if !math.IsNaN(p.Progress) && !math.IsNaN(last.Progress) && p.Progress < last.Progress-0.005 {
		return true
	}
	if p.Progress == 0 && math.IsNaN(last.Progress) && last.Step > 0 && !(p.Step > 0) {
		return true
	}
	return false
}

// Resume tells the history that the job was stopped and started again (the
// controller sees its Workload readmitted after an eviction): the next
// report starts a new segment even when its counters do not show the
// restart, as when the checkpoint was taken after the last report.
func (h *History) Resume() {
	if len(h.points) > 0 {
		h.resumed = true
	}
}

// Pause detection: a job preempted and resumed from a checkpoint taken
// after its last report comes back with a higher step, so no counter drop
// shows the restart; only the silence does. Without a new segment the
// time it spent waiting would read as a very slow stretch of training
// (pace, ETA, and the reported-ETA plausibility check all suffer).
const (
	pauseFactor   = 30     // × the segment's median report interval
	pauseMinimum  = 1800.0 // seconds: never shorter than this
	pauseInterval = 8      // recent intervals the median is taken over
)

// resumedAfterPause: a report at t comes after a silence of more than
// pauseFactor × the current segment's recent median report interval (and
// more than pauseMinimum). Heartbeats count as reports.
func (h *History) resumedAfterPause(t float64) bool {
	gap := t - h.lastReport
	if gap <= pauseMinimum {
		return false
	}
	pts := h.points
	n := len(pts)
	var d [pauseInterval]float64
	k := 0
	for i := n - 1; i > 0 && k < pauseInterval && pts[i].Seg == pts[n-1].Seg && pts[i-1].Seg == pts[n-1].Seg; i-- {
		if dt := pts[i].T - pts[i-1].T; dt > 0 {
			d[k] = dt
			k++
		}
	}
	if k < 3 {
		return false
	}
	return gap > pauseFactor*stats.Median(d[:k])
}

// sameReport: nothing but time (and the reported ETA, which a heartbeat
// recomputes from elapsed time) changed.
func sameReport(a, b *Point) bool {
	if !sameF(a.Step, b.Step) || !sameF(a.TotalSteps, b.TotalSteps) || !sameF(a.Epoch, b.Epoch) ||
		!sameF(a.TotalEpochs, b.TotalEpochs) || !sameF(a.Progress, b.Progress) || a.NonFinite != b.NonFinite ||
		!slices.Equal(a.NaNMetrics, b.NaNMetrics) {
		return false
	}
	n := max(len(a.vals), len(b.vals))
	for c := 0; c < n; c++ {
		if !sameF(a.val(c), b.val(c)) {
			return false
		}
	}
	return true
}

func sameF(a, b float64) bool { return a == b || (math.IsNaN(a) && math.IsNaN(b)) }

// Informative: a point whose values differ from its predecessor's in a
// metric or in segment (counters always move, so they do not count).
func (h *History) Informative(i int) bool {
	if i == 0 {
		return true
	}
	a, b := &h.points[i-1], &h.points[i]
	if a.Seg != b.Seg || a.NonFinite != b.NonFinite || !slices.Equal(a.NaNMetrics, b.NaNMetrics) {
		return true
	}
	for c := range h.names {
		if !sameF(a.val(c), b.val(c)) {
			return true
		}
	}
	return false
}

// thin enforces MaxPoints. Only the head (all but the most recent
// TailPoints) is thinned, and there points are removed where they are
// densest on a logarithmic age scale: log(1+t-t0) spacing keeps the early
// shape of the curve while older stretches become sparser. Reports in which
// no value changed count as half as far from their neighbours, so they go
// first. The first point and segment starts are kept. At least a quarter
// of the head is removed per call so thinning is amortised. It returns how
// many points were dropped.
func (h *History) thin() int {
	headEnd := len(h.points) - h.limits.TailPoints
	excess := len(h.points) - h.limits.MaxPoints
	target := max(excess, headEnd/4)
	if headEnd < 3 || target <= 0 {
		return 0
	}
	t0 := h.points[0].T
	logAge := func(i int) float64 { return math.Log1p(math.Max(0, h.points[i].T-t0)) }
	type cand struct {
		i     int
		score float64
	}
	cands := make([]cand, 0, headEnd)
	for i := 1; i < headEnd; i++ {
		if h.points[i].Seg != h.points[i-1].Seg {
			continue
		}
		sc := logAge(i+1) - logAge(i-1)
		if !h.Informative(i) {
			sc /= 2
		}
		cands = append(cands, cand{i, sc})
	}
	sort.SliceStable(cands, func(a, b int) bool { return cands[a].score < cands[b].score })
	drop := make([]bool, len(h.points))
	dropped := 0
	for _, c := range cands {
		if dropped >= target {
			break
		}
		// Never drop two neighbours in one pass: the scores assumed both stay.
		if drop[c.i-1] || drop[c.i+1] {
			continue
		}
		drop[c.i] = true
		dropped++
	}
	out := h.points[:0]
	for i, p := range h.points {
		if !drop[i] {
			out = append(out, p)
		}
	}
	h.thinned += len(h.points) - len(out)
	for i := len(out); i < len(h.points); i++ {
		h.points[i] = Point{}
	}
	h.points = out
	return dropped
}
