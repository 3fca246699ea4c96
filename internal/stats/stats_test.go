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
