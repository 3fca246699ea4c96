package splitmix

import (
	"math"
	"testing"
)

func TestDeterministicAndDistributed(t *testing.T) {
	a, b := New(42), New(42)
	var sum, sq float64
	const n = 20000
	for i := 0; i < n; i++ {
		x, y := a.Norm(), b.Norm()
		if x != y {
			t.Fatal("same seed, different draws")
		}
		sum += x
		sq += x * x
	}
	if mean, sd := sum/n, math.Sqrt(sq/n); math.Abs(mean) > 0.03 || math.Abs(sd-1) > 0.03 {
		t.Errorf("normal draws: mean %.3f sd %.3f", mean, sd)
	}
	// A pinned value: the sequence must not change across Go releases or
	// refactors (the shipped example histories depend on it).
	if got := New(1).Uint64(); got != 0x910a2dec89025cc1 {
		t.Errorf("first draw of seed 1 = %#x", got)
	}
}
