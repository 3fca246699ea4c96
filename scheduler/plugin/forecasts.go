package plugin

import (
	"encoding/json"
	"fmt"
	"math"
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

// FromProgressForecast decodes pf. A missing or undecodable decision is an
// error: the caller then treats the job as untracked.
func FromProgressForecast(pf *v1alpha1.ProgressForecast) (JobForecast, error) {
	jf := JobForecast{Namespace: pf.Namespace, Name: pf.Name, Verdict: preempt.Verdict(pf.Status.Verdict)}
	if pf.Status.LastReportTime != nil {
		jf.LastReport = pf.Status.LastReportTime.Time
	}
	if pf.Status.Decision == nil || len(pf.Status.Decision.Raw) == 0 {
		return jf, fmt.Errorf("progressforecast %s/%s has no decision yet", pf.Namespace, pf.Name)
	}
	var d preempt.Decision
	if err := json.Unmarshal(pf.Status.Decision.Raw, &d); err != nil {
		return jf, fmt.Errorf("decoding the decision of progressforecast %s/%s: %w", pf.Namespace, pf.Name, err)
	}
	if d.Verdict != "" {
		jf.Verdict = d.Verdict
	}
	jf.Mode, jf.Boost = d.Mode, d.Boost
	jf.DecidedAt = fromUnix(d.At)
	if d.ProtectedUntil != nil {
		jf.ProtectedUntil = fromUnix(*d.ProtectedUntil)
	}
	return jf, nil
}

// fromUnix converts the policy's time base (Unix seconds) to a time; a
// non-finite value is the zero time.
func fromUnix(sec float64) time.Time {
	if math.IsNaN(sec) || math.IsInf(sec, 0) {
		return time.Time{}
	}
	s, frac := math.Modf(sec)
	return time.Unix(int64(s), int64(frac*1e9))
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
