package progress

import (
	"math"
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
// run (1e12 steps, ten years of ETA) and exist so that absurd values cannot
// overflow arithmetic or earn protection.
const (
	maxCounter    = 1e12
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

// lossLike reports whether a metric name denotes something whose NaN means
// the run diverged.
func lossLike(name string) bool {
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
func Parse(t float64, s TrainerStatus) (snap Snapshot, rejs []Rejection, ok bool) {
	snap = Snapshot{Progress: math.NaN(), ReportedETA: math.NaN(), Step: math.NaN(), TotalSteps: math.NaN(),
		Epoch: math.NaN(), TotalEpochs: math.NaN()}
	reject := func(r RejectReason, field, detail string) {
		rejs = append(rejs, Rejection{T: t, Reason: r, Field: field, Detail: detail})
	}
	fatal := false
	if p := s.ProgressPercentage; p != nil {
		switch {
		case math.IsNaN(*p) || math.IsInf(*p, 0):
			reject(RejectNonFinite, "progressPercentage", "")
			fatal = true
		case *p < 0 || *p > 100:
			reject(RejectProgressRange, "progressPercentage", strconv.FormatFloat(*p, 'g', 6, 64))
			fatal = true
		default:
			snap.Progress = *p / 100
		}
	}
	if e := s.EstimatedRemainingSeconds; e != nil {
		switch {
		case math.IsNaN(*e) || math.IsInf(*e, 0):
			reject(RejectNonFinite, "estimatedRemainingSeconds", "")
		case *e < 0:
			reject(RejectNegative, "estimatedRemainingSeconds", strconv.FormatFloat(*e, 'g', 6, 64))
		case *e > maxETASeconds:
			reject(RejectAbsurd, "estimatedRemainingSeconds", strconv.FormatFloat(*e, 'g', 6, 64))
		default:
			snap.ReportedETA = *e
		}
	}
	if len(s.Metrics) > maxMetrics {
		reject(RejectTooManyMetrics, "metrics", strconv.Itoa(len(s.Metrics)))
	}
	seen := make(map[string]bool, len(s.Metrics))
	fallback := map[string]float64{}
	for i, m := range s.Metrics {
		if i >= maxMetrics {
			break
		}
		if m.Name == "" || len(m.Name) > maxMetricName {
			reject(RejectInvalidName, "metrics", "")
			continue
		}
		if seen[m.Name] {
			reject(RejectDuplicateName, m.Name, "")
			fatal = true
			continue
		}
		seen[m.Name] = true
		v, err := strconv.ParseFloat(strings.TrimSpace(m.Value), 64)
		if err != nil {
			reject(RejectUnparsable, m.Name, truncate(m.Value, 32))
			continue
		}
		name := m.Name
		if alias, isCounter := counterAliases[name]; isCounter {
			switch {
			case math.IsNaN(v) || math.IsInf(v, 0):
				reject(RejectNonFinite, name, "")
				fatal = true
			case v < 0:
				reject(RejectNegative, name, m.Value)
				fatal = true
			case v > maxCounter:
				reject(RejectAbsurd, name, truncate(m.Value, 32))
				fatal = true
			default:
				switch alias {
				case "step":
					snap.Step = v
				case "total":
					snap.TotalSteps = v
				case "epoch":
					snap.Epoch = v
				case "totalEpochs":
					snap.TotalEpochs = v
				}
			}
			continue
		}
		cname := CanonicalMetric(name)
		if math.IsNaN(v) || math.IsInf(v, 0) {
			if lossLike(cname) {
				reject(RejectNonFiniteObjective, name, "")
				snap.NonFinite = append(snap.NonFinite, cname)
			} else {
				reject(RejectNonFinite, name, "")
				snap.NonFiniteOther = append(snap.NonFiniteOther, cname)
			}
			continue
		}
		if math.Abs(v) > maxMetricAbs {
			reject(RejectAbsurd, name, truncate(m.Value, 32))
			continue
		}
		if snap.Metrics == nil {
			snap.Metrics = make(map[string]float64, len(s.Metrics))
		}
		snap.Metrics[cname] = v
		for _, c := range fallbackCounters {
			if cname == c && v >= 0 {
				fallback[c] = v
			}
		}
	}
	if math.IsNaN(snap.Step) {
		for _, c := range fallbackCounters {
			if v, ok := fallback[c]; ok {
				snap.Step = v
				break
			}
		}
	}
	if !math.IsNaN(snap.Step) && !math.IsNaN(snap.TotalSteps) && snap.Step > snap.TotalSteps*1.0001+1 {
		reject(RejectInconsistent, "current_step", "step beyond total_steps")
		fatal = true
	}
	if !math.IsNaN(snap.TotalSteps) && snap.TotalSteps == 0 {
		reject(RejectInconsistent, "total_steps", "total_steps is zero")
		snap.TotalSteps = math.NaN()
	}
	if !math.IsNaN(snap.Epoch) && !math.IsNaN(snap.TotalEpochs) && snap.Epoch > snap.TotalEpochs*1.0001+1e-9 {
		reject(RejectInconsistent, "current_epoch", "epoch beyond total epochs")
		fatal = true
	}
	if !fatal && math.IsNaN(snap.Progress) && math.IsNaN(snap.Step) && math.IsNaN(snap.Epoch) &&
		len(snap.Metrics) == 0 && len(snap.NonFinite) == 0 && len(snap.NonFiniteOther) == 0 && math.IsNaN(snap.ReportedETA) {
		reject(RejectEmpty, "trainerStatus", "")
		fatal = true
	}
	return snap, rejs, !fatal
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
