//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"math"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	kftrainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/progress-planner/planner/api/v1alpha1"
	"github.com/progress-planner/planner/pkg/preempt"
	"github.com/progress-planner/planner/pkg/progress"
	"github.com/progress-planner/planner/simulator"
	"github.com/progress-planner/planner/test/framework"
)

// TestSimulateFromCluster: two ClusterQueues with their LocalQueues, two
// admitted TrainJobs (one replaying a history, so the planner stores a
// forecast for it, at a low priority) and a pending one; `planner
// simulate --from-cluster --arrivals TRACE --export-scenario` (the built
// binary, through a kubeconfig) captures them with a trace job arriving
// in the low-priority job's queue, the exported scenario is compared with
// the objects read back from the API server, and then run through the
// fidelity harness on the same control plane: the real Kueue admits,
// preempts (the arrival evicts the low-priority job) and completes as the
// simulator does.
func TestSimulateFromCluster(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	bin := plannerBinary(t)
	env := plannerEnv(t)
	kc := writeKubeconfig(t, env.Config)
	for name, v := range map[string]int32{"sim-high": 500, "sim-low": -10} {
		if _, err := env.CreateWorkloadPriorityClass(ctx, name, v); err != nil {
			t.Fatal(err)
		}
	}
	cfg := testConfig()
	cfg.Policy.Mode = preempt.ModeAdvise // boosts stay 0: the admitted set does not move under the test
	c := startPlanner(ctx, t, env, cfg)
	const ns = "sim-snap"

	a, _ := runningJob(ctx, t, env, ns, "q-a", "job-a", "sim-low") // q-a: 8 GPUs, job-a takes them
	if _, _, err := env.CreateGPUQueue(ctx, ns, "q-b", 4); err != nil {
		t.Fatal(err)
	}
	wantGPUs := map[string]int{"job-a": 8, "job-b": 4, "job-c": 2}
	tjs := map[string]*kftrainer.TrainJob{"job-a": a}
	for _, j := range []struct{ name, queue, prio string }{{"job-b", "q-b", "sim-high"}, {"job-c", "q-b", ""}} {
		tj, err := env.CreateTrainJob(ctx, ns, j.name, j.queue, wantGPUs[j.name], j.prio)
		if err != nil {
			t.Fatal(err)
		}
		tjs[j.name] = tj
		wl, err := env.WaitForWorkload(ctx, tj, plannerBound)
		if err != nil {
			t.Fatal(err)
		}
		if j.name == "job-b" {
			if _, err := env.WaitFor(ctx, wl, plannerBound, func() bool { return framework.WorkloadAdmitted(wl) }); err != nil {
				t.Fatalf("job-b not admitted: %v", err)
			}
		}
	}
	sent := prefix(history(t, "synth__inverse-power").Reports, 0.5)
	done := replay(ctx, t, c, a, sent)
	if err := <-done; err != nil {
		t.Fatalf("replay: %v", err)
	}
	// The planner stores histories asynchronously: wait until the stored
	// one ends at the last report sent, so the snapshot below reads the
	// same history this test compares it with.
	last, _, ok := progress.Parse(0, sent[len(sent)-1].TrainerStatus)
	if !ok {
		t.Fatal("the last replayed report does not parse")
	}
	pfA := waitPF(ctx, t, c, a, plannerBound, "the whole replayed history stored", func(pf *v1alpha1.ProgressForecast) bool {
		h, err := storedHistory(pf)
		if err != nil || h == nil || h.Len() == 0 {
			return false
		}
		return h.Points()[h.Len()-1].Fraction() == last.Fraction()
	})

	// One trace job, 4 GPUs at priority 0 in q-a for 20 s: it arrives
	// at 1 s and preempts job-a (priority -10, LowerPriority preemption).
	dir := t.TempDir()
	out, trace := filepath.Join(dir, "snapshot.yaml"), filepath.Join(dir, "arrivals.csv")
	if err := os.WriteFile(trace, []byte("timestamp,duration,num_gpus,gpu_time,cluster\n2017-10-09 07:00:00,20.0,4,80.0,q-a\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	log := runCLI(ctx, t, bin, "simulate", "--from-cluster", "--kubeconfig", kc, "-n", ns, "--export-scenario", out,
		"--arrivals", trace, "--trace-format", "philly", "--policies", "kueue", "--horizon", "0", "--progress", "off")
	t.Logf("planner simulate --from-cluster:\n%s", log)
	sc, err := simulator.LoadScenario(out)
	if err != nil {
		t.Fatal(err)
	}

	// Queues: as the ClusterQueues say.
	var cqs kueue.ClusterQueueList
	if err := env.Client.List(ctx, &cqs); err != nil {
		t.Fatal(err)
	}
	var wantQ, gotQ []string
	for _, cq := range cqs.Items {
		rq := cq.Spec.ResourceGroups[0].Flavors[0].Resources[0]
		wantQ = append(wantQ, fmt.Sprintf("%s %d cohort=%q %s", cq.Name, rq.NominalQuota.Value(), cq.Spec.CohortName, cq.Spec.Preemption.WithinClusterQueue))
	}
	for _, q := range sc.Queues {
		gotQ = append(gotQ, fmt.Sprintf("%s %d cohort=%q %s", q.Name, q.GPUs, q.Cohort, q.WithinClusterQueue))
	}
	compareSorted(t, "queues", gotQ, wantQ)

	// LocalQueues.
	var lqs kueue.LocalQueueList
	if err := env.Client.List(ctx, &lqs, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	var wantL, gotL []string
	for _, lq := range lqs.Items {
		wantL = append(wantL, lq.Namespace+"/"+lq.Name+" -> "+string(lq.Spec.ClusterQueue))
	}
	for _, lq := range sc.LocalQueues {
		gotL = append(gotL, lq.Namespace+"/"+lq.Name+" -> "+lq.ClusterQueue)
	}
	compareSorted(t, "local queues", gotL, wantL)

	// Jobs: one per TrainJob, with its ClusterQueue, GPUs and priority;
	// admitted ones at 0, pending ones at 1 s.
	var wantJ, gotJ []string
	for name, tj := range tjs {
		wl, err := env.WorkloadFor(ctx, tj)
		if err != nil {
			t.Fatal(err)
		}
		prio, at := int32(0), "1s"
		if wl.Spec.Priority != nil {
			prio = *wl.Spec.Priority
		}
		if framework.WorkloadQuotaReserved(wl) {
			at = "0s"
		}
		var lq kueue.LocalQueue
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: string(wl.Spec.QueueName)}, &lq); err != nil {
			t.Fatal(err)
		}
		wantJ = append(wantJ, fmt.Sprintf("%s/%s %s %d GPUs prio %d at %s", ns, name, lq.Spec.ClusterQueue, wantGPUs[name], prio, at))
	}
	var durA simulator.Seconds
	var arrivals []string
	for _, j := range sc.Jobs {
		line := fmt.Sprintf("%s %s %d GPUs prio %d at %s", j.Name, j.Queue, j.GPUs, j.Priority, j.Arrival)
		if strings.HasPrefix(j.Name, "arrival/") {
			arrivals = append(arrivals, line+" for "+j.Duration.String())
			continue
		}
		gotJ = append(gotJ, line)
		if j.Name == ns+"/job-a" {
			durA = j.Duration
			checkOwnCurve(t, pfA, j)
		}
	}
	compareSorted(t, "jobs", gotJ, wantJ)
	compareSorted(t, "arrivals", arrivals, []string{"arrival/2/philly-1 q-a 4 GPUs prio 0 at 1s for 20s"})
	if !strings.Contains(strings.Join(wantJ, "\n"), "prio 500 at 0s") || !strings.Contains(strings.Join(wantJ, "\n"), "at 1s") {
		t.Errorf("the cluster did not reach the mix of admitted and pending jobs the test needs: %q", wantJ)
	}
	// job-a's run time is its forecast's ETA, not the 1h default given to
	// the jobs without a history.
	if durA <= 0 || durA == 3600 {
		t.Errorf("job-a's duration %v: want its forecast's ETA", durA)
	}
	t.Logf("exported scenario: %d queues, %d local queues, %d jobs (job-a runs %v more, from its forecast)", len(sc.Queues), len(sc.LocalQueues), len(sc.Jobs), durA)
	if t.Failed() {
		return
	}

	// The exported scenario through the fidelity harness (TestFidelity),
	// on this control plane: its ClusterQueues again under other names
	// (the originals hold this test's jobs), its jobs in the harness's
	// namespace under their own names. The real Kueue must admit and
	// complete them as the simulator does.
	got := checkFidelity(ctx, t, env, harnessCopy(sc, "fidelity-"), "the exported scenario")
	if !slices.ContainsFunc(got, func(e fidelityEvent) bool { return e.Type == "preempt" && e.Job == "job-a" && e.By == "philly-1" }) {
		t.Errorf("the real Kueue did not preempt job-a for the arrival: %v", got)
	}
}

// checkOwnCurve: the exported job continues its stored history. Its
// curve begins with the history's objective values, placed at their step
// over the total, and goes on past them (the forecast's continuation);
// it has run as long as that placement and its ETA say.
func checkOwnCurve(t *testing.T, pf *v1alpha1.ProgressForecast, j simulator.JobSpec) {
	t.Helper()
	h, err := storedHistory(pf)
	if err != nil || h == nil {
		t.Fatalf("stored history: %v", err)
	}
	obj, err := progress.ParseObjective(pf.Status.Objective)
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for i, p := range h.Points() {
		if v := h.Value(i, obj.Metric); p.Fraction() > 0 && !math.IsNaN(v) {
			want = append(want, fmt.Sprintf("%.6f %.6g", p.Fraction(), v))
		}
	}
	c := j.Curve
	if c == nil || len(c.X) <= len(want) || len(want) < 3 {
		t.Fatalf("%s: curve %+v for %d stored values: want them, then the continuation (job %+v)", j.Name, c, len(want), j)
	}
	var got []string
	for i := range want {
		got = append(got, fmt.Sprintf("%.6f %.6g", c.X[i], c.V[i]))
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("%s: the curve's history part\n%s\nwant the stored values\n%s", j.Name, strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// Where the job is: its last report's step over the total (its last
	// objective value may be older: the value moves at evaluations).
	pts := h.Points()
	at := pts[len(pts)-1].Fraction()
	if ran := float64(j.RanFor); math.Abs(ran-at*float64(j.Duration)/(1-at)) > 1 || !(c.X[len(want)] > at) || c.X[len(c.X)-1] != 1 {
		t.Errorf("%s: ran for %v with %v left at run fraction %v; continuation from %v to %v", j.Name, j.RanFor, j.Duration, at, c.X[len(want)], c.X[len(c.X)-1])
	}
	t.Logf("%s continues its %d stored values from run fraction %.2f (ran for %v)", j.Name, len(want), at, j.RanFor)
}

// harnessCopy is sc with its ClusterQueues renamed with prefix, its jobs
// named without their namespace, and no LocalQueues (the fidelity harness
// gives each ClusterQueue a LocalQueue of its name).
func harnessCopy(sc *simulator.Scenario, prefix string) *simulator.Scenario {
	c := *sc
	c.Queues = slices.Clone(sc.Queues)
	for i := range c.Queues {
		c.Queues[i].Name = prefix + c.Queues[i].Name
	}
	c.LocalQueues = nil
	c.Jobs = slices.Clone(sc.Jobs)
	for i := range c.Jobs {
		c.Jobs[i].Name = path.Base(c.Jobs[i].Name)
		c.Jobs[i].Queue = prefix + c.Jobs[i].Queue
	}
	return &c
}

func compareSorted(t *testing.T, what string, got, want []string) {
	t.Helper()
	sort.Strings(got)
	sort.Strings(want)
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("%s:\n got  %q\n want %q", what, got, want)
	}
}
