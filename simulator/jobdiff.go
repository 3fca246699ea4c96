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
// the added wait, longest first. A delay's reason says, when both runs
// recorded their events (Options.RecordEvents), what freed the GPUs the
// job was admitted into and how many other admissions its ClusterQueue
// made while it waited, after and before the what-if (delayReason).
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
			c.Reason = delayReason(whatIf, base, w, b)
		case delay >= minDelay:
			c.Change = "delayed"
			c.Reason = delayReason(whatIf, base, w, b)
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

// delayReason explains a job's wait in the what-if run and in the base
// run, in planner explain's words, from their event logs ("" without
// them): "admitted when a running job finished, 12 other admissions in q-a
// while it waited; before: admitted when GPUs already free, 0 other …".
func delayReason(whatIf, base *Result, w, b JobOutcome) string {
	if len(whatIf.Records) == 0 || len(base.Records) == 0 {
		return ""
	}
	return waitCause(whatIf.Records, w) + "; before: " + waitCause(base.Records, b)
}

// waitCause is what ended o's first wait (AdmissionCause) and how many
// other admissions its ClusterQueue made meanwhile (a job readmitted after
// a preemption counts again).
func waitCause(recs []Record, o JobOutcome) string {
	end := o.FirstAdmit
	what := "not admitted by the run's end"
	if !math.IsNaN(end) {
		what = "admitted when " + AdmissionCause(recs, o.Name, o.Queue, o.Arrival, end)
	} else {
		end = math.Inf(1)
	}
	ahead := 0
	for _, r := range recs {
		if r.T >= end {
			break
		}
		if r.Type == "admit" && r.Queue == o.Queue && r.Job != o.Name && r.T >= o.Arrival {
			ahead++
		}
	}
	adm := "admissions"
	if ahead == 1 {
		adm = "admission"
	}
	return fmt.Sprintf("%s, %d other %s in %s while it waited", what, ahead, adm, o.Queue)
}

// PolicyJobChanges is one policy's job changes: the first of them (at
// most the number asked for) and how many there are.
type PolicyJobChanges struct {
	Policy string      `json:"policy"`
	Total  int         `json:"total"`
	Jobs   []JobChange `json:"jobs"`
}

// KeepJobChanges is cs for policy, cut to its first max.
func KeepJobChanges(policy string, cs []JobChange, max int) PolicyJobChanges {
	return PolicyJobChanges{Policy: policy, Total: len(cs), Jobs: cs[:min(len(cs), max)]}
}

// WriteJobChanges writes p's changes as a table, and how many were left
// out.
func WriteJobChanges(w io.Writer, p PolicyJobChanges) error {
	fmt.Fprintf(w, "\nJobs the what-if changed (%s): %d\n", p.Policy, p.Total)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  job\tqueue\tchange\twait before\twait after\treason")
	for _, c := range p.Jobs {
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\t%s\n", c.Job, c.Queue, c.Change, waitText(c.BaseWait), waitText(c.WhatIfWait), c.Reason)
	}
	if more := p.Total - len(p.Jobs); more > 0 {
		fmt.Fprintf(tw, "  … %d more\t\t\t\t\t\n", more)
	}
	return tw.Flush()
}

func waitText(h Float) string {
	if math.IsNaN(float64(h)) {
		return "never admitted"
	}
	return hours(float64(h))
}
