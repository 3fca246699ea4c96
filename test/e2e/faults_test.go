//go:build e2e

package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	kftrainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	coordinationv1 "k8s.io/api/coordination/v1"
	eventsv1 "k8s.io/api/events/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/progress-planner/planner/api/v1alpha1"
	"github.com/progress-planner/planner/pkg/kueueext"
	"github.com/progress-planner/planner/pkg/preempt"
	"github.com/progress-planner/planner/pkg/progress"
	"github.com/progress-planner/planner/test/framework"
)

// Fault tests (issue 22, docs/testing.md "Fault tests"): a TrainJob reports
// progress under the planner (its manager in-process, as in the other
// scenarios) while the control plane misbehaves: kube-apiserver stopped and
// restarted on the same port, or etcd frozen with SIGSTOP. Each test checks
// that the planner's manager never exits, that the stored history survives
// (HistoryValid stays True, the accepted report count never goes back, no
// HistoryReset), and that reports sent after the fault are folded in and
// decided on.

// faultScenario is the part the fault tests share.
type faultScenario struct {
	env     *framework.Env
	c       client.Client
	tj      *kftrainer.TrainJob
	wl      *kueue.Workload
	exited  <-chan error // the planner's manager's exit, if it exits
	mon     *pfMonitor
	reports int // reports in the whole history
}

// startFaultScenario starts a control plane, an admitted 8-GPU job, the
// planner (its manager in-process), and replays the first 40 % of
// synth__early-plateau (replayBefore). It returns the reports to replay
// after the fault and the ProgressForecast before it.
func startFaultScenario(ctx context.Context, t *testing.T) (*faultScenario, []progress.FileReport, *v1alpha1.ProgressForecast) {
	t.Helper()
	env := plannerEnv(t)
	tj, wl := runningJob(ctx, t, env, "team-a", "gpus", "job-a", "")
	c, _, exited := runPlannerExit(ctx, t, env.Config, env.Config, kueueext.Options{Config: testConfig(), SkipNameValidation: true}, 60*time.Second)
	s := &faultScenario{env: env, c: c, tj: tj, wl: wl, exited: exited}
	all := history(t, "synth__early-plateau").Reports
	s.reports = len(all)
	cut1, cut2 := int(float64(len(all))*0.4), int(float64(len(all))*0.86)
	before := s.replayBefore(ctx, t, all[:cut1], "the fault")
	return s, all[cut1:cut2], before
}

// replayBefore replays the reports before the fault (named by fault in the
// messages), waits until the planner has observed most of them (it
// coalesces status changes it sees together: about 35 of 40) and has
// decided, starts the monitor, and returns the ProgressForecast once the
// last forecast has landed.
func (s *faultScenario) replayBefore(ctx context.Context, t *testing.T, reports []progress.FileReport, fault string) *v1alpha1.ProgressForecast {
	t.Helper()
	if err := <-replay(ctx, t, s.c, s.tj, reports); err != nil {
		t.Fatalf("replay before %s: %v", fault, err)
	}
	waitPF(ctx, t, s.c, s.tj, plannerBound, "reports before "+fault+" folded in and decided", func(pf *v1alpha1.ProgressForecast) bool {
		return pf.Status.Observations >= int64(len(reports)*3/4) && pf.Status.Decision != nil
	})
	s.mon = startPFMonitor(ctx, t, s.env.Config, s.tj, s.wl)
	time.Sleep(1500 * time.Millisecond) // a forecast per second: let the last one land
	return snapshotPF(ctx, t, s.c, s.tj)
}

// faultTest is a fault test on the scenario of startFaultScenario: the
// fault, then the rest of the history replayed and checked (afterFault, no
// flap). R is what inject reports of the fault.
type faultTest[R any] struct {
	name    string // the fault in the logs: "the outage"
	failing string // what inject does, in its error: "restarting kube-apiserver"
	// inject makes the fault, for d, and returns once it has ended: a
	// method of framework.Env.
	inject func(e *framework.Env, ctx context.Context, d time.Duration) (R, error)
	d      time.Duration
	// ended logs and checks the fault itself, right after it ended.
	ended func(ctx context.Context, s *faultScenario, r R, faultAt, faultEnd time.Time)
	// logBoosts logs the planner's boost Events at the end.
	logBoosts bool
}

func (f faultTest[R]) run(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	s, rest, before := startFaultScenario(ctx, t)
	errs0 := reconcileErrors()
	t.Logf("before %s: %d observations, revision %d, verdict %s, reconcile errors %v",
		f.name, before.Status.Observations, before.Status.Revision, before.Status.Verdict, errs0)
	faultAt := time.Now()
	r, err := f.inject(s.env, ctx, f.d)
	if err != nil {
		t.Fatalf("%s: %v", f.failing, err)
	}
	faultEnd := time.Now()
	f.ended(ctx, s, r, faultAt, faultEnd)
	s.afterFault(ctx, t, rest, faultEnd, before, true)
	if f.logBoosts {
		logBoostEvents(ctx, t, s.c, s.tj)
	}
	t.Logf("planner reconcile errors (process-wide counter): %v before %s, %v at the end; manager exits: 0", errs0, f.name, reconcileErrors())
}

// afterFault replays the rest of the history after the fault ended at
// faultEnd and checks that the planner folds it in and decides on it.
//
// noFlap asks that the boost annotation never returns to a value it left.
func (s *faultScenario) afterFault(ctx context.Context, t *testing.T, rest []progress.FileReport, faultEnd time.Time,
	before *v1alpha1.ProgressForecast, noFlap bool) {
	t.Helper()
	select {
	case err := <-s.exited:
		t.Fatalf("the planner's manager exited during the fault: %v", err)
	default:
	}
	// One report first: it reaches the planner once its watches are back
	// (client-go's reflectors relist with a backoff of up to 30 s after
	// the connection failed); reports written before that are seen
	// coalesced, as their latest state. This wait is the recovery time.
	firstAt := time.Now()
	if err := <-replay(ctx, t, s.c, s.tj, rest[:1]); err != nil {
		t.Fatalf("the first report after the fault: %v", err)
	}
	first := waitPF(ctx, t, s.c, s.tj, 3*time.Minute, "the first report after the fault folded in", func(pf *v1alpha1.ProgressForecast) bool {
		return pf.Status.Observations > before.Status.Observations
	})
	t.Logf("the first report after the fault folded in %v after it was written (%v after the fault ended): observations %d → %d, revision %d → %d",
		time.Since(firstAt).Round(time.Millisecond), time.Since(faultEnd).Round(time.Millisecond),
		before.Status.Observations, first.Status.Observations, before.Status.Revision, first.Status.Revision)
	replayAt := time.Now()
	if err := <-replay(ctx, t, s.c, s.tj, rest[1:]); err != nil {
		t.Fatalf("replay after the fault: %v", err)
	}
	t.Logf("replayed %d more reports in %v", len(rest)-1, time.Since(replayAt).Round(time.Millisecond))
	pf := waitPF(ctx, t, s.c, s.tj, plannerBound, "reports after the fault folded in and decided on", func(pf *v1alpha1.ProgressForecast) bool {
		if pf.Status.Decision == nil || pf.Status.Observations < first.Status.Observations+int64(len(rest)-1)/2 {
			return false
		}
		return decisionOf(t, pf).At > float64(replayAt.UnixNano())/1e9
	})
	folded := time.Now()
	d := decisionOf(t, pf)
	t.Logf("after the fault: %d observations (was %d), revision %d (was %d), verdict %s, decision at +%.1fs after the fault; folded in %v after the replay began",
		pf.Status.Observations, before.Status.Observations, pf.Status.Revision, before.Status.Revision, pf.Status.Verdict,
		d.At-float64(faultEnd.UnixNano())/1e9, folded.Sub(replayAt).Round(time.Millisecond))
	if pf.Status.Revision <= before.Status.Revision {
		t.Errorf("revision %d not above %d", pf.Status.Revision, before.Status.Revision)
	}
	if pf.Status.Verdict != string(preempt.Plateaued) {
		t.Errorf("verdict %s after the fault, want %s", pf.Status.Verdict, preempt.Plateaued)
	}
	// The history ends plateaued before NearDone: the decision is the yield.
	if _, err := s.env.WaitFor(ctx, s.wl, plannerBound, func() bool { n, ok := boostValue(s.wl); return ok && n == -100 }); err != nil {
		t.Errorf("job-a's boost not -100 after the fault: %v (annotations %v, verdict %s)", err, s.wl.Annotations, pf.Status.Verdict)
	}
	// HistoryValid is set when a planner restores a stored history (at
	// its start); the planner ran throughout, so it must not be False.
	if c := apimeta.FindStatusCondition(pf.Status.Conditions, v1alpha1.ConditionHistoryValid); c != nil && c.Status != metav1.ConditionTrue {
		t.Errorf("HistoryValid %s %s: %s", c.Status, c.Reason, c.Message)
	}
	nBefore, err := storedPoints(before)
	if err != nil {
		t.Errorf("stored history before the fault does not decode: %v", err)
	}
	nAfter, err := storedPoints(pf)
	if err != nil {
		t.Errorf("stored history after the fault does not decode: %v", err)
	}
	t.Logf("stored history: %d points before the fault, %d after", nBefore, nAfter)
	if nAfter <= nBefore {
		t.Errorf("stored history has %d points after the fault, %d before", nAfter, nBefore)
	}
	if evs := plannerEvents(ctx, t, s.c, s.tj.Namespace, "TrainJob", s.tj.Name); hasReason(evs, kueueext.ReasonHistoryReset) {
		t.Errorf("history reset across the fault:%s", describeEvents(evs))
	}
	select {
	case err := <-s.exited:
		t.Fatalf("the planner's manager exited after the fault: %v", err)
	default:
	}
	s.mon.check(t, noFlap)
}

// pfMonitor polls the ProgressForecast and the Workload every 200 ms from
// its own client (errors, e.g. while the apiserver is down, are counted and
// skipped) and records what must never happen: the accepted report count
// going back, HistoryValid not True, and every change of the boost
// annotation.
type pfMonitor struct {
	mu            sync.Mutex
	polls, errs   int
	maxObs        int64
	maxPoints     int
	regressions   []string
	invalid       []string
	boosts        []string // annotation values in the order seen, "" for none
	cancel        context.CancelFunc
	done          chan struct{}
	firstErr, end time.Time
}

func startPFMonitor(ctx context.Context, t *testing.T, cfg *rest.Config, tj *kftrainer.TrainJob, wl *kueue.Workload) *pfMonitor {
	t.Helper()
	rc := rest.CopyConfig(cfg)
	rc.Timeout = 5 * time.Second
	c, err := client.New(rc, client.Options{Scheme: kueueext.NewScheme()})
	if err != nil {
		t.Fatal(err)
	}
	mctx, cancel := context.WithCancel(ctx)
	m := &pfMonitor{cancel: cancel, done: make(chan struct{})}
	t.Cleanup(m.stop)
	go func() {
		defer close(m.done)
		tick := time.NewTicker(200 * time.Millisecond)
		defer tick.Stop()
		for {
			m.poll(mctx, c, client.ObjectKeyFromObject(tj), client.ObjectKeyFromObject(wl))
			select {
			case <-mctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	return m
}

func (m *pfMonitor) poll(ctx context.Context, c client.Client, pfKey, wlKey client.ObjectKey) {
	var pf v1alpha1.ProgressForecast
	var wl kueue.Workload
	errPF := c.Get(ctx, pfKey, &pf)
	errWL := c.Get(ctx, wlKey, &wl)
	m.mu.Lock()
	defer m.mu.Unlock()
	m.polls++
	if errPF != nil || errWL != nil {
		if ctx.Err() == nil {
			m.errs++
		}
		return
	}
	now := time.Now().Format("15:04:05.000")
	if pf.Status.Observations < m.maxObs {
		m.regressions = append(m.regressions, fmt.Sprintf("%s: observations %d after %d", now, pf.Status.Observations, m.maxObs))
	} else {
		m.maxObs = pf.Status.Observations
	}
	if n, err := storedPoints(&pf); err != nil {
		m.invalid = append(m.invalid, fmt.Sprintf("%s: stored history does not decode: %v", now, err))
	} else if n < m.maxPoints {
		m.regressions = append(m.regressions, fmt.Sprintf("%s: %d stored points after %d", now, n, m.maxPoints))
	} else {
		m.maxPoints = n
	}
	if c := apimeta.FindStatusCondition(pf.Status.Conditions, v1alpha1.ConditionHistoryValid); c != nil && c.Status != metav1.ConditionTrue {
		m.invalid = append(m.invalid, fmt.Sprintf("%s: HistoryValid %s %s: %s", now, c.Status, c.Reason, c.Message))
	}
	v, _ := boostOf(&wl)
	if len(m.boosts) == 0 || m.boosts[len(m.boosts)-1] != v {
		m.boosts = append(m.boosts, v)
	}
}

func (m *pfMonitor) stop() {
	m.cancel()
	<-m.done
}

// check stops the monitor and reports what it saw; noFlap: a boost value
// seen again after it changed is an error.
func (m *pfMonitor) check(t *testing.T, noFlap bool) {
	t.Helper()
	m.stop()
	m.mu.Lock()
	defer m.mu.Unlock()
	t.Logf("monitor: %d polls (%d failed), highest observation count %d, most stored points %d, boost annotation values in order %q",
		m.polls, m.errs, m.maxObs, m.maxPoints, m.boosts)
	if len(m.regressions) > 0 {
		t.Errorf("the accepted report count went back: %s", strings.Join(m.regressions, "; "))
	}
	if len(m.invalid) > 0 {
		t.Errorf("stored history not valid: %s", strings.Join(m.invalid, "; "))
	}
	// Expected: the decision before the fault, then -100 once plateaued;
	// a value that comes back after a change is a flap.
	seen := map[string]bool{}
	for i, v := range m.boosts {
		if !noFlap {
			break
		}
		if seen[v] && (i == 0 || m.boosts[i-1] != v) {
			t.Errorf("the boost flapped: values in order %q", m.boosts)
			break
		}
		seen[v] = true
	}
}

// storedHistory decodes the ProgressForecast's stored history as the
// planner restores it (nil when none is stored).
func storedHistory(pf *v1alpha1.ProgressForecast) (*progress.History, error) {
	if pf.Status.History == nil || len(pf.Status.History.Raw) == 0 {
		return nil, nil
	}
	return progress.UnmarshalHistory(pf.Status.History.Raw, progress.DefaultLimits())
}

// storedPoints is the number of points of the stored history (0 when none
// is stored).
func storedPoints(pf *v1alpha1.ProgressForecast) (int, error) {
	h, err := storedHistory(pf)
	if err != nil || h == nil {
		return 0, err
	}
	return h.Len(), nil
}

// reconcileErrors is the planner controller's reconcile error count
// (controller-runtime's metric, shared registry; -1 if absent).
func reconcileErrors() float64 {
	return gaugeValueOK(map[string]string{"controller": "trainjob-progress"}, "controller_runtime_reconcile_errors_total")
}

// snapshotPF reads the ProgressForecast now.
func snapshotPF(ctx context.Context, t *testing.T, c client.Client, tj *kftrainer.TrainJob) *v1alpha1.ProgressForecast {
	t.Helper()
	pf := &v1alpha1.ProgressForecast{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(tj), pf); err != nil {
		t.Fatal(err)
	}
	return pf
}

// TestFaultLeaderStoppedFlushes: a leader stopped gracefully (SIGTERM, as
// in a rolling update) with a checkpoint interval of 10 minutes writes the
// reports it folded in since the last checkpoint before it exits, so the
// stored history ends at the last report; a crash (TestFaultLeaderKilled)
// would lose them.
func TestFaultLeaderStoppedFlushes(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	rs := setUpReplicas(ctx, t, strings.Replace(leaderConfig, "checkpointInterval: 0s", "checkpointInterval: 10m", 1))
	tj, c := rs.tj, rs.c
	leader := rs.start("replica-1")
	if _, err := framework.Poll(ctx, 2*time.Minute, func(context.Context) (bool, error) {
		if !leader.Running() {
			return false, fmt.Errorf("%s exited: %v", leader.name, leader.State())
		}
		return leader.acquired(), nil
	}); err != nil {
		t.Fatalf("no leader: %v", err)
	}
	all := history(t, "synth__early-plateau").Reports
	reports := all[:len(all)*3/10] // healthy so far: no verdict change writes the status
	if err := <-replay(ctx, t, c, tj, reports); err != nil {
		t.Fatal(err)
	}
	first := waitPF(ctx, t, c, tj, plannerBound, "the first checkpoint", func(pf *v1alpha1.ProgressForecast) bool { return pf.Status.Observations >= 1 })
	time.Sleep(3 * time.Second) // the last reports folded in, in memory
	before := snapshotPF(ctx, t, c, tj)
	leader.StopWith(syscall.SIGTERM, 30*time.Second)
	after := snapshotPF(ctx, t, c, tj)
	t.Logf("stored before SIGTERM: %d observations (first checkpoint %d), after the exit (%v): %d, revision %d → %d",
		before.Status.Observations, first.Status.Observations, leader.Err(), after.Status.Observations, before.Status.Revision, after.Status.Revision)
	if before.Status.Observations >= int64(len(reports)) {
		t.Fatalf("every report stored before the stop (%d): the test needs unsaved ones", before.Status.Observations)
	}
	h, err := storedHistory(after)
	if err != nil || h == nil {
		t.Fatalf("stored history after the stop: %v", err)
	}
	pts := h.Points()
	var want string
	for _, m := range reports[len(reports)-1].TrainerStatus.Metrics {
		if m.Name == "current_step" {
			want = m.Value
		}
	}
	if len(pts) == 0 || fmt.Sprint(pts[len(pts)-1].Step) != want {
		t.Errorf("stored history ends at step %v, want the last report's %s", pts[len(pts)-1].Step, want)
	}
	if b, _ := os.ReadFile(leader.log); !strings.Contains(string(b), "checkpoints written at shutdown") {
		t.Errorf("the leader's log does not say it wrote the checkpoints at shutdown:\n%s", tail(string(b), 20))
	}
}

// TestFaultAPIServerRestart: kube-apiserver stopped for 20 s mid-run and
// started again on the same port with the same etcd.
//
// No flap: while the planner cannot see reports (the outage plus its
// watches' relist backoff, over 45 s on this machine) the job's silence is
// the planner's blindness, not the job's (preempt Facts.WatchingSince), so
// it is not judged Hung meanwhile.
func TestFaultAPIServerRestart(t *testing.T) {
	const down = 20 * time.Second
	faultTest[framework.APIServerRestart]{name: "the outage", failing: "restarting kube-apiserver",
		inject: (*framework.Env).RestartAPIServer, d: down, logBoosts: true,
		ended: func(_ context.Context, _ *faultScenario, r framework.APIServerRestart, faultAt, faultEnd time.Time) {
			how := "exited after SIGTERM"
			if r.Killed {
				how = fmt.Sprintf("killed with SIGKILL (not exited %v after SIGTERM)", framework.APIServerStopGrace)
			}
			t.Logf("kube-apiserver pid %d %s in %v, down %v, pid %d ready in %v (fault %v in all)",
				r.OldPID, how, r.Stop.Round(time.Millisecond), r.Down.Round(time.Millisecond), r.NewPID, r.Ready.Round(time.Millisecond),
				faultEnd.Sub(faultAt).Round(time.Millisecond))
			if r.Down < down {
				t.Errorf("kube-apiserver down %v, want ≥ %v", r.Down, down)
			}
		},
	}.run(t)
}

// TestFaultEtcdFreeze: etcd stopped with SIGSTOP for 10 s mid-run, then
// resumed.
func TestFaultEtcdFreeze(t *testing.T) {
	faultTest[int]{name: "the freeze", failing: "freezing etcd", inject: (*framework.Env).FreezeEtcd, d: 10 * time.Second,
		ended: func(ctx context.Context, s *faultScenario, pid int, faultAt, faultEnd time.Time) {
			t.Logf("etcd pid %d frozen for %v", pid, faultEnd.Sub(faultAt).Round(time.Millisecond))
			// The apiserver answers again once etcd does.
			ready, err := framework.Poll(ctx, 2*time.Minute, func(ctx context.Context) (bool, error) {
				return s.c.Get(ctx, client.ObjectKeyFromObject(s.tj), &kftrainer.TrainJob{}) == nil, nil
			})
			if err != nil {
				t.Fatalf("the apiserver did not answer after the freeze: %v", err)
			}
			t.Logf("a read succeeded %v after SIGCONT", ready.Round(time.Millisecond))
		},
	}.run(t)
}

// leaderConfig is testConfig as a PlannerConfiguration file, with leader
// election on and short lease settings.
const leaderConfig = `apiVersion: planner.progress.io/v1alpha1
kind: PlannerConfiguration
leaderElection:
  enabled: true
  namespace: default
  leaseName: planner-faults
  leaseDuration: 6s
  renewDeadline: 4s
  retryPeriod: 1s
metrics:
  bindAddress: "0"
health:
  bindAddress: "0"
crdCheckInterval: 1s
forecast:
  minInterval: 1s
  urgentMinInterval: 200ms
  idleInterval: 5s
  checkpointInterval: 0s     # every forecast stored: the test asserts no accepted observation is lost
policy:
  evidence:
    minAge: 0s
  stability:
    minDwell: 0s
`

const leaderLeaseDuration = 6 * time.Second

// replica is a `planner run` subprocess.
type replica struct {
	name string
	*plannerProcess
	log string
}

func startReplica(t *testing.T, bin, dir, name, config, kubeconfig string) *replica {
	t.Helper()
	r := &replica{name: name, log: filepath.Join(dir, name+".log")}
	f, err := os.Create(r.log)
	if err != nil {
		t.Fatal(err)
	}
	r.plannerProcess = startPlannerProcess(t, bin, []string{"run", "--config", config, "--kubeconfig", kubeconfig, "--log-format", "text"}, f)
	_ = f.Close()
	t.Cleanup(func() {
		r.StopWith(syscall.SIGTERM, 30*time.Second)
		if t.Failed() {
			b, _ := os.ReadFile(r.log)
			t.Logf("last lines of %s (%s):\n%s", name, r.log, tail(string(b), 40))
		}
	})
	return r
}

// replicaSetup is the scene of the leader tests: a running job, a client,
// and `planner run` replicas started with one config.
type replicaSetup struct {
	env   *framework.Env
	tj    *kftrainer.TrainJob
	wl    *kueue.Workload
	c     client.Client
	start func(name string) *replica
}

func setUpReplicas(ctx context.Context, t *testing.T, configYAML string) replicaSetup {
	t.Helper()
	bin := plannerBinary(t)
	env := plannerEnv(t)
	tj, wl := runningJob(ctx, t, env, "team-a", "gpus", "job-a", "")
	c, err := client.New(env.Config, client.Options{Scheme: kueueext.NewScheme()})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	config := filepath.Join(dir, "planner.yaml")
	if err := os.WriteFile(config, []byte(configYAML), 0o600); err != nil {
		t.Fatal(err)
	}
	kubeconfig := writeKubeconfig(t, env.Config)
	return replicaSetup{env: env, tj: tj, wl: wl, c: c,
		start: func(name string) *replica { return startReplica(t, bin, dir, name, config, kubeconfig) }}
}

// acquired says whether the replica's log says it acquired the lease.
func (r *replica) acquired() bool {
	b, _ := os.ReadFile(r.log)
	return strings.Contains(strings.ToLower(string(b)), "successfully acquired lease")
}

// TestFaultLeaderKilled: two `planner run` replicas with leader election
// (lease 6 s, renew deadline 4 s, retry 1 s); the leader is killed with
// SIGKILL while the job reports. The other takes over within the lease
// duration + 5 s, the stored history survives (restored by the new
// leader: HistoryValid True), reports after the takeover are folded in,
// and the boost on the Workload does not flap.
func TestFaultLeaderKilled(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	rs := setUpReplicas(ctx, t, leaderConfig)
	env, tj, wl, c := rs.env, rs.tj, rs.wl, rs.c
	replicas := []*replica{rs.start("replica-1"), rs.start("replica-2")}
	lease := &coordinationv1.Lease{}
	leaseKey := client.ObjectKey{Namespace: "default", Name: "planner-faults"}
	var leader, follower *replica
	if _, err := framework.Poll(ctx, 2*time.Minute, func(ctx context.Context) (bool, error) {
		var holders []*replica
		for _, r := range replicas {
			if !r.Running() {
				return false, fmt.Errorf("%s exited: %v", r.name, r.State())
			}
			if r.acquired() {
				holders = append(holders, r)
			}
		}
		if len(holders) > 1 {
			return false, errors.New("both replicas say they acquired the lease")
		}
		if len(holders) == 0 || c.Get(ctx, leaseKey, lease) != nil {
			return false, nil
		}
		leader = holders[0]
		follower = replicas[0]
		if follower == leader {
			follower = replicas[1]
		}
		return true, nil
	}); err != nil {
		t.Fatalf("no leader: %v", err)
	}
	holder0 := ptrString(lease.Spec.HolderIdentity)
	t.Logf("leader %s (pid %d, lease holder %s), follower %s (pid %d)", leader.name, leader.Pid(), holder0,
		follower.name, follower.Pid())

	all := history(t, "synth__early-plateau").Reports
	cut1, cut2, cut3 := int(float64(len(all))*0.4), int(float64(len(all))*0.55), int(float64(len(all))*0.86)
	s := &faultScenario{env: env, c: c, tj: tj, wl: wl}
	before := s.replayBefore(ctx, t, all[:cut1], "the kill")
	mon := s.mon
	nBefore, err := storedPoints(before)
	if err != nil {
		t.Fatalf("stored history before the kill does not decode: %v", err)
	}
	t.Logf("before the kill: %d observations, %d stored points, revision %d, verdict %s",
		before.Status.Observations, nBefore, before.Status.Revision, before.Status.Verdict)

	// 40-55 % of the history is written while the leader dies: reports
	// written while no leader runs reach the new leader coalesced.
	rest := replay(ctx, t, c, tj, all[cut1:cut2])
	time.Sleep(2 * time.Second)
	killAt := time.Now()
	if err := leader.Kill(); err != nil {
		t.Fatal(err)
	}
	var takeover time.Duration
	if _, err := framework.Poll(ctx, 2*time.Minute, func(ctx context.Context) (bool, error) {
		if !follower.Running() {
			return false, fmt.Errorf("%s exited: %v", follower.name, follower.State())
		}
		if !follower.acquired() {
			return false, nil
		}
		takeover = time.Since(killAt)
		return true, nil
	}); err != nil {
		t.Fatalf("%s did not take over: %v", follower.name, err)
	}
	if err := c.Get(ctx, leaseKey, lease); err != nil {
		t.Fatal(err)
	}
	t.Logf("%s took over %v after the leader's SIGKILL (lease duration %v; bound %v); lease holder %s → %s, transitions %d",
		follower.name, takeover.Round(time.Millisecond), leaderLeaseDuration, leaderLeaseDuration+5*time.Second,
		holder0, ptrString(lease.Spec.HolderIdentity), ptrInt32(lease.Spec.LeaseTransitions))
	if takeover > leaderLeaseDuration+5*time.Second {
		t.Errorf("takeover took %v, more than the lease duration + 5 s", takeover)
	}
	if ptrString(lease.Spec.HolderIdentity) == holder0 {
		t.Errorf("lease holder still %s", holder0)
	}
	if err := <-rest; err != nil {
		t.Fatalf("replay across the kill: %v", err)
	}
	// The next report after the takeover is folded in, then 55-86 %.
	atTakeover := snapshotPF(ctx, t, c, tj)
	firstAt := time.Now()
	if err := <-replay(ctx, t, c, tj, all[cut2:cut2+1]); err != nil {
		t.Fatalf("the first report after the takeover: %v", err)
	}
	first := waitPF(ctx, t, c, tj, plannerBound, "the first report after the takeover folded in", func(pf *v1alpha1.ProgressForecast) bool {
		return pf.Status.Observations > atTakeover.Status.Observations
	})
	t.Logf("when the replay across the kill ended: %d observations; the next report folded in %v after it was written (observations %d)",
		atTakeover.Status.Observations, time.Since(firstAt).Round(time.Millisecond), first.Status.Observations)
	replayAt := time.Now()
	if err := <-replay(ctx, t, c, tj, all[cut2+1:cut3]); err != nil {
		t.Fatalf("replay after the takeover: %v", err)
	}
	pf := waitPF(ctx, t, c, tj, plannerBound, "reports after the takeover folded in and decided on", func(pf *v1alpha1.ProgressForecast) bool {
		return pf.Status.Decision != nil && pf.Status.Observations >= first.Status.Observations+int64(cut3-cut2-1)/2 &&
			decisionOf(t, pf).At > float64(replayAt.UnixNano())/1e9
	})
	if waited, err := env.WaitFor(ctx, wl, plannerBound, func() bool { n, ok := boostValue(wl); return ok && n == -100 }); err != nil {
		t.Errorf("job-a's boost not -100 after the takeover: %v (annotations %v)", err, wl.Annotations)
	} else {
		v, _ := boostOf(wl)
		t.Logf("boost annotation %q on %s after waiting %v", v, wl.Name, waited.Round(time.Millisecond))
	}
	pf = snapshotPF(ctx, t, c, tj)
	nAfter, err := storedPoints(pf)
	if err != nil {
		t.Errorf("stored history after the takeover does not decode: %v", err)
	}
	t.Logf("after the takeover: %d observations (was %d), %d stored points (was %d), revision %d (was %d), verdict %s, boost %d",
		pf.Status.Observations, before.Status.Observations, nAfter, nBefore, pf.Status.Revision, before.Status.Revision, pf.Status.Verdict, pf.Status.Boost)
	if pf.Status.Verdict != string(preempt.Plateaued) {
		t.Errorf("verdict %s after the takeover, want %s", pf.Status.Verdict, preempt.Plateaued)
	}
	// The new leader restored the stored history when it started its
	// controller.
	if hc := apimeta.FindStatusCondition(pf.Status.Conditions, v1alpha1.ConditionHistoryValid); hc == nil || hc.Status != metav1.ConditionTrue {
		t.Errorf("HistoryValid %+v after the takeover, want True (restored)", hc)
	} else {
		t.Logf("HistoryValid %s %s: %s", hc.Status, hc.Reason, hc.Message)
	}
	if nAfter <= nBefore {
		t.Errorf("stored history has %d points after the takeover, %d before", nAfter, nBefore)
	}
	if evs := plannerEvents(ctx, t, c, tj.Namespace, "TrainJob", tj.Name); hasReason(evs, kueueext.ReasonHistoryReset) {
		t.Errorf("history reset across the takeover:%s", describeEvents(evs))
	}
	logBoostEvents(ctx, t, c, tj)
	mon.check(t, true)
	mon.mu.Lock()
	t.Logf("boost annotation changes on the Workload: %d (values %q)", len(mon.boosts)-1, mon.boosts)
	mon.mu.Unlock()
	if !follower.Running() {
		t.Errorf("%s exited: %v", follower.name, follower.State())
	}
}

// logBoostEvents logs the planner's boost Events on the TrainJob.
func logBoostEvents(ctx context.Context, t *testing.T, c client.Client, tj *kftrainer.TrainJob) {
	t.Helper()
	for _, ev := range plannerEvents(ctx, t, c, tj.Namespace, "TrainJob", tj.Name) {
		if ev.Reason == kueueext.ReasonBoostChanged {
			t.Logf("boost Event %s: %s", ev.CreationTimestamp.Format("15:04:05"), ev.Note)
		}
	}
}

func ptrString(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

func ptrInt32(p *int32) int32 {
	if p == nil {
		return 0
	}
	return *p
}

// TestFaultForecastDeleted: a user deletes a job's ProgressForecast
// mid-run. The planner creates it again (owned by the job, on the real API
// server with its garbage collector's owner rules), says in a HistoryReset
// Event on the job that the history restarted, and folds the next reports
// into the new object; it does not keep writing to the deleted one.
func TestFaultForecastDeleted(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	env := plannerEnv(t)
	a, _, _, _ := runningAndPending(ctx, t, env, "")
	c := startPlanner(ctx, t, env, testConfig())
	reports := history(t, "synth__early-plateau").Reports
	first := prefix(reports, 0.3)
	if err := <-replay(ctx, t, c, a, first); err != nil {
		t.Fatal(err)
	}
	old := waitPF(ctx, t, c, a, plannerBound, "the first reports folded in", func(pf *v1alpha1.ProgressForecast) bool {
		return pf.Status.Observations >= 10
	})
	if err := c.Delete(ctx, old); err != nil {
		t.Fatal(err)
	}
	deleted := time.Now()
	pf := waitPF(ctx, t, c, a, plannerBound, "created again", func(pf *v1alpha1.ProgressForecast) bool { return pf.UID != old.UID })
	t.Logf("ProgressForecast %s deleted with %d observations; created again %v later (uid %s → %s)", old.Name, old.Status.Observations,
		time.Since(deleted).Round(time.Millisecond), old.UID, pf.UID)
	if ref := metav1.GetControllerOf(pf); ref == nil || ref.UID != a.UID {
		t.Errorf("recreated ProgressForecast's owner %+v, want TrainJob %s", ref, a.UID)
	}
	ev := waitEvent(ctx, t, c, a.Namespace, "TrainJob", a.Name, kueueext.ReasonHistoryReset)
	if !strings.Contains(ev.Note, "was deleted; created again, the history restarts") {
		t.Errorf("HistoryReset Event: %q", ev.Note)
	}
	if err := <-replay(ctx, t, c, a, reports[len(first):len(first)+15]); err != nil {
		t.Fatal(err)
	}
	pf = waitPF(ctx, t, c, a, plannerBound, "the next reports in the new object", func(pf *v1alpha1.ProgressForecast) bool {
		return pf.UID != old.UID && pf.Status.Observations >= 5
	})
	t.Logf("the recreated ProgressForecast holds %d observations after 15 more reports", pf.Status.Observations)
}

// TestFaultCorruptHistory: a user overwrites a job's stored history in its
// ProgressForecast status (a version the planner does not know, an
// encoding cut short, a JSON string) with a revision ahead of the
// planner's, so the
// planner must read it. The planner refuses it with a HistoryReset Event,
// starts a fresh history, keeps running and folds the next reports in;
// the other job's forecast is untouched.
func TestFaultCorruptHistory(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	env := plannerEnv(t)
	a, b, _, _ := runningAndPending(ctx, t, env, "")
	c := startPlanner(ctx, t, env, testConfig())
	reports := history(t, "synth__early-plateau").Reports
	if err := <-replay(ctx, t, c, a, reports[:20]); err != nil {
		t.Fatal(err)
	}
	if err := <-replay(ctx, t, c, b, reports[:12]); err != nil {
		t.Fatal(err)
	}
	pfA := waitPF(ctx, t, c, a, plannerBound, "a's reports folded in", func(pf *v1alpha1.ProgressForecast) bool { return pf.Status.Observations >= 10 })
	pfB := waitPF(ctx, t, c, b, plannerBound, "b's reports folded in", func(pf *v1alpha1.ProgressForecast) bool { return pf.Status.Observations >= 1 })
	next := 20
	for i, garbage := range []string{`{"version":99,"t":[1,2,3]}`, `{"version":1,"t":[0,5,1]}`, `"garbage"`} {
		pf := pfA.DeepCopy()
		pf.Status.Revision += 1000
		pf.Status.History = &runtime.RawExtension{Raw: []byte(garbage)}
		if err := c.Status().Update(ctx, pf); err != nil {
			// The API server itself refuses invalid JSON: that corruption
			// cannot be stored, which is the point of the check.
			t.Logf("corruption %d refused by the API server: %v", i, err)
			continue
		}
		events0 := len(plannerEventsWithReason(ctx, t, c, a, kueueext.ReasonHistoryReset))
		if err := <-replay(ctx, t, c, a, reports[next:next+5]); err != nil {
			t.Fatal(err)
		}
		next += 5
		if _, err := framework.Poll(ctx, plannerBound, func(ctx context.Context) (bool, error) {
			return len(plannerEventsWithReason(ctx, t, c, a, kueueext.ReasonHistoryReset)) > events0, nil
		}); err != nil {
			t.Fatalf("corruption %d (%s): no HistoryReset Event: %v", i, garbage, err)
		}
		pfA = waitPF(ctx, t, c, a, plannerBound, "a fresh history with the next reports", func(pf *v1alpha1.ProgressForecast) bool {
			f := pf.Status.Forecast
			return f != nil && f.Reports > 0 && f.Reports <= 6 && pf.Status.History != nil
		})
		t.Logf("corruption %d (%s): refused, fresh history with %d reports", i, garbage, pfA.Status.Forecast.Reports)
	}
	after := waitPF(ctx, t, c, b, bound, "b untouched", func(pf *v1alpha1.ProgressForecast) bool { return true })
	if after.Status.Observations < pfB.Status.Observations {
		t.Errorf("b's forecast lost observations: %d → %d", pfB.Status.Observations, after.Status.Observations)
	}
	if evs := plannerEventsWithReason(ctx, t, c, b, kueueext.ReasonHistoryReset); len(evs) != 0 {
		t.Errorf("HistoryReset on b: %+v", evs)
	}
}

// plannerEventsWithReason lists the planner's Events on job with reason.
func plannerEventsWithReason(ctx context.Context, t *testing.T, c client.Client, job *kftrainer.TrainJob, reason string) []eventsv1.Event {
	t.Helper()
	var out []eventsv1.Event
	for _, e := range plannerEvents(ctx, t, c, job.Namespace, "TrainJob", job.Name) {
		if e.Reason == reason {
			out = append(out, e)
		}
	}
	return out
}
