package simulator

import (
	"testing"
)

// phillyLike is the built-in scenario scaled to n jobs on a 256-GPU cluster
// of four ClusterQueues in one cohort: Philly run-time and size
// distributions (untruncated), parametric curves.
func phillyLike(b *testing.B, n int) *Input {
	sc := DefaultScenario()
	sc.Queues = []Queue{
		{Name: "a", GPUs: 96, Cohort: "c"}, {Name: "b", GPUs: 64, Cohort: "c"},
		{Name: "d", GPUs: 64, Cohort: "c"}, {Name: "e", GPUs: 32, Cohort: "c"},
	}
	sc.Generate.Jobs = n
	sc.Generate.Load = 0.9
	sc.Generate.MaxDuration = 0
	sc.Generate.GPUs = []GPUShare{{1, 0.9317}, {2, 0.0221}, {4, 0.0227}, {8, 0.0200}, {16, 0.0024}, {32, 0.0011}}
	in, err := sc.Resolve()
	if err != nil {
		b.Fatal(err)
	}
	return in
}

// BenchmarkSimulatePhillyLike runs each policy on 2,000 generated
// Philly-like jobs (Deactivate on) and reports simulated events and
// forecasts per second of wall time.
func BenchmarkSimulatePhillyLike(b *testing.B) {
	in := phillyLike(b, 2000)
	for _, p := range AllPolicies {
		b.Run(p, func(b *testing.B) {
			o := DefaultOptions()
			o.Deactivate = true
			var events, forecasts int
			var wall float64
			b.ReportAllocs()
			for b.Loop() {
				r, err := Run(in, p, o)
				if err != nil {
					b.Fatal(err)
				}
				events += r.Summary.Events
				forecasts += r.Summary.Forecasts
				wall += r.Summary.WallSeconds
			}
			b.ReportMetric(float64(events)/wall, "events/s")
			if forecasts > 0 {
				b.ReportMetric(float64(forecasts)/wall, "forecasts/s")
			}
		})
	}
}
