package preempt

import (
	"math"
	"strconv"
	"strings"
)

// reasonParts is what the one-line reason is built from.
type reasonParts struct {
	verdict  Verdict
	evidence string
	target   int32 // the boost the verdict asks for
	eff      Effective
	facts    Facts
	dwell    float64 // verdict age
	minDwell float64
	changes  int // boost changes in the last hour, before this decision
	maxRate  int
	notes    []string
}

// buildReason renders "<Verdict>: <evidence>; <boost>[; <notes>...]" on one
// line. Every piece of text that comes from the forecast went through
// oneLine already.
func buildReason(d *Decision, r reasonParts) string {
	var w text
	n := len(r.evidence) + 160
	for _, note := range r.notes {
		n += len(note) + 2
	}
	w.Grow(n)
	w.str(string(r.verdict))
	if r.evidence != "" {
		w.str(": ", r.evidence)
	}
	w.str("; ")
	boostClause(&w, d, r)
	for _, note := range r.notes {
		if note != "" {
			w.str("; ", note)
		}
	}
	if r.eff.Mode == ModeAdvise {
		w.str("; advise mode (", r.eff.Scope, "): ")
		switch {
		case d.AdvisedBoost != 0 && d.AdvisedAction == ActionDeactivate:
			w.str("would apply boost ")
			w.boost(d.AdvisedBoost)
			w.str(" and Deactivate; applying boost 0, no action")
		case d.AdvisedBoost != 0:
			w.str("would apply boost ")
			w.boost(d.AdvisedBoost)
			w.str("; applying 0")
		case d.AdvisedAction == ActionDeactivate:
			w.str("would Deactivate; no action")
		default:
			w.str("nothing applied")
		}
	}
	return w.String()
}

func boostClause(w *text, d *Decision, r reasonParts) {
	adv := d.AdvisedBoost
	w.str("boost ")
	w.boost(adv)
	switch {
	case adv < 0:
		w.str(" (yield to waiting work of the same priority)")
	case adv > 0:
		w.str(" (protected")
		if d.ProtectedUntil != nil {
			w.str("; lease ends in ")
			w.dur(*d.ProtectedUntil - d.At)
		}
		w.str(")")
	case r.verdict == Unknown || r.verdict == Warming:
		w.str(" (not enough evidence to act)")
	case r.verdict == Untrusted:
		w.str(" (no protection for unverified progress)")
	}
	switch d.HeldBy {
	case HoldDwell:
		w.str(", held: verdict is ")
		w.dur(r.dwell)
		w.str(" old, boost ")
		w.boost(r.target)
		w.str(" waits for the ")
		w.dur(r.minDwell)
		w.str(" dwell")
	case HoldRateCap:
		w.str(", held: ")
		w.int(int64(r.changes))
		w.str(" boost changes in the last hour (cap ")
		w.int(int64(r.maxRate))
		w.str("), boost ")
		w.boost(r.target)
		w.str(" waits")
	}
	if adv != 0 && r.eff.Mode == ModeEnforce {
		w.str(", priority ")
		w.int(int64(r.facts.BasePriority))
		w.str(" → ")
		w.int(int64(d.EffectivePriority))
	}
}

// text builds reasons without fmt's per-argument allocations (Decide runs
// for every job on every forecast, and the simulator runs it a lot).
type text struct{ strings.Builder }

func (w *text) str(parts ...string) {
	for _, s := range parts {
		w.WriteString(s)
	}
}

func (w *text) int(n int64) {
	var buf [24]byte
	w.Write(strconv.AppendInt(buf[:0], n, 10))
}

// fixed writes x with prec decimals (like %.2f).
func (w *text) fixed(x float64, prec int) {
	var buf [32]byte
	w.Write(strconv.AppendFloat(buf[:0], x, 'f', prec, 64))
}

// sig writes x with n significant digits (like %.4g).
func (w *text) sig(x float64, n int) {
	var buf [32]byte
	w.Write(strconv.AppendFloat(buf[:0], x, 'g', n, 64))
}

func (w *text) dur(sec float64) {
	var buf [24]byte
	w.Write(appendDur(buf[:0], sec))
}

func (w *text) pct(x float64) {
	var buf [32]byte
	w.Write(appendPct(buf[:0], x))
}

func (w *text) boost(b int32) {
	if b > 0 {
		w.WriteByte('+')
	}
	w.int(int64(b))
}

// FormatDuration renders seconds the way decision reasons do: "45s",
// "4m30s", "12m", "2h", "2h10m" (whole minutes from 10m on), "?" when not
// finite. Commands that print next to reasons use it to read alike.
func FormatDuration(sec float64) string { return fmtDur(sec) }

// maxDurSec is the longest duration printed (about 31,700 years); longer
// ones print as "?".
const maxDurSec = 1e12

// fmtDur is FormatDuration.
func fmtDur(sec float64) string {
	var buf [24]byte
	return string(appendDur(buf[:0], sec))
}

func appendDur(b []byte, sec float64) []byte {
	// Beyond maxDurSec no duration means anything, and int64 seconds
	// would overflow past ~9e18.
	if !finite(sec) || math.Abs(sec) > maxDurSec {
		return append(b, '?')
	}
	if sec < 0 {
		b = append(b, '-')
		sec = -sec
	}
	s := int64(math.Round(sec))
	if s >= 600 {
		s = (s + 30) / 60 * 60
	}
	switch {
	case s >= 3600:
		b = strconv.AppendInt(b, s/3600, 10)
		b = append(b, 'h')
		if m := (s % 3600) / 60; m > 0 {
			if m < 10 {
				b = append(b, '0')
			}
			b = strconv.AppendInt(b, m, 10)
			b = append(b, 'm')
		}
	case s >= 60:
		b = strconv.AppendInt(b, s/60, 10)
		b = append(b, 'm')
		if sec := s % 60; sec > 0 {
			if sec < 10 {
				b = append(b, '0')
			}
			b = strconv.AppendInt(b, sec, 10)
			b = append(b, 's')
		}
	default:
		b = strconv.AppendInt(b, s, 10)
		b = append(b, 's')
	}
	return b
}

// fmtPct renders a fraction as a percentage with sensible precision:
// 0.93 → "93%", 0.054 → "5.4%", 0.004 → "0.4%", 0.00012 → "0.012%".
func fmtPct(x float64) string {
	var buf [32]byte
	return string(appendPct(buf[:0], x))
}

func appendPct(b []byte, x float64) []byte {
	if !finite(x) {
		return append(b, "?%"...)
	}
	v := x * 100
	switch a := math.Abs(v); {
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

func fmtBoost(b int32) string {
	if b > 0 {
		return "+" + strconv.Itoa(int(b))
	}
	return strconv.Itoa(int(b))
}

// oneLine collapses whitespace (including newlines) so that text from the
// forecast cannot break the one-line reason.
func oneLine(s string) string {
	if !strings.ContainsAny(s, "\n\r\t") && !strings.Contains(s, "  ") {
		return strings.TrimSpace(s)
	}
	return strings.Join(strings.Fields(s), " ")
}
