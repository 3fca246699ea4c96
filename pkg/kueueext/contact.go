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
// TestFaultAPIServerRestart). The rule: a kind's silence is counted from
// when the planner last regained sight of that kind — its start, or the
// first delivery of the kind's own watch after the planner's latest API
// failure — and not at all while it has not regained it
// (preempt.Facts.WatchingSince).
//
// Sight is per kind because each kind's watch resumes on its own backoff:
// the planner's own ProgressForecast writes coming back prove the server
// answers, not that the TrainJob watch has relisted (the flake this
// replaced: a job judged Hung 50 s after a ProgressForecast event while
// its kind's watch was still backing off). A kind whose watch resumed
// without a relist delivers nothing for a job that is really hung, so a
// delivery of any other watch also restores sight of every kind, but only
// kindResumeBound after it.
type contact struct {
	clock clock.PassiveClock
	mu    sync.Mutex
	start time.Time
	lost  time.Time            // the latest API failure (zero: none since start)
	other time.Time            // the first delivery of any watch after lost (zero: none yet)
	kinds map[string]time.Time // per kind, the first delivery of its own watch after lost
}

// kindResumeBound: how long after the server answers again a kind's watch
// has surely resumed. client-go's reflector retries a broken watch after a
// backoff capped at 30 s with jitter 1.0, so at most 60 s; doubled for the
// relist and one more failed attempt while the server was still starting.
const kindResumeBound = 2 * time.Minute

func newContact(clk clock.PassiveClock) *contact {
	return &contact{clock: clk, start: clk.Now(), kinds: map[string]time.Time{}}
}

// failed notes err from a call to the API server when it says the server
// could not be reached or did not answer (not an answer about an object:
// not found, conflict, invalid, forbidden).
func (c *contact) failed(err error) {
	if c == nil || err == nil || !lostContact(err) {
		return
	}
	c.mu.Lock()
	c.lost, c.other = c.clock.Now(), time.Time{}
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

// delivered notes that a watch delivered an event; kind is the job kind
// the watch is for, "" for any other watch.
func (c *contact) delivered(kind string) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.lost.IsZero() {
		return
	}
	now := c.clock.Now()
	if c.other.IsZero() {
		c.other = now
	}
	if kind != "" && c.kinds[kind].Before(c.lost) {
		// Sight the bound already restored stays where it was: moving
		// it would reset the silence of a job that is really hung.
		c.kinds[kind] = c.boundedRegain(now)
	}
}

// boundedRegain is now, or the time sight of every kind came back by the
// bound if that was earlier. c.mu is held.
func (c *contact) boundedRegain(now time.Time) time.Time {
	if b := c.other.Add(kindResumeBound); !c.other.IsZero() && b.Before(now) {
		return b
	}
	return now
}

// watchingSince is since when the planner has seen kind without
// interruption; now while it has not regained sight after a failure.
func (c *contact) watchingSince(kind string, now time.Time) time.Time {
	if c == nil {
		return time.Time{}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.lost.IsZero() {
		return c.start
	}
	if seen := c.kinds[kind]; !seen.Before(c.lost) {
		return seen
	}
	return c.boundedRegain(now)
}

// predicate notes every delivery of the watch it is attached to (kind as
// for delivered) and filters nothing.
func (c *contact) predicate(kind string) predicate.Predicate {
	note := func() bool { c.delivered(kind); return true }
	return predicate.Funcs{
		CreateFunc:  func(event.CreateEvent) bool { return note() },
		UpdateFunc:  func(event.UpdateEvent) bool { return note() },
		DeleteFunc:  func(event.DeleteEvent) bool { return note() },
		GenericFunc: func(event.GenericEvent) bool { return note() },
	}
}
