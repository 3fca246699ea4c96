// Package stats holds the small order statistics the forecaster and the
// progress history share, so each is written once.
package stats

import (
	"math"
	"slices"
)

// Median is the median of v (NaN when v is empty); v is not modified.
func Median(v []float64) float64 {
	if len(v) == 0 {
		return math.NaN()
	}
	c := slices.Clone(v)
	slices.Sort(c)
	n := len(c)
	if n%2 == 1 {
		return c[n/2]
	}
	return (c[n/2-1] + c[n/2]) / 2
}
