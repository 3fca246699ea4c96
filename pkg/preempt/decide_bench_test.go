package preempt

import "testing"

// BenchmarkDecide is one decision for a plateaued job with a previous
// decision (the controller's steady state), reason string included.
func BenchmarkDecide(b *testing.B) {
	p := DefaultPolicy()
	prev := Decide(fcPlateau(t0), running(), Decision{}, p)
	f := fcPlateau(t0 + 600)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		Decide(f, running(), prev, p)
	}
}
