//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"testing"
	"time"

	kftrainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/progress-planner/planner/api/v1alpha1"
	"github.com/progress-planner/planner/examples"
	"github.com/progress-planner/planner/pkg/kueueext"
	"github.com/progress-planner/planner/pkg/plannerconfig"
	"github.com/progress-planner/planner/pkg/preempt"
	"github.com/progress-planner/planner/pkg/progress"
	statusreplay "github.com/progress-planner/planner/pkg/replay"
	"github.com/progress-planner/planner/test/framework"
)

// The planner's e2e scenarios: the planner's manager runs in-process against
// the real control plane (kube-apiserver, etcd, Kueue's controllers,
// scheduler and webhooks), TrainJob progress is written the way the Trainer
// status server writes it (kueueext.Replay, as `planner replay` does), and
// the assertions are on what Kueue does with the planner's annotation.
//
// Time: the histories are replayed 50× faster than recorded, and the test
// policy has no minimum age and no dwell (both minutes by default), so a
// scenario takes seconds. Everything else is the default policy.

const (
	replaySpeed = 50
	// plannerBound bounds waits on the planner (a forecast per second while
	// reports arrive, plus the replay itself).
	plannerBound = 90 * time.Second
	// crdDir holds the planner's generated CRDs (relative to test/e2e).
	crdDir = "../../config/crd/bases"
)

func plannerEnv(t *testing.T) *framework.Env {
	t.Helper()
	return framework.Start(t, framework.Options{ExtraCRDPaths: []string{crdDir}})
}

// testConfig is the default config with fast intervals and a policy without
// minimum age and dwell (see the file comment).
func testConfig() plannerconfig.Config {
	c := plannerconfig.DefaultConfig()
	c.LeaderElection.Enabled = false
	c.Metrics.BindAddress = "0"
	c.Health.BindAddress = "0"
	c.CRDCheckInterval = preempt.Dur(time.Second)
	c.Forecast.MinInterval = preempt.Dur(time.Second)
	c.Forecast.UrgentMinInterval = preempt.Dur(200 * time.Millisecond)
	c.Forecast.IdleInterval = preempt.Dur(5 * time.Second)
	// The default 10m checkpoint scaled down like the intervals above: the
	// scenarios run the cadence, and their waits see the latest forecast
	// within a second.
	c.Forecast.CheckpointInterval = preempt.Dur(time.Second)
	c.Policy.Evidence.MinAge = preempt.Dur(0)
	c.Policy.Stability.MinDwell = preempt.Dur(0)
	return c
}

// startPlanner runs the planner's manager (as `planner run` builds it) until
// the test ends and returns a client that knows the planner's types.
func startPlanner(ctx context.Context, t *testing.T, env *framework.Env, cfg plannerconfig.Config) client.Client {
	t.Helper()
	c, _ := runPlanner(ctx, t, env.Config, env.Config, cfg, 30*time.Second)
	return c
}

func history(t *testing.T, name string) *progress.HistoryFile {
	t.Helper()
	b, err := fs.ReadFile(examples.FS, examples.Dir+"/"+name+".jsonl")
	if err != nil {
		t.Fatal(err)
	}
	hf, err := progress.ReadHistoryFile(strings.NewReader(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	return hf
}

var errSuspended = errors.New("TrainJob suspended")

// replay writes reports into tj's status at replaySpeed in the background,
// and stops when Kueue suspends tj (an evicted job stops reporting).
func replay(ctx context.Context, t *testing.T, c client.Client, tj *kftrainer.TrainJob, reports []progress.FileReport) <-chan error {
	t.Helper()
	return replayAt(ctx, c, tj, reports, replaySpeed)
}

func replayAt(ctx context.Context, c client.Client, tj *kftrainer.TrainJob, reports []progress.FileReport, speed float64) <-chan error {
	done := make(chan error, 1)
	key := client.ObjectKeyFromObject(tj)
	go func() {
		_, err := statusreplay.Run(ctx, c, key, reports, statusreplay.Options{
			Speed: speed,
			OnReport: func(i int, _ progress.FileReport, werr error) error {
				if werr != nil {
					return fmt.Errorf("report %d refused: %w", i, werr)
				}
				var now kftrainer.TrainJob
				if err := c.Get(ctx, key, &now); err != nil {
					return err
				}
				if framework.TrainJobSuspended(&now) {
					return errSuspended
				}
				return nil
			},
		})
		if errors.Is(err, errSuspended) {
			err = nil
		}
		done <- err
	}()
	return done
}

func prefix(reports []progress.FileReport, frac float64) []progress.FileReport {
	return reports[:int(float64(len(reports))*frac)]
}

// waitPF polls the job's ProgressForecast until cond holds.
func waitPF(ctx context.Context, t *testing.T, c client.Client, tj client.Object, timeout time.Duration, what string,
	cond func(*v1alpha1.ProgressForecast) bool) *v1alpha1.ProgressForecast {
	t.Helper()
	pf := &v1alpha1.ProgressForecast{}
	key := client.ObjectKeyFromObject(tj)
	if _, err := framework.Poll(ctx, timeout, func(ctx context.Context) (bool, error) {
		if err := c.Get(ctx, key, pf); err != nil {
			if apierrors.IsNotFound(err) {
				return false, nil
			}
			return false, err
		}
		return cond(pf), nil
	}); err != nil {
		t.Fatalf("ProgressForecast %s: %s: %v; status: verdict %q boost %d advised %d mode %q adviseOnly %q observations %d reason: %s",
			key, what, err, pf.Status.Verdict, pf.Status.Boost, pf.Status.AdvisedBoost, pf.Status.Mode, pf.Status.AdviseOnly,
			pf.Status.Observations, pf.Status.Reason)
	}
	return pf
}

// plannerEvents lists the planner's Events about the object named name.
func plannerEvents(ctx context.Context, t *testing.T, c client.Client, namespace, kind, name string) []eventsv1.Event {
	t.Helper()
	evs, err := listPlannerEvents(ctx, c, namespace, kind, name)
	if err != nil {
		t.Fatal(err)
	}
	return evs
}

func listPlannerEvents(ctx context.Context, c client.Client, namespace, kind, name string) ([]eventsv1.Event, error) {
	var list eventsv1.EventList
	if err := c.List(ctx, &list, client.InNamespace(namespace)); err != nil {
		return nil, err
	}
	var out []eventsv1.Event
	for _, e := range list.Items {
		if e.ReportingController == kueueext.ControllerName && e.Regarding.Kind == kind && e.Regarding.Name == name {
			out = append(out, e)
		}
	}
	return out, nil
}

func waitEvent(ctx context.Context, t *testing.T, c client.Client, namespace, kind, name, reason string) eventsv1.Event {
	t.Helper()
	var found eventsv1.Event
	var seen []eventsv1.Event
	if _, err := framework.Poll(ctx, 30*time.Second, func(ctx context.Context) (bool, error) {
		evs, err := listPlannerEvents(ctx, c, namespace, kind, name)
		if err != nil {
			return false, err
		}
		seen = evs
		for _, e := range evs {
			if e.Reason == reason {
				found = e
				return true, nil
			}
		}
		return false, nil
	}); err != nil {
		msg := fmt.Sprintf("no %s Event on %s %s/%s: %v; planner events: %s", reason, kind, namespace, name, err, describeEvents(seen))
		if kind == "TrainJob" {
			var pf v1alpha1.ProgressForecast
			if err := c.Get(context.Background(), client.ObjectKey{Namespace: namespace, Name: name}, &pf); err == nil {
				msg += fmt.Sprintf("\nProgressForecast: verdict %q advised %d observations %d rejections %v reason: %s; decision: %s",
					pf.Status.Verdict, pf.Status.AdvisedBoost, pf.Status.Observations, pf.Status.Rejections, pf.Status.Reason, rawOf(pf.Status.Decision))
			}
		}
		t.Fatal(msg)
	}
	return found
}

func rawOf(r interface{ MarshalJSON() ([]byte, error) }) string {
	if r == nil {
		return "none"
	}
	b, _ := r.MarshalJSON()
	return string(b)
}

func describeEvents(evs []eventsv1.Event) string {
	var b strings.Builder
	for _, e := range evs {
		fmt.Fprintf(&b, "\n  %s %s: %s", e.Type, e.Reason, e.Note)
	}
	return b.String()
}

func decisionOf(t *testing.T, pf *v1alpha1.ProgressForecast) preempt.Decision {
	t.Helper()
	var d preempt.Decision
	if pf.Status.Decision == nil {
		t.Fatalf("ProgressForecast %s has no decision", pf.Name)
	}
	if err := json.Unmarshal(pf.Status.Decision.Raw, &d); err != nil {
		t.Fatal(err)
	}
	return d
}

func boostOf(wl *kueue.Workload) (string, bool) {
	v, ok := wl.Annotations[kueueext.AnnotationPriorityBoost]
	return v, ok
}

// Scenario 1: a plateaued job yields. An 8-GPU queue; job-a holds all GPUs
// and reports a plateaued curve; job-b, same priority, waits. The planner
// lowers job-a's boost and wakes job-b; Kueue evicts job-a and admits job-b.
func TestPlannerPlateauedJobYields(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	env := plannerEnv(t)
	a, b, wlA, wlB := runningAndPending(ctx, t, env, "")
	c := startPlanner(ctx, t, env, testConfig())
	yields0, yieldedHours0 := gaugeValueOK(nil, "planner_yields_total"), gaugeValueOK(nil, "planner_gpu_hours_yielded_total")

	replayStart := time.Now()
	replayDone := replay(ctx, t, c, a, prefix(history(t, "synth__early-plateau").Reports, 0.9))

	pf := waitPF(ctx, t, c, a, plannerBound, "verdict Plateaued", func(pf *v1alpha1.ProgressForecast) bool {
		return pf.Status.Verdict == string(preempt.Plateaued)
	})
	d := decisionOf(t, pf)
	detectable := time.Unix(0, int64(d.VerdictSince*1e9))
	t.Logf("job-a: Plateaued %v into the replay (%d observations): %s", detectable.Sub(replayStart).Round(time.Millisecond),
		pf.Status.Observations, pf.Status.Reason)

	if _, err := env.WaitFor(ctx, wlA, framework.DefaultWait, func() bool { v, _ := boostOf(wlA); return v == "-100" }); err != nil {
		t.Fatalf("job-a's Workload boost not -100: %v (annotations %v)", err, wlA.Annotations)
	}
	boosted := time.Now()
	if !kueueext.PlannerOwnsBoost(wlA.ManagedFields) {
		t.Errorf("the boost on %s is not owned by field manager %s: %v", wlA.Name, kueueext.FieldManager, kueueext.BoostOwners(wlA.ManagedFields))
	}
	evicted, admitted := waitYield(ctx, t, env, wlA, wlB)
	if _, err := env.WaitFor(ctx, b, bound, func() bool { return !framework.TrainJobSuspended(b) }); err != nil {
		t.Fatalf("job-b admitted but not unsuspended: %v", err)
	}
	t.Logf("plateau detectable → boost written %v → job-a evicted %v → job-b admitted %v; plateau detectable → job-b admitted: %v",
		boosted.Sub(detectable).Round(time.Millisecond), evicted.Sub(boosted).Round(time.Millisecond),
		admitted.Sub(evicted).Round(time.Millisecond), admitted.Sub(detectable).Round(time.Millisecond))

	// job-b was woken by the planner (a dip of its boost, restored at once
	// to "0": its priority unchanged); the boost Event says so below.
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(wlB), wlB); err != nil {
		t.Fatal(err)
	}
	if v, ok := boostOf(wlB); !ok || v != "0" && v != "+0" {
		t.Errorf("job-b's Workload boost annotation %q (set %v) after the nudge (Kueue %s)", v, ok, framework.KueueVersion)
	}
	if err := <-replayDone; err != nil {
		t.Errorf("replay: %v", err)
	}
	ev := waitEvent(ctx, t, c, a.Namespace, "TrainJob", a.Name, kueueext.ReasonBoostChanged)
	t.Logf("Event on TrainJob %s: %s %s: %s", a.Name, ev.Type, ev.Reason, ev.Note)
	if !strings.Contains(ev.Note, "Plateaued") || !strings.Contains(ev.Note, "priority boost -100") || !strings.Contains(ev.Note, "woke 1 waiting Workload") {
		t.Errorf("boost Event does not carry the policy's reason: %q", ev.Note)
	}
	waitEvent(ctx, t, c, wlA.Namespace, "Workload", wlA.Name, kueueext.ReasonBoostChanged)
	waitEvent(ctx, t, c, a.Namespace, "TrainJob", a.Name, string(preempt.Plateaued))

	// The planner records the eviction it caused; job-a keeps the yield it
	// was evicted with while it waits (docs/policy.md, eviction cooldown),
	// so it is not readmitted ahead of job-b and made to yield again.
	pf = waitPF(ctx, t, c, a, bound, "planner eviction recorded, yield kept while out", func(pf *v1alpha1.ProgressForecast) bool {
		return pf.Status.LastPlannerEvictionTime != nil && pf.Status.Boost == -100
	})
	// The dashboard's outcome metrics saw the yield (docs/observability.md).
	yields, yieldedHours := gaugeValueOK(nil, "planner_yields_total"), gaugeValueOK(nil, "planner_gpu_hours_yielded_total")
	plateaued := gaugeValueOK(map[string]string{"verdict": string(preempt.Plateaued)}, "planner_jobs")
	t.Logf("metrics: planner_yields_total %v → %v, planner_gpu_hours_yielded_total %.2f → %.2f, planner_jobs{verdict=Plateaued} %v",
		yields0, yields, yieldedHours0, yieldedHours, plateaued)
	if yields0 < 0 || yields-yields0 != 1 || yieldedHours <= yieldedHours0 || plateaued < 1 {
		t.Errorf("outcome metrics: yields %v → %v (want +1), GPU-hours yielded %v → %v (want more), jobs Plateaued %v (want ≥ 1)",
			yields0, yields, yieldedHours0, yieldedHours, plateaued)
	}
	if pf.Status.Workload != wlA.Name || pf.Status.ClusterQueue != "gpus" || pf.Status.Mode != "enforce" {
		t.Errorf("status workload %q clusterQueue %q mode %q adviseOnly %q", pf.Status.Workload, pf.Status.ClusterQueue, pf.Status.Mode, pf.Status.AdviseOnly)
	}
	if err := env.HoldsFor(ctx, wlA, 3*time.Second, func() bool { v, _ := boostOf(wlA); return v == "-100" }); err != nil {
		t.Fatalf("job-a's yield not kept while it waits: %v (annotations %v, owners %v)", err, wlA.Annotations, kueueext.BoostOwners(wlA.ManagedFields))
	}
	t.Logf("job-a's boost annotation owners while it waits: %v", kueueext.BoostOwners(wlA.ManagedFields))
	// B keeps its place: same priority, no preemption back and forth.
	if err := env.HoldsFor(ctx, wlB, 3*time.Second, func() bool { return framework.WorkloadAdmitted(wlB) }); err != nil {
		t.Fatalf("job-b lost its admission: %v", err)
	}
	if evs := plannerEvents(ctx, t, c, a.Namespace, "TrainJob", a.Name); hasReason(evs, kueueext.ReasonAdviseOnly) {
		t.Errorf("the planner went advise-only on its own annotation:%s", describeEvents(evs))
	}
}

// waitYield waits for job-a's Workload to be evicted and then job-b's to
// be admitted in its place (scenario 1's yield), and says when each was
// seen.
func waitYield(ctx context.Context, t *testing.T, env *framework.Env, wlA, wlB *kueue.Workload) (evicted, admitted time.Time) {
	t.Helper()
	if _, err := env.WaitFor(ctx, wlA, bound, func() bool { return framework.WorkloadEvicted(wlA) }); err != nil {
		t.Fatalf("job-a's Workload not evicted: %v; conditions %+v", err, wlA.Status.Conditions)
	}
	evicted = time.Now()
	if _, err := env.WaitFor(ctx, wlB, bound, func() bool { return framework.WorkloadAdmitted(wlB) }); err != nil {
		t.Fatalf("job-b's Workload not admitted: %v; conditions %+v", err, wlB.Status.Conditions)
	}
	return evicted, time.Now()
}

// Scenario 3: a healthy job is left alone: no boost, no Event spam, the
// waiting job keeps waiting.
func TestPlannerHealthyJobLeftAlone(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	env := plannerEnv(t)
	a, _, wlA, wlB := runningAndPending(ctx, t, env, "")
	c := startPlanner(ctx, t, env, testConfig())

	reports := prefix(history(t, "synth__inverse-power").Reports, 0.85)
	if err := <-replay(ctx, t, c, a, reports); err != nil {
		t.Fatalf("replay: %v", err)
	}
	pf := waitPF(ctx, t, c, a, plannerBound, "all reports observed and forecast", func(pf *v1alpha1.ProgressForecast) bool {
		return pf.Status.Observations >= int64(len(reports)*9/10) && pf.Status.Forecast != nil &&
			pf.Status.Forecast.Reports >= int32(len(reports)*8/10)
	})
	t.Logf("job-a after %d reports: verdict %s, boost %d: %s", len(reports), pf.Status.Verdict, pf.Status.Boost, pf.Status.Reason)
	if v := pf.Status.Verdict; v != string(preempt.Progressing) && v != string(preempt.Warming) {
		t.Errorf("verdict %q for a healthy job", v)
	}
	// Within the hang threshold (2 report intervals + 45 s) of the last
	// report, nothing may change.
	if err := env.HoldsFor(ctx, wlA, 5*time.Second, func() bool { _, ok := boostOf(wlA); return !ok && framework.WorkloadAdmitted(wlA) }); err != nil {
		t.Fatalf("job-a's Workload was boosted or lost its admission: %v (annotations %v)", err, wlA.Annotations)
	}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(wlB), wlB); err != nil {
		t.Fatal(err)
	}
	if framework.WorkloadQuotaReserved(wlB) {
		t.Error("job-b got quota beside a healthy job-a")
	}
	if evs := plannerEvents(ctx, t, c, a.Namespace, "TrainJob", a.Name); len(evs) > 0 {
		t.Errorf("planner Events for a healthy job:%s", describeEvents(evs))
	}
	if evs := plannerEvents(ctx, t, c, wlA.Namespace, "Workload", wlA.Name); len(evs) > 0 {
		t.Errorf("planner Events for a healthy job's Workload:%s", describeEvents(evs))
	}
}

// Scenario 4: a forged jump to 99 % earns no protection, and an Event says
// why.
func TestPlannerForgedProgressEarnsNoProtection(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	env := plannerEnv(t)
	a, _, wlA, wlB := runningAndPending(ctx, t, env, "")
	c := startPlanner(ctx, t, env, testConfig())

	hf := history(t, "synth__inverse-power")
	honest := prefix(hf.Reports, 0.45)
	// The forged report follows the honest ones a little over a second
	// later: the forecast judges a jump against the job's rate over at
	// least 1 s (pkg/forecast jumpRatio), so this replay runs at 15×, where
	// 45 % → 99 % in 1.05 s is ~30× the job's rate (at 50× it would be ~9×).
	const speed = 15
	forged := progress.FileReport{T: honest[len(honest)-1].T + 1.05*speed, TrainerStatus: forge99(hf.Reports[len(honest)].TrainerStatus)}
	if err := <-replayAt(ctx, c, a, append(append([]progress.FileReport{}, honest...), forged), speed); err != nil {
		t.Fatalf("replay: %v", err)
	}
	ev := waitEvent(ctx, t, c, a.Namespace, "TrainJob", a.Name, kueueext.ReasonImplausibleProgress)
	t.Logf("Event on TrainJob %s: %s %s: %s", a.Name, ev.Type, ev.Reason, ev.Note)
	if ev.Type != "Warning" || !strings.Contains(ev.Note, "no protection") {
		t.Errorf("Event %s %q", ev.Type, ev.Note)
	}
	pf := waitPF(ctx, t, c, a, bound, "forecast after the forged report", func(pf *v1alpha1.ProgressForecast) bool {
		return pf.Status.Forecast != nil && len(pf.Status.Forecast.Integrity) > 0
	})
	t.Logf("job-a after the forged report: verdict %s, advised boost %d: %s", pf.Status.Verdict, pf.Status.AdvisedBoost, pf.Status.Reason)
	if pf.Status.AdvisedBoost > 0 || pf.Status.Verdict == string(preempt.NearDone) {
		t.Errorf("forged progress earned protection: verdict %s advised %d", pf.Status.Verdict, pf.Status.AdvisedBoost)
	}
	if err := env.HoldsFor(ctx, wlA, 3*time.Second, func() bool {
		v, ok := boostOf(wlA)
		return !ok || strings.HasPrefix(v, "-") || v == "0"
	}); err != nil {
		t.Fatalf("job-a's Workload got a positive boost: %v (annotations %v)", err, wlA.Annotations)
	}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(wlB), wlB); err != nil {
		t.Fatal(err)
	}
	if v, ok := boostOf(wlB); ok && v != "0" && v != "+0" {
		t.Errorf("job-b's boost changed: %q", v)
	}
}

// forge99 claims 99 %: percentage and step counter jump, ETA one minute.
func forge99(s progress.TrainerStatus) progress.TrainerStatus {
	out := progress.TrainerStatus{ProgressPercentage: ptr.To(99.0), EstimatedRemainingSeconds: ptr.To(60.0)}
	var total float64
	for _, m := range s.Metrics {
		if m.Name == "total_steps" {
			fmt.Sscan(m.Value, &total)
		}
	}
	for _, m := range s.Metrics {
		if m.Name == "current_step" && total > 0 {
			m.Value = fmt.Sprint(int(total * 0.99))
		}
		out.Metrics = append(out.Metrics, m)
	}
	return out
}

// Scenario 6: garbage trainerStatus keeps the planner running; other jobs
// are unaffected; the rejections are visible.
func TestPlannerGarbageStatus(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	env := plannerEnv(t)
	a, _, _, _ := runningAndPending(ctx, t, env, "")
	// A second, healthy job in its own queue.
	if _, _, err := env.CreateGPUQueue(ctx, "team-c", "gpus-c", 8); err != nil {
		t.Fatal(err)
	}
	jc, err := env.CreateTrainJob(ctx, "team-c", "job-c", "gpus-c", 8, "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := env.WaitFor(ctx, jc, bound, func() bool { return !framework.TrainJobSuspended(jc) }); err != nil {
		t.Fatalf("job-c not started: %v", err)
	}
	c := startPlanner(ctx, t, env, testConfig())
	waitPF(ctx, t, c, a, bound, "created", func(*v1alpha1.ProgressForecast) bool { return true })

	healthy := prefix(history(t, "synth__inverse-power").Reports, 0.5)
	cDone := replay(ctx, t, c, jc, healthy)

	// Values the Trainer API accepts but that make no sense.
	garbage := []progress.TrainerStatus{
		{Metrics: []progress.MetricValue{{Name: "loss", Value: "banana"}, {Name: "current_step", Value: "-5"}}},
		{Metrics: []progress.MetricValue{{Name: "loss", Value: "1"}, {Name: "loss", Value: "2"}}},
		{ProgressPercentage: ptr.To(50.0), Metrics: []progress.MetricValue{{Name: "current_step", Value: "900"}, {Name: "total_steps", Value: "10"}}},
		{Metrics: []progress.MetricValue{{Name: "total_steps", Value: "1e300"}, {Name: "loss", Value: "0x1p-2"}}},
		{Metrics: []progress.MetricValue{{Name: strings.Repeat("m", 64), Value: strings.Repeat("9", 64)}}},
	}
	var reports []progress.FileReport
	for i, g := range garbage {
		reports = append(reports, progress.FileReport{T: float64(i) * 25, TrainerStatus: g}) // 0.5 s apart at replaySpeed
	}
	if err := <-replay(ctx, t, c, a, reports); err != nil {
		t.Fatalf("garbage replay: %v", err)
	}
	pf := waitPF(ctx, t, c, a, plannerBound, "rejections visible", func(pf *v1alpha1.ProgressForecast) bool {
		return len(pf.Status.Rejections) >= 5 && pf.Status.LastRejection != ""
	})
	t.Logf("job-a rejections %v, last %q, observations %d", pf.Status.Rejections, pf.Status.LastRejection, pf.Status.Observations)
	ev := waitEvent(ctx, t, c, a.Namespace, "TrainJob", a.Name, kueueext.ReasonReportsRejected)
	t.Logf("Event on TrainJob %s: %s", a.Name, ev.Note)

	if err := <-cDone; err != nil {
		t.Fatalf("job-c replay: %v", err)
	}
	pfc := waitPF(ctx, t, c, jc, plannerBound, "job-c observed and forecast", func(pf *v1alpha1.ProgressForecast) bool {
		return pf.Status.Observations >= int64(len(healthy)*9/10) && pf.Status.Forecast != nil
	})
	if len(pfc.Status.Rejections) != 0 {
		t.Errorf("job-c has rejections %v", pfc.Status.Rejections)
	}
	t.Logf("job-c unaffected: %d observations, verdict %s", pfc.Status.Observations, pfc.Status.Verdict)

	// The planner carries on with job-a's valid reports.
	before := pf.Status.Observations
	if err := <-replay(ctx, t, c, a, prefix(history(t, "synth__inverse-power").Reports, 0.2)); err != nil {
		t.Fatal(err)
	}
	waitPF(ctx, t, c, a, plannerBound, "valid reports after the garbage", func(pf *v1alpha1.ProgressForecast) bool {
		return pf.Status.Observations > before+5 && pf.Status.Forecast != nil && pf.Status.Forecast.Reports > 5
	})
}

// Scenario 8: advise mode, and a foreign owner of the annotation: the
// planner decides and explains but writes no boost.
func TestPlannerWritesNoBoost(t *testing.T) {
	for _, tc := range []struct {
		name    string
		advise  bool
		foreign bool
	}{
		{name: "advise mode", advise: true},
		{name: "foreign annotation owner", foreign: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			env := plannerEnv(t)
			a, _, wlA, wlB := runningAndPending(ctx, t, env, "")
			if tc.foreign {
				// Someone else (field manager planner-e2e) manages the boost.
				if err := env.SetPriorityBoost(ctx, wlA, 0); err != nil {
					t.Fatal(err)
				}
			}
			cfg := testConfig()
			if tc.advise {
				cfg.Policy.Mode = preempt.ModeAdvise
			}
			c := startPlanner(ctx, t, env, cfg)
			replayDone := replay(ctx, t, c, a, prefix(history(t, "synth__early-plateau").Reports, 0.8))
			pf := waitPF(ctx, t, c, a, plannerBound, "Plateaued with advised boost -100", func(pf *v1alpha1.ProgressForecast) bool {
				return pf.Status.Verdict == string(preempt.Plateaued) && pf.Status.AdvisedBoost == -100
			})
			t.Logf("job-a: mode %s, advised %d, boost %d, adviseOnly %q", pf.Status.Mode, pf.Status.AdvisedBoost, pf.Status.Boost, pf.Status.AdviseOnly)
			wantMode := "advise"
			if tc.foreign {
				wantMode = "advise-only"
				if !strings.Contains(pf.Status.AdviseOnly, "planner-e2e") {
					t.Errorf("adviseOnly %q does not name the other writer", pf.Status.AdviseOnly)
				}
				ev := waitEvent(ctx, t, c, a.Namespace, "TrainJob", a.Name, kueueext.ReasonAdviseOnly)
				t.Logf("Event on TrainJob %s: %s", a.Name, ev.Note)
				waitEvent(ctx, t, c, wlA.Namespace, "Workload", wlA.Name, kueueext.ReasonAdviseOnly)
			}
			if pf.Status.Mode != wantMode || pf.Status.Boost != 0 {
				t.Errorf("mode %q boost %d, want %q and 0", pf.Status.Mode, pf.Status.Boost, wantMode)
			}
			if err := env.HoldsFor(ctx, wlA, 3*time.Second, func() bool {
				v, ok := boostOf(wlA)
				if tc.foreign {
					return ok && v == "0" && framework.WorkloadAdmitted(wlA)
				}
				return !ok && framework.WorkloadAdmitted(wlA)
			}); err != nil {
				t.Fatalf("job-a's Workload changed: %v (annotations %v, managers %v)", err, wlA.Annotations, kueueext.BoostOwners(wlA.ManagedFields))
			}
			if kueueext.PlannerOwnsBoost(wlA.ManagedFields) {
				t.Error("the planner owns job-a's boost annotation")
			}
			if err := env.Client.Get(ctx, client.ObjectKeyFromObject(wlB), wlB); err != nil {
				t.Fatal(err)
			}
			if framework.WorkloadQuotaReserved(wlB) {
				t.Error("job-b admitted although no boost was written")
			}
			if evs := plannerEvents(ctx, t, c, a.Namespace, "TrainJob", a.Name); hasReason(evs, kueueext.ReasonBoostChanged) {
				t.Errorf("boost change Events without a boost change:%s", describeEvents(evs))
			}
			cancel()
			<-replayDone
		})
	}
}

func hasReason(evs []eventsv1.Event, reason string) bool {
	for _, e := range evs {
		if e.Reason == reason {
			return true
		}
	}
	return false
}
