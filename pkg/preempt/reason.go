package preempt

import (
	"strconv"
	"strings"

	"github.com/progress-planner/planner/internal/humanize"
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
	w.Write(humanize.AppendDuration(buf[:0], sec))
}

func (w *text) pct(x float64) {
	var buf [32]byte
	w.Write(humanize.AppendPercent(buf[:0], x))
}

func (w *text) boost(b int32) {
	if b > 0 {
		w.WriteByte('+')
	}
	w.int(int64(b))
}

// oneLine collapses whitespace (including newlines) so that text from the
// forecast cannot break the one-line reason.
func oneLine(s string) string {
	if !strings.ContainsAny(s, "\n\r\t") && !strings.Contains(s, "  ") {
		return strings.TrimSpace(s)
	}
	return strings.Join(strings.Fields(s), " ")
}
