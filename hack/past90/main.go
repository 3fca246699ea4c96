// Command past90 attributes each preemption of a job past 90 % of its work,
// in a planner run, to the verdict the job held when it was preempted (a
// diagnostic; see docs/simulator.md). It runs the planner policy with
// simulator.Options.Observe and RecordEvents; without --deactivate it is the
// boosts-only run, whose preemptions past 90 % the policy allows for a
// broken job that no stop will end (docs/policy.md, "no yield at ...").
//
//	go run ./hack/past90 --trace ../shared/data/traces/pollux/philly.csv \
//	    --trace-format philly --curves ../shared/data/curves
package main

import (
	"flag"
	"fmt"
	"os"
	"sort"
	"strings"

	"github.com/progress-planner/planner/simulator"
)

// seen is one planner decision on a running job.
type seen struct {
	now, work float64
	verdict   string
	nonFinite bool
}

func main() {
	trace := flag.String("trace", "", "trace file")
	format := flag.String("trace-format", "philly", "philly or alibaba")
	curves := flag.String("curves", "", "curves directory")
	deactivate := flag.Bool("deactivate", false, "the Deactivate what-if (default: boosts only)")
	flag.Parse()
	sc := &simulator.Scenario{Name: "trace", Trace: &simulator.TraceSource{Path: *trace, Format: *format}}
	if *curves != "" {
		sc.Curves = &simulator.CurveSource{Dir: *curves}
	}
	opt, err := sc.Options(simulator.DefaultOptions())
	must(err)
	opt.Deactivate, opt.RecordEvents = *deactivate, true
	in, err := sc.Resolve()
	must(err)
	byName := map[string]*simulator.Job{}
	for i := range in.Jobs {
		byName[in.Jobs[i].Name] = in.Jobs[i]
	}
	decisions := make([][]seen, len(in.Jobs))
	opt.Observe = func(o simulator.Observation) {
		if o.Running {
			decisions[o.Job.ID] = append(decisions[o.Job.ID], seen{o.Now, o.Work, string(o.Decision.Verdict), o.Forecast.NonFinite})
		}
	}
	r, err := simulator.Run(in, simulator.PolicyPlanner, opt)
	must(err)
	fmt.Printf("planner (deactivate %v): %d preemptions, %d of jobs past 90 %% of their work\n", *deactivate,
		r.Summary.Preemptions, r.Summary.PreemptionsPast90)
	count := map[string]int{}
	for _, ev := range r.Records {
		if ev.Type != "preempt" {
			continue
		}
		j := byName[ev.Job]
		d := lastBefore(decisions[j.ID], ev.T)
		if d == nil || (d.work+ev.T-d.now)/j.Duration < 0.9 {
			continue
		}
		why := d.verdict
		if d.nonFinite {
			why += " (NaN/Inf)"
		}
		if ev.Priority >= 0 {
			why += ", not yielding"
		}
		count[why+"\t"+j.CurveName]++
	}
	keys := make([]string, 0, len(count))
	for k := range count {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(a, b int) bool {
		return count[keys[a]] > count[keys[b]] || count[keys[a]] == count[keys[b]] && keys[a] < keys[b]
	})
	total := 0
	for _, k := range keys {
		total += count[k]
		fmt.Printf("%5d  %s\n", count[k], strings.Replace(k, "\t", "  ", 1))
	}
	fmt.Printf("%5d  attributed\n", total)
}

// lastBefore is the latest decision on the running job at or before t.
func lastBefore(ds []seen, t float64) *seen {
	k := sort.Search(len(ds), func(i int) bool { return ds[i].now > t })
	if k == 0 {
		return nil
	}
	return &ds[k-1]
}

func must(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
