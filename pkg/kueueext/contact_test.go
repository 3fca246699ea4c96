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

const contactKind = "TrainJob.trainer.kubeflow.org"

// The planner's own blindness: from a lost API call until the next
// delivery of the kind's watch, watchingSince is now (no silence counts);
// after it, the delivery's time. Answers about objects are not lost
// contact.
func TestContactWatchingSince(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	clk := clocktesting.NewFakePassiveClock(t0)
	c := newContact(clk)
	if got := c.watchingSince(contactKind, t0.Add(time.Hour)); !got.Equal(t0) {
		t.Fatalf("since start: %v, want %v", got, t0)
	}
	gr := schema.GroupResource{Group: "planner.progress.io", Resource: "progressforecasts"}
	for _, err := range []error{apierrors.NewNotFound(gr, "x"), apierrors.NewConflict(gr, "x", errors.New("changed")),
		apierrors.NewForbidden(gr, "x", errors.New("rbac")), nil} {
		c.failed(err)
	}
	if got := c.watchingSince(contactKind, t0.Add(time.Hour)); !got.Equal(t0) {
		t.Fatalf("answers about objects lost contact: %v", got)
	}
	clk.SetTime(t0.Add(10 * time.Minute))
	c.failed(fmt.Errorf("update status: %w", syscall.ECONNREFUSED))
	now := t0.Add(11 * time.Minute)
	if got := c.watchingSince(contactKind, now); !got.Equal(now) {
		t.Fatalf("blind after a refused connection: %v, want now %v", got, now)
	}
	clk.SetTime(t0.Add(12 * time.Minute))
	c.predicate(contactKind).Update(event.UpdateEvent{})
	if got := c.watchingSince(contactKind, t0.Add(20*time.Minute)); !got.Equal(t0.Add(12 * time.Minute)) {
		t.Fatalf("after the first delivery: %v, want %v", got, t0.Add(12*time.Minute))
	}
	// A server that answers "unavailable" is lost contact too.
	clk.SetTime(t0.Add(30 * time.Minute))
	c.failed(apierrors.NewServiceUnavailable("etcd leader changed"))
	if got := c.watchingSince(contactKind, t0.Add(31*time.Minute)); !got.Equal(t0.Add(31 * time.Minute)) {
		t.Fatalf("blind after 503: %v", got)
	}
}

// Sight is per kind: a delivery of another watch (the planner's own
// ProgressForecast writes coming back) does not restore sight of a kind
// whose watch is still backing off, until kindResumeBound has passed; the
// kind's own delivery restores it at once. Once the bound has restored it,
// a later delivery of the kind does not move it (that would reset a hung
// job's silence).
func TestContactSightIsPerKind(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	clk := clocktesting.NewFakePassiveClock(t0)
	c := newContact(clk)
	const jobKind = "Job.batch"
	c.failed(syscall.ECONNREFUSED)
	at := func(d time.Duration) time.Time { return t0.Add(d) }

	clk.SetTime(at(20 * time.Second))
	c.predicate("").Update(event.UpdateEvent{}) // a ProgressForecast comes back
	for _, d := range []time.Duration{20 * time.Second, time.Minute, kindResumeBound} {
		if got := c.watchingSince(contactKind, at(d)); !got.Equal(at(d)) {
			t.Errorf("TrainJob at +%v: watching since %v, want now (its watch has not delivered)", d, got)
		}
	}
	clk.SetTime(at(70 * time.Second))
	c.predicate(contactKind).Create(event.CreateEvent{}) // the TrainJob watch relisted
	if got := c.watchingSince(contactKind, at(5*time.Minute)); !got.Equal(at(70 * time.Second)) {
		t.Errorf("TrainJob after its own delivery: %v, want %v", got, at(70*time.Second))
	}
	// The Job watch resumed without a relist and has nothing to deliver:
	// the bound after the first delivery restores it.
	bound := at(20*time.Second + kindResumeBound)
	if got := c.watchingSince(jobKind, at(5*time.Minute)); !got.Equal(bound) {
		t.Errorf("Job by the bound: %v, want %v", got, bound)
	}
	clk.SetTime(at(10 * time.Minute))
	c.predicate(jobKind).Update(event.UpdateEvent{})
	if got := c.watchingSince(jobKind, at(11*time.Minute)); !got.Equal(bound) {
		t.Errorf("Job after a delivery past the bound: %v, want it kept at %v", got, bound)
	}
	// A new failure blinds every kind again, and the bound counts from the
	// first delivery after it.
	clk.SetTime(at(20 * time.Minute))
	c.failed(apierrors.NewServiceUnavailable("starting"))
	for _, k := range []string{contactKind, jobKind} {
		if got := c.watchingSince(k, at(30*time.Minute)); !got.Equal(at(30 * time.Minute)) {
			t.Errorf("%s after a second failure with no delivery: %v, want now", k, got)
		}
	}
}
