package progress

import (
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// TrainerStatus is shaped like Kubeflow Trainer v2
// TrainJob.status.trainerStatus. Everything in it is tenant-written and
// untrusted: Parse validates it.
type TrainerStatus struct {
	ProgressPercentage        *float64      `json:"progressPercentage,omitempty"`
	EstimatedRemainingSeconds *float64      `json:"estimatedRemainingSeconds,omitempty"`
	Metrics                   []MetricValue `json:"metrics,omitempty"`
	LastUpdatedTime           *time.Time    `json:"lastUpdatedTime,omitempty"`
}

// MetricValue is one reported metric; values are strings in the Trainer
// API ("0.2347", "450", "nan").
type MetricValue struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// RejectReason classifies why a report, or one value in it, was refused.
// Reasons are kept and counted per job (History.Rejections).
type RejectReason string

const (
	RejectUnparsable         RejectReason = "unparsable"       // a value that is not a number
	RejectNonFinite          RejectReason = "non-finite"       // NaN or ±Inf
	RejectNegative           RejectReason = "negative"         // negative step, total, epoch or ETA
	RejectProgressRange      RejectReason = "progress-range"   // progress outside 0–100
	RejectAbsurd             RejectReason = "absurd"           // beyond sane magnitudes (e.g. 1e15 steps)
	RejectInconsistent       RejectReason = "inconsistent"     // step beyond total, epoch beyond total epochs
	RejectOutOfOrder         RejectReason = "out-of-order"     // observed before the latest accepted report
	RejectDuplicateName      RejectReason = "duplicate-metric" // the same metric twice in one report
	RejectEmpty              RejectReason = "empty"            // nothing usable in the report
	RejectTooManyMetrics     RejectReason = "too-many-metrics" // more metrics than the history keeps
	RejectInvalidName        RejectReason = "invalid-name"     // empty or overlong metric name
	RejectNonFiniteObjective RejectReason = "non-finite-loss"  // NaN/Inf in a loss-like metric: kept as a divergence signal
)

// Rejection is one refused value with its reason.
type Rejection struct {
	T      float64      `json:"t"`
	Reason RejectReason `json:"reason"`
	Field  string       `json:"field"`
	Detail string       `json:"detail,omitempty"`
}

// Sanity bounds for tenant-written values. They are far beyond any real
// run and exist so that absurd values cannot overflow arithmetic or earn
// protection. A progress counter may reach 1e15: a count of tokens passes
// 1e12 in any language model pretrained on over a trillion of them (15e12
// for the largest public runs), and integers to 1e15 are exact in a
// float64. Other values stay within 1e12, and an ETA within ten years.
const (
	maxCounter    = 1e15
	maxETASeconds = 10 * 365 * 24 * 3600
	maxMetricAbs  = 1e12
	maxMetrics    = 64
	maxMetricName = 128
)

// Snapshot is one validated report: the counters and metrics the planner
// could parse, NaN where a field is absent.
type Snapshot struct {
	Progress    float64 // fraction 0..1 from progressPercentage; NaN if absent
	ReportedETA float64 // seconds; NaN if absent
	Step        float64 // current_step (or another progress counter); NaN if absent
	TotalSteps  float64 // NaN if absent
	Epoch       float64 // NaN if absent
	TotalEpochs float64 // NaN if absent
	// Metrics holds every other finite metric by canonical name.
	Metrics map[string]float64
	// NonFinite lists loss-like metrics that reported NaN/Inf: a divergence
	// signal, never a value.
	NonFinite []string
	// NonFiniteOther lists other metrics that reported NaN/Inf (e.g. an
	// accuracy objective, or grad_norm during fp16 loss scaling); they are
	// a divergence signal only when the metric is the job's objective.
	NonFiniteOther []string
}

// counter names real reporters use, snake and camel case, mapped to the
// Snapshot field they fill. MLPerf-style counters (samples_count, …) are
// used as the step axis when no step is reported.
var counterAliases = map[string]string{
	"current_step": "step", "currentStep": "step", "step": "step", "global_step": "step",
	"total_steps": "total", "totalSteps": "total", "max_steps": "total",
	"current_epoch": "epoch", "currentEpoch": "epoch",
	"total_epochs": "totalEpochs", "totalEpochs": "totalEpochs",
}

// IsTotalCounter reports whether a metric name is a fixed total's counter
// (total steps or epochs) under any spelling counterAliases reads.
func IsTotalCounter(name string) bool {
	f := counterAliases[name]
	return f == "total" || f == "totalEpochs"
}

// fallbackCounters are progress counters used as the step axis when a
// report has no step (MLPerf logs samples, tokens or epochs).
var fallbackCounters = []string{"samples_count", "tokens_count", "epoch"}

// CanonicalMetric maps camelCase metric names to the snake_case spelling so
// "evalLoss" and "eval_loss" are one series. Only a capital that starts a
// lowercase word is split ("evalLoss" → "eval_loss", "TrainLoss" →
// "train_loss"); acronyms stay as they are ("mAP", "top1AUC").
func CanonicalMetric(name string) string {
	r := []rune(name)
	var b strings.Builder
	for i, c := range r {
		isUpper := c >= 'A' && c <= 'Z'
		startsWord := isUpper && i+1 < len(r) && r[i+1] >= 'a' && r[i+1] <= 'z'
		switch {
		case startsWord && i == 0:
			b.WriteRune(c - 'A' + 'a')
		case startsWord && !(r[i-1] == '_'):
			b.WriteByte('_')
			b.WriteRune(c - 'A' + 'a')
		case startsWord:
			b.WriteRune(c - 'A' + 'a')
		default:
			b.WriteRune(c)
		}
	}
	return b.String()
}

// LossLike reports whether a metric name denotes something whose NaN means
// the run diverged.
func LossLike(name string) bool {
	for _, k := range []string{"loss", "perplexity", "wer", "fid"} {
		if strings.Contains(name, k) {
			return true
		}
	}
	return false
}

// Parse validates a TrainerStatus observed at planner time t. It never
// panics; every refused value is returned as a Rejection, and the Snapshot
// keeps only what passed. ok is false when the report must be refused as a
// whole (it would corrupt the history: out-of-range progress, negative or
// inconsistent counters).
//
// The fields are checked one after the other (progress, ETA, metrics),
// then the counters against each other, then whether anything usable is
// left.
func Parse(t float64, s TrainerStatus) (snap Snapshot, rejs []Rejection, ok bool) {
	ps := parser{t: t, snap: Snapshot{Progress: math.NaN(), ReportedETA: math.NaN(), Step: math.NaN(), TotalSteps: math.NaN(),
		Epoch: math.NaN(), TotalEpochs: math.NaN()}}
	ps.progress(s.ProgressPercentage)
	ps.eta(s.EstimatedRemainingSeconds)
	ps.metrics(s.Metrics)
	ps.fallbackStep()
	ps.consistency()
	ps.usable()
	return ps.snap, ps.rejs, !ps.fatal
}

// parser is Parse's state: the snapshot so far, the rejections in the
// order found, and whether the report as a whole is refused.
type parser struct {
	t     float64
	snap  Snapshot
	rejs  []Rejection
	fatal bool
	// fallback holds the fallbackCounters reported, for a report without
	// a step.
	fallback map[string]float64
}

// reject refuses one value.
func (ps *parser) reject(r RejectReason, field, detail string) {
	ps.rejs = append(ps.rejs, Rejection{T: ps.t, Reason: r, Field: field, Detail: detail})
}

// refuse refuses one value that would corrupt the history, and with it
// the report.
func (ps *parser) refuse(r RejectReason, field, detail string) {
	ps.reject(r, field, detail)
	ps.fatal = true
}

// progress: a finite percentage within 0–100, else the report is refused.
func (ps *parser) progress(p *float64) {
	if p == nil {
		return
	}
	switch {
	case math.IsNaN(*p) || math.IsInf(*p, 0):
		ps.refuse(RejectNonFinite, "progressPercentage", "")
	case *p < 0 || *p > 100:
		ps.refuse(RejectProgressRange, "progressPercentage", strconv.FormatFloat(*p, 'g', 6, 64))
	default:
		ps.snap.Progress = *p / 100
	}
}

// eta: a finite, non-negative ETA of at most maxETASeconds; a bad one is
// dropped alone.
func (ps *parser) eta(e *float64) {
	if e == nil {
		return
	}
	switch {
	case math.IsNaN(*e) || math.IsInf(*e, 0):
		ps.reject(RejectNonFinite, "estimatedRemainingSeconds", "")
	case *e < 0:
		ps.reject(RejectNegative, "estimatedRemainingSeconds", strconv.FormatFloat(*e, 'g', 6, 64))
	case *e > maxETASeconds:
		ps.reject(RejectAbsurd, "estimatedRemainingSeconds", strconv.FormatFloat(*e, 'g', 6, 64))
	default:
		ps.snap.ReportedETA = *e
	}
}

// metrics: at most maxMetrics of them, each with a valid name, reported
// once (a duplicate refuses the report) and parsing as a number; counters
// fill the Snapshot's counter fields, everything else Metrics.
func (ps *parser) metrics(ms []MetricValue) {
	if len(ms) > maxMetrics {
		ps.reject(RejectTooManyMetrics, "metrics", strconv.Itoa(len(ms)))
	}
	seen := make(map[string]bool, len(ms))
	ps.fallback = map[string]float64{}
	for i, m := range ms {
		if i >= maxMetrics {
			break
		}
		if m.Name == "" || len(m.Name) > maxMetricName {
			ps.reject(RejectInvalidName, "metrics", "")
			continue
		}
		if seen[m.Name] {
			ps.refuse(RejectDuplicateName, m.Name, "")
			continue
		}
		seen[m.Name] = true
		v, err := strconv.ParseFloat(strings.TrimSpace(m.Value), 64)
		if err != nil {
			ps.reject(RejectUnparsable, m.Name, truncate(m.Value, 32))
			continue
		}
		if alias, isCounter := counterAliases[m.Name]; isCounter {
			ps.counter(alias, m, v)
			continue
		}
		ps.metric(m, v, len(ms))
	}
}

// counter: a finite, non-negative counter of at most maxCounter, else the
// report is refused (a bad counter would corrupt the history's axis).
func (ps *parser) counter(alias string, m MetricValue, v float64) {
	switch {
	case math.IsNaN(v) || math.IsInf(v, 0):
		ps.refuse(RejectNonFinite, m.Name, "")
	case v < 0:
		ps.refuse(RejectNegative, m.Name, m.Value)
	case v > maxCounter:
		ps.refuse(RejectAbsurd, m.Name, truncate(m.Value, 32))
	default:
		switch alias {
		case "step":
			ps.snap.Step = v
		case "total":
			ps.snap.TotalSteps = v
		case "epoch":
			ps.snap.Epoch = v
		case "totalEpochs":
			ps.snap.TotalEpochs = v
		}
	}
}

// metric: a finite value of at most maxMetricAbs under its canonical name
// (n sizes the map: the number of metrics reported). A NaN/Inf is never a
// value but is remembered as a divergence signal (NonFinite for a
// loss-like name, NonFiniteOther otherwise).
func (ps *parser) metric(m MetricValue, v float64, n int) {
	cname := CanonicalMetric(m.Name)
	if math.IsNaN(v) || math.IsInf(v, 0) {
		if LossLike(cname) {
			ps.reject(RejectNonFiniteObjective, m.Name, "")
			ps.snap.NonFinite = append(ps.snap.NonFinite, cname)
		} else {
			ps.reject(RejectNonFinite, m.Name, "")
			ps.snap.NonFiniteOther = append(ps.snap.NonFiniteOther, cname)
		}
		return
	}
	// A counter the step axis may fall back to has a counter's bound.
	fallback := slices.Contains(fallbackCounters, cname)
	limit := maxMetricAbs
	if fallback {
		limit = maxCounter
	}
	if math.Abs(v) > limit {
		ps.reject(RejectAbsurd, m.Name, truncate(m.Value, 32))
		return
	}
	if ps.snap.Metrics == nil {
		ps.snap.Metrics = make(map[string]float64, n)
	}
	ps.snap.Metrics[cname] = v
	if fallback && v >= 0 {
		ps.fallback[cname] = v
	}
}

// fallbackStep: without a step, the first fallbackCounter reported is the
// step axis.
func (ps *parser) fallbackStep() {
	if !math.IsNaN(ps.snap.Step) {
		return
	}
	for _, c := range fallbackCounters {
		if v, ok := ps.fallback[c]; ok {
			ps.snap.Step = v
			return
		}
	}
}

// consistency: a step beyond its total or an epoch beyond its total
// refuses the report; a zero total is dropped.
func (ps *parser) consistency() {
	snap := &ps.snap
	if !math.IsNaN(snap.Step) && !math.IsNaN(snap.TotalSteps) && snap.Step > snap.TotalSteps*1.0001+1 {
		ps.refuse(RejectInconsistent, "current_step", "step beyond total_steps")
	}
	if !math.IsNaN(snap.TotalSteps) && snap.TotalSteps == 0 {
		ps.reject(RejectInconsistent, "total_steps", "total_steps is zero")
		snap.TotalSteps = math.NaN()
	}
	if !math.IsNaN(snap.Epoch) && !math.IsNaN(snap.TotalEpochs) && snap.Epoch > snap.TotalEpochs*1.0001+1e-9 {
		ps.refuse(RejectInconsistent, "current_epoch", "epoch beyond total epochs")
	}
}

// usable: a report that is not refused already but has nothing left to
// store is refused as empty.
func (ps *parser) usable() {
	snap := &ps.snap
	if !ps.fatal && math.IsNaN(snap.Progress) && math.IsNaN(snap.Step) && math.IsNaN(snap.Epoch) &&
		len(snap.Metrics) == 0 && len(snap.NonFinite) == 0 && len(snap.NonFiniteOther) == 0 && math.IsNaN(snap.ReportedETA) {
		ps.refuse(RejectEmpty, "trainerStatus", "")
	}
}

// Fraction is the planner's own progress measure: step/total, else
// epoch/totalEpochs, else NaN. Reported percentage is not used: it is the
// job's claim.
func (s Snapshot) Fraction() float64 {
	if !math.IsNaN(s.Step) && !math.IsNaN(s.TotalSteps) && s.TotalSteps > 0 {
		return math.Min(s.Step/s.TotalSteps, 1)
	}
	if !math.IsNaN(s.Epoch) && !math.IsNaN(s.TotalEpochs) && s.TotalEpochs > 0 {
		return math.Min(s.Epoch/s.TotalEpochs, 1)
	}
	return math.NaN()
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
