package clustersnap

import (
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/progress-planner/planner/api/v1alpha1"
	"github.com/progress-planner/planner/pkg/clusterview"
	"github.com/progress-planner/planner/pkg/forecast"
	"github.com/progress-planner/planner/pkg/progress"
	"github.com/progress-planner/planner/simulator"
)

// lossAt is the test job's loss at a step: still falling at 40 %.
func lossAt(step int) float64 { return 1 + 3/(1+float64(step)/2000) }

// storedHistory is a run of 10,000 steps, 100 steps a minute, that
// restarted from its checkpoint at step 2,500 after reaching step 3,000
// (the re-run steps report a 0.1 lower loss), and is now at step 4,000.
func storedHistory(t *testing.T, t0 time.Time) []byte {
	t.Helper()
	h := progress.NewHistory(progress.DefaultLimits())
	report := func(i, step int, loss float64) {
		h.Observe(float64(t0.Unix())+60*float64(i), progress.TrainerStatus{Metrics: []progress.MetricValue{
			{Name: "loss", Value: fmt.Sprintf("%.5g", loss)}, {Name: "current_step", Value: fmt.Sprint(step)},
			{Name: "total_steps", Value: "10000"}}})
	}
	i := 0
	for step := 100; step <= 3000; step += 100 {
		report(i, step, lossAt(step))
		i++
	}
	for step := 2600; step <= 4000; step += 100 {
		report(i, step, lossAt(step)-0.1)
		i++
	}
	raw, err := h.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// A running job with a stored history continues its own curve: the
// history placed by step (the re-run replacing what it re-ran), then the
// forecast's continuation to its predicted final loss; it starts the
// simulation at 40 % of a run the ETA's pace makes, and, run under the
// planner policy, it finishes its ETA later.
func TestScenarioContinuesStoredHistory(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	t0 := now.Add(-45 * time.Minute)
	run := workload("w-run", "lq-a", "1", 0, t0, "a")
	owner := []metav1.OwnerReference{{APIVersion: "trainer.kubeflow.org/v1alpha1", Kind: "TrainJob", Name: "llama", UID: "u-llama", Controller: ptr.To(true)}}
	run.OwnerReferences = owner
	pf := v1alpha1.ProgressForecast{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "llama", UID: "u-pf", OwnerReferences: owner},
		Spec:   v1alpha1.ProgressForecastSpec{JobRef: v1alpha1.JobRef{APIVersion: "trainer.kubeflow.org/v1alpha1", Kind: "TrainJob", Name: "llama", UID: "u-llama"}},
		Status: v1alpha1.ProgressForecastStatus{Objective: "loss,minimize", Workload: run.Name, History: &runtime.RawExtension{Raw: storedHistory(t, t0)}}}
	s := &clusterview.Snapshot{
		ClusterQueues: []kueue.ClusterQueue{gpuQueue("a", "", "8", nil, "")},
		LocalQueues:   []kueue.LocalQueue{{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "lq-a"}, Spec: kueue.LocalQueueSpec{ClusterQueue: "a"}}},
		Workloads:     []kueue.Workload{run},
		Forecasts:     []v1alpha1.ProgressForecast{pf},
	}
	sc, notes, err := Scenario(s, Options{Now: now, DefaultDuration: 1800})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(strings.Join(notes, "\n"), "1 jobs continue their own stored history") {
		t.Errorf("notes %q", notes)
	}
	j := sc.Jobs[0]
	c := j.Curve
	if c == nil {
		t.Fatalf("job %+v: no curve of its own", j)
	}
	// 6,000 steps left at 100 a minute: about an hour; 40 % done, so it
	// has run 2/3 of that.
	if d := float64(j.Duration); math.Abs(d-3600) > 300 || math.Abs(float64(j.RanFor)-d*0.4/0.6) > 1 || j.TotalSteps != 10000 {
		t.Errorf("duration %v, ranFor %v, totalSteps %v", j.Duration, j.RanFor, j.TotalSteps)
	}
	// The history: steps 100–2,500, then the re-run's 2,600–4,000.
	hist := 0
	for i, x := range c.X {
		if x > 0.4 {
			break
		}
		hist++
		step := int(math.Round(x * 10000))
		want := lossAt(step)
		if step > 2500 {
			want -= 0.1
		}
		if math.Abs(c.V[i]-want) > 1e-4 {
			t.Errorf("x %v: loss %v, want %v", x, c.V[i], want)
		}
	}
	if hist != 40 || len(c.X) != hist+continuationPoints || c.X[len(c.X)-1] != 1 {
		t.Errorf("%d history points of %d, last x %v", hist, len(c.X), c.X[len(c.X)-1])
	}
	// The continuation falls from the best so far, monotonically.
	for i := hist; i < len(c.V); i++ {
		if !(c.V[i] <= c.V[i-1]+1e-9) {
			t.Errorf("continuation rises at x %v: %v after %v", c.X[i], c.V[i], c.V[i-1])
		}
	}
	if !(c.V[len(c.V)-1] < c.V[hist-1]) {
		t.Errorf("continuation ends at %v, from %v: no predicted gain", c.V[len(c.V)-1], c.V[hist-1])
	}

	in, err := sc.Resolve()
	if err != nil {
		t.Fatal(err)
	}
	r, err := simulator.Run(in, simulator.PolicyPlanner, simulator.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	if o := r.Jobs[0]; o.Outcome != "completed" || math.Abs(o.End-(in.Jobs[0].Duration-in.Jobs[0].Done)) > 1 {
		t.Errorf("simulated job: %s at %v, want completed after its %v left", o.Outcome, o.End, in.Jobs[0].Duration-in.Jobs[0].Done)
	}
}

// A long history is thinned evenly to maxHistoryPoints, its first and
// last values kept, so an exported scenario stays small.
func TestOwnCurveThinsLongHistories(t *testing.T) {
	h := progress.NewHistory(progress.DefaultLimits())
	for i := 1; i <= 300; i++ {
		h.Observe(float64(60*i), progress.TrainerStatus{Metrics: []progress.MetricValue{
			{Name: "loss", Value: fmt.Sprintf("%.5g", lossAt(10*i))}, {Name: "current_step", Value: fmt.Sprint(10 * i)},
			{Name: "total_steps", Value: "10000"}}})
	}
	fc := forecast.Fit(h, progress.Objective{Metric: "loss", Direction: progress.Minimize}, 18000, forecast.DefaultSettings())
	c := ownCurveOf(h, &fc)
	if c == nil {
		t.Fatal("no curve")
	}
	hist := len(c.spec.X) - continuationPoints
	if hist != maxHistoryPoints || c.spec.X[0] != 0.001 || c.spec.X[hist-1] != 0.3 {
		t.Errorf("%d history points from x %v to %v, want %d from 0.001 to 0.3", hist, c.spec.X[0], c.spec.X[hist-1], maxHistoryPoints)
	}
}

// A run so far past the simulator's ten-year bound (a forged or absurd
// progress next to a long ETA) keeps the simple curve; a step total past
// 1e12 is not carried over.
func TestWithOwnCurveBounds(t *testing.T) {
	spec := simulator.CurveSpec{Objective: progress.Objective{Metric: "loss", Direction: progress.Minimize}, X: []float64{0.1, 0.5, 1}, V: []float64{3, 2, 1}}
	for _, c := range []struct {
		at, total float64
		duration  simulator.Seconds
		ok        bool
		steps     float64
	}{
		{0.5, 1e4, 3600, true, 1e4},
		{0.5, 1e300, 3600, true, 0},
		{1 - 1e-12, 1e4, 3600, false, 0},
		{0.5, 1e4, simulator.MaxSeconds, false, 0},
	} {
		js := simulator.JobSpec{Duration: c.duration}
		ok := withOwnCurve(&js, jobFuture{own: &ownCurve{spec: spec, at: c.at, totalSteps: c.total}})
		if ok != c.ok || js.TotalSteps != c.steps || (js.Curve != nil) != c.ok {
			t.Errorf("at %v, total %v, duration %v: ok %v, job %+v", c.at, c.total, c.duration, ok, js)
		}
	}
}
