//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	kftrainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/progress-planner/planner/test/framework"
)

// bound is how long any single expected transition may take. Kueue does
// each in well under a second here; the margin absorbs a loaded CI machine.
const bound = 20 * time.Second

// TestControlPlaneYield proves the control plane is real: Kueue admits and
// unsuspends a TrainJob, queues a second one behind it, and honours the
// priority-boost annotation (the planner's only lever) by evicting the first
// and admitting the second, as the planner does it: lower the running job's
// boost, then touch the waiting job's (see TestLoweredBoostNeedsNudge).
func TestControlPlaneYield(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	env := framework.Start(t)
	a, b, wlA, wlB := runningAndPending(ctx, t, env, "")

	yield := time.Now()
	if err := env.SetPriorityBoost(ctx, wlA, -100); err != nil {
		t.Fatal(err)
	}
	// Wake B the way the planner does where a respelling no longer works
	// (Kueue v0.18+): a dip of its boost, restored at once. Works on both
	// pairs (TestLoweredBoostNeedsNudge).
	if err := dip(ctx, env, wlB); err != nil {
		t.Fatal(err)
	}
	evicted, err := env.WaitFor(ctx, wlA, bound, func() bool { return framework.WorkloadEvicted(wlA) })
	if err != nil {
		t.Fatalf("Workload %s not evicted within %v: %v; conditions %+v", wlA.Name, bound, err, wlA.Status.Conditions)
	}
	if c := findCondition(wlA, kueue.WorkloadEvicted); c != nil {
		t.Logf("job-a: Workload evicted %v after the boost patches: %s: %s", evicted.Round(time.Millisecond), c.Reason, c.Message)
	}
	if _, err := env.WaitFor(ctx, a, bound, func() bool { return framework.TrainJobSuspended(a) }); err != nil {
		t.Fatalf("TrainJob %s not suspended after eviction: %v", a.Name, err)
	}
	t.Logf("job-a: TrainJob suspended %v after the boost patches", time.Since(yield).Round(time.Millisecond))
	if _, err := env.WaitFor(ctx, wlB, bound, func() bool { return framework.WorkloadAdmitted(wlB) }); err != nil {
		t.Fatalf("Workload %s not admitted within %v of the yield: %v; conditions %+v", wlB.Name, bound, err, wlB.Status.Conditions)
	}
	t.Logf("job-b: Workload admitted %v after the boost patches", time.Since(yield).Round(time.Millisecond))
	if _, err := env.WaitFor(ctx, b, bound, func() bool { return !framework.TrainJobSuspended(b) }); err != nil {
		t.Fatalf("TrainJob %s admitted but not unsuspended: %v", b.Name, err)
	}
	t.Logf("job-b: TrainJob unsuspended %v after the boost patches", time.Since(yield).Round(time.Millisecond))

	// A is back in the queue, not admitted: the quota is B's.
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(wlA), wlA); err != nil {
		t.Fatal(err)
	}
	if framework.WorkloadQuotaReserved(wlA) {
		t.Fatalf("Workload %s holds quota beside %s", wlA.Name, wlB.Name)
	}
	var aNow kftrainer.TrainJob
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(a), &aNow); err != nil {
		t.Fatal(err)
	}
	if !framework.TrainJobSuspended(&aNow) {
		t.Fatalf("TrainJob %s running beside %s", a.Name, b.Name)
	}
}

// TestLoweredBoostNeedsNudge measures how the waiting Workloads of a
// ClusterQueue are woken after the boost of its admitted Workload is
// lowered, on the Kueue this binary is built for (docs/compatibility.md has
// the figures for each version). Lowering the boost retries them only when
// the lowered Workload has a WorkloadPriorityClass (workload.PriorityChanged,
// v0.17.0 and v0.19.2 alike). Without one, the waiting Workload stays
// pending; then a respelling of its own boost ("0") wakes it on v0.17 but
// not on v0.19 (SchedulingEquivalenceHashing, on by default from v0.18,
// keeps a Workload whose effective priority is unchanged among the
// inadmissible ones), and a dip (boost -1, restored at once) wakes it on
// both. The planner does what this test shows (pkg/kueueext/kueuecaps.go).
func TestLoweredBoostNeedsNudge(t *testing.T) {
	for _, tc := range []struct {
		name          string
		priorityClass string // "" = none
		wakesByItself bool
	}{
		{name: "without WorkloadPriorityClass", wakesByItself: false},
		{name: "with WorkloadPriorityClass", priorityClass: "training", wakesByItself: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			env := framework.Start(t)
			if tc.priorityClass != "" {
				if _, err := env.CreateWorkloadPriorityClass(ctx, tc.priorityClass, 1000); err != nil {
					t.Fatal(err)
				}
			}
			_, _, wlA, wlB := runningAndPending(ctx, t, env, tc.priorityClass)

			lowered := time.Now()
			if err := env.SetPriorityBoost(ctx, wlA, -100); err != nil {
				t.Fatal(err)
			}
			// A negative claim needs a window: 5 requeue batch periods, far
			// above the ~0.1-0.6 s the woken paths take.
			window := 5 * framework.RequeueBatchPeriod
			if !tc.wakesByItself {
				stillPending := func(what string) {
					t.Helper()
					if err := env.HoldsFor(ctx, wlB, window, func() bool { return !framework.WorkloadQuotaReserved(wlB) }); err != nil {
						t.Fatalf("Kueue %s: Workload %s got quota after %s (%v): "+
							"revisit the planner's wake-up (pkg/kueueext/kueuecaps.go) and docs/compatibility.md",
							framework.KueueVersion, wlB.Name, what, err)
					}
					t.Logf("Kueue %s: after %s, the waiting Workload still pending after %v", framework.KueueVersion, what, window)
				}
				admittedAfter := func(what string, start time.Time) {
					t.Helper()
					if _, err := env.WaitFor(ctx, wlB, bound, func() bool { return framework.WorkloadAdmitted(wlB) }); err != nil {
						t.Fatalf("Kueue %s: Workload %s not admitted after %s: %v; conditions %+v",
							framework.KueueVersion, wlB.Name, what, err, wlB.Status.Conditions)
					}
					t.Logf("Kueue %s: after %s, the waiting Workload admitted in %v", framework.KueueVersion, what,
						time.Since(start).Round(time.Millisecond))
				}
				stillPending("boost -100 on the admitted Workload alone")
				if err := env.Client.Get(ctx, client.ObjectKeyFromObject(wlA), wlA); err != nil {
					t.Fatal(err)
				}
				if !framework.WorkloadAdmitted(wlA) {
					t.Fatalf("Workload %s lost its admission without a nudge; conditions %+v", wlA.Name, wlA.Status.Conditions)
				}

				respell := time.Now()
				if err := env.SetPriorityBoost(ctx, wlB, 0); err != nil {
					t.Fatal(err)
				}
				if framework.RespellWakes {
					admittedAfter("respelling the waiting Workload's boost (absent → \"0\")", respell)
					return
				}
				stillPending("respelling the waiting Workload's boost (absent → \"0\")")

				start := time.Now()
				if err := dip(ctx, env, wlB); err != nil {
					t.Fatal(err)
				}
				admittedAfter("a dip of the waiting Workload's boost (\"0\" → \"-1\" → absent)", start)
				return
			}
			waited, err := env.WaitFor(ctx, wlB, window, func() bool { return framework.WorkloadAdmitted(wlB) })
			if err != nil {
				t.Fatalf("Kueue %s: Workload %s (WorkloadPriorityClass %s) not admitted within %v of lowering %s's boost: %v; conditions %+v",
					framework.KueueVersion, wlB.Name, tc.priorityClass, window, wlA.Name, err, wlB.Status.Conditions)
			}
			t.Logf("Kueue %s: boost -100 on the admitted Workload alone: the waiting one admitted in %v (lowered at %s)",
				framework.KueueVersion, waited.Round(time.Millisecond), lowered.Format("15:04:05.000"))
		})
	}
}

// dip lowers wl's boost by one (from none: "-1") and at once removes it
// again, as the planner wakes a waiting Workload on Kueue v0.18+.
func dip(ctx context.Context, env *framework.Env, wl *kueue.Workload) error {
	low := "-1"
	if err := env.SetPriorityBoostValue(ctx, wl, &low); err != nil {
		return fmt.Errorf("dip of %s: %w", wl.Name, err)
	}
	if err := env.SetPriorityBoostValue(ctx, wl, nil); err != nil {
		return fmt.Errorf("restoring %s after the dip: %w", wl.Name, err)
	}
	return nil
}

// runningAndPending sets up an 8-GPU ClusterQueue with TrainJob job-a (8
// GPUs) admitted and running and TrainJob job-b (8 GPUs, same priority)
// pending behind it, and Kueue quiescent: job-b has stayed pending for more
// than Kueue's requeue batch period, so no retry triggered by job-a's
// admission is still in flight.
func runningAndPending(ctx context.Context, t *testing.T, env *framework.Env, priorityClass string) (a, b *kftrainer.TrainJob, wlA, wlB *kueue.Workload) {
	t.Helper()
	const ns, queue = "team-a", "gpus"
	if _, _, err := env.CreateGPUQueue(ctx, ns, queue, 8); err != nil {
		t.Fatal(err)
	}
	if _, err := env.InstallTorchRuntime(ctx); err != nil {
		t.Fatal(err)
	}

	start := time.Now()
	a, err := env.CreateTrainJob(ctx, ns, "job-a", queue, 8, priorityClass)
	if err != nil {
		t.Fatal(err)
	}
	if !framework.TrainJobSuspended(a) {
		t.Fatalf("TrainJob %s was created unsuspended: Kueue's mutating webhook did not run", a.Name)
	}
	wlA, err = env.WaitForWorkload(ctx, a, bound)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := env.WaitFor(ctx, wlA, bound, func() bool { return framework.WorkloadAdmitted(wlA) }); err != nil {
		t.Fatalf("Workload %s not admitted: %v; conditions %+v", wlA.Name, err, wlA.Status.Conditions)
	}
	if _, err := env.WaitFor(ctx, a, bound, func() bool { return !framework.TrainJobSuspended(a) }); err != nil {
		t.Fatalf("TrainJob %s admitted but not unsuspended: %v", a.Name, err)
	}
	t.Logf("job-a: Workload %s admitted and TrainJob unsuspended %v after creation (PodSets %d, priority %d)",
		wlA.Name, time.Since(start).Round(time.Millisecond), len(wlA.Spec.PodSets), ptrValue(wlA.Spec.Priority))
	if len(wlA.Spec.PodSets) == 0 {
		t.Fatalf("Workload %s has no PodSets", wlA.Name)
	}

	b, err = env.CreateTrainJob(ctx, ns, "job-b", queue, 8, priorityClass)
	if err != nil {
		t.Fatal(err)
	}
	wlB, err = env.WaitForWorkload(ctx, b, bound)
	if err != nil {
		t.Fatal(err)
	}
	// Pending: Kueue tried it (QuotaReserved=False, reason Pending) and did
	// not admit it...
	if _, err := env.WaitFor(ctx, wlB, bound, func() bool {
		c := findCondition(wlB, kueue.WorkloadQuotaReserved)
		return c != nil && c.Status == metav1.ConditionFalse && c.Reason == "Pending"
	}); err != nil {
		t.Fatalf("Workload %s not reported pending: %v; conditions %+v", wlB.Name, err, wlB.Status.Conditions)
	}
	// ...and keeps it pending past any retry already scheduled.
	if err := env.HoldsFor(ctx, wlB, 2*framework.RequeueBatchPeriod+framework.RequeueBatchPeriod/2, func() bool {
		return !framework.WorkloadQuotaReserved(wlB)
	}); err != nil {
		t.Fatalf("Workload %s got quota beside %s in an 8-GPU queue: %v", wlB.Name, wlA.Name, err)
	}
	if c := findCondition(wlB, kueue.WorkloadQuotaReserved); c != nil {
		t.Logf("job-b: Workload %s pending: %s", wlB.Name, c.Message)
	}
	return a, b, wlA, wlB
}

func findCondition(wl *kueue.Workload, condType string) *metav1.Condition {
	return apimeta.FindStatusCondition(wl.Status.Conditions, condType)
}

func ptrValue(p *int32) int32 {
	if p == nil {
		return 0
	}
	return *p
}
