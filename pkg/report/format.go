package report

import (
	"fmt"

	"github.com/progress-planner/planner/internal/humanize"
)

func fmtRangeDur(r *Range) string {
	if r == nil {
		return "—"
	}
	return fmt.Sprintf("%s [%s–%s]", humanize.Duration(r.Value), humanize.Duration(r.Lo), humanize.Duration(r.Hi))
}

func fmtRangeNum(r *Range) string {
	if r == nil {
		return "—"
	}
	return fmt.Sprintf("%s [%s–%s]", humanize.Number(r.Value), humanize.Number(r.Lo), humanize.Number(r.Hi))
}

func fmtOptNum(x *float64) string {
	if x == nil {
		return "—"
	}
	return humanize.Number(*x)
}

func fmtOptPct(x *float64) string {
	if x == nil {
		return "—"
	}
	return humanize.Percent(*x)
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
		return humanize.Duration(*p)
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
