package offline

import (
	"cmp"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"

	"github.com/progress-planner/planner/pkg/forecast"
	"github.com/progress-planner/planner/pkg/preempt"
	"github.com/progress-planner/planner/pkg/progress"
	"github.com/progress-planner/planner/pkg/report"
)

// Output is a history file's forecast and decision as of its cut: the
// JSON/YAML object printed by planner forecast
// (docs/forecast-json.md). Times are seconds in the history's time base
// (since run start), durations seconds, shares fractions.
type Output struct {
	Name string `json:"name"`
	// At is the forecast instant (= Forecast.Now); AtBasis how it was chosen.
	At      float64 `json:"at"`
	AtBasis string  `json:"atBasis"`
	// ReportsRead counts the file's report lines with t <= At (before
	// validation and heartbeat collapse; Forecast.Reports counts the
	// accepted, distinct ones).
	ReportsRead  int               `json:"reportsRead"`
	Objective    ObjectiveOutput   `json:"objective"`
	Forecast     forecast.Forecast `json:"forecast"`
	Decision     preempt.Decision  `json:"decision"`
	AssumedFacts AssumedFacts      `json:"assumedFacts"`
	// Rejections counts refused reports and values by reason.
	Rejections map[string]int `json:"rejections"`
}

type ObjectiveOutput struct {
	progress.Objective
	// Source: "flag" (--objective), "header" or "default" (eval_loss/loss).
	Source string `json:"source"`
}

// AssumedFacts are the preempt.Facts the decision was made with. A history
// file knows none of them for sure; they are assumed as Note says.
type AssumedFacts struct {
	preempt.Facts
	// GPUsFrom: "runInfo.gpus", or "unknown" (GPUs 0).
	GPUsFrom string `json:"gpusFrom"`
	Note     string `json:"note"`
}

const AssumedFactsNote = "assumed from the history file, not observed on a cluster: gpus from runInfo.gpus (else 0), " +
	"admittedAt = the first report's t, no namespace or ClusterQueue, base priority 0, no evictions, no previous decision"

// Forecast forecasts a history as of its cut from the reports
// with t <= cut.At only, and decides under the default policy. objFlag,
// when not nil, overrides the objective. It is pure: nothing after the cut
// can change its result.
func Forecast(c *HistoryCut, objFlag *progress.Objective) (*Output, error) {
	hd, cut, h, read := &c.Header, c.Cut, c.H, c.Read
	now := cut.At

	if h.Len() == 0 && read > 0 {
		// Say why, not the downstream symptom ("no objective").
		return nil, fmt.Errorf("%s: all %d reports up to t=%gs rejected: %s", hd.Name, read, now, RejectionSummary(h))
	}
	var obj progress.Objective
	src := ""
	if objFlag != nil {
		obj, src = *objFlag, "flag"
	} else if o, ok := hd.ObjectiveSpec(); ok {
		obj, src = o, "header"
	} else if o, ok := progress.DefaultObjective(h); ok {
		obj, src = o, "default"
	} else {
		return nil, fmt.Errorf("%s: no objective: the header names none and the reports up to t=%gs carry neither eval_loss nor loss; "+
			"pass --objective METRIC[,minimize|maximize][,target=X]", hd.Name, now)
	}

	fc := forecast.Fit(h, obj, now, forecast.DefaultSettings())

	facts := preempt.Facts{}
	gpusFrom := "unknown"
	if g, ok := hd.RunInfoFloat("gpus"); ok {
		if !(g >= 0 && g <= report.MaxGPUs) { // before the conversion to int
			return nil, fmt.Errorf("%s: header: runInfo.gpus %v: must be in [0, %d]", hd.Name, g, report.MaxGPUs)
		}
		facts.GPUs, gpusFrom = int(math.Round(g)), "runInfo.gpus"
	}
	if read > 0 {
		first := c.First
		facts.AdmittedAt = &first
	}
	d := preempt.Decide(fc, facts, preempt.Decision{}, preempt.DefaultPolicy())

	rej := map[string]int{}
	for k, v := range h.Rejections() {
		rej[string(k)] = v
	}
	return &Output{
		Name:         hd.Name,
		At:           now,
		AtBasis:      cut.Basis,
		ReportsRead:  read,
		Objective:    ObjectiveOutput{Objective: obj, Source: src},
		Forecast:     fc,
		Decision:     d,
		AssumedFacts: AssumedFacts{Facts: facts, GPUsFrom: gpusFrom, Note: AssumedFactsNote},
		Rejections:   rej,
	}, nil
}

// RejectionSummary is "progress-range 20 (e.g. progressPercentage 150),
// ...": each reason with its count, most frequent first, and the latest
// value refused for it.
func RejectionSummary(h *progress.History) string {
	counts := h.Rejections()
	example := map[progress.RejectReason]progress.Rejection{}
	for _, r := range h.RecentRejections() {
		example[r.Reason] = r
	}
	reasons := slices.Collect(maps.Keys(counts))
	slices.SortFunc(reasons, func(a, b progress.RejectReason) int { return cmp.Or(counts[b]-counts[a], cmp.Compare(a, b)) })
	var parts []string
	for _, r := range reasons {
		part := fmt.Sprintf("%s %d", r, counts[r])
		if e, ok := example[r]; ok {
			part += " (e.g. " + strings.TrimSpace(e.Field+" "+e.Detail) + ")"
		}
		parts = append(parts, part)
	}
	if len(parts) == 0 {
		return "no reason recorded"
	}
	return strings.Join(parts, ", ")
}
