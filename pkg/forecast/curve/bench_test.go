package curve

import (
	"math"
	"math/rand/v2"
	"testing"
)

// benchCurve is a noisy loss curve with a fast start and a slow tail, like
// a real training run: 0.8 + 2/(1 + 3e-3·x) + 0.5·exp(−x/200), 1 % noise
// and a few spikes.
func benchCurve(n int) Data {
	rng := rand.New(rand.NewPCG(7, 11))
	d := Data{X: make([]float64, n), Y: make([]float64, n)}
	for i := range n {
		x := 20 * float64(i+1) * 512 / float64(n)
		y := 0.8 + 2/(1+3e-3*x) + 0.5*math.Exp(-x/200)
		y += 0.01 * rng.NormFloat64()
		if rng.IntN(100) == 0 {
			y += 0.2
		}
		d.X[i], d.Y[i] = x, y
	}
	return d
}

func benchmarkFitCurves(b *testing.B, n int) {
	d := benchCurve(n)
	s := DefaultSettings()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Fit(d, s); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkFitCurves512 is the planner's common case: every family on 512
// reports (binned to 64 points).
func BenchmarkFitCurves512(b *testing.B) { benchmarkFitCurves(b, 512) }

// BenchmarkFitCurves100k shows that binning keeps long histories cheap.
func BenchmarkFitCurves100k(b *testing.B) { benchmarkFitCurves(b, 100_000) }
