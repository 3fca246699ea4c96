package kueueext

import (
	"slices"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/progress-planner/planner/internal/stats"
)

// Prometheus collectors, registered once with controller-runtime's
// registry (served on the manager's metrics endpoint). Labels never carry
// job names: the cardinality is bounded by the number of reasons,
// verdicts, outcomes and ClusterQueues.
var (
	metricObservations = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "planner_observations_total",
		Help: "trainerStatus changes observed, by outcome (accepted: folded into the history; refused: rejected as a whole).",
	}, []string{"outcome"})
	metricRejections = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "planner_rejections_total",
		Help: "Refused reports and values in observed trainerStatus, by reason.",
	}, []string{"reason"})
	metricForecasts = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "planner_forecasts_total",
		Help: "Forecasts made, by trigger (first, urgent, deadline, reports, idle).",
	}, []string{"trigger"})
	metricFitDuration = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "planner_fit_duration_seconds",
		Help:    "Duration of forecast.Fit for one job.",
		Buckets: prometheus.ExponentialBuckets(0.0005, 2, 14),
	})
	metricUpdateToDecision = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "planner_update_to_decision_seconds",
		Help:    "For decisions on new reports: time from the watch delivering the TrainJob update with the newest report the decision includes to the decision (workqueue wait, waiting for the rate limit's fresh report, forecast).",
		Buckets: prometheus.ExponentialBuckets(0.001, 2, 16),
	})
	metricDecisions = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "planner_decisions_total",
		Help: "Decisions made, by verdict.",
	}, []string{"verdict"})
	metricBoostChanges = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "planner_boost_changes_total",
		Help: "Priority-boost annotations written to Workloads, by direction (raise, lower).",
	}, []string{"direction"})
	metricDeactivations = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "planner_deactivations_total",
		Help: "Workloads the planner deactivated (spec.active=false) by the policy's stop action.",
	})
	metricGPUHoursSaved = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "planner_gpu_hours_saved_total",
		Help: "GPU-hours the policy's stop action saved, as estimated when the planner deactivated a Workload (its GPUs times the time the job still planned to run, docs/policy.md).",
	})
	metricYields = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "planner_yields_total",
		Help: "Evictions Kueue made after the planner lowered the Workload's boost (the job yielded its GPUs).",
	})
	metricGPUHoursYielded = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "planner_gpu_hours_yielded_total",
		Help: "GPU-hours freed by yields, as estimated when Kueue evicted the Workload: its GPUs times the time the job still planned to run (the last forecast's ETA; 0 when unknown).",
	})
	metricJobsByVerdict = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "planner_jobs",
		Help: "Tracked jobs by their current verdict.",
	}, []string{"verdict"})
	metricETAError = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "planner_eta_error_ratio",
		Help:    "For jobs that succeeded: |predicted end − actual end| / (actual end − forecast time) of the first forecast past each progress checkpoint (25, 50, 75 %), the live counterpart of the backtest's ETA error.",
		Buckets: []float64{0.01, 0.02, 0.05, 0.1, 0.2, 0.3, 0.5, 1, 2},
	}, []string{"checkpoint"})
	metricAdmissionScored = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "planner_admission_estimates_scored_total",
		Help: "Waiting Workloads whose admission was estimated (by the leader's publisher; by the live page when it publishes none) and since seen admitted, by where the wait fell against the 80 % range shown with the first estimate (inside, below, above): the admission estimate's live coverage.",
	}, []string{"result"})
	metricAdmissionOutcomes = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "planner_admission_calibration_outcomes",
		Help: "Earlier admission estimates (last 24 h) the admission range calibration rests on; 0: fewer than it needs, the simulated futures' own range is shown.",
	})
	metricAdmissionFactor = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "planner_admission_range_factor",
		Help: "How far the admission ranges are stretched past the simulated futures' own: P90 + 1 min is multiplied, and P10 + 1 min divided, by this factor (1: not calibrated; below 1: narrowed).",
	})
	metricAdmissionWait = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "planner_admission_expected_wait_seconds",
		Help: "Waiting Workloads' expected time to admission as the leader's last admission-estimate pass published it (the ProgressForecast status's expected time less the pass's), by ClusterQueue: the median and the largest (statistic) over the queue's waiting Workloads with an estimate.",
	}, []string{"cluster_queue", "statistic"})
	metricNudges = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "planner_nudges_total",
		Help: "Waiting Workloads woken after the planner lowered an admitted Workload's boost.",
	})
	metricAdviseOnly = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "planner_advise_only_total",
		Help: "Times a job went advise-only although the policy enforces, by cause (foreign-owner, no-workload, duplicate-workloads, no-kueue, boost-disabled).",
	}, []string{"cause"})
	metricReconcileDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "planner_reconcile_duration_seconds",
		Help:    "Duration of one TrainJob reconcile, by result (ok, error).",
		Buckets: prometheus.ExponentialBuckets(0.001, 2, 14),
	}, []string{"result"})
	metricTrackedJobs = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "planner_tracked_jobs",
		Help: "TrainJobs whose history the planner holds in memory.",
	})
	metricKueueClockAhead = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "planner_kueue_clock_ahead_seconds",
		Help: "How far ahead of the planner's clock the newest Workload condition time Kueue stamped was when the planner read it (0: not ahead).",
	})
	metricFutureTimes = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "planner_future_timestamps_total",
		Help: "Workload condition times later than the planner's clock, clamped to it.",
	})
	metricKueueBoostGate = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "planner_kueue_priority_boost",
		Help: "Kueue's PriorityBoost feature gate as the planner last probed it: 1 for the current state (on, off, unknown), 0 for the others. off: the boost annotation has no effect and the planner writes none.",
	}, []string{"state"})
	metricKueueInfo = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "planner_kueue_info",
		Help: "1 for the detected Kueue API generation (v0.17, v0.19+, unknown) and the way the planner wakes waiting Workloads (dip on every generation).",
	}, []string{"api", "wake"})
	metricAPIAvailable = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "planner_api_available",
		Help: "1 when the API the planner needs is served (trainjobs, workloads, progressforecasts, jobs, jobsets), else 0.",
	}, []string{"resource"})
)

var registerOnce sync.Once

// RegisterMetrics registers the planner's collectors with
// controller-runtime's metrics registry; it is idempotent.
func RegisterMetrics() {
	registerOnce.Do(func() {
		ctrlmetrics.Registry.MustRegister(
			metricObservations, metricRejections, metricForecasts, metricFitDuration, metricUpdateToDecision,
			metricDecisions, metricBoostChanges, metricDeactivations, metricGPUHoursSaved, metricNudges,
			metricAdviseOnly, metricReconcileDuration, metricTrackedJobs, metricAPIAvailable,
			metricKueueClockAhead, metricFutureTimes, metricKueueBoostGate, metricKueueInfo,
			metricYields, metricGPUHoursYielded, metricJobsByVerdict, metricETAError,
			metricAdmissionScored, metricAdmissionOutcomes, metricAdmissionFactor, metricAdmissionWait,
		)
	})
}

// RecordAdmissionEstimates publishes an admission estimating pass's
// figures (the publisher's, or a live page rebuild's): the estimates
// newly scored against their admission (inside, below, above the range
// shown), and the calibration in use (outcomes, factor = e^shift).
func RecordAdmissionEstimates(inside, below, above, outcomes int, factor float64) {
	metricAdmissionScored.WithLabelValues("inside").Add(float64(inside))
	metricAdmissionScored.WithLabelValues("below").Add(float64(below))
	metricAdmissionScored.WithLabelValues("above").Add(float64(above))
	metricAdmissionOutcomes.Set(float64(outcomes))
	metricAdmissionFactor.Set(factor)
}

// RecordAdmissionWaits publishes a pass's expected waits (seconds) by
// ClusterQueue: each queue's median and largest; queues not given are
// dropped, so a queue nothing waits in leaves the metric.
func RecordAdmissionWaits(byQueue map[string][]float64) {
	metricAdmissionWait.Reset()
	for q, waits := range byQueue {
		if len(waits) == 0 {
			continue
		}
		metricAdmissionWait.WithLabelValues(q, "median").Set(stats.Median(waits))
		metricAdmissionWait.WithLabelValues(q, "max").Set(slices.Max(waits))
	}
}

// setKueueMetrics publishes the detected Kueue capabilities.
func setKueueMetrics(g gateState, gen kueueGeneration) {
	for _, s := range []gateState{gateUnknown, gateOn, gateOff} {
		v := 0.0
		if s == g {
			v = 1
		}
		metricKueueBoostGate.WithLabelValues(s.String()).Set(v)
	}
	metricKueueInfo.Reset()
	metricKueueInfo.WithLabelValues(string(gen), string(gen.wakeStyle())).Set(1)
}
