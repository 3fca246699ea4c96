package kueueext

import (
	"errors"
	"fmt"
	"syscall"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/event"
)

// The planner's own blindness: from a lost API call until the next watch
// delivery, watchingSince is now (no silence counts); after it, the
// delivery's time. Answers about objects are not lost contact.
func TestContactWatchingSince(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	clk := clocktesting.NewFakePassiveClock(t0)
	c := newContact(clk)
	if got := c.watchingSince(t0.Add(time.Hour)); !got.Equal(t0) {
		t.Fatalf("since start: %v, want %v", got, t0)
	}
	gr := schema.GroupResource{Group: "planner.progress.io", Resource: "progressforecasts"}
	for _, err := range []error{apierrors.NewNotFound(gr, "x"), apierrors.NewConflict(gr, "x", errors.New("changed")),
		apierrors.NewForbidden(gr, "x", errors.New("rbac")), nil} {
		c.failed(err)
	}
	if got := c.watchingSince(t0.Add(time.Hour)); !got.Equal(t0) {
		t.Fatalf("answers about objects lost contact: %v", got)
	}
	clk.SetTime(t0.Add(10 * time.Minute))
	c.failed(fmt.Errorf("update status: %w", syscall.ECONNREFUSED))
	now := t0.Add(11 * time.Minute)
	if got := c.watchingSince(now); !got.Equal(now) {
		t.Fatalf("blind after a refused connection: %v, want now %v", got, now)
	}
	clk.SetTime(t0.Add(12 * time.Minute))
	c.predicate().Update(event.UpdateEvent{})
	if got := c.watchingSince(t0.Add(20 * time.Minute)); !got.Equal(t0.Add(12 * time.Minute)) {
		t.Fatalf("after the first delivery: %v, want %v", got, t0.Add(12*time.Minute))
	}
	// A server that answers "unavailable" is lost contact too.
	clk.SetTime(t0.Add(30 * time.Minute))
	c.failed(apierrors.NewServiceUnavailable("etcd leader changed"))
	if got := c.watchingSince(t0.Add(31 * time.Minute)); !got.Equal(t0.Add(31 * time.Minute)) {
		t.Fatalf("blind after 503: %v", got)
	}
}
