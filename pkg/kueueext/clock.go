package kueueext

import (
	"sync"
	"time"
)

// notAfter is t, or now when t is later: times from other components and
// from stored state never lie in the planner's future.
func notAfter(t, now time.Time) time.Time {
	if t.After(now) {
		return now
	}
	return t
}

// kueueClock reads times Kueue stamped (Workload conditions) against the
// planner's clock. A time ahead of the planner's now is clamped to it (with
// Kueue's clock an hour ahead, a job would otherwise be "admitted -48m
// ago"), and the skew is reported: the newest time read minus the
// planner's now when reading it (older times say nothing about the skew,
// only that something happened long ago).
type kueueClock struct {
	mu     sync.Mutex
	newest time.Time
}

func (k *kueueClock) read(t, now time.Time) time.Time {
	k.mu.Lock()
	if t.After(k.newest) {
		k.newest = t
		metricKueueClockAhead.Set(max(t.Sub(now), 0).Seconds())
	}
	k.mu.Unlock()
	if t.After(now) {
		metricFutureTimes.Inc()
	}
	return notAfter(t, now)
}
