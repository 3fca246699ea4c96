package queueorder

import (
	"math"
	"slices"
	"testing"
)

func TestEffectivePrioritySaturates(t *testing.T) {
	for _, c := range []struct{ base, boost, want int32 }{
		{100, 50, 150}, {100, -200, -100}, {math.MaxInt32, 1000, math.MaxInt32}, {math.MinInt32, -1, math.MinInt32},
	} {
		if got := EffectivePriority(c.base, c.boost); got != c.want {
			t.Errorf("EffectivePriority(%d, %d) = %d, want %d", c.base, c.boost, got, c.want)
		}
	}
}

func TestCompareIsKueuesOrder(t *testing.T) {
	type w struct {
		eff  int32
		t    float64
		name string
	}
	ws := []w{{0, 5, "c"}, {10, 9, "b"}, {0, 5, "a"}, {0, 1, "d"}, {10, 2, "e"}}
	slices.SortFunc(ws, func(a, b w) int { return Compare(a.eff, b.eff, a.t, b.t, a.name, b.name) })
	var got []string
	for _, x := range ws {
		got = append(got, x.name)
	}
	if want := []string{"e", "b", "d", "a", "c"}; !slices.Equal(got, want) {
		t.Errorf("order %v, want %v", got, want)
	}
}
