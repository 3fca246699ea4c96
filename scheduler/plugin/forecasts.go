package plugin

import (
	"fmt"
	"time"

	"github.com/progress-planner/planner/api/v1alpha1"
	"github.com/progress-planner/planner/pkg/preempt"
)

// JobForecast is the part of a ProgressForecast the plugin acts on, decoded
// once when the informer stores it (the CR's history can be large and the
// decision is JSON; neither should be parsed in a scheduling cycle).
type JobForecast struct {
	// Namespace and Name of the ProgressForecast (= the TrainJob's).
	Namespace, Name string
	// Verdict of the latest decision.
	Verdict preempt.Verdict
	// Mode is the policy's mode for the job; advise means the planner only
	// explains, so the plugin treats the job as untracked.
	Mode preempt.Mode
	// Boost is the decision's boost (0 in advise mode).
	Boost int32
	// DecidedAt is when the decision was made (planner clock).
	DecidedAt time.Time
	// ProtectedUntil is the end of the NearDone lease; zero when none.
	ProtectedUntil time.Time
	// LastReport is the job's latest progress report; zero when unknown.
	LastReport time.Time
}

// FromProgressForecast reads pf's typed decision fields (never the
// decision blob, whose layout is the planner's internal state). A
// ProgressForecast without them (no decision yet, or written by a planner
// older than the typed fields) or with a version this plugin does not
// know is an error: the caller then treats the job as untracked, the
// default kube-scheduler behaviour, rather than guess (docs/
// scheduler-plugin.md, "Versions").
func FromProgressForecast(pf *v1alpha1.ProgressForecast) (JobForecast, error) {
	st := &pf.Status
	jf := JobForecast{Namespace: pf.Namespace, Name: pf.Name, Verdict: preempt.Verdict(st.Verdict)}
	if st.LastReportTime != nil {
		jf.LastReport = st.LastReportTime.Time
	}
	switch {
	case st.DecisionVersion == 0 || st.DecidedTime == nil:
		return jf, fmt.Errorf("progressforecast %s/%s has no typed decision (none yet, or a planner older than decision version %d)",
			pf.Namespace, pf.Name, v1alpha1.DecisionVersion)
	case st.DecisionVersion > v1alpha1.DecisionVersion:
		return jf, fmt.Errorf("progressforecast %s/%s has decision version %d, this planner-scheduler knows %d: upgrade planner-scheduler",
			pf.Namespace, pf.Name, st.DecisionVersion, v1alpha1.DecisionVersion)
	}
	// status.mode is the policy's mode, or "advise-only" when the policy
	// enforces but the planner does not write the Workload: the policy's
	// decision still stands for the scheduler.
	jf.Mode = preempt.ModeEnforce
	if st.Mode == string(preempt.ModeAdvise) {
		jf.Mode = preempt.ModeAdvise
	} else {
		jf.Boost = st.AdvisedBoost
	}
	jf.DecidedAt = st.DecidedTime.Time
	if st.ProtectedUntil != nil {
		jf.ProtectedUntil = st.ProtectedUntil.Time
	}
	return jf, nil
}

// Tracked reports whether the plugin acts on the job at all.
func (f *JobForecast) Tracked() bool { return f != nil && f.Mode != preempt.ModeAdvise }

// fresh reports whether the decision is recent enough to act on its verdict
// and boost. A lease is judged by its own end instead (leased reports the
// protection even from an old decision, because the lease was granted for
// exactly that long).
func (f *JobForecast) fresh(now time.Time, maxAge time.Duration) bool {
	return f.Tracked() && !f.DecidedAt.IsZero() && now.Sub(f.DecidedAt) <= maxAge
}

// Leased reports whether the job holds an active NearDone lease at now.
func (f *JobForecast) Leased(now time.Time) bool {
	return f.Tracked() && !f.ProtectedUntil.IsZero() && now.Before(f.ProtectedUntil)
}

// Stalled reports whether a fresh decision says the job should yield
// (Plateaued, Hung or Diverging).
func (f *JobForecast) Stalled(now time.Time, maxAge time.Duration) bool {
	return f.fresh(now, maxAge) && f.Verdict.Stalled()
}

// EffectiveBoost is the boost the queue order adds: the decision's boost
// while the decision is fresh, else 0.
func (f *JobForecast) EffectiveBoost(now time.Time, maxAge time.Duration) int32 {
	if !f.fresh(now, maxAge) {
		return 0
	}
	return f.Boost
}

// Forecasts looks up the forecast of the job namespace/name; nil when the
// job is untracked. Implementations must be safe for concurrent use.
type Forecasts interface {
	Get(namespace, name string) *JobForecast
}

// StaticForecasts is a fixed set of forecasts, keyed by namespace/name, for
// tests and benchmarks.
type StaticForecasts map[string]*JobForecast

// Get implements Forecasts.
func (s StaticForecasts) Get(namespace, name string) *JobForecast { return s[namespace+"/"+name] }
