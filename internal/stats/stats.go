// Package stats holds the small order statistics the forecaster, the
// progress history, the backtest, the simulator and the admission
// estimates share, so each is written once.
package stats

import (
	"math"
	"slices"
)

// Median is the median of v (NaN when v is empty); v is not modified.
func Median(v []float64) float64 {
	// A short input is sorted in a stack buffer: the forecast takes
	// medians of a few recent values at every report (no garbage).
	var buf [32]float64
	if len(v) <= len(buf) {
		return MedianInPlace(append(buf[:0], v...))
	}
	return MedianInPlace(slices.Clone(v))
}

// MedianInPlace is Median, sorting v itself (a scratch copy the caller
// owns).
func MedianInPlace(v []float64) float64 {
	if len(v) == 0 {
		return math.NaN()
	}
	slices.Sort(v)
	n := len(v)
	if n%2 == 1 {
		return v[n/2]
	}
	return (v[n/2-1] + v[n/2]) / 2
}

// CentralZ is the two-sided normal quantile of a central interval of the
// given coverage (0.8 → 1.2816); a coverage outside (0, 1), or NaN, is
// taken as 0.8. The forecast's intervals and the report's capacity
// forecast read them with the same z.
func CentralZ(coverage float64) float64 {
	if !(coverage > 0 && coverage < 1) {
		coverage = 0.8
	}
	return math.Sqrt2 * math.Erfinv(coverage)
}

// Quantile is the q-quantile of v (q in [0, 1]) by linear interpolation
// between the two nearest order statistics (numpy's default, so the
// backtest matches ../shared/eval); NaN when v is empty; v is not
// modified. Quantile(v, 0.5) equals Median(v).
func Quantile(v []float64, q float64) float64 {
	if len(v) == 0 {
		return math.NaN()
	}
	c := slices.Clone(v)
	slices.Sort(c)
	pos := math.Min(math.Max(q, 0), 1) * float64(len(c)-1)
	i := int(math.Floor(pos))
	if i >= len(c)-1 {
		return c[len(c)-1]
	}
	f := pos - float64(i)
	if f == 0 || c[i] == c[i+1] {
		return c[i] // also keeps +Inf values (never happened) from making NaN
	}
	return c[i] + (c[i+1]-c[i])*f
}
