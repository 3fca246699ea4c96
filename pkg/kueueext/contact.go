package kueueext

import (
	"errors"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
)

// contact tracks whether the planner itself can see the cluster, so that
// its own blindness is not read as a job's silence. While the API server
// is down (or a control-plane upgrade restarts it) no report reaches the
// planner, and its watches take tens of seconds to resume after the
// server is back; a job judged Hung over that window would lose its boost
// and get it back once reports flow again (a flap, measured by
// TestFaultAPIServerRestart). The rule: silence is counted from when the
// planner last regained sight — its start, or the first watch event
// delivered after its latest API failure — and not at all while it has
// not regained it (preempt.Facts.WatchingSince).
type contact struct {
	clock clock.PassiveClock
	mu    sync.Mutex
	since time.Time // seeing the cluster without interruption since
	lost  time.Time // the latest API failure not yet followed by a watch event (zero: none)
}

func newContact(clk clock.PassiveClock) *contact {
	return &contact{clock: clk, since: clk.Now()}
}

// failed notes err from a call to the API server when it says the server
// could not be reached or did not answer (not an answer about an object:
// not found, conflict, invalid, forbidden).
func (c *contact) failed(err error) {
	if c == nil || err == nil || !lostContact(err) {
		return
	}
	c.mu.Lock()
	c.lost = c.clock.Now()
	c.mu.Unlock()
}

// lostContact: err is a transport failure (no API status at all: refused,
// reset, timed out) or a status saying the server is unavailable,
// overloaded or timed out.
func lostContact(err error) bool {
	var st apierrors.APIStatus
	if !errors.As(err, &st) {
		return true
	}
	return apierrors.IsServiceUnavailable(err) || apierrors.IsServerTimeout(err) || apierrors.IsTimeout(err) ||
		apierrors.IsTooManyRequests(err) || apierrors.IsInternalError(err)
}

// delivered notes that a watch delivered an event: the planner sees the
// cluster again.
func (c *contact) delivered() {
	if c == nil {
		return
	}
	c.mu.Lock()
	if !c.lost.IsZero() {
		c.since, c.lost = c.clock.Now(), time.Time{}
	}
	c.mu.Unlock()
}

// watchingSince is since when the planner has seen the cluster without
// interruption; now while it has not regained sight after a failure.
func (c *contact) watchingSince(now time.Time) time.Time {
	if c == nil {
		return time.Time{}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.lost.IsZero() {
		return now
	}
	return c.since
}

// predicate notes every delivery of the watch it is attached to and
// filters nothing.
func (c *contact) predicate() predicate.Predicate {
	note := func() bool { c.delivered(); return true }
	return predicate.Funcs{
		CreateFunc:  func(event.CreateEvent) bool { return note() },
		UpdateFunc:  func(event.UpdateEvent) bool { return note() },
		DeleteFunc:  func(event.DeleteEvent) bool { return note() },
		GenericFunc: func(event.GenericEvent) bool { return note() },
	}
}
