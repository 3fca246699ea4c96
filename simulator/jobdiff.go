package simulator

import (
	"fmt"
	"io"
	"math"
	"sort"
	"text/tabwriter"
)

// JobChange is one job whose fate a what-if changed under one policy:
// stopped where the baseline let it run (with the policy's reason, the
// words planner explain prints), or admitted later (or never).
type JobChange struct {
	Job    string `json:"job"`
	Queue  string `json:"queue"`
	Change string `json:"change"` // "stopped", "delayed", "never admitted"
	// Waits (arrival to first admission), hours; NaN: never admitted.
	BaseWait   Float  `json:"baseWaitHours"`
	WhatIfWait Float  `json:"whatIfWaitHours"`
	Reason     string `json:"reason,omitempty"`
}

// JobChanges lists the jobs of base and whatIf (runs of one policy on the
// same jobs, before and after a what-if) that the what-if stopped, or
// admitted at least minDelay seconds later or never: stops first, then by
// the added wait, longest first.
func JobChanges(base, whatIf *Result, minDelay float64) ([]JobChange, error) {
	if len(base.Jobs) != len(whatIf.Jobs) {
		return nil, fmt.Errorf("job changes: %d jobs before the what-if, %d after", len(base.Jobs), len(whatIf.Jobs))
	}
	var out []JobChange
	added := map[int]float64{}
	for i, b := range base.Jobs {
		w := whatIf.Jobs[i]
		c := JobChange{Job: w.Name, Queue: w.Queue, BaseWait: Float((b.FirstAdmit - b.Arrival) / 3600), WhatIfWait: Float((w.FirstAdmit - w.Arrival) / 3600)}
		delay := (w.FirstAdmit - w.Arrival) - (b.FirstAdmit - b.Arrival)
		switch {
		case w.Outcome == endDeactivated.String() && b.Outcome != w.Outcome:
			c.Change, c.Reason = "stopped", w.Reason
		case math.IsNaN(w.FirstAdmit) && !math.IsNaN(b.FirstAdmit):
			c.Change, delay = "never admitted", math.Inf(1)
		case delay >= minDelay:
			c.Change = "delayed"
		default:
			continue
		}
		added[len(out)] = delay
		out = append(out, c)
	}
	idx := make([]int, len(out))
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(a, b int) bool {
		sa, sb := out[idx[a]].Change == "stopped", out[idx[b]].Change == "stopped"
		if sa != sb {
			return sa
		}
		return added[idx[a]] > added[idx[b]]
	})
	sorted := make([]JobChange, len(out))
	for i, k := range idx {
		sorted[i] = out[k]
	}
	return sorted, nil
}

// WriteJobChanges writes at most max changes as a table, and how many
// were left out.
func WriteJobChanges(w io.Writer, policy string, cs []JobChange, max int) error {
	fmt.Fprintf(w, "\nJobs the what-if changed (%s): %d\n", policy, len(cs))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  job\tqueue\tchange\twait before\twait after\treason")
	for i, c := range cs {
		if i == max {
			fmt.Fprintf(tw, "  … %d more\t\t\t\t\t\n", len(cs)-max)
			break
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\t%s\n", c.Job, c.Queue, c.Change, waitText(c.BaseWait), waitText(c.WhatIfWait), c.Reason)
	}
	return tw.Flush()
}

func waitText(h Float) string {
	if math.IsNaN(float64(h)) {
		return "never admitted"
	}
	return hours(float64(h))
}
