// Package humanize is the one way the planner prints durations,
// percentages and metric values for people: decision reasons, the
// ProgressForecast printer columns, reports, explain and the CLI all show
// the same value the same way (docs/architecture.md, "Formatting").
//
// The Append forms write into a caller's buffer, so the policy can build
// its one-line reasons without allocating per value.
package humanize

import (
	"math"
	"strconv"
)

// MaxSeconds is the longest duration printed (about 31,700 years):
// beyond it no duration means anything, and int64 seconds would overflow
// past ~9e18. Longer and non-finite durations print as "?".
const MaxSeconds = 1e12

// Duration prints seconds with at most two units, coarser as the value
// grows: "45s", "4m30s" (seconds kept below 10 minutes), "12m",
// "2h05m", "30h" (hours up to two days), "3d4h". Rounded to the nearest
// unit shown; negative values keep their sign; "?" when not finite or
// beyond MaxSeconds.
func Duration(sec float64) string {
	var buf [24]byte
	return string(AppendDuration(buf[:0], sec))
}

// AppendDuration appends Duration(sec) to b.
func AppendDuration(b []byte, sec float64) []byte {
	if math.IsNaN(sec) || math.IsInf(sec, 0) || math.Abs(sec) > MaxSeconds {
		return append(b, '?')
	}
	if sec < 0 {
		b = append(b, '-')
		sec = -sec
	}
	s := int64(math.Round(sec))
	switch {
	case s < 60:
		return unit(b, s, 's')
	case s < 600:
		return pair(b, s/60, 'm', s%60, 's')
	case s < 3600-30:
		return unit(b, (s+30)/60, 'm')
	case s < 48*3600-30:
		m := (s + 30) / 60
		return pair(b, m/60, 'h', m%60, 'm')
	default:
		h := (s + 1800) / 3600
		return pair(b, h/24, 'd', h%24, 'h')
	}
}

// unit appends "<n><u>".
func unit(b []byte, n int64, u byte) []byte {
	return append(strconv.AppendInt(b, n, 10), u)
}

// pair appends "<hi><hu>" and, when lo is not zero, "<lo><lu>" (two
// digits for minutes and seconds: "2h05m", "4m07s").
func pair(b []byte, hi int64, hu byte, lo int64, lu byte) []byte {
	b = unit(b, hi, hu)
	if lo == 0 {
		return b
	}
	if lo < 10 && lu != 'h' {
		b = append(b, '0')
	}
	return unit(b, lo, lu)
}

// Percent prints a fraction as a percentage with two significant digits
// at most, and whole percents from 10 %: 0.93 → "93%", 0.054 → "5.4%",
// 0.004 → "0.4%", 0.00012 → "0.012%", 0 → "0%"; a value just short of
// 100 % keeps the decimals that tell it from 100 % ("99.7%"); "?%" when
// not finite.
func Percent(x float64) string {
	var buf [32]byte
	return string(AppendPercent(buf[:0], x))
}

// AppendPercent appends Percent(x) to b.
func AppendPercent(b []byte, x float64) []byte {
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return append(b, "?%"...)
	}
	v := x * 100
	switch a := math.Abs(v); {
	case a >= 10 && a < 100 && math.Round(a) >= 100:
		// Just short of 100 % must not read as done: as many decimals
		// as it takes (99.7 %, 99.96 %), at most four.
		d := 1
		for ; d < 4 && math.Round(a*math.Pow10(d)) >= 100*math.Pow10(d); d++ {
		}
		b = strconv.AppendFloat(b, v, 'f', d, 64)
	case a >= 10:
		b = strconv.AppendFloat(b, v, 'f', 0, 64)
	case a >= 1:
		b = strconv.AppendFloat(b, v, 'f', 1, 64)
	case a == 0:
		b = append(b, '0')
	default:
		b = strconv.AppendFloat(b, v, 'g', 2, 64)
	}
	return append(b, '%')
}

// Number prints a metric value: whole numbers (and anything from 10,000
// up) without decimals, others with four significant digits ("0.3142",
// "2.487", "1.5e-05"); "?" when not finite.
func Number(x float64) string {
	var buf [32]byte
	return string(AppendNumber(buf[:0], x))
}

// AppendNumber appends Number(x) to b.
func AppendNumber(b []byte, x float64) []byte {
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return append(b, '?')
	}
	if (x == math.Trunc(x) || math.Abs(x) >= 1e4) && math.Abs(x) < 1e12 {
		return strconv.AppendFloat(b, x, 'f', 0, 64)
	}
	return strconv.AppendFloat(b, x, 'g', 4, 64)
}

// Boost prints a priority boost with its sign: "+100", "0", "-50".
func Boost(b int32) string {
	if b > 0 {
		return "+" + strconv.Itoa(int(b))
	}
	return strconv.Itoa(int(b))
}
