package kueueext

import (
	"sync"
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
)

// arrivals remembers when the watch delivered each TrainJob's latest
// trainerStatus change, so the decision latency can be measured from the
// delivery rather than from the reconcile that picked the change up (which
// may have waited in the workqueue).
type arrivals struct {
	clock clock.PassiveClock
	mu    sync.Mutex
	at    map[types.NamespacedName]time.Time
}

func newArrivals(clk clock.PassiveClock) *arrivals {
	return &arrivals{clock: clk, at: map[types.NamespacedName]time.Time{}}
}

// predicate stamps deliveries that carry a new trainerStatus. It filters
// nothing: it only observes the event stream where it is delivered.
func (a *arrivals) predicate() predicate.Predicate {
	return predicate.Funcs{
		CreateFunc: func(e event.CreateEvent) bool {
			if tj, ok := e.Object.(*trainer.TrainJob); ok && tj.Status.TrainerStatus != nil {
				a.note(types.NamespacedName{Namespace: tj.Namespace, Name: tj.Name})
			}
			return true
		},
		UpdateFunc: func(e event.UpdateEvent) bool {
			old, ok1 := e.ObjectOld.(*trainer.TrainJob)
			tj, ok2 := e.ObjectNew.(*trainer.TrainJob)
			if ok1 && ok2 && tj.Status.TrainerStatus != nil &&
				!equality.Semantic.DeepEqual(old.Status.TrainerStatus, tj.Status.TrainerStatus) {
				a.note(types.NamespacedName{Namespace: tj.Namespace, Name: tj.Name})
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
