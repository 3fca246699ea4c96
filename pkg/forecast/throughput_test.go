package forecast

import (
	"math"
	"testing"
)

// The pace's trend share is chosen by the job's own hindcasts: a job that
// slowed down early and has kept a constant pace since is extrapolated
// flat; a job that keeps slowing down keeps the damped trend.
func TestSelectTrendByHindcast(t *testing.T) {
	samples := func(tau func(x float64) float64) []paceSample {
		var s []paceSample
		tm := 0.0
		for x := 0.0; x < 100; x++ {
			dt := tau(x + 0.5)
			tm += dt
			s = append(s, paceSample{x0: x, x1: x + 1, dt: dt, t1: tm})
		}
		return s
	}
	settled := samples(func(x float64) float64 { return 1 + math.Min(x, 30)/10 })
	if phi, _ := selectTrend(settled); phi != 0 {
		t.Errorf("pace constant since x=30: trend share %v, want 0", phi)
	}
	slowing := samples(func(x float64) float64 { return 1 + x/10 })
	if phi, _ := selectTrend(slowing); phi != dampedTrend {
		t.Errorf("pace still slowing: trend share %v, want %v", phi, dampedTrend)
	}
}
