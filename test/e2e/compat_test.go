//go:build e2e

package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/progress-planner/planner/api/v1alpha1"
	"github.com/progress-planner/planner/pkg/kueueext"
	"github.com/progress-planner/planner/pkg/preempt"
	"github.com/progress-planner/planner/test/framework"
)

// Issue 15: with Kueue's PriorityBoost gate off, Kueue ignores the boost
// annotation. The planner must notice (a dry-run probe against Kueue's
// webhook), write no boost, and say so: Enforcing=False with reason
// PriorityBoostDisabled on the ProgressForecast, a Warning Event
// PriorityBoostDisabled on the TrainJob, and planner_kueue_priority_boost
// {state="off"} 1. The plateaued job keeps running and the waiting one
// keeps waiting: nothing pretends to act.
func TestPlannerPriorityBoostOff(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	env := framework.Start(t, framework.Options{
		ExtraCRDPaths: []string{crdDir},
		FeatureGates:  map[string]bool{"PriorityBoost": false},
	})
	a, _, wlA, wlB := runningAndPending(ctx, t, env, "")
	c := startPlanner(ctx, t, env, testConfig())
	replayDone := replay(ctx, t, c, a, prefix(history(t, "synth__early-plateau").Reports, 0.9))

	pf := waitPF(ctx, t, c, a, plannerBound, "Plateaued, advised -100, Enforcing=False PriorityBoostDisabled",
		func(pf *v1alpha1.ProgressForecast) bool {
			cond := apimeta.FindStatusCondition(pf.Status.Conditions, v1alpha1.ConditionEnforcing)
			return pf.Status.Verdict == string(preempt.Plateaued) && pf.Status.AdvisedBoost == -100 &&
				cond != nil && cond.Status == metav1.ConditionFalse && cond.Reason == "PriorityBoostDisabled"
		})
	cond := apimeta.FindStatusCondition(pf.Status.Conditions, v1alpha1.ConditionEnforcing)
	t.Logf("job-a: verdict %s, advised boost %d, boost %d, mode %q; Enforcing=%s %s: %s", pf.Status.Verdict,
		pf.Status.AdvisedBoost, pf.Status.Boost, pf.Status.Mode, cond.Status, cond.Reason, cond.Message)
	if pf.Status.Boost != 0 || pf.Status.Mode != "advise-only" || !strings.Contains(pf.Status.AdviseOnly, "PriorityBoost feature gate is off") {
		t.Errorf("status boost %d mode %q adviseOnly %q: want 0, advise-only, the gate named", pf.Status.Boost, pf.Status.Mode, pf.Status.AdviseOnly)
	}
	ev := waitEvent(ctx, t, c, a.Namespace, "TrainJob", a.Name, kueueext.ReasonBoostDisabled)
	t.Logf("Event on TrainJob %s: %s %s: %s", a.Name, ev.Type, ev.Reason, ev.Note)
	if ev.Type != "Warning" {
		t.Errorf("Event type %s, want Warning", ev.Type)
	}
	if v := gaugeValue(t, "planner_kueue_priority_boost", map[string]string{"state": "off"}); v != 1 {
		t.Errorf("planner_kueue_priority_boost{state=off} = %v, want 1", v)
	}

	// Nothing written, nothing moved: job-a keeps its quota, job-b waits.
	if err := env.HoldsFor(ctx, wlA, 3*time.Second, func() bool {
		_, set := boostOf(wlA)
		return !set && framework.WorkloadAdmitted(wlA)
	}); err != nil {
		t.Fatalf("job-a's Workload changed with PriorityBoost off: %v (annotations %v)", err, wlA.Annotations)
	}
	if err := env.HoldsFor(ctx, wlB, time.Second, func() bool { _, set := boostOf(wlB); return !set && !framework.WorkloadQuotaReserved(wlB) }); err != nil {
		t.Fatalf("job-b's Workload touched or admitted with PriorityBoost off: %v (annotations %v)", err, wlB.Annotations)
	}
	if evs := plannerEvents(ctx, t, c, a.Namespace, "TrainJob", a.Name); hasReason(evs, kueueext.ReasonBoostChanged) {
		t.Errorf("a boost Event with PriorityBoost off:%s", describeEvents(evs))
	}
	if err := <-replayDone; err != nil {
		t.Errorf("replay: %v", err)
	}
}

// Issue 15: the planner reads Kueue's API generation at start-up and
// reports it with the wake-up it uses, the dip on both (planner_kueue_info).
func TestPlannerDetectsKueue(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	env := plannerEnv(t)
	startPlanner(ctx, t, env, testConfig())
	want := map[string]string{"api": "v0.19+", "wake": "dip"}
	if framework.RespellWakes {
		want = map[string]string{"api": "v0.17", "wake": "dip"}
	}
	if _, err := framework.Poll(ctx, 30*time.Second, func(context.Context) (bool, error) {
		return gaugeValueOK(want, "planner_kueue_info") == 1, nil
	}); err != nil {
		t.Fatalf("Kueue %s: planner_kueue_info %v not 1: %v", framework.KueueVersion, want, err)
	}
	t.Logf("Kueue %s: planner_kueue_info %v = 1", framework.KueueVersion, want)
}

// gaugeValue reads a gauge of the planner's metrics (this process's
// controller-runtime registry) by its labels.
func gaugeValue(t *testing.T, name string, labels map[string]string) float64 {
	t.Helper()
	v := gaugeValueOK(labels, name)
	if v < 0 {
		t.Fatalf("metric %s%v not found", name, labels)
	}
	return v
}

// gaugeValueOK returns the gauge's (or counter's) value in the
// in-process planner's registry, or -1 when it is not there.
func gaugeValueOK(labels map[string]string, name string) float64 {
	mfs, err := ctrlmetrics.Registry.Gather()
	if err != nil {
		return -1
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if !labelsMatch(m, labels) {
				continue
			}
			switch {
			case m.GetGauge() != nil:
				return m.GetGauge().GetValue()
			case m.GetCounter() != nil:
				return m.GetCounter().GetValue()
			}
		}
	}
	return -1
}

func labelsMatch(m *dto.Metric, want map[string]string) bool {
	got := map[string]string{}
	for _, l := range m.GetLabel() {
		got[l.GetName()] = l.GetValue()
	}
	for k, v := range want {
		if got[k] != v {
			return false
		}
	}
	return true
}
