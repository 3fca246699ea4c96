//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"math"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	kftrainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/progress-planner/planner/pkg/workloads"
	"github.com/progress-planner/planner/simulator"
	"github.com/progress-planner/planner/test/framework"
)

// The fidelity check (issue 5): one small scenario is run by the simulator
// (policy kueue, in-process, the code path of `planner simulate`) and on the
// real control plane with the real Kueue, and the admissions, preemptions
// and completions must match, instant by instant.
//
// Time on the cluster is a virtual clock advanced in lock-step, not a fixed
// compression of wall time. At each instant T at which the scenario has an
// exogenous event (an arrival, or a completion due at admission + remaining
// run time), the test applies it (creates the TrainJob, or sets the
// TrainJob's Complete condition, after which Kueue finishes the Workload and
// frees its quota), then waits until no Workload has changed for
// fidelityQuiet; every Workload transition observed meanwhile belongs to
// instant T. A fixed wall-clock scale would let Kueue's latencies (up to a
// requeue batch period, 1 s, per reaction) accumulate along a chain of
// completions and admissions and reorder them against arrivals fixed in
// wall time: the test would measure latency, not semantics. With the
// lock-step clock every instant is a quiescent point of both systems, so
// any difference is a difference of decisions.
//
// Between instants at least fidelityQuiet (2.5 s) of wall time passes, so
// admissions at different instants get QuotaReserved times in different
// seconds (Kueue orders preemption candidates by that second-resolution
// time, then by UID) and arrivals different creation seconds (Kueue's
// queue order timestamp).

const (
	fidelityScenario  = "../../simulator/testdata/fidelity.yaml"
	fidelityNamespace = "fidelity"
	// fidelityQuiet ends an instant: Kueue retries inadmissible Workloads
	// in batches of RequeueBatchPeriod after quota is freed, so a reaction
	// can follow the previous Workload change by up to about one period.
	fidelityQuiet = 2*framework.RequeueBatchPeriod + framework.RequeueBatchPeriod/2
	// fidelityStepBound bounds one instant (Kueue never stays busy that long here).
	fidelityStepBound = 30 * time.Second
)

// fidelityEvent is one admission, preemption or completion at virtual
// instant T (scenario seconds), in simulator.Record's vocabulary.
type fidelityEvent struct {
	T    float64
	Type string // admit, preempt, finish
	Job  string
	By   string // the preemptor (preempt only)
}

func (e fidelityEvent) String() string {
	if e.By != "" {
		return fmt.Sprintf("%s %s (by %s)", e.Type, e.Job, e.By)
	}
	return e.Type + " " + e.Job
}

func TestFidelity(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	sc, err := simulator.LoadScenario(fidelityScenario)
	if err != nil {
		t.Fatal(err)
	}
	checkFidelity(ctx, t, framework.Start(t), sc, fidelityScenario)
}

// checkFidelity runs sc (named what) through the simulator (policy kueue)
// and in lock-step on env's cluster, in fidelityNamespace, and fails t
// where the admissions, preemptions and completions differ.
func checkFidelity(ctx context.Context, t *testing.T, env *framework.Env, sc *simulator.Scenario, what string) []fidelityEvent {
	t.Helper()
	begin := time.Now()
	in, opt, want := simulateFidelity(t, sc, what)
	if err := checkNoCoincidences(in, want); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	if err := setupFidelityCluster(ctx, env, in); err != nil {
		t.Fatal(err)
	}
	obs, err := watchWorkloadTransitions(ctx, env, fidelityNamespace)
	if err != nil {
		t.Fatal(err)
	}
	got := driveLockStep(ctx, t, env, in, opt, obs)

	t.Logf("instant | simulator (policy kueue) | real control plane (Kueue)\n%s", sideBySide(want, got))
	if diffs := compareInstants(want, got); len(diffs) > 0 {
		t.Fatalf("%s: the real control plane differs from the simulator at %d instant(s):\n%s", what, len(diffs), strings.Join(diffs, "\n"))
	}
	t.Logf("fidelity of %s: %d jobs, %d admissions/preemptions/completions at %d instants match the simulator (%v)",
		what, len(in.Jobs), len(got), len(groupByInstant(got)), time.Since(begin).Round(time.Second))
	return got
}

// simulateFidelity runs the scenario through the simulator as `planner
// simulate --scenario ... --policies kueue --events ...` does, and returns
// the resolved input, the options and the recorded events.
func simulateFidelity(t *testing.T, sc *simulator.Scenario, what string) (*simulator.Input, simulator.Options, []fidelityEvent) {
	t.Helper()
	opt, err := sc.Options(simulator.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	opt.RecordEvents = true
	in, err := sc.Resolve()
	if err != nil {
		t.Fatal(err)
	}
	cmp, err := simulator.Compare(in, []string{simulator.PolicyKueue}, sc.Seed, opt)
	if err != nil {
		t.Fatal(err)
	}
	var evs []fidelityEvent
	for _, r := range cmp.Results[0].Records {
		evs = append(evs, fidelityEvent{T: r.T, Type: r.Type, Job: r.Job, By: r.By})
	}
	if len(evs) == 0 {
		t.Fatalf("%s: the simulator recorded no events", what)
	}
	return in, opt, evs
}

// checkNoCoincidences fails a scenario in which two exogenous events (an
// arrival or a completion) of one ClusterQueue fall on one instant in the
// simulator's run. The simulator applies all of an instant's events before
// one scheduling pass; the cluster sees them one API call after another
// and may schedule in between, so such an instant would compare two
// different things. Events of different ClusterQueues may coincide: the
// harness's queues have no cohort, so neither sees the other's.
func checkNoCoincidences(in *simulator.Input, sim []fidelityEvent) error {
	type instantQueue struct {
		t     float64
		queue string
	}
	queueOf := map[string]string{}
	at := map[instantQueue][]string{}
	for _, j := range in.Jobs {
		queueOf[j.Name] = j.Queue
		at[instantQueue{j.Arrival, j.Queue}] = append(at[instantQueue{j.Arrival, j.Queue}], "arrival of "+j.Name)
	}
	for _, e := range sim {
		if e.Type == "finish" {
			k := instantQueue{e.T, queueOf[e.Job]}
			at[k] = append(at[k], "completion of "+e.Job)
		}
	}
	var clashes []string
	for k, what := range at {
		if len(what) > 1 {
			clashes = append(clashes, fmt.Sprintf("%s in %s: %s", simulator.Seconds(k.t), k.queue, strings.Join(what, ", ")))
		}
	}
	if len(clashes) > 0 {
		sort.Strings(clashes)
		return fmt.Errorf("exogenous events coincide, move one of them: %s", strings.Join(clashes, "; "))
	}
	return nil
}

// setupFidelityCluster creates the scenario's ClusterQueues (with a
// LocalQueue of the same name), one WorkloadPriorityClass per base
// priority, and the TrainJob runtime.
func setupFidelityCluster(ctx context.Context, env *framework.Env, in *simulator.Input) error {
	if _, err := env.InstallTorchRuntime(ctx); err != nil {
		return err
	}
	for _, q := range in.Queues {
		// framework.CreateGPUQueue makes what the simulator's queue means
		// only without a cohort and with LowerPriority preemption.
		if q.Cohort != "" || (q.WithinClusterQueue != "" && q.WithinClusterQueue != simulator.PreemptLowerPriority) {
			return fmt.Errorf("queue %s: the fidelity harness supports queues without a cohort and with LowerPriority preemption", q.Name)
		}
		if _, _, err := env.CreateGPUQueue(ctx, fidelityNamespace, q.Name, q.GPUs); err != nil {
			return fmt.Errorf("queue %s: %w", q.Name, err)
		}
	}
	made := map[int32]bool{}
	for _, j := range in.Jobs {
		if made[j.Priority] {
			continue
		}
		if _, err := env.CreateWorkloadPriorityClass(ctx, priorityClassName(j.Priority), j.Priority); err != nil {
			return err
		}
		made[j.Priority] = true
	}
	return nil
}

func priorityClassName(p int32) string {
	if p < 0 {
		return fmt.Sprintf("fidelity-minus-%d", -int64(p))
	}
	return fmt.Sprintf("fidelity-%d", p)
}

// virtualJob is a scenario job on the cluster, with the simulator's
// accounting of its work in virtual time.
type virtualJob struct {
	spec      *simulator.Job
	every     float64 // checkpoint interval (0: none)
	work      float64 // run time kept (at the last admission), from the run before the scenario (Job.Done)
	admitAt   float64
	finishAt  float64 // +Inf unless admitted
	completed bool
	tj        *kftrainer.TrainJob
}

// keptWork is the simulator's checkpoint rule: an evicted job keeps whole
// checkpoint intervals of the admission it loses.
func (v *virtualJob) keptWork(now float64) float64 {
	if v.every <= 0 {
		return v.work
	}
	ran := now - v.admitAt
	return math.Min(v.spec.Duration, v.work+math.Floor(ran/v.every+1e-9)*v.every)
}

// driveLockStep replays the scenario on the cluster with the virtual clock
// (see the file comment) and returns the Workload transitions observed,
// each stamped with its instant.
func driveLockStep(ctx context.Context, t *testing.T, env *framework.Env, in *simulator.Input, opt simulator.Options,
	obs <-chan fidelityEvent) []fidelityEvent {
	t.Helper()
	jobs := map[string]*virtualJob{}
	var order []*virtualJob // in.Jobs order: arrival, then id
	for _, j := range in.Jobs {
		every := j.Checkpoint
		if every <= 0 {
			every = opt.Checkpoint
		}
		v := &virtualJob{spec: j, every: every, work: j.Done, finishAt: math.Inf(1)}
		jobs[j.Name] = v
		order = append(order, v)
	}
	var got []fidelityEvent
	nextArrival := 0
	for step := 0; step < 10*len(order)+10; step++ {
		now := math.Inf(1)
		if nextArrival < len(order) {
			now = order[nextArrival].spec.Arrival
		}
		for _, v := range order {
			now = math.Min(now, v.finishAt)
		}
		if math.IsInf(now, 1) {
			break
		}
		// The simulator's order within an instant: completions, then arrivals.
		var applied []string
		for _, v := range order {
			if v.finishAt == now {
				completeTrainJob(ctx, t, env, v.tj)
				v.completed, v.finishAt = true, math.Inf(1)
				applied = append(applied, "complete "+v.spec.Name)
			}
		}
		for ; nextArrival < len(order) && order[nextArrival].spec.Arrival == now; nextArrival++ {
			v := order[nextArrival]
			tj, err := env.CreateTrainJob(ctx, fidelityNamespace, v.spec.Name, v.spec.Queue, v.spec.GPUs, priorityClassName(v.spec.Priority))
			if err != nil {
				t.Fatal(err)
			}
			v.tj = tj
			applied = append(applied, "create "+v.spec.Name)
		}
		seen, err := settle(ctx, obs, fidelityQuiet, fidelityStepBound)
		if err != nil {
			t.Fatalf("instant %s (%s): %v", simulator.Seconds(now), strings.Join(applied, ", "), err)
		}
		var names []string
		for _, e := range seen {
			e.T = now
			got = append(got, e)
			names = append(names, e.String())
			v := jobs[e.Job]
			if v == nil {
				continue
			}
			switch e.Type {
			case "admit":
				v.admitAt = now
				if !v.completed {
					v.finishAt = now + (v.spec.Duration - v.work)
				}
			case "preempt":
				v.work = v.keptWork(now)
				v.finishAt = math.Inf(1)
			}
		}
		t.Logf("instant %-6s %-28s -> %s", simulator.Seconds(now), strings.Join(applied, ", "), strings.Join(names, ", "))
	}
	for _, v := range order {
		if !v.completed {
			t.Logf("job %s never completed on the cluster", v.spec.Name)
		}
	}
	return got
}

// settle collects observations until none has arrived for quiet (or bound
// has passed, which is an error: Kueue did not come to rest).
func settle(ctx context.Context, obs <-chan fidelityEvent, quiet, bound time.Duration) ([]fidelityEvent, error) {
	var seen []fidelityEvent
	deadline := time.After(bound)
	timer := time.NewTimer(quiet)
	defer timer.Stop()
	for {
		select {
		case e, ok := <-obs:
			if !ok {
				return seen, fmt.Errorf("the Workload watch ended")
			}
			seen = append(seen, e)
			timer.Reset(quiet)
		case <-timer.C:
			return seen, nil
		case <-deadline:
			return seen, fmt.Errorf("Workloads still changing after %v", bound)
		case <-ctx.Done():
			return seen, ctx.Err()
		}
	}
}

// preemptorUID reads the preemptor's Workload UID from Kueue's eviction
// message ("Preempted to accommodate a workload (UID: ..., JobUID: ...) ...").
var preemptorUID = regexp.MustCompile(`\(UID: ([^,)]+), JobUID:`)

// watchWorkloadTransitions watches the namespace's Workloads and sends, in
// the apiserver's write order, every QuotaReserved, Evicted and Finished
// condition turning True as an admission, a preemption and a completion of
// the owning TrainJob. Only the transitions count: Kueue rewrites
// conditions (messages, the Admitted condition) without changing them.
func watchWorkloadTransitions(ctx context.Context, env *framework.Env, ns string) (<-chan fidelityEvent, error) {
	wc, err := client.NewWithWatch(env.Config, client.Options{Scheme: env.Scheme})
	if err != nil {
		return nil, fmt.Errorf("watch client: %w", err)
	}
	w, err := wc.Watch(ctx, &kueue.WorkloadList{}, client.InNamespace(ns))
	if err != nil {
		return nil, fmt.Errorf("watching Workloads in %s: %w", ns, err)
	}
	out := make(chan fidelityEvent, 256)
	go func() {
		defer close(out)
		defer w.Stop()
		type flags struct{ reserved, evicted, finished bool }
		last := map[types.UID]flags{}
		jobOf := map[types.UID]string{}
		for ev := range w.ResultChan() {
			if ev.Type == watch.Error {
				return
			}
			wl, ok := ev.Object.(*kueue.Workload)
			if !ok || ev.Type == watch.Deleted {
				continue
			}
			job := ownerName(wl)
			jobOf[wl.UID] = job
			now := flags{
				reserved: conditionTrue(wl, kueue.WorkloadQuotaReserved),
				evicted:  conditionTrue(wl, kueue.WorkloadEvicted),
				finished: conditionTrue(wl, kueue.WorkloadFinished),
			}
			was := last[wl.UID]
			last[wl.UID] = now
			if now.evicted && !was.evicted {
				c := apimeta.FindStatusCondition(wl.Status.Conditions, kueue.WorkloadEvicted)
				e := fidelityEvent{Type: "preempt", Job: job}
				if c.Reason != kueue.WorkloadEvictedByPreemption {
					e.Type = "evict(" + c.Reason + ")" // never in the simulator: shows up as a difference
				}
				if m := preemptorUID.FindStringSubmatch(c.Message); m != nil {
					e.By = jobOf[types.UID(m[1])]
					if e.By == "" {
						e.By = "uid " + m[1]
					}
				}
				out <- e
			}
			if now.reserved && !was.reserved {
				out <- fidelityEvent{Type: "admit", Job: job}
			}
			if now.finished && !was.finished {
				out <- fidelityEvent{Type: "finish", Job: job}
			}
		}
	}()
	return out, nil
}

func conditionTrue(wl *kueue.Workload, condType string) bool {
	return apimeta.IsStatusConditionTrue(wl.Status.Conditions, condType)
}

// ownerName is the name of the TrainJob controlling wl (the scenario's job
// name), or the Workload's own name.
func ownerName(wl *kueue.Workload) string {
	if job, ok := workloads.JobOf(wl); ok && job.Name != "" {
		return job.Name
	}
	return "workload " + wl.Name
}

// instant is the events of one instant, as a sorted set.
type instant struct {
	T      float64
	events []string
}

func groupByInstant(evs []fidelityEvent) []instant {
	var out []instant
	for _, e := range evs {
		if n := len(out); n == 0 || out[n-1].T != e.T {
			out = append(out, instant{T: e.T})
		}
		out[len(out)-1].events = append(out[len(out)-1].events, e.String())
	}
	for i := range out {
		sort.Strings(out[i].events)
	}
	return out
}

// compareInstants compares the two runs instant by instant. Within one
// instant the events are compared as sets: the simulator does all of an
// instant's admissions and preemptions in one pass, while Kueue admits one
// head per ClusterQueue per scheduling cycle, evicts a preemptor's victims
// in parallel (workqueue.ParallelizeUntil), admits the preemptor only once
// the victims have released their quota, and writes each admission from a
// goroutine (Scheduler.admit) while the next cycle already runs. The write
// order inside an instant is therefore not even Kueue's decision order
// (runs show a priority-100 admission written before a priority-200 one of
// the same instant). Across instants the order is strict.
func compareInstants(want, got []fidelityEvent) []string {
	w, g := groupByInstant(want), groupByInstant(got)
	var diffs []string
	for i := 0; i < max(len(w), len(g)); i++ {
		var ws, gs instant
		if i < len(w) {
			ws = w[i]
		}
		if i < len(g) {
			gs = g[i]
		}
		switch {
		case i >= len(w):
			diffs = append(diffs, fmt.Sprintf("  %s: simulator: nothing more; cluster: %s", simulator.Seconds(gs.T), strings.Join(gs.events, ", ")))
		case i >= len(g):
			diffs = append(diffs, fmt.Sprintf("  %s: simulator: %s; cluster: nothing more", simulator.Seconds(ws.T), strings.Join(ws.events, ", ")))
		case ws.T != gs.T || strings.Join(ws.events, "|") != strings.Join(gs.events, "|"):
			diffs = append(diffs, fmt.Sprintf("  simulator at %s: %s\n  cluster   at %s: %s",
				simulator.Seconds(ws.T), strings.Join(ws.events, ", "), simulator.Seconds(gs.T), strings.Join(gs.events, ", ")))
		}
	}
	return diffs
}

// sideBySide renders both runs, one line per instant of either.
func sideBySide(want, got []fidelityEvent) string {
	byT := map[float64][2]string{}
	var ts []float64
	for k, evs := range [][]fidelityEvent{want, got} {
		for _, in := range groupByInstant(evs) {
			row, ok := byT[in.T]
			if !ok {
				ts = append(ts, in.T)
			}
			row[k] = strings.Join(in.events, ", ")
			byT[in.T] = row
		}
	}
	sort.Float64s(ts)
	var b strings.Builder
	for _, t := range ts {
		row := byT[t]
		mark := "  "
		if row[0] != row[1] {
			mark = "!="
		}
		fmt.Fprintf(&b, "%s %-6s | %-44s | %s\n", mark, simulator.Seconds(t), row[0], row[1])
	}
	return b.String()
}

// TestFidelityCompare pins down what compareInstants tolerates: a
// permutation within one instant, and nothing else (another victim, an
// event moved to another instant, a missing event).
func TestFidelityCompare(t *testing.T) {
	sim := []fidelityEvent{
		{T: 0, Type: "admit", Job: "a"},
		{T: 60, Type: "preempt", Job: "a", By: "b"},
		{T: 60, Type: "admit", Job: "b"},
		{T: 120, Type: "finish", Job: "b"},
	}
	for _, tc := range []struct {
		name  string
		real  []fidelityEvent
		diffs int
	}{
		{"same", sim, 0},
		{"permuted within an instant", []fidelityEvent{sim[0], sim[2], sim[1], sim[3]}, 0},
		{"another preemptor", []fidelityEvent{sim[0], {T: 60, Type: "preempt", Job: "a", By: "c"}, sim[2], sim[3]}, 1},
		{"later instant", []fidelityEvent{sim[0], sim[1], {T: 120, Type: "admit", Job: "b"}, sim[3]}, 2},
		{"missing completion", sim[:3], 1},
	} {
		if d := compareInstants(sim, tc.real); len(d) != tc.diffs {
			t.Errorf("%s: %d differences, want %d:\n%s", tc.name, len(d), tc.diffs, strings.Join(d, "\n"))
		}
	}
}
