package report

import (
	"fmt"
	"math"
	"strconv"
)

// fmtDur prints seconds as a short Go-like duration: 45s, 12m, 2h10m, 3d4h.
func fmtDur(sec float64) string {
	// Beyond 1e12 s (about 31,700 years) no duration means anything, and
	// int64 seconds would overflow past ~9e18.
	if math.IsNaN(sec) || math.IsInf(sec, 0) || math.Abs(sec) > 1e12 {
		return "?"
	}
	neg := sec < 0
	s := int64(math.Round(math.Abs(sec)))
	var out string
	switch {
	case s < 60:
		out = fmt.Sprintf("%ds", s)
	case s < 3600:
		out = fmt.Sprintf("%dm", (s+30)/60)
	case s < 86400:
		m := (s + 30) / 60
		if m%60 == 0 {
			out = fmt.Sprintf("%dh", m/60)
		} else {
			out = fmt.Sprintf("%dh%02dm", m/60, m%60)
		}
	default:
		h := (s + 1800) / 3600
		if h%24 == 0 {
			out = fmt.Sprintf("%dd", h/24)
		} else {
			out = fmt.Sprintf("%dd%dh", h/24, h%24)
		}
	}
	if neg {
		return "-" + out
	}
	return out
}

// fmtNum prints a metric value with 4 significant digits.
func fmtNum(x float64) string {
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return "?"
	}
	return strconv.FormatFloat(x, 'g', 4, 64)
}

// fmtPct prints a fraction as a percentage with one decimal.
func fmtPct(x float64) string {
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return "?"
	}
	return strconv.FormatFloat(x*100, 'f', 1, 64) + "%"
}

func fmtRangeDur(r *Range) string {
	if r == nil {
		return "—"
	}
	return fmt.Sprintf("%s [%s–%s]", fmtDur(r.Value), fmtDur(r.Lo), fmtDur(r.Hi))
}

func fmtRangeNum(r *Range) string {
	if r == nil {
		return "—"
	}
	return fmt.Sprintf("%s [%s–%s]", fmtNum(r.Value), fmtNum(r.Lo), fmtNum(r.Hi))
}

func fmtOptNum(x *float64) string {
	if x == nil {
		return "—"
	}
	return fmtNum(*x)
}

func fmtOptPct(x *float64) string {
	if x == nil {
		return "—"
	}
	return fmtPct(*x)
}

func fmtBoost(b int32) string {
	if b > 0 {
		return "+" + strconv.Itoa(int(b))
	}
	return strconv.Itoa(int(b))
}

func fmtFreed(f Freed) string {
	return fmt.Sprintf("%d [%d–%d]", f.Median, f.Lo, f.Hi)
}

func fmtAdmission(a Admission) string {
	opt := func(p *float64) string {
		if p == nil {
			return "?"
		}
		if *p == 0 {
			return "now"
		}
		return fmtDur(*p)
	}
	switch {
	case a.Median == nil && a.Lo == nil:
		return "— (" + a.Note + ")"
	case a.Lo != nil && *a.Lo == 0 && a.Hi != nil && *a.Hi == 0:
		return "now"
	default:
		hi := opt(a.Hi)
		if a.Hi == nil {
			hi = "later"
		}
		return fmt.Sprintf("%s [%s–%s]", opt(a.Median), opt(a.Lo), hi)
	}
}
