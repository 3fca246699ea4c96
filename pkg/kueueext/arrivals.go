package kueueext

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"github.com/progress-planner/planner/pkg/jobframework"
)

// arrivals remembers when the watch delivered each job's latest report
// change (a TrainJob's trainerStatus; kinds fed by a report source stamp
// their reports themselves: jobframework.Report.ReceivedAt), so the decision latency can be measured from the
// delivery rather than from the reconcile that picked the change up (which
// may have waited in the workqueue).
type arrivals struct {
	clock clock.PassiveClock
	kind  jobframework.Adapter
	mu    sync.Mutex
	at    map[types.NamespacedName]time.Time
}

func newArrivals(clk clock.PassiveClock, kind jobframework.Adapter) *arrivals {
	return &arrivals{clock: clk, kind: kind, at: map[types.NamespacedName]time.Time{}}
}

// predicate stamps deliveries that carry a new report in the object (the
// report's hash changed). It filters nothing: it only observes the event
// stream where it is delivered.
func (a *arrivals) predicate() predicate.Predicate {
	return predicate.Funcs{
		CreateFunc: func(e event.CreateEvent) bool {
			if r, ok := a.kind.Latest(e.Object); ok && r.ReceivedAt.IsZero() {
				a.note(types.NamespacedName{Namespace: e.Object.GetNamespace(), Name: e.Object.GetName()})
			}
			return true
		},
		UpdateFunc: func(e event.UpdateEvent) bool {
			old, _ := a.kind.Latest(e.ObjectOld)
			r, ok := a.kind.Latest(e.ObjectNew)
			if ok && r.ReceivedAt.IsZero() && r.Hash != old.Hash {
				a.note(types.NamespacedName{Namespace: e.ObjectNew.GetNamespace(), Name: e.ObjectNew.GetName()})
			}
			return true
		},
		DeleteFunc: func(e event.DeleteEvent) bool {
			a.mu.Lock()
			delete(a.at, types.NamespacedName{Namespace: e.Object.GetNamespace(), Name: e.Object.GetName()})
			a.mu.Unlock()
			return true
		},
	}
}

func (a *arrivals) note(key types.NamespacedName) {
	now := a.clock.Now()
	a.mu.Lock()
	a.at[key] = now
	a.mu.Unlock()
}

// take returns when the latest trainerStatus change of key was delivered
// and forgets it; def when none is remembered (the reconcile saw the
// change before its event was handled, or no watch feeds this reconciler).
func (a *arrivals) take(key types.NamespacedName, def time.Time) time.Time {
	if a == nil {
		return def
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	t, ok := a.at[key]
	if !ok || t.After(def) {
		return def
	}
	delete(a.at, key)
	return t
}
