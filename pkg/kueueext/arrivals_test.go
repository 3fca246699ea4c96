package kueueext

import (
	"testing"
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/event"

	"github.com/progress-planner/planner/pkg/jobframework"
)

func TestArrivals(t *testing.T) {
	t0 := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	key := types.NamespacedName{Namespace: "ns", Name: "a"}
	job := func(step string) *trainer.TrainJob {
		tj := &trainer.TrainJob{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "a"}}
		if step != "" {
			tj.Status.TrainerStatus = &trainer.TrainerStatus{Metrics: []trainer.Metric{{Name: "current_step", Value: step}}}
		}
		return tj
	}
	tests := []struct {
		name     string
		old, new *trainer.TrainJob
		delay    time.Duration // from the delivery to the reconcile
		want     time.Time     // take's answer
	}{
		{name: "new report: delivery time", old: job("10"), new: job("20"), delay: 3 * time.Second, want: t0},
		{name: "same report (metadata change): reconcile time", old: job("10"), new: job("10"), delay: 3 * time.Second, want: t0.Add(3 * time.Second)},
		{name: "status cleared: reconcile time", old: job("10"), new: job(""), delay: time.Second, want: t0.Add(time.Second)},
		{name: "first report on an update", old: job(""), new: job("10"), delay: 2 * time.Second, want: t0},
		{name: "delivered after the reconcile began: left for the next one", old: job("10"), new: job("20"), delay: -time.Second, want: t0.Add(-time.Second)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			clk := clocktesting.NewFakeClock(t0)
			a := newArrivals(clk, jobframework.TrainJob{})
			if !a.predicate().Update(event.UpdateEvent{ObjectOld: tc.old, ObjectNew: tc.new}) {
				t.Fatal("the predicate filtered an event; it must only observe")
			}
			at := t0.Add(tc.delay)
			if got := a.take(key, at); !got.Equal(tc.want) {
				t.Fatalf("take = %v, want %v", got, tc.want)
			}
			// Taken (or never stamped), the next reconcile falls back to its
			// own time; a delivery the first reconcile could not have seen
			// is still there for the next.
			later := t0.Add(time.Minute)
			want := later
			if tc.delay < 0 {
				want = t0
			}
			if got := a.take(key, later); !got.Equal(want) {
				t.Fatalf("second take = %v, want %v", got, want)
			}
		})
	}

	t.Run("delete forgets, create stamps", func(t *testing.T) {
		clk := clocktesting.NewFakeClock(t0)
		a := newArrivals(clk, jobframework.TrainJob{})
		a.predicate().Create(event.CreateEvent{Object: job("10")})
		clk.Step(5 * time.Second)
		if got := a.take(key, clk.Now()); !got.Equal(t0) {
			t.Fatalf("after create: %v, want %v", got, t0)
		}
		a.predicate().Create(event.CreateEvent{Object: job("10")})
		a.predicate().Delete(event.DeleteEvent{Object: job("10")})
		if got := a.take(key, clk.Now()); !got.Equal(clk.Now()) {
			t.Fatalf("after delete: %v, want the fallback", got)
		}
	})
	var nilArrivals *arrivals
	if got := nilArrivals.take(key, t0); !got.Equal(t0) {
		t.Fatalf("nil arrivals: %v", got)
	}
}
