package kueueext

import (
	"math"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/progress-planner/planner/pkg/forecast"
	"github.com/progress-planner/planner/pkg/preempt"
)

func gaugeValue(t *testing.T, g *prometheus.GaugeVec, label string) float64 {
	t.Helper()
	var m dto.Metric
	if err := g.WithLabelValues(label).Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetGauge().GetValue()
}

// planner_jobs is a level: a job moving between verdicts moves one count,
// a forgotten job leaves every count.
func TestVerdictCounts(t *testing.T) {
	g := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "t"}, []string{"verdict"})
	c := newVerdictCounts(g)
	a, b := jobKey{NamespacedName: types.NamespacedName{Namespace: "n", Name: "a"}}, jobKey{NamespacedName: types.NamespacedName{Namespace: "n", Name: "b"}}
	c.set(a, preempt.Progressing)
	c.set(b, preempt.Progressing)
	c.set(a, preempt.Progressing) // no change
	if got := gaugeValue(t, g, string(preempt.Progressing)); got != 2 {
		t.Fatalf("Progressing = %v, want 2", got)
	}
	c.set(a, preempt.Plateaued)
	if p, q := gaugeValue(t, g, string(preempt.Progressing)), gaugeValue(t, g, string(preempt.Plateaued)); p != 1 || q != 1 {
		t.Fatalf("after a plateaus: Progressing %v Plateaued %v, want 1 1", p, q)
	}
	c.set(a, "")
	c.set(b, "")
	c.set(b, "") // forgetting twice is harmless
	if p, q := gaugeValue(t, g, string(preempt.Progressing)), gaugeValue(t, g, string(preempt.Plateaued)); p != 0 || q != 0 {
		t.Fatalf("after forgetting both: Progressing %v Plateaued %v, want 0 0", p, q)
	}
}

func TestYieldedGPUHours(t *testing.T) {
	for _, tc := range []struct {
		gpus int
		eta  forecast.Estimate
		want float64
	}{
		{8, forecast.Estimate{Known: true, Value: 5400}, 12},
		{8, forecast.Estimate{Known: false, Value: 5400}, 0},
		{8, forecast.Estimate{Known: true, Value: math.Inf(1)}, 0},
		{8, forecast.Estimate{Known: true, Value: -1}, 0},
		{-3, forecast.Estimate{Known: true, Value: 3600}, 0},
	} {
		if got := yieldedGPUHours(tc.gpus, tc.eta); got != tc.want {
			t.Errorf("yieldedGPUHours(%d, %+v) = %v, want %v", tc.gpus, tc.eta, got, tc.want)
		}
	}
}

func histogram(t *testing.T, label string) (count uint64, sum float64) {
	t.Helper()
	var m dto.Metric
	if err := metricETAError.WithLabelValues(label).(prometheus.Histogram).Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetHistogram().GetSampleCount(), m.GetHistogram().GetSampleSum()
}

// Each checkpoint keeps the first forecast past it; the error is published
// once, when the job succeeds, relative to the time that remained.
func TestETACheckpoints(t *testing.T) {
	t0 := time.Unix(1_000_000, 0)
	fc := func(progress, eta float64) *forecast.Forecast {
		return &forecast.Forecast{Progress: &progress, ETA: forecast.Estimate{Known: true, Value: eta}}
	}
	var e etaCheckpoints
	e.record(fc(0.10, 900), t0)                                                  // before every checkpoint
	e.record(fc(0.30, 700), t0.Add(300*time.Second))                             // 25 %: predicts end at t0+1000
	e.record(fc(0.40, 100), t0.Add(400*time.Second))                             // still 25 %: ignored
	e.record(&forecast.Forecast{Progress: ptr.To(0.6)}, t0.Add(500*time.Second)) // ETA unknown: 50 % not seen
	e.record(fc(0.80, 240), t0.Add(800*time.Second))                             // 50 % and 75 %: end at t0+1040
	n25, s25 := histogram(t, "25")
	n50, _ := histogram(t, "50")
	e.settle(unixSeconds(t0) + 1100) // actual end
	e.settle(unixSeconds(t0) + 5000) // once only
	m25, u25 := histogram(t, "25")
	m50, u50 := histogram(t, "50")
	if m25-n25 != 1 || math.Abs((u25-s25)-100.0/800) > 1e-9 {
		t.Errorf("25 %%: %d new samples, sum +%v; want 1, %v", m25-n25, u25-s25, 100.0/800)
	}
	if m50-n50 != 1 || u50 <= 0 {
		t.Errorf("50 %%: %d new samples, want 1 (60/300)", m50-n50)
	}
}

func TestSucceededAt(t *testing.T) {
	at := metav1.NewTime(time.Unix(2_000_000, 0))
	wl := &kueue.Workload{}
	if _, ok := succeededAt(wl); ok {
		t.Error("running Workload: succeeded")
	}
	wl.Status.Conditions = []metav1.Condition{{Type: kueue.WorkloadFinished, Status: metav1.ConditionTrue, Reason: "Failed", LastTransitionTime: at}}
	if _, ok := succeededAt(wl); ok {
		t.Error("failed Workload: succeeded")
	}
	wl.Status.Conditions[0].Reason = kueue.WorkloadFinishedReasonSucceeded
	if got, ok := succeededAt(wl); !ok || !got.Equal(at.Time) {
		t.Errorf("succeeded Workload: %v %v", got, ok)
	}
	if _, ok := succeededAt(nil); ok {
		t.Error("no Workload: succeeded")
	}
}
