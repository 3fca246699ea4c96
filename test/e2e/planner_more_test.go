//go:build e2e

package e2e

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	kftrainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/progress-planner/planner/api/v1alpha1"
	"github.com/progress-planner/planner/pkg/kueueext"
	"github.com/progress-planner/planner/pkg/plannerconfig"
	"github.com/progress-planner/planner/pkg/preempt"
	"github.com/progress-planner/planner/test/framework"
)

// More scenarios of the planner (docs/controller.md): near-done protection
// (2), a restart (5), the opt-in stop (7) and an install from the shipped
// manifests under the planner's own ServiceAccount (9).

// runPlanner runs the planner's manager on rc until stop is called (or the
// test ends), waiting up to startTimeout for its controller to start, and
// returns a client that knows the planner's types (as the administrator)
// and an idempotent stop.
func runPlanner(ctx context.Context, t *testing.T, rc *rest.Config, adminCfg *rest.Config, cfg plannerconfig.Config,
	startTimeout time.Duration, mopts ...kueueext.ManagerOption) (client.Client, func()) {
	t.Helper()
	return runPlannerWith(ctx, t, rc, adminCfg, kueueext.Options{Config: cfg, SkipNameValidation: true}, startTimeout, mopts...)
}

// runPlannerWith is runPlanner with the planner's Setup options (a report
// source, for instance).
func runPlannerWith(ctx context.Context, t *testing.T, rc *rest.Config, adminCfg *rest.Config, opts kueueext.Options,
	startTimeout time.Duration, mopts ...kueueext.ManagerOption) (client.Client, func()) {
	t.Helper()
	c, stop, _ := runPlannerExit(ctx, t, rc, adminCfg, opts, startTimeout, mopts...)
	return c, stop
}

// runPlannerExit is runPlannerWith that also returns a channel that
// receives the manager's exit, should it exit before stop (an in-process
// "crash loop" would show there).
func runPlannerExit(ctx context.Context, t *testing.T, rc *rest.Config, adminCfg *rest.Config, opts kueueext.Options,
	startTimeout time.Duration, mopts ...kueueext.ManagerOption) (client.Client, func(), <-chan error) {
	t.Helper()
	cfg := opts.Config
	mgr, err := kueueext.NewManager(rc, cfg, mopts...)
	if err != nil {
		t.Fatal(err)
	}
	p, err := kueueext.Setup(mgr, opts)
	if err != nil {
		t.Fatal(err)
	}
	mctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	exited := make(chan error, 1)
	go func() {
		err := mgr.Start(mctx)
		if mctx.Err() == nil {
			exited <- fmt.Errorf("manager returned %v while the test ran", err)
		}
		done <- err
	}()
	var stopped atomic.Bool
	stop := func() {
		if stopped.Swap(true) {
			return
		}
		cancel()
		select {
		case err := <-done:
			if err != nil && !errors.Is(err, context.Canceled) {
				t.Errorf("planner manager: %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Error("planner manager did not stop within 30s")
		}
	}
	t.Cleanup(stop)
	if _, err := framework.Poll(ctx, startTimeout, func(context.Context) (bool, error) {
		select {
		case err := <-exited:
			return false, err
		default:
		}
		return p.Started(), nil
	}); err != nil {
		t.Fatalf("planner controller not started: %v", err)
	}
	c, err := client.New(adminCfg, client.Options{Scheme: kueueext.NewScheme()})
	if err != nil {
		t.Fatal(err)
	}
	return c, stop, exited
}

func boostValue(wl *kueue.Workload) (int, bool) {
	v, ok := boostOf(wl)
	if !ok {
		return 0, false
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		return 0, false
	}
	return n, true
}

// runningJob creates a queue of 8 GPUs in ns and an 8-GPU TrainJob in it,
// and waits until it runs.
func runningJob(ctx context.Context, t *testing.T, env *framework.Env, ns, queue, name, priorityClass string) (*kftrainer.TrainJob, *kueue.Workload) {
	t.Helper()
	if _, _, err := env.CreateGPUQueue(ctx, ns, queue, 8); err != nil {
		t.Fatal(err)
	}
	if _, err := env.InstallTorchRuntime(ctx); err != nil {
		t.Fatal(err)
	}
	tj, err := env.CreateTrainJob(ctx, ns, name, queue, 8, priorityClass)
	if err != nil {
		t.Fatal(err)
	}
	wl, err := env.WaitForWorkload(ctx, tj, bound)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := env.WaitFor(ctx, wl, bound, func() bool { return framework.WorkloadAdmitted(wl) }); err != nil {
		t.Fatalf("Workload %s not admitted: %v; conditions %+v", wl.Name, err, wl.Status.Conditions)
	}
	if _, err := env.WaitFor(ctx, tj, bound, func() bool { return !framework.TrainJobSuspended(tj) }); err != nil {
		t.Fatalf("TrainJob %s not unsuspended: %v", name, err)
	}
	return tj, wl
}

// preemptedBy creates the 8-GPU TrainJob name at priority class "high" in
// queue and waits until Kueue has evicted victim for it and admitted it.
// It returns the new job's Workload and when the eviction was seen.
func preemptedBy(ctx context.Context, t *testing.T, env *framework.Env, ns, queue, name string, victim *kueue.Workload) (*kueue.Workload, time.Time) {
	t.Helper()
	tj, err := env.CreateTrainJob(ctx, ns, name, queue, 8, "high")
	if err != nil {
		t.Fatal(err)
	}
	wl, err := env.WaitForWorkload(ctx, tj, bound)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := env.WaitFor(ctx, victim, bound, func() bool { return framework.WorkloadEvicted(victim) }); err != nil {
		t.Fatalf("Workload %s was not preempted by %s: %v; conditions %+v", victim.Name, name, err, victim.Status.Conditions)
	}
	evicted := time.Now()
	if _, err := env.WaitFor(ctx, wl, bound, func() bool { return framework.WorkloadAdmitted(wl) }); err != nil {
		t.Fatalf("%s not admitted after the preemption: %v; conditions %+v", name, err, wl.Status.Conditions)
	}
	return wl, evicted
}

// completeTrainJob marks tj Complete the way the Trainer controller does
// (status condition Complete=True); Kueue then finishes its Workload.
func completeTrainJob(ctx context.Context, t *testing.T, env *framework.Env, tj *kftrainer.TrainJob) {
	t.Helper()
	if _, err := framework.Poll(ctx, bound, func(ctx context.Context) (bool, error) {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(tj), tj); err != nil {
			return false, err
		}
		apimeta.SetStatusCondition(&tj.Status.Conditions, metav1.Condition{
			Type: kftrainer.TrainJobComplete, Status: metav1.ConditionTrue, Reason: "JobsCompleted", Message: "e2e: training finished",
		})
		err := env.Client.Status().Update(ctx, tj)
		if apierrors.IsConflict(err) {
			return false, nil
		}
		return err == nil, err
	}); err != nil {
		t.Fatalf("marking TrainJob %s Complete: %v", tj.Name, err)
	}
}

// Scenario 2: a near-done job is protected. job-a (priority 100) is at
// ~90-100 % and progressing; job-b (priority 150) would preempt it without
// the planner (shown on a second queue first). With the planner, job-a's
// NearDone boost (+100, effective 200) keeps its GPUs until it finishes;
// then job-b is admitted.
func TestPlannerNearDoneJobProtected(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	env := plannerEnv(t)
	if _, err := env.CreateWorkloadPriorityClass(ctx, "low", 100); err != nil {
		t.Fatal(err)
	}
	if _, err := env.CreateWorkloadPriorityClass(ctx, "high", 150); err != nil {
		t.Fatal(err)
	}

	// Without the planner: the higher-priority job preempts at once.
	a0, wlA0 := runningJob(ctx, t, env, "control", "gpus-control", "job-a0", "low")
	start := time.Now()
	wlB0, _ := preemptedBy(ctx, t, env, "control", "gpus-control", "job-b0", wlA0)
	if _, err := env.WaitFor(ctx, a0, bound, func() bool { return framework.TrainJobSuspended(a0) }); err != nil {
		t.Fatalf("job-a0 not suspended: %v", err)
	}
	t.Logf("without the planner: job-b0 (priority %d) preempted job-a0 (priority %d) %v after its creation",
		ptrValue(wlB0.Spec.Priority), ptrValue(wlA0.Spec.Priority), time.Since(start).Round(time.Millisecond))

	// With the planner.
	a, wlA := runningJob(ctx, t, env, "team-a", "gpus", "job-a", "low")
	// A wide lease margin: at 15× the remaining ~6 s of the run are short
	// against scheduling jitter on a loaded machine, and the lease (ETA
	// upper bound × (1 + margin)) must outlast them.
	cfg := testConfig()
	cfg.Policy.NearDone.LeaseMargin = 4
	c := startPlanner(ctx, t, env, cfg)
	// Speed 15 (the whole history in ~61 s): from 90 % on, job-a has ~6 s
	// to go, long enough to watch job-b wait.
	const speed = 15
	reports := history(t, "synth__inverse-power").Reports
	replayStart := time.Now()
	replayDone := replayAt(ctx, c, a, reports, speed)

	pf := waitPF(ctx, t, c, a, 2*plannerBound, "verdict NearDone", func(pf *v1alpha1.ProgressForecast) bool {
		return pf.Status.Verdict == string(preempt.NearDone)
	})
	nearDone := time.Now()
	t.Logf("job-a: NearDone %v into the replay (progress %s, ETA %s): %s", nearDone.Sub(replayStart).Round(time.Millisecond),
		pf.Status.Forecast.Progress, pf.Status.Forecast.ETA, pf.Status.Reason)
	if _, err := env.WaitFor(ctx, wlA, bound, func() bool { n, ok := boostValue(wlA); return ok && n == 100 }); err != nil {
		t.Fatalf("job-a's boost not +100: %v (annotations %v)", err, wlA.Annotations)
	}
	boosted := time.Now()
	t.Logf("job-a: boost %s written %v after NearDone; effective priority %d+100", wlA.Annotations[kueueext.AnnotationPriorityBoost],
		boosted.Sub(nearDone).Round(time.Millisecond), ptrValue(wlA.Spec.Priority))

	b, err := env.CreateTrainJob(ctx, "team-a", "job-b", "gpus", 8, "high")
	if err != nil {
		t.Fatal(err)
	}
	wlB, err := env.WaitForWorkload(ctx, b, bound)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := env.WaitFor(ctx, wlB, bound, func() bool {
		c := findCondition(wlB, kueue.WorkloadQuotaReserved)
		return c != nil && c.Status == metav1.ConditionFalse
	}); err != nil {
		t.Fatalf("job-b not reported pending: %v; conditions %+v", err, wlB.Status.Conditions)
	}
	if p := ptrValue(wlB.Spec.Priority); p != 150 || ptrValue(wlA.Spec.Priority) != 100 {
		t.Fatalf("priorities: job-a %d job-b %d, want 100 and 150", ptrValue(wlA.Spec.Priority), p)
	}
	// job-a keeps its GPUs until the replay reaches 100 %.
	held := time.Now()
	var replayErr error
	finished := false
	if _, err := framework.Poll(ctx, 2*plannerBound, func(ctx context.Context) (bool, error) {
		select {
		case replayErr = <-replayDone:
			finished = true
		default:
		}
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(wlA), wlA); err != nil {
			return false, err
		}
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(wlB), wlB); err != nil {
			return false, err
		}
		if framework.WorkloadEvicted(wlA) || !framework.WorkloadAdmitted(wlA) {
			return false, fmt.Errorf("job-a lost its GPUs before finishing (boost %v): %+v", wlA.Annotations, wlA.Status.Conditions)
		}
		if framework.WorkloadQuotaReserved(wlB) {
			return false, errors.New("job-b got quota while job-a runs")
		}
		return finished, nil
	}); err != nil {
		t.Fatal(err)
	}
	if replayErr != nil {
		t.Fatalf("replay: %v", replayErr)
	}
	replayEnd := time.Now()
	t.Logf("job-b (priority 150) waited %v beside protected job-a (100+100) until the replay reached 100 %% (replay took %v)",
		replayEnd.Sub(held).Round(time.Millisecond), replayEnd.Sub(replayStart).Round(time.Millisecond))

	completeTrainJob(ctx, t, env, a)
	if _, err := env.WaitFor(ctx, wlA, bound, func() bool {
		return apimeta.IsStatusConditionTrue(wlA.Status.Conditions, kueue.WorkloadFinished)
	}); err != nil {
		t.Fatalf("job-a's Workload not Finished: %v; conditions %+v", err, wlA.Status.Conditions)
	}
	if framework.WorkloadEvicted(wlA) {
		t.Errorf("job-a was evicted: %+v", wlA.Status.Conditions)
	}
	if _, err := env.WaitFor(ctx, wlB, bound, func() bool { return framework.WorkloadAdmitted(wlB) }); err != nil {
		t.Fatalf("job-b not admitted after job-a finished: %v; conditions %+v", err, wlB.Status.Conditions)
	}
	t.Logf("job-a finished → job-b admitted in %v", time.Since(replayEnd).Round(time.Millisecond))
	ev := waitEvent(ctx, t, c, a.Namespace, "TrainJob", a.Name, kueueext.ReasonBoostChanged)
	t.Logf("Event on TrainJob %s: %s", a.Name, ev.Note)
}

// A healthy job preempted by higher-priority work waits in the queue
// without reports (its pods are gone). The planner forecasts a job that is
// not running only on news (a Workload change, an objective change); here
// its owner names another objective once it has waited past the hang
// threshold. The time it waited is not silence: it is not judged Hung, and
// gets no -100 that would put it behind every waiting job of its priority
// (preempt Facts.NotRunning; before 2026-12-07 that forecast made it Hung).
func TestPlannerPreemptedJobNotHung(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	env := plannerEnv(t)
	for name, v := range map[string]int32{"low": 100, "high": 150} {
		if _, err := env.CreateWorkloadPriorityClass(ctx, name, v); err != nil {
			t.Fatal(err)
		}
	}
	a, wlA := runningJob(ctx, t, env, "team-a", "gpus", "job-a", "low")
	c := startPlanner(ctx, t, env, testConfig())
	reports := history(t, "synth__inverse-power").Reports
	if err := <-replayAt(ctx, c, a, reports[:len(reports)/2], 15); err != nil {
		t.Fatalf("replay: %v", err)
	}
	replayed := time.Now()
	pf := waitPF(ctx, t, c, a, bound, "a verdict", func(pf *v1alpha1.ProgressForecast) bool { return pf.Status.Verdict != "" })
	t.Logf("job-a at half-way: %s", pf.Status.Reason)

	// At once (well within the hang threshold), job-b preempts job-a,
	// which then waits: no more reports.
	_, preempted := preemptedBy(ctx, t, env, "team-a", "gpus", "job-b", wlA)
	if _, err := env.WaitFor(ctx, wlA, bound, func() bool { return !framework.WorkloadAdmitted(wlA) }); err != nil {
		t.Fatalf("job-a still admitted: %v; conditions %+v", err, wlA.Status.Conditions)
	}
	t.Logf("job-a preempted %v after its last report", preempted.Sub(replayed).Round(time.Millisecond))

	verdicts := map[string]int{}
	check := func(until time.Duration) {
		t.Helper()
		for time.Since(preempted) < until {
			if err := c.Get(ctx, client.ObjectKeyFromObject(a), pf); err != nil {
				t.Fatal(err)
			}
			verdicts[pf.Status.Verdict]++
			if pf.Status.Verdict == string(preempt.Hung) || pf.Status.Boost < 0 {
				t.Fatalf("job-a waiting in the queue for %v: verdict %s, boost %d: %s", time.Since(preempted).Round(time.Second),
					pf.Status.Verdict, pf.Status.Boost, pf.Status.Reason)
			}
			if err := env.Client.Get(ctx, client.ObjectKeyFromObject(wlA), wlA); err != nil {
				t.Fatal(err)
			}
			if n, ok := boostValue(wlA); ok && n < 0 {
				t.Fatalf("job-a's Workload got boost %d while waiting", n)
			}
			if framework.WorkloadAdmitted(wlA) {
				t.Fatalf("job-a readmitted while job-b holds the GPUs: %+v", wlA.Status.Conditions)
			}
			select {
			case <-ctx.Done():
				t.Fatal(ctx.Err())
			case <-time.After(time.Second):
			}
		}
	}
	// Past the hang threshold (2 × the replay's 0.5 s report interval +
	// 45 s) in the queue, then news that makes the planner forecast it.
	check(60 * time.Second)
	if _, err := framework.Poll(ctx, bound, func(ctx context.Context) (bool, error) {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(a), a); err != nil {
			return false, err
		}
		metav1.SetMetaDataAnnotation(&a.ObjectMeta, kueueext.AnnotationObjective, "loss,minimize")
		err := env.Client.Update(ctx, a)
		if apierrors.IsConflict(err) {
			return false, nil
		}
		return err == nil, err
	}); err != nil {
		t.Fatalf("naming job-a's objective: %v", err)
	}
	pf = waitPF(ctx, t, c, a, bound, "the new objective", func(pf *v1alpha1.ProgressForecast) bool {
		return strings.HasPrefix(pf.Status.Objective, "loss")
	})
	t.Logf("job-a forecast while waiting, %v after its preemption: %s", time.Since(preempted).Round(time.Second), pf.Status.Reason)
	check(time.Since(preempted) + 10*time.Second)
	t.Logf("job-a waited %v in the queue, verdicts seen %v, latest: %s", time.Since(preempted).Round(time.Second), verdicts, pf.Status.Reason)
}

// boostEventSig summarises the planner's boost-change Events on an object
// (names and series counts), to compare before and after a restart.
func boostEventSig(ctx context.Context, t *testing.T, c client.Client, ns, kind, name string) string {
	t.Helper()
	var parts []string
	for _, e := range plannerEvents(ctx, t, c, ns, kind, name) {
		if e.Reason != kueueext.ReasonBoostChanged {
			continue
		}
		n := int32(1)
		if e.Series != nil {
			n = e.Series.Count
		}
		parts = append(parts, fmt.Sprintf("%s×%d", e.Name, n))
	}
	sort.Strings(parts)
	return strings.Join(parts, ",")
}

// Scenario 5: the planner is stopped mid-run and a new one started. The
// history comes back from the ProgressForecast, the boost does not flap, and
// decisions continue.
func TestPlannerRestart(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	env := plannerEnv(t)
	a, wlA := runningJob(ctx, t, env, "team-a", "gpus", "job-a", "")
	cfg := testConfig()
	c, stop := runPlanner(ctx, t, env.Config, env.Config, cfg, 60*time.Second)

	reports := history(t, "synth__early-plateau").Reports
	// Plateaued by ~70 % (docs/backtest.md 7.37); NearDone (which protects
	// a plateaued job) starts at 90 % of the steps, so the run stops at 87 %.
	cut := int(float64(len(reports)) * 0.7)
	if err := <-replay(ctx, t, c, a, reports[:cut]); err != nil {
		t.Fatalf("replay: %v", err)
	}
	if _, err := env.WaitFor(ctx, wlA, plannerBound, func() bool { n, ok := boostValue(wlA); return ok && n == -100 }); err != nil {
		t.Fatalf("job-a's boost not -100 before the restart: %v (annotations %v)", err, wlA.Annotations)
	}
	// Let the planner persist the last reports (a forecast per second).
	pf := waitPF(ctx, t, c, a, plannerBound, "all reports persisted", func(pf *v1alpha1.ProgressForecast) bool {
		return pf.Status.Observations >= int64(cut*9/10) && pf.Status.Verdict == string(preempt.Plateaued)
	})
	time.Sleep(1500 * time.Millisecond)
	if err := c.Get(ctx, client.ObjectKeyFromObject(pf), pf); err != nil {
		t.Fatal(err)
	}
	obsBefore, revBefore := pf.Status.Observations, pf.Status.Revision
	decBefore := decisionOf(t, pf)
	boostBefore, _ := boostOf(wlA)
	wlSig := boostEventSig(ctx, t, c, wlA.Namespace, "Workload", wlA.Name)
	tjSig := boostEventSig(ctx, t, c, a.Namespace, "TrainJob", a.Name)
	t.Logf("before the restart: %d observations, revision %d, verdict %s, boost annotation %q, decision at %.3f, boost Events workload [%s] trainjob [%s]",
		obsBefore, revBefore, pf.Status.Verdict, boostBefore, decBefore.At, wlSig, tjSig)

	stopAt := time.Now()
	stop()
	t.Logf("planner stopped in %v", time.Since(stopAt).Round(time.Millisecond))
	if err := env.HoldsFor(ctx, wlA, 2*time.Second, func() bool { v, _ := boostOf(wlA); return v == boostBefore }); err != nil {
		t.Fatalf("boost changed while the planner was down: %v", err)
	}

	restartAt := time.Now()
	c, _ = runPlanner(ctx, t, env.Config, env.Config, cfg, 60*time.Second)
	t.Logf("planner restarted in %v", time.Since(restartAt).Round(time.Millisecond))
	rest2 := replay(ctx, t, c, a, reports[cut:int(float64(len(reports))*0.86)])
	// The boost holds while the new planner takes over and decides again.
	if err := env.HoldsFor(ctx, wlA, 4*time.Second, func() bool { v, _ := boostOf(wlA); return v == boostBefore }); err != nil {
		t.Fatalf("the boost flapped across the restart: %v (annotations %v)", err, wlA.Annotations)
	}
	if err := <-rest2; err != nil {
		t.Fatalf("replay after the restart: %v", err)
	}
	pf = waitPF(ctx, t, c, a, plannerBound, "a decision after the restart, history continued", func(pf *v1alpha1.ProgressForecast) bool {
		if pf.Status.Decision == nil || pf.Status.Observations <= obsBefore+5 {
			return false
		}
		d := decisionOf(t, pf)
		return d.At > float64(restartAt.UnixNano())/1e9
	})
	decAfter := decisionOf(t, pf)
	t.Logf("after the restart: %d observations (was %d), revision %d, verdict %s, decision at %.3f (%.1fs after the restart)",
		pf.Status.Observations, obsBefore, pf.Status.Revision, pf.Status.Verdict, decAfter.At, decAfter.At-float64(restartAt.UnixNano())/1e9)
	if pf.Status.Revision <= revBefore {
		t.Errorf("revision %d not above %d", pf.Status.Revision, revBefore)
	}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(wlA), wlA); err != nil {
		t.Fatal(err)
	}
	if v, _ := boostOf(wlA); v != boostBefore {
		t.Errorf("boost annotation %q after the restart, was %q", v, boostBefore)
	}
	if s := boostEventSig(ctx, t, c, wlA.Namespace, "Workload", wlA.Name); s != wlSig {
		t.Errorf("boost Events on the Workload changed across the restart: [%s] → [%s]", wlSig, s)
	}
	if s := boostEventSig(ctx, t, c, a.Namespace, "TrainJob", a.Name); s != tjSig {
		t.Errorf("boost Events on the TrainJob changed across the restart: [%s] → [%s]", tjSig, s)
	}
	if evs := plannerEvents(ctx, t, c, a.Namespace, "TrainJob", a.Name); hasReason(evs, kueueext.ReasonHistoryReset) {
		t.Errorf("history reset across the restart:%s", describeEvents(evs))
	}
	if c := apimeta.FindStatusCondition(pf.Status.Conditions, "HistoryValid"); c != nil && c.Status != metav1.ConditionTrue {
		t.Errorf("HistoryValid %s: %s", c.Status, c.Message)
	}
}

// Scenario 7: the opt-in stop. job-stop opted in and job-keep did not; both
// report the same flat loss with nobody waiting. The planner deactivates
// job-stop's Workload after the grace period and says why; job-keep stays.
func TestPlannerOptInStop(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	env := plannerEnv(t)
	stopJob, wlStop := runningJob(ctx, t, env, "team-a", "gpus", "job-stop", "")
	keepJob, wlKeep := runningJob(ctx, t, env, "team-c", "gpus-c", "job-keep", "")
	patch := client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"annotations":{"`+kueueext.AnnotationStopOptIn+`":"true"}}}`))
	if err := env.Client.Patch(ctx, stopJob, patch); err != nil {
		t.Fatalf("opting job-stop in: %v", err)
	}

	cfg := testConfig()
	const grace = 3 * time.Second
	cfg.Policy.Stop.GracePeriod = preempt.Dur(grace)
	cfg.Policy.Stop.MinConfidence = 0.3
	c := startPlanner(ctx, t, env, cfg)

	// Up to 87 % of the steps: from 90 % on the job would be NearDone
	// (protected), which would end job-keep's stall.
	reports := prefix(history(t, "synth__early-plateau").Reports, 0.86)
	replayStart := time.Now()
	stopDone := replay(ctx, t, c, stopJob, reports)
	keepDone := replay(ctx, t, c, keepJob, reports)

	pf := waitPF(ctx, t, c, stopJob, plannerBound, "stalled", func(pf *v1alpha1.ProgressForecast) bool {
		return pf.Status.Verdict == string(preempt.Plateaued)
	})
	stalled := time.Now()
	t.Logf("job-stop: Plateaued %v into the replay: %s", stalled.Sub(replayStart).Round(time.Millisecond), pf.Status.Reason)

	if _, err := env.WaitFor(ctx, wlStop, plannerBound, func() bool { return wlStop.Spec.Active != nil && !*wlStop.Spec.Active }); err != nil {
		pf := &v1alpha1.ProgressForecast{}
		_ = c.Get(ctx, client.ObjectKeyFromObject(stopJob), pf)
		t.Fatalf("job-stop's Workload not deactivated: %v; verdict %s reason: %s", err, pf.Status.Verdict, pf.Status.Reason)
	}
	deactivated := time.Now()
	if _, err := env.WaitFor(ctx, wlStop, bound, func() bool { return framework.WorkloadEvicted(wlStop) }); err != nil {
		t.Fatalf("job-stop's Workload not evicted: %v; conditions %+v", err, wlStop.Status.Conditions)
	}
	evicted := time.Now()
	ec := findCondition(wlStop, kueue.WorkloadEvicted)
	if _, err := env.WaitFor(ctx, stopJob, bound, func() bool { return framework.TrainJobSuspended(stopJob) }); err != nil {
		t.Fatalf("job-stop not suspended: %v", err)
	}
	t.Logf("job-stop: Plateaued → spec.active=false %v (grace %v) → Evicted (%s: %s) %v → TrainJob suspended %v",
		deactivated.Sub(stalled).Round(time.Millisecond), grace, ec.Reason, ec.Message, evicted.Sub(deactivated).Round(time.Millisecond),
		time.Since(evicted).Round(time.Millisecond))
	if ec.Reason != kueue.WorkloadDeactivated {
		t.Errorf("eviction reason %q, want %q", ec.Reason, kueue.WorkloadDeactivated)
	}
	ev := waitEvent(ctx, t, c, stopJob.Namespace, "TrainJob", stopJob.Name, kueueext.ReasonDeactivated)
	t.Logf("Event on TrainJob %s: %s %s: %s", stopJob.Name, ev.Type, ev.Reason, ev.Note)
	if !strings.Contains(ev.Note, "GPU-hours") || !strings.Contains(ev.Note, "opted in") {
		t.Errorf("Deactivated Event does not say why and how much: %q", ev.Note)
	}
	waitEvent(ctx, t, c, wlStop.Namespace, "Workload", wlStop.Name, kueueext.ReasonDeactivated)
	pf = waitPF(ctx, t, c, stopJob, bound, "deactivatedTime recorded", func(pf *v1alpha1.ProgressForecast) bool {
		return pf.Status.DeactivatedTime != nil
	})
	if d := decisionOf(t, pf); d.GPUHoursSaved <= 0 {
		t.Errorf("decision saves %g GPU-hours", d.GPUHoursSaved)
	}

	// job-keep: same history, stalled past the grace period, still active.
	pfKeep := waitPF(ctx, t, c, keepJob, plannerBound, "stalled past the grace period", func(pf *v1alpha1.ProgressForecast) bool {
		if pf.Status.Decision == nil {
			return false
		}
		d := decisionOf(t, pf)
		return d.StalledSince != nil && d.At-*d.StalledSince > 2*grace.Seconds()
	})
	dk := decisionOf(t, pfKeep)
	t.Logf("job-keep: verdict %s, stalled %.1fs, action %q advised %q: %s", pfKeep.Status.Verdict, dk.At-*dk.StalledSince,
		dk.Action, dk.AdvisedAction, pfKeep.Status.Reason)
	if err := env.HoldsFor(ctx, wlKeep, 3*time.Second, func() bool {
		return (wlKeep.Spec.Active == nil || *wlKeep.Spec.Active) && framework.WorkloadAdmitted(wlKeep)
	}); err != nil {
		t.Fatalf("job-keep (not opted in) was stopped: %v", err)
	}
	if dk.Action == preempt.ActionDeactivate || pfKeep.Status.DeactivatedTime != nil {
		t.Errorf("job-keep decision action %q, deactivatedTime %v", dk.Action, pfKeep.Status.DeactivatedTime)
	}
	if evs := plannerEvents(ctx, t, c, keepJob.Namespace, "TrainJob", keepJob.Name); hasReason(evs, kueueext.ReasonDeactivated) {
		t.Errorf("Deactivated Event for job-keep:%s", describeEvents(evs))
	}
	for name, ch := range map[string]<-chan error{"job-stop": stopDone, "job-keep": keepDone} {
		if err := <-ch; err != nil {
			t.Errorf("%s replay: %v", name, err)
		}
	}
}

// kustomization is the part of kustomize's Kustomization the shipped
// manifests use.
type kustomization struct {
	Namespace          string   `json:"namespace"`
	Resources          []string `json:"resources"`
	ConfigMapGenerator []struct {
		Name      string   `json:"name"`
		Namespace string   `json:"namespace"`
		Files     []string `json:"files"`
	} `json:"configMapGenerator"`
}

// renderKustomization reads dir/kustomization.yaml and returns its objects,
// resources (files and directories) followed by generated ConfigMaps, with
// namespace set on namespaced objects. Generated ConfigMaps keep their plain
// name (kustomize would add a content hash and rewrite references to it).
func renderKustomization(t *testing.T, dir, namespace string) []*unstructured.Unstructured {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "kustomization.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var k kustomization
	// Fields this test does not need (images, apiVersion, kind) are ignored.
	if err := yaml.Unmarshal(b, &k); err != nil {
		t.Fatalf("%s: %v", dir, err)
	}
	if k.Namespace != "" {
		namespace = k.Namespace
	}
	var out []*unstructured.Unstructured
	for _, r := range k.Resources {
		p := filepath.Join(dir, r)
		if st, err := os.Stat(p); err != nil {
			t.Fatal(err)
		} else if st.IsDir() {
			out = append(out, renderKustomization(t, p, namespace)...)
			continue
		}
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		for _, doc := range bytes.Split(data, []byte("\n---")) {
			if len(bytes.TrimSpace(doc)) == 0 {
				continue
			}
			u := &unstructured.Unstructured{}
			if err := yaml.Unmarshal(doc, &u.Object); err != nil {
				t.Fatalf("%s: %v", p, err)
			}
			if len(u.Object) == 0 {
				continue
			}
			out = append(out, u)
		}
	}
	for _, g := range k.ConfigMapGenerator {
		cm := &corev1.ConfigMap{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
			ObjectMeta: metav1.ObjectMeta{Name: g.Name, Namespace: g.Namespace}, Data: map[string]string{}}
		for _, f := range g.Files {
			key, file, ok := strings.Cut(f, "=")
			if !ok {
				key, file = filepath.Base(f), f
			}
			data, err := os.ReadFile(filepath.Join(dir, file))
			if err != nil {
				t.Fatal(err)
			}
			cm.Data[key] = string(data)
		}
		m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(cm)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, &unstructured.Unstructured{Object: m})
	}
	for _, u := range out {
		if namespace == "" {
			continue
		}
		switch u.GetKind() {
		case "Namespace", "CustomResourceDefinition", "ClusterRole", "ClusterRoleBinding":
		default:
			u.SetNamespace(namespace)
		}
		if kind := u.GetKind(); kind == "RoleBinding" || kind == "ClusterRoleBinding" {
			subjects, _, _ := unstructured.NestedSlice(u.Object, "subjects")
			for i, s := range subjects {
				if m, ok := s.(map[string]any); ok && m["kind"] == "ServiceAccount" {
					m["namespace"] = namespace
					subjects[i] = m
				}
			}
			_ = unstructured.SetNestedSlice(u.Object, subjects, "subjects")
		}
	}
	return out
}

type forbiddenCounter struct {
	rt    http.RoundTripper
	count *atomic.Int64
	last  *atomic.Value
}

func (f forbiddenCounter) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := f.rt.RoundTrip(r)
	if err == nil && resp.StatusCode == http.StatusForbidden {
		body, rerr := io.ReadAll(resp.Body)
		resp.Body.Close()
		resp.Body = io.NopCloser(bytes.NewReader(body))
		// The planner's PriorityBoost probe is a dry run that Kueue's
		// webhook is meant to refuse, with 403 (docs/compatibility.md):
		// not an RBAC denial.
		if rerr == nil && r.URL.Query().Get("dryRun") == "All" && bytes.Contains(body, []byte("admission webhook")) &&
			bytes.Contains(body, []byte(kueueext.AnnotationPriorityBoost)) {
			return resp, err
		}
		f.count.Add(1)
		f.last.Store(r.Method + " " + r.URL.Path)
	}
	return resp, err
}

// Scenario 9: install with the shipped manifests (config/default), then run
// the planner under its ServiceAccount's identity with the shipped config
// (switched to enforce): the RBAC is enough for a plateaued job's boost,
// the ProgressForecast, Events and the leader-election Lease.
func TestPlannerShippedManifests(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	env := framework.Start(t) // the planner's CRD comes from the manifests
	objs := renderKustomization(t, "../../config/default", "")
	order := map[string]int{"Namespace": 0, "CustomResourceDefinition": 1, "ServiceAccount": 2}
	sort.SliceStable(objs, func(i, j int) bool {
		oi, ok := order[objs[i].GetKind()]
		if !ok {
			oi = 9
		}
		oj, ok := order[objs[j].GetKind()]
		if !ok {
			oj = 9
		}
		return oi < oj
	})
	start := time.Now()
	var names []string
	for _, u := range objs {
		if err := env.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner("kubectl"), client.ForceOwnership); err != nil {
			t.Fatalf("server-side apply %s %s/%s: %v", u.GetKind(), u.GetNamespace(), u.GetName(), err)
		}
		names = append(names, u.GetKind()+" "+u.GetName())
	}
	t.Logf("applied %d objects from config/default in %v: %s", len(objs), time.Since(start).Round(time.Millisecond), strings.Join(names, ", "))
	const ns, sa = "progress-planner-system", "progress-planner"
	var dep appsv1.Deployment
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "progress-planner"}, &dep); err != nil {
		t.Fatalf("Deployment not accepted: %v", err)
	}
	var cm corev1.ConfigMap
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "planner-config"}, &cm); err != nil {
		t.Fatal(err)
	}
	if _, err := framework.Poll(ctx, bound, func(ctx context.Context) (bool, error) {
		c, err := client.New(env.Config, client.Options{Scheme: kueueext.NewScheme()})
		if err != nil {
			return false, nil
		}
		var l v1alpha1.ProgressForecastList
		if err := c.List(ctx, &l); err != nil {
			return false, nil
		}
		return true, nil
	}); err != nil {
		t.Fatalf("ProgressForecast CRD not served: %v", err)
	}

	cfg, err := plannerconfig.ParseConfig([]byte(cm.Data["config.yaml"]))
	if err != nil {
		t.Fatalf("shipped config: %v", err)
	}
	if !cfg.LeaderElection.Enabled {
		t.Errorf("shipped config has leader election off")
	}
	cfg.Policy.Mode = preempt.ModeEnforce
	cfg.LeaderElection.Namespace = ns // POD_NAMESPACE in the Deployment
	tc := testConfig()
	cfg.Metrics, cfg.Health, cfg.CRDCheckInterval, cfg.Forecast = tc.Metrics, tc.Health, tc.CRDCheckInterval, tc.Forecast
	cfg.Policy.Evidence.MinAge, cfg.Policy.Stability.MinDwell = tc.Policy.Evidence.MinAge, tc.Policy.Stability.MinDwell

	user := "system:serviceaccount:" + ns + ":" + sa
	rc := rest.CopyConfig(env.Config)
	rc.Impersonate = rest.ImpersonationConfig{UserName: user}
	// The identity really is limited: it may not read Secrets.
	probe, err := client.New(rc, client.Options{Scheme: kueueext.NewScheme()})
	if err != nil {
		t.Fatal(err)
	}
	if err := probe.List(ctx, &corev1.SecretList{}, client.InNamespace(ns)); !apierrors.IsForbidden(err) {
		t.Fatalf("listing Secrets as %s: %v, want Forbidden", user, err)
	}
	var forbidden atomic.Int64
	var lastForbidden atomic.Value
	rc.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return forbiddenCounter{rt: rt, count: &forbidden, last: &lastForbidden}
	})

	a, _, wlA, _ := runningAndPending(ctx, t, env, "")
	c, _ := runPlanner(ctx, t, rc, env.Config, cfg, 60*time.Second)
	replayStart := time.Now()
	replayDone := replay(ctx, t, c, a, prefix(history(t, "synth__early-plateau").Reports, 0.9))
	if _, err := env.WaitFor(ctx, wlA, plannerBound, func() bool { n, ok := boostValue(wlA); return ok && n == -100 }); err != nil {
		t.Fatalf("job-a's boost not written under the ServiceAccount: %v (annotations %v; 403s %d, last %v)", err, wlA.Annotations,
			forbidden.Load(), lastForbidden.Load())
	}
	t.Logf("boost -100 written as %s %v into the replay", user, time.Since(replayStart).Round(time.Millisecond))
	pf := waitPF(ctx, t, c, a, bound, "status written", func(pf *v1alpha1.ProgressForecast) bool {
		return pf.Status.Verdict == string(preempt.Plateaued) && pf.Status.Boost == -100 && pf.Status.Mode == "enforce"
	})
	t.Logf("ProgressForecast %s: verdict %s boost %d observations %d", pf.Name, pf.Status.Verdict, pf.Status.Boost, pf.Status.Observations)
	ev := waitEvent(ctx, t, c, a.Namespace, "TrainJob", a.Name, kueueext.ReasonBoostChanged)
	t.Logf("Event: %s %s", ev.Reason, ev.Note)
	var lease coordinationv1.Lease
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: cfg.LeaderElection.LeaseName}, &lease); err != nil {
		t.Fatalf("leader election Lease: %v", err)
	}
	t.Logf("Lease %s/%s held by %q", ns, lease.Name, ptr.Deref(lease.Spec.HolderIdentity, ""))
	if ptr.Deref(lease.Spec.HolderIdentity, "") == "" {
		t.Error("Lease has no holder")
	}
	if err := <-replayDone; err != nil {
		t.Errorf("replay: %v", err)
	}
	if n := forbidden.Load(); n > 0 {
		t.Errorf("%d requests of the planner were forbidden, last %v", n, lastForbidden.Load())
	}
	// The PriorityBoost probe ran under the shipped RBAC and found the gate.
	if v := gaugeValue(t, "planner_kueue_priority_boost", map[string]string{"state": "on"}); v != 1 {
		t.Errorf("planner_kueue_priority_boost{state=on} = %v under the shipped RBAC, want 1", v)
	}
	if env.LogPath != "" {
		f, err := os.Open(env.LogPath)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 1<<20), 1<<24)
		lines := 0
		for sc.Scan() {
			lines++
			if l := sc.Text(); strings.Contains(strings.ToLower(l), "forbidden") {
				t.Errorf("forbidden in the log: %s", l)
			}
		}
		t.Logf("log %s: %d lines, no RBAC forbidden errors", env.LogPath, lines)
	}
}
