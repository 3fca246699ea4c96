package stats

import (
	"math"
	"testing"
)

func TestMedian(t *testing.T) {
	for _, c := range []struct {
		in   []float64
		want float64
	}{{[]float64{3, 1, 2}, 2}, {[]float64{4, 1, 3, 2}, 2.5}, {[]float64{5}, 5}} {
		in := append([]float64(nil), c.in...)
		if got := Median(in); got != c.want {
			t.Errorf("Median(%v) = %v, want %v", c.in, got, c.want)
		}
		for i := range in {
			if in[i] != c.in[i] {
				t.Fatalf("Median reordered its input: %v", in)
			}
		}
	}
	if !math.IsNaN(Median(nil)) {
		t.Error("Median(nil) is not NaN")
	}
}

// Quantile is numpy.percentile's default (linear) interpolation:
// numpy.percentile([1,2,3,4], [0, 10, 25, 50, 90, 100]).
func TestQuantile(t *testing.T) {
	v := []float64{4, 1, 3, 2}
	for q, want := range map[float64]float64{0: 1, 0.1: 1.3, 0.25: 1.75, 0.5: 2.5, 0.9: 3.7, 1: 4, -1: 1, 2: 4} {
		if got := Quantile(v, q); math.Abs(got-want) > 1e-12 {
			t.Errorf("Quantile(%v) = %v, want %v", q, got, want)
		}
	}
	if v[0] != 4 || v[1] != 1 {
		t.Errorf("Quantile reordered its input: %v", v)
	}
	if got := Quantile([]float64{7}, 0.3); got != 7 {
		t.Errorf("one value: %v", got)
	}
	if !math.IsNaN(Quantile(nil, 0.5)) {
		t.Error("Quantile(nil) is not NaN")
	}
}

func TestKaplanMeier(t *testing.T) {
	// No censoring: the empirical distribution.
	sv := KaplanMeier([]float64{1, 2, 3, 4}, nil)
	for _, c := range []struct{ x, want float64 }{{0, 1}, {1, 0.75}, {2.5, 0.5}, {4, 0}, {9, 0}} {
		if got := sv.At(c.x); math.Abs(got-c.want) > 1e-12 {
			t.Errorf("S(%g) = %g, want %g", c.x, got, c.want)
		}
	}
	// Censored at 2 (still running): the at-risk set shrinks, the mass
	// moves right: S(1)=3/4, S(3)=3/4·(1−1/2)=3/8, S(4)=0.
	sv = KaplanMeier([]float64{1, 3, 4}, []float64{2})
	for _, c := range []struct{ x, want float64 }{{1, 0.75}, {2, 0.75}, {3, 0.375}, {4, 0}} {
		if got := sv.At(c.x); math.Abs(got-c.want) > 1e-12 {
			t.Errorf("censored: S(%g) = %g, want %g", c.x, got, c.want)
		}
	}
	// Draws: u near 1 gives the first completion, near 0 the last; given
	// T > 3 only 4 is left; past every observation, as long again.
	if a, b, c, d := sv.DrawAfter(0, 0.99), sv.DrawAfter(0, 0.01), sv.DrawAfter(3, 0.5), sv.DrawAfter(10, 0.5); a != 1 || b != 4 || c != 4 || d != 20 {
		t.Errorf("draws %g %g %g %g, want 1 4 4 20", a, b, c, d)
	}
	// Only censored, or nothing: no estimate.
	if sv := KaplanMeier(nil, []float64{5}); !sv.Empty() || !math.IsNaN(sv.DrawAfter(0, 0.5)) {
		t.Errorf("censored only: %+v", sv)
	}
	// A tail of censored runs past the last completion: a draw there is
	// the largest observation.
	sv = KaplanMeier([]float64{1}, []float64{5, 7})
	if got := sv.DrawAfter(0, 0.1); got != 7 {
		t.Errorf("tail draw %g, want 7", got)
	}
}
