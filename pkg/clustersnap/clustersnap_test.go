package clustersnap

import (
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/progress-planner/planner/api/v1alpha1"
	"github.com/progress-planner/planner/pkg/clusterview"
	"github.com/progress-planner/planner/pkg/forecast"
	"github.com/progress-planner/planner/pkg/kueueext"
	"github.com/progress-planner/planner/simulator"
)

func gpuQueue(name, cohort string, gpus string, borrow *string, within kueue.PreemptionPolicy) kueue.ClusterQueue {
	rq := kueue.ResourceQuota{Name: "nvidia.com/gpu", NominalQuota: resource.MustParse(gpus)}
	if borrow != nil {
		q := resource.MustParse(*borrow)
		rq.BorrowingLimit = &q
	}
	cq := kueue.ClusterQueue{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: kueue.ClusterQueueSpec{CohortName: kueue.CohortReference(cohort),
		ResourceGroups: []kueue.ResourceGroup{{CoveredResources: []corev1.ResourceName{"nvidia.com/gpu"},
			Flavors: []kueue.FlavorQuotas{{Name: "f", Resources: []kueue.ResourceQuota{rq}}}}}}}
	if within != "" {
		cq.Spec.Preemption = &kueue.ClusterQueuePreemption{WithinClusterQueue: within}
	}
	return cq
}

func workload(name, lq string, gpus string, prio int32, created time.Time, admittedTo string) kueue.Workload {
	w := kueue.Workload{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: name, CreationTimestamp: metav1.NewTime(created)},
		Spec: kueue.WorkloadSpec{QueueName: kueue.LocalQueueName(lq), Priority: ptr.To(prio), PodSets: []kueue.PodSet{{Name: "node", Count: 2, Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse(gpus)}}}}}}}}}}
	if admittedTo != "" {
		w.Status.Admission = &kueue.Admission{ClusterQueue: kueue.ClusterQueueReference(admittedTo)}
		w.Status.Conditions = []metav1.Condition{{Type: kueue.WorkloadQuotaReserved, Status: metav1.ConditionTrue, Reason: "x", LastTransitionTime: metav1.NewTime(created)}}
	}
	return w
}

func TestScenarioFromSnapshot(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	four := "4"
	// Admitted 90 min ago, finished 20 min later: an observed run time.
	done := workload("w-done", "lq-a", "1", 0, now.Add(-90*time.Minute), "a")
	done.Status.Conditions = append(done.Status.Conditions, metav1.Condition{Type: kueue.WorkloadFinished, Status: metav1.ConditionTrue, Reason: "x",
		LastTransitionTime: metav1.NewTime(now.Add(-70 * time.Minute))})
	s := &clusterview.Snapshot{
		ClusterQueues: []kueue.ClusterQueue{
			gpuQueue("a", "pool", "8", &four, kueue.PreemptionPolicyLowerPriority),
			gpuQueue("b", "pool", "4", nil, ""),
			gpuQueue("c", "", "2", nil, kueue.PreemptionPolicyLowerOrNewerEqualPriority),
		},
		LocalQueues: []kueue.LocalQueue{{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "lq-a"}, Spec: kueue.LocalQueueSpec{ClusterQueue: "a"}},
			{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "lq-b"}, Spec: kueue.LocalQueueSpec{ClusterQueue: "b"}}},
		Workloads: []kueue.Workload{
			workload("w-pending-late", "lq-a", "1", 10, now.Add(-time.Minute), ""),
			workload("w-run", "lq-a", "2", 0, now.Add(-3*time.Hour), "a"),
			workload("w-pending-early", "lq-b", "2", 100, now.Add(-2*time.Hour), ""),
			workload("w-cpu", "lq-b", "0", 0, now.Add(-time.Hour), ""),
			workload("w-old", "lq-b", "1", 0, now.Add(-48*time.Hour), "b"),
			done,
		},
	}
	sc, notes, err := Scenario(s, Options{Now: now, DefaultDuration: 1800, Horizon: 4 * 3600})
	if err != nil {
		t.Fatal(err)
	}
	q := sc.Queues
	if len(q) != 3 || q[0].GPUs != 8 || q[0].Cohort != "pool" || q[0].BorrowingLimit == nil || *q[0].BorrowingLimit != 4 || q[0].WithinClusterQueue != simulator.PreemptLowerPriority ||
		q[1].BorrowingLimit != nil || q[1].WithinClusterQueue != simulator.PreemptNever || q[2].Cohort != "" || q[2].WithinClusterQueue != simulator.PreemptLowerPriority {
		t.Errorf("queues %+v", q)
	}
	if len(sc.LocalQueues) != 2 || sc.LocalQueues[1] != (simulator.LocalQueue{Namespace: "team", Name: "lq-b", ClusterQueue: "b"}) {
		t.Errorf("local queues %+v", sc.LocalQueues)
	}
	line := func(j simulator.JobSpec) string {
		return j.Name + " " + j.Queue + " " + simulator.Seconds(j.Arrival).String() + " " + simulator.Seconds(j.Duration).String() + " " +
			strings.Repeat("g", j.GPUs) + " " + string(rune('0'+j.Priority/10)) + " ran " + j.RanFor.String()
	}
	var got []string
	for _, j := range sc.Jobs {
		got = append(got, line(j))
	}
	want := []string{
		// admitted first (creation order), then pending in creation
		// order; no ETA: unknown, drawn given how long each has run
		"team/w-old b 0s 30m gg 0 ran 48h", "team/w-run a 0s 30m gggg 0 ran 3h", "team/w-pending-early b 1s 30m gggg : ran 0s", "team/w-pending-late a 1s 30m gg 1 ran 0s",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("jobs:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// The last 4 h are the arrivals' sample: w-done with its own run.
	got = got[:0]
	for _, j := range sc.Recent.Jobs {
		got = append(got, line(j))
	}
	want = []string{"next/team/w-pending-late a 0s 30m gg 1 ran 0s", "next/team/w-run a 0s 30m gggg 0 ran 0s", "next/team/w-pending-early b 0s 30m gggg : ran 0s", "next/team/w-done a 0s 20m gg 0 ran 0s"}
	if sc.Recent.Window != 4*3600 || strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("recent arrivals over %v:\n%s\nwant:\n%s", sc.Recent.Window, strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// Run times: w-done's 20 min finished; w-run and w-old censored.
	if fmt.Sprint(sc.RunTimes, sc.RunSoFar) != "[20m] [3h 48h]" {
		t.Errorf("run times %v, so far %v", sc.RunTimes, sc.RunSoFar)
	}
	all := strings.Join(notes, "\n")
	for _, w := range []string{"withinClusterQueue LowerOrNewerEqualPriority simulated as LowerPriority", "4 Workloads without a known ETA", "1 Workloads requesting no nvidia.com/gpu"} {
		if !strings.Contains(all, w) {
			t.Errorf("notes lack %q:\n%s", w, all)
		}
	}
	// The scenario resolves: the four jobs, then this seed's arrivals
	// drawn from the sample within its window; w-old, past every
	// observation, runs as long again (stats.Survival.DrawAfter).
	in, err := sc.Resolve()
	if err != nil || len(in.Jobs) < 4 {
		t.Fatalf("resolve: %v", err)
	}
	for _, j := range in.Jobs {
		switch {
		case j.Name == "team/w-old" && j.Duration != 48*3600:
			t.Errorf("w-old runs %v more, want 48h", simulator.Seconds(j.Duration))
		case strings.HasPrefix(j.Name, "next/") && !(strings.Contains(j.Name, "#") && j.Arrival >= 1 && j.Arrival <= 4*3600):
			t.Errorf("drawn arrival %s at %v", j.Name, j.Arrival)
		}
	}
}

func TestScenarioArrivalsFromTrace(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	s := &clusterview.Snapshot{ClusterQueues: []kueue.ClusterQueue{gpuQueue("a", "", "8", nil, ""), gpuQueue("b", "", "8", nil, "")}}
	tr := &simulator.Trace{Jobs: []simulator.TraceJob{
		{Line: 2, Name: "x", Arrival: 0, Duration: 600, GPUs: 2, Group: "b"},
		{Line: 3, Name: "y", Arrival: 1800, Duration: 60, GPUs: 1, Group: "vc-other"},
		{Line: 4, Name: "z", Arrival: 7200, Duration: 60, GPUs: 1, Group: "a"},
	}}
	sc, _, err := Scenario(s, Options{Now: now, DefaultDuration: 3600, Horizon: 3600, Arrivals: tr, ArrivalsQueue: "a"})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, j := range sc.Jobs {
		got = append(got, fmt.Sprintf("%s %s %v %v %d", j.Name, j.Queue, j.Arrival, j.Duration, j.GPUs))
	}
	// z arrives after the 1h horizon; y's group is no queue: --arrivals-queue.
	if want := "arrival/2/x b 1s 10m 2|arrival/3/y a 30m1s 1m 1"; strings.Join(got, "|") != want {
		t.Errorf("jobs %q, want %q", strings.Join(got, "|"), want)
	}
	if _, _, err := Scenario(s, Options{Now: now, DefaultDuration: 3600, Horizon: 3600, Arrivals: tr}); err == nil || !strings.Contains(err.Error(), `group "vc-other"`) {
		t.Errorf("an unknown group without --arrivals-queue: %v", err)
	}
}

// With Options.Latest a running job takes the controller's own latest
// forecast, its ETA moved on by the time since (no refit of the stored
// history); an entry for another object of the same name is not used.
func TestScenarioTakesLatestForecasts(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	run := workload("w-run", "lq-a", "1", 0, now.Add(-time.Hour), "a")
	run.OwnerReferences = []metav1.OwnerReference{{APIVersion: "trainer.kubeflow.org/v1alpha1", Kind: "TrainJob", Name: "llama", UID: "u-llama", Controller: ptr.To(true)}}
	pf := v1alpha1.ProgressForecast{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "llama", UID: "u-pf",
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "trainer.kubeflow.org/v1alpha1", Kind: "TrainJob", Name: "llama", UID: "u-llama", Controller: ptr.To(true)}}},
		Spec: v1alpha1.ProgressForecastSpec{JobRef: v1alpha1.JobRef{APIVersion: "trainer.kubeflow.org/v1alpha1", Kind: "TrainJob", Name: "llama", UID: "u-llama"}}}
	s := &clusterview.Snapshot{
		ClusterQueues: []kueue.ClusterQueue{gpuQueue("a", "", "8", nil, "")},
		LocalQueues:   []kueue.LocalQueue{{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "lq-a"}, Spec: kueue.LocalQueueSpec{ClusterQueue: "a"}}},
		Workloads:     []kueue.Workload{run},
		Forecasts:     []v1alpha1.ProgressForecast{pf},
	}
	key := types.NamespacedName{Namespace: "team", Name: "llama"}
	latest := kueueext.LatestForecast{ForecastUID: "u-pf", At: now.Add(-10 * time.Minute), Plateaued: true,
		ETA: forecast.Estimate{Known: true, Value: 3600, Lo: 1800, Hi: 7200}}
	for _, tc := range []struct {
		name         string
		uid          types.UID
		want, lo, hi simulator.Seconds
		unknown      bool
		plateauAt    float64
	}{
		// 10 minutes later: 50m (20m to 1h50m), and plateaued now.
		{"the controller's forecast", "u-pf", 3000, 1200, 6600, false, plateauedNow},
		// Another object's entry: the stored history, here none, so no ETA.
		{"a re-created object's", "u-old", 1800, 0, 0, true, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := latest
			l.ForecastUID = tc.uid
			sc, _, err := Scenario(s, Options{Now: now, DefaultDuration: 1800, Latest: map[types.NamespacedName]kueueext.LatestForecast{key: l}})
			if err != nil {
				t.Fatal(err)
			}
			if len(sc.Jobs) != 1 {
				t.Fatalf("jobs %+v", sc.Jobs)
			}
			j := sc.Jobs[0]
			if j.Duration != tc.want || j.UnknownDuration != tc.unknown || j.PlateauAt != tc.plateauAt {
				t.Errorf("job %+v: want duration %v, unknown %v, plateauAt %v", j, tc.want, tc.unknown, tc.plateauAt)
			}
			if !tc.unknown {
				if lo, hi := etaInterval(float64(tc.want), float64(tc.lo), float64(tc.hi)); j.DurationLo != lo || j.DurationHi != hi {
					t.Errorf("interval %v–%v, want %v–%v", j.DurationLo, j.DurationHi, lo, hi)
				}
			}
		})
	}
}
