package jobframework

import (
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"

	"github.com/progress-planner/planner/pkg/progress"
	"github.com/progress-planner/planner/pkg/workloads"
)

func TestMemorySourceEvents(t *testing.T) {
	src := NewMemorySource()
	jobs := src.Events(schema.GroupKind{Group: "batch", Kind: "Job"})
	sets := src.Events(schema.GroupKind{Group: "jobset.x-k8s.io", Kind: "JobSet"})
	ref := workloads.Ref{APIVersion: "batch/v1", Kind: "Job", Namespace: "ml", Name: "sweep"}
	src.Put(ref, progress.TrainerStatus{ProgressPercentage: ptr.To(1.0)}, t0)
	select {
	case ev := <-jobs:
		if ev.Object.GetNamespace() != "ml" || ev.Object.GetName() != "sweep" {
			t.Errorf("event for %s/%s", ev.Object.GetNamespace(), ev.Object.GetName())
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no event")
	}
	select {
	case ev := <-sets:
		t.Errorf("a JobSet event for a Job's report: %v", ev.Object.GetName())
	default:
	}
	src.Forget(ref)
	if _, ok := src.Latest(ref); ok {
		t.Error("a forgotten report")
	}
}

// More reports than the buffer holds: Put never blocks, and every event
// is delivered.
func TestMemorySourceNoLoss(t *testing.T) {
	src := NewMemorySource()
	gk := schema.GroupKind{Group: "batch", Kind: "Job"}
	n := eventBuffer + 50
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			src.Put(workloads.Ref{APIVersion: "batch/v1", Kind: "Job", Namespace: "ml", Name: "j", UID: "u"},
				progress.TrainerStatus{ProgressPercentage: ptr.To(float64(i))}, t0)
		}()
	}
	wg.Wait()
	ch := src.Events(gk)
	for i := range n {
		select {
		case <-ch:
		case <-time.After(5 * time.Second):
			t.Fatalf("event %d of %d not delivered", i, n)
		}
	}
}
