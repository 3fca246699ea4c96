package humanize

import (
	"math"
	"testing"
)

func TestDuration(t *testing.T) {
	for _, c := range []struct {
		sec  float64
		want string
	}{
		{0, "0s"}, {0.4, "0s"}, {45, "45s"}, {59.6, "1m"}, {60, "1m"}, {270, "4m30s"}, {247, "4m07s"},
		{599, "9m59s"}, {600, "10m"}, {750, "13m"}, {3569, "59m"}, {3570, "1h"}, {3600, "1h"},
		{7500, "2h05m"}, {108000, "30h"}, {48*3600 - 31, "47h59m"}, {48*3600 - 30, "2d"},
		{200000, "2d8h"}, {725, "12m"}, {3900, "1h05m"}, {7800, "2h10m"}, {30 * 86400, "30d"}, {-90, "-1m30s"},
		{math.NaN(), "?"}, {math.Inf(1), "?"}, {2e12, "?"}, {-1e13, "?"}, {9.3e18, "?"}, {1e308, "?"},
	} {
		if got := Duration(c.sec); got != c.want {
			t.Errorf("Duration(%v) = %q, want %q", c.sec, got, c.want)
		}
	}
}

// TestDurationIsMonotone: a longer duration never prints as a shorter one
// (rounding at each unit boundary carries into the larger unit).
func TestDurationIsMonotone(t *testing.T) {
	parse := func(s string) float64 {
		var v, n float64
		for i := 0; i < len(s); i++ {
			switch c := s[i]; {
			case c >= '0' && c <= '9':
				n = n*10 + float64(c-'0')
			case c == 'd':
				v, n = v+n*86400, 0
			case c == 'h':
				v, n = v+n*3600, 0
			case c == 'm':
				v, n = v+n*60, 0
			case c == 's':
				v, n = v+n, 0
			}
		}
		return v
	}
	prev := -1.0
	for s := 0.0; s <= 31*86400; s += 7 + math.Floor(s/97) {
		v := parse(Duration(s))
		if v < prev {
			t.Fatalf("Duration(%v) = %q reads %v, below the previous %v", s, Duration(s), v, prev)
		}
		// Off by at most half the smallest unit shown.
		half := 0.5
		switch {
		case s >= 48*3600-30:
			half = 1800
		case s >= 600:
			half = 30
		}
		if math.Abs(v-s) > half {
			t.Fatalf("Duration(%v) = %q is %v off", s, Duration(s), v-s)
		}
		prev = v
	}
}

func TestPercentAndNumber(t *testing.T) {
	for _, c := range []struct {
		x    float64
		want string
	}{{0.93, "93%"}, {0.054, "5.4%"}, {0.004, "0.4%"}, {0.00012, "0.012%"}, {0, "0%"}, {1, "100%"}, {-0.25, "-25%"}, {0.997, "99.7%"}, {0.9996, "99.96%"}, {0.994, "99%"}, {math.NaN(), "?%"}} {
		if got := Percent(c.x); got != c.want {
			t.Errorf("Percent(%v) = %q, want %q", c.x, got, c.want)
		}
	}
	for _, c := range []struct {
		x    float64
		want string
	}{{4500, "4500"}, {0.31416, "0.3142"}, {2.48748, "2.487"}, {12345.6, "12346"}, {1.5e-5, "1.5e-05"}, {300417.5, "300418"}, {0.000123456, "0.0001235"}, {3000, "3000"}, {math.Inf(-1), "?"}} {
		if got := Number(c.x); got != c.want {
			t.Errorf("Number(%v) = %q, want %q", c.x, got, c.want)
		}
	}
}

func BenchmarkAppendDuration(b *testing.B) {
	buf := make([]byte, 0, 32)
	for i := 0; i < b.N; i++ {
		buf = AppendDuration(buf[:0], float64(i%200000))
	}
}
