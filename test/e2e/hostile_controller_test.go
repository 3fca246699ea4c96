//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"strconv"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/progress-planner/planner/api/v1alpha1"
	"github.com/progress-planner/planner/pkg/kueueext"
	"github.com/progress-planner/planner/pkg/preempt"
	"github.com/progress-planner/planner/test/framework"
)

// Issue 14: a tenant who can edit a ProgressForecast's status forges its
// decision (mode enforce, boost 2000000000, Deactivate, revision bumped)
// while the planner runs in advise mode, then touches the TrainJob so that
// the planner reconciles it with no forecast due. The planner reads the
// forged state back (the revision says another writer wrote it), conforms
// it to the current policy and writes nothing to the Workload: in advise
// mode it never owns the annotation, so managedFields shows any write it
// ever made.
func TestPlannerForgedDecisionWritesNothing(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	env := plannerEnv(t)
	a, wlA := runningJob(ctx, t, env, "team-a", "gpus", "job-a", "")
	cfg := testConfig()
	cfg.Policy.Mode = preempt.ModeAdvise
	// No idle forecast soon after the replay ends (the default is 2 min):
	// otherwise a fresh decision could replace the forged one before it is
	// applied, and the test would pass without the fix.
	cfg.Forecast.IdleInterval = preempt.Dur(10 * time.Minute)
	c := startPlanner(ctx, t, env, cfg)
	replayDone := replay(ctx, t, c, a, prefix(history(t, "synth__early-plateau").Reports, 0.8))
	waitPF(ctx, t, c, a, plannerBound, "Plateaued with advised boost -100", func(pf *v1alpha1.ProgressForecast) bool {
		return pf.Status.Verdict == string(preempt.Plateaued) && pf.Status.AdvisedBoost == -100
	})
	if err := <-replayDone; err != nil {
		t.Fatal(err)
	}

	// Forge, retrying when the planner writes in between.
	const forgedBoost = 2_000_000_000
	var forgedRev int64
	if _, err := framework.Poll(ctx, 30*time.Second, func(ctx context.Context) (bool, error) {
		var pf v1alpha1.ProgressForecast
		if err := c.Get(ctx, client.ObjectKeyFromObject(a), &pf); err != nil {
			return false, err
		}
		d := decisionOf(t, &pf)
		d.Mode, d.Boost, d.AdvisedBoost = preempt.ModeEnforce, forgedBoost, forgedBoost
		d.Action, d.AdvisedAction = preempt.ActionDeactivate, preempt.ActionDeactivate
		// A decision "just made", with no deadline due (at 50× replay
		// speed the projected NearDone crossing has passed already).
		d.At, d.NearDoneAt = float64(time.Now().Unix()), nil
		raw, err := json.Marshal(d)
		if err != nil {
			return false, err
		}
		pf.Status.Decision.Raw = raw
		pf.Status.Mode, pf.Status.AdvisedBoost = string(preempt.ModeEnforce), forgedBoost
		// "Just forecast": no new forecast is due to replace the forgery.
		if pf.Status.Forecast != nil {
			pf.Status.Forecast.Time = metav1.Now()
		}
		pf.Status.Revision++
		if err := c.Status().Update(ctx, &pf); err != nil {
			if apierrors.IsConflict(err) {
				return false, nil
			}
			return false, err
		}
		forgedRev = pf.Status.Revision
		return true, nil
	}); err != nil {
		t.Fatalf("forging the decision: %v", err)
	}
	t.Logf("forged revision %d: mode enforce, boost %d, Deactivate", forgedRev, forgedBoost)
	// ProgressForecast updates do not trigger reconciles (only the
	// planner's own writes are expected): any change to the TrainJob does,
	// with no new report and no forecast due.
	touch := client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"annotations":{"e2e.planner.progress.io/touch":"1"}}}`))
	if err := c.Patch(ctx, a, touch); err != nil {
		t.Fatal(err)
	}

	// The planner reads the forgery back and overwrites it with the
	// conformed decision.
	pf := waitPF(ctx, t, c, a, plannerBound, "the planner's write after the forgery", func(pf *v1alpha1.ProgressForecast) bool {
		return pf.Status.Revision > forgedRev
	})
	d := decisionOf(t, pf)
	p := cfg.Policy
	if d.Mode != preempt.ModeAdvise || d.Boost != 0 || d.AdvisedBoost < p.Boosts.Min || d.AdvisedBoost > p.Boosts.Max || d.Action != preempt.ActionNone {
		t.Errorf("stored decision after the forgery: mode %s boost %d advised %d action %s; want advise, 0, within [%d, %d], None",
			d.Mode, d.Boost, d.AdvisedBoost, d.Action, p.Boosts.Min, p.Boosts.Max)
	}
	if pf.Status.Mode != string(preempt.ModeAdvise) || pf.Status.Boost != 0 || pf.Status.AdvisedBoost != d.AdvisedBoost {
		t.Errorf("status mode %q boost %d advised %d, want advise, 0 and the decision's %d",
			pf.Status.Mode, pf.Status.Boost, pf.Status.AdvisedBoost, d.AdvisedBoost)
	}
	if err := env.HoldsFor(ctx, wlA, 2*time.Second, func() bool {
		_, set := boostOf(wlA)
		return !set && ptr.Deref(wlA.Spec.Active, true) && framework.WorkloadAdmitted(wlA)
	}); err != nil {
		t.Fatalf("job-a's Workload changed: %v (annotations %v, active %v)", err, wlA.Annotations, wlA.Spec.Active)
	}
	if kueueext.PlannerOwnsBoost(wlA.ManagedFields) {
		v, _ := boostOf(wlA)
		t.Errorf("the planner wrote the boost annotation in advise mode (now %q)", v)
	}
	if evs := plannerEvents(ctx, t, c, a.Namespace, "TrainJob", a.Name); hasReason(evs, kueueext.ReasonBoostChanged) || hasReason(evs, kueueext.ReasonDeactivated) {
		t.Errorf("boost or stop Events after a forged decision:%s", describeEvents(evs))
	}
	t.Logf("after the forgery: decision mode %s, boost %d, advised %d; Workload annotation absent (%s)",
		d.Mode, d.Boost, d.AdvisedBoost, strconv.Quote(wlA.Annotations[kueueext.AnnotationPriorityBoost]))
}
