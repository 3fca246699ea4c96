package admission

import (
	"slices"
	"sync"
	"time"

	"github.com/progress-planner/planner/pkg/report"
)

// Tracker keeps, for a process that estimates again and again (the live
// page, at every rebuild), each waiting Workload's first estimate and
// what became of it: the outcomes Calibrate reads. It lives in memory: a
// restarted planner calibrates again from the estimates it makes.
type Tracker struct {
	// Horizon: estimates older than this are forgotten (24 h when 0, as
	// the arrivals the futures draw from).
	Horizon time.Duration

	mu      sync.Mutex
	tracked map[string]*trackedEstimate
}

// trackedEstimate is one Workload's first estimate (the futures' own
// interval and the one shown, seconds after at) and, once seen admitted,
// when.
type trackedEstimate struct {
	at               time.Time
	p10, p90         float64
	shownLo, shownHi float64
	admitted         time.Time // zero: still waiting
}

// Scored counts the tracked estimates whose Workload was admitted, by
// where the wait fell against the range shown: the live page's own
// coverage.
type Scored struct{ Inside, Below, Above int }

// Observe records what a rebuild at now saw: the Workloads (views) and
// the estimates of the waiting ones (est, keyed by Workload key as
// ForWaiting keys them). A Workload seen waiting with a bounded estimate
// for the first time is tracked; a tracked one seen running is admitted
// (now, to the rebuild's period) and scored against the range shown with
// its first estimate; one gone or finished before it was admitted is
// forgotten (its wait is not known).
func (t *Tracker) Observe(now time.Time, views []report.WorkloadView, est map[string]*report.AdmissionEstimate) Scored {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.tracked == nil {
		t.tracked = map[string]*trackedEstimate{}
	}
	var sc Scored
	seen := make(map[string]bool, len(views))
	for _, v := range views {
		k := v.Key()
		seen[k] = true
		tr := t.tracked[k]
		switch {
		case tr == nil && v.State == report.Waiting:
			if e := est[k]; e != nil && e.FuturesP10 != nil && e.FuturesP90 != nil && e.P10 != nil && e.P90 != nil {
				t.tracked[k] = &trackedEstimate{at: now, p10: *e.FuturesP10, p90: *e.FuturesP90, shownLo: *e.P10, shownHi: *e.P90}
			}
		case tr != nil && tr.admitted.IsZero() && v.State == report.Running:
			tr.admitted = now
			switch wait := now.Sub(tr.at).Seconds(); {
			case wait < tr.shownLo:
				sc.Below++
			case wait > tr.shownHi:
				sc.Above++
			default:
				sc.Inside++
			}
		case tr != nil && tr.admitted.IsZero() && v.State != report.Waiting:
			delete(t.tracked, k)
		}
	}
	t.prune(now, seen)
	return sc
}

// prune forgets the estimates of Workloads gone before their admission
// and those made before the horizon, except the MinOutcomes most recent
// admitted ones among the latter (CalibrateWithin falls back on them
// after a quiet spell): memory stays bounded by the horizon's estimates.
func (t *Tracker) prune(now time.Time, seen map[string]bool) {
	var old []string
	for k, tr := range t.tracked {
		switch {
		case !seen[k] && tr.admitted.IsZero():
			delete(t.tracked, k)
		case now.Sub(tr.at) > t.horizon():
			if tr.admitted.IsZero() {
				delete(t.tracked, k)
			} else {
				old = append(old, k)
			}
		}
	}
	if len(old) <= MinOutcomes {
		return
	}
	slices.SortFunc(old, func(a, b string) int { return t.tracked[b].at.Compare(t.tracked[a].at) }) // newest first
	for _, k := range old[MinOutcomes:] {
		delete(t.tracked, k)
	}
}

func (t *Tracker) horizon() time.Duration {
	if t.Horizon > 0 {
		return t.Horizon
	}
	return 24 * time.Hour
}

// Calibration is the calibration from the outcomes of the estimates made
// within the horizon before now, made up from older ones when they are
// too few (CalibrateWithin).
func (t *Tracker) Calibration(now time.Time) Calibration {
	t.mu.Lock()
	defer t.mu.Unlock()
	past := make([]Outcome, 0, len(t.tracked))
	for _, tr := range t.tracked {
		o := Outcome{P10: tr.p10, P90: tr.p90, Age: now.Sub(tr.at).Seconds()}
		if tr.admitted.IsZero() {
			o.Wait, o.Waiting = now.Sub(tr.at).Seconds(), true
		} else {
			o.Wait = tr.admitted.Sub(tr.at).Seconds()
		}
		past = append(past, o)
	}
	return CalibrateWithin(past, t.horizon().Seconds())
}
