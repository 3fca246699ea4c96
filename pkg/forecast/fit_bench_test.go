package forecast

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/progress-planner/planner/pkg/progress"
)

// benchHistory builds a history from n reports of a noisy loss curve with
// an evaluation every 10 reports; the History bound applies (512 points).
func benchHistory(n int) *progress.History {
	h := progress.NewHistory(progress.DefaultLimits())
	rng := rand.New(rand.NewPCG(1, 2))
	evalLoss := math.NaN()
	for i := 0; i < n; i++ {
		step := i * 10
		loss := 1 + 3/math.Pow(1+float64(step)/500, 0.6) + 0.01*rng.NormFloat64()
		if i%10 == 0 {
			evalLoss = loss + 0.05
		}
		h.Observe(float64(i)*5, progress.TrainerStatus{
			ProgressPercentage:        f64(math.Floor(100 * float64(i) / float64(n))),
			EstimatedRemainingSeconds: f64(float64(n-i) * 5),
			Metrics: metrics("loss", fmt.Sprintf("%.5g", loss), "eval_loss", fmt.Sprintf("%.5g", evalLoss),
				"current_step", fmt.Sprint(step), "total_steps", fmt.Sprint(n*10)),
		})
	}
	return h
}

// BenchmarkFit512 is one full forecast (all curve families, hindcast,
// detection) on a 512-point history in which every report carries a new
// objective value.
func BenchmarkFit512(b *testing.B) {
	h := benchHistory(512)
	obj := progress.Objective{Metric: "loss", Direction: progress.Minimize}
	now := h.LastReport()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		Fit(h, obj, now, DefaultSettings())
	}
}

// BenchmarkFit512Target is BenchmarkFit512 for a job with a target the
// curve reaches: the time to target, its line and the bound on the curve's
// crossing (boundCrossing) are computed too.
func BenchmarkFit512Target(b *testing.B) {
	h := benchHistory(512)
	target := 1.3
	obj := progress.Objective{Metric: "loss", Direction: progress.Minimize, Target: &target}
	now := h.LastReport()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		Fit(h, obj, now, DefaultSettings())
	}
}

// BenchmarkFit100k feeds 100,000 reports: the history bound keeps 512 and
// the forecast costs the same as on 512.
func BenchmarkFit100k(b *testing.B) {
	h := benchHistory(100000)
	if h.Len() > progress.DefaultLimits().MaxPoints {
		b.Fatalf("history not bounded: %d", h.Len())
	}
	obj := progress.Objective{Metric: "loss", Direction: progress.Minimize}
	now := h.LastReport()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		Fit(h, obj, now, DefaultSettings())
	}
}

// BenchmarkObserve100k is the cost of appending 100,000 reports to a
// bounded history (thinning included), per report.
func BenchmarkObserve100k(b *testing.B) {
	sts := make([]progress.TrainerStatus, 1000)
	for i := range sts {
		sts[i] = progress.TrainerStatus{ProgressPercentage: f64(float64(i) / 10),
			Metrics: metrics("loss", fmt.Sprint(1+1/float64(i+1)), "current_step", fmt.Sprint(i), "total_steps", "100000")}
	}
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		h := progress.NewHistory(progress.DefaultLimits())
		for j := 0; j < 100000; j++ {
			s := sts[j%1000]
			s.Metrics = append([]progress.MetricValue(nil), s.Metrics...)
			s.Metrics[1].Value = fmt.Sprint(j)
			h.Observe(float64(j), s)
		}
	}
}

// BenchmarkHistoryEncode reports the encoded size of a full history.
func BenchmarkHistoryEncode(b *testing.B) {
	h := benchHistory(100000)
	var size int
	b.ReportAllocs()
	b.ResetTimer() // building the history is not the encoding
	for i := 0; i < b.N; i++ {
		buf, err := h.MarshalJSON()
		if err != nil {
			b.Fatal(err)
		}
		size = len(buf)
	}
	b.ReportMetric(float64(size), "bytes/history")
}
