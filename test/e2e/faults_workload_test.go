//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	kftrainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/progress-planner/planner/api/v1alpha1"
	"github.com/progress-planner/planner/pkg/kueueext"
	"github.com/progress-planner/planner/pkg/preempt"
	"github.com/progress-planner/planner/test/framework"
)

// Fault tests 4 and 7 of issue 22 (docs/testing.md "Fault tests"): the
// Workload under a boosted job changes hands. Both start from a running
// 8-GPU job whose replayed history has plateaued and whose Workload the
// planner has boosted to -100 (plateauedAndBoosted).

// plateauedAndBoosted creates the job in ns, starts the planner, replays
// 80 % of synth__early-plateau and waits until the planner owns a -100
// boost on the job's Workload.
func plateauedAndBoosted(ctx context.Context, t *testing.T, ns string) (*framework.Env, client.Client, *kftrainer.TrainJob, *kueue.Workload) {
	t.Helper()
	env := plannerEnv(t)
	tj, wl := runningJob(ctx, t, env, ns, "gpus", "job-a", "")
	c := startPlanner(ctx, t, env, testConfig())
	if err := <-replay(ctx, t, c, tj, prefix(history(t, "synth__early-plateau").Reports, 0.8)); err != nil {
		t.Fatal(err)
	}
	if _, err := env.WaitFor(ctx, wl, plannerBound, func() bool {
		n, ok := boostValue(wl)
		return ok && n == -100 && kueueext.PlannerOwnsBoost(wl.ManagedFields)
	}); err != nil {
		t.Fatalf("the planner did not boost job-a's Workload to -100: %v (annotations %v)", err, wl.Annotations)
	}
	return env, c, tj, wl
}

// boostWrites is the planner's process-wide count of boost annotations
// written (planner_boost_changes_total, both directions).
func boostWrites() float64 {
	var n float64
	for _, dir := range []string{"raise", "lower"} {
		if v := gaugeValueOK(map[string]string{"direction": dir}, "planner_boost_changes_total"); v > 0 {
			n += v
		}
	}
	return n
}

// TestFaultWorkloadRecreated (fault 4): the boosted job's Workload is
// deleted, and Kueue creates a new one for the same job. With no further
// progress report, the planner applies the job's boost to the new
// Workload and records it in the ProgressForecast.
func TestFaultWorkloadRecreated(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	env, c, tj, old := plateauedAndBoosted(ctx, t, "wl-recreate")
	if err := env.Client.Delete(ctx, old); err != nil {
		t.Fatal(err)
	}
	deleted := time.Now()
	var nw *kueue.Workload
	if _, err := framework.Poll(ctx, bound, func(ctx context.Context) (bool, error) {
		var l kueue.WorkloadList
		if err := env.Client.List(ctx, &l, client.InNamespace(tj.Namespace)); err != nil {
			return false, err
		}
		for i := range l.Items {
			w := &l.Items[i]
			if w.UID != old.UID && w.DeletionTimestamp == nil && ownedBy(w, tj) {
				nw = w
				return true, nil
			}
		}
		return false, nil
	}); err != nil {
		t.Fatalf("Kueue created no new Workload for job-a after the old one was deleted: %v", err)
	}
	created := time.Now()
	t.Logf("Workload %s (uid %s) deleted; Kueue created %s (uid %s) %v later", old.Name, old.UID, nw.Name, nw.UID, created.Sub(deleted).Round(time.Millisecond))
	if _, err := env.WaitFor(ctx, nw, plannerBound, func() bool {
		n, ok := boostValue(nw)
		return ok && n == -100 && kueueext.PlannerOwnsBoost(nw.ManagedFields)
	}); err != nil {
		t.Fatalf("the boost was not re-applied to the new Workload: %v (annotations %v, managers %v)", err, nw.Annotations, kueueext.BoostOwners(nw.ManagedFields))
	}
	t.Logf("boost -100 re-applied to the new Workload %v after it was created (%v after the delete)",
		time.Since(created).Round(time.Millisecond), time.Since(deleted).Round(time.Millisecond))
	pf := waitPF(ctx, t, c, tj, plannerBound, "the ProgressForecast naming the new Workload", func(pf *v1alpha1.ProgressForecast) bool {
		return pf.Status.Workload == nw.Name && pf.Status.Boost == -100
	})
	if pf.Status.Verdict != string(preempt.Plateaued) {
		t.Errorf("verdict %s after the Workload was recreated, want %s", pf.Status.Verdict, preempt.Plateaued)
	}
}

// ownedBy: w's controller is job.
func ownedBy(w *kueue.Workload, job client.Object) bool {
	for _, r := range w.OwnerReferences {
		if r.UID == job.GetUID() {
			return true
		}
	}
	return false
}

// TestFaultConflictingBoostWriter (fault 7): another controller (field
// manager kueue-priority-booster, server-side apply with force, as a
// booster taking the annotation would) writes the boost annotation of the
// planner's boosted Workload every 200 ms for 15 s, while the job keeps
// reporting. The planner goes advise-only for that Workload, names the
// other writer, and writes nothing: its boost-write count does not move,
// and it never owns the annotation again, so there is no write war.
func TestFaultConflictingBoostWriter(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	env, c, tj, wl := plateauedAndBoosted(ctx, t, "wl-conflict")
	const other = "kueue-priority-booster"
	writes0 := boostWrites()
	var foreign atomic.Int64
	written := make(chan error, 1)
	go func() {
		written <- writeBoostContinuously(ctx, env.Client, wl, other, 200*time.Millisecond, 15*time.Second, &foreign)
	}()
	// The job keeps reporting meanwhile, so the planner keeps deciding.
	reports := history(t, "synth__early-plateau").Reports
	replayed := replay(ctx, t, c, tj, reports[len(prefix(reports, 0.8)):len(prefix(reports, 0.86))])

	pf := waitPF(ctx, t, c, tj, plannerBound, "advise-only naming the other writer", func(pf *v1alpha1.ProgressForecast) bool {
		return pf.Status.Mode == "advise-only" && strings.Contains(pf.Status.AdviseOnly, other)
	})
	t.Logf("job-a: mode %s, advised %d: %s", pf.Status.Mode, pf.Status.AdvisedBoost, pf.Status.AdviseOnly)
	waitEvent(ctx, t, c, tj.Namespace, "TrainJob", tj.Name, kueueext.ReasonAdviseOnly)
	// For the rest of the war the planner never takes the annotation back.
	if err := env.HoldsFor(ctx, wl, 10*time.Second, func() bool { return !kueueext.PlannerOwnsBoost(wl.ManagedFields) }); err != nil {
		t.Errorf("the planner owns the boost annotation again: %v (managers %v)", err, kueueext.BoostOwners(wl.ManagedFields))
	}
	if err := <-written; err != nil {
		t.Fatalf("the other writer: %v", err)
	}
	if err := <-replayed; err != nil {
		t.Fatal(err)
	}
	time.Sleep(3 * time.Second) // let the last foreign write's reconcile land
	writes := boostWrites() - writes0
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(wl), wl); err != nil {
		t.Fatal(err)
	}
	v, _ := boostOf(wl)
	t.Logf("the other writer wrote the annotation %d times; the planner wrote it %v times (planner_boost_changes_total); final value %q, managers %v",
		foreign.Load(), writes, v, kueueext.BoostOwners(wl.ManagedFields))
	if writes != 0 {
		t.Errorf("the planner wrote the boost %v times while another controller managed it", writes)
	}
	if kueueext.PlannerOwnsBoost(wl.ManagedFields) {
		t.Error("the planner owns the boost annotation after the war")
	}
	if foreign.Load() < 20 {
		t.Errorf("the other writer managed only %d writes", foreign.Load())
	}
}

// writeBoostContinuously applies the boost annotation to wl as field
// manager every period for d, alternating two values, and counts the
// writes the API server accepted.
func writeBoostContinuously(ctx context.Context, c client.Client, wl *kueue.Workload, manager string, period, d time.Duration, n *atomic.Int64) error {
	tick := time.NewTicker(period)
	defer tick.Stop()
	end := time.After(d)
	for i := 0; ; i++ {
		u := &unstructured.Unstructured{}
		u.SetAPIVersion(kueue.SchemeGroupVersion.String())
		u.SetKind("Workload")
		u.SetNamespace(wl.Namespace)
		u.SetName(wl.Name)
		u.SetAnnotations(map[string]string{kueueext.AnnotationPriorityBoost: strconv.Itoa(5 + i%2)})
		if err := c.Patch(ctx, u, client.Apply, client.FieldOwner(manager), client.ForceOwnership); err != nil {
			return fmt.Errorf("write %d: %w", i, err)
		}
		n.Add(1)
		select {
		case <-end:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
}
