// Command oraclegap decomposes the planner's GPU-hours after plateau
// beyond the oracle's, job by job, on a trace (a diagnostic; see
// docs/simulator.md). It runs the planner and the oracle with
// simulator.Options.Observe and attributes each job's excess to a cause.
//
//	go run ./hack/oraclegap --trace ../shared/data/traces/pollux/philly.csv \
//	    --trace-format philly --curves ../shared/data/curves [--top 30]
package main

import (
	"flag"
	"fmt"
	"math"
	"os"
	"sort"
	"strings"

	"github.com/progress-planner/planner/pkg/preempt"
	"github.com/progress-planner/planner/simulator"
)

type obs struct {
	now, work           float64
	verdict             preempt.Verdict
	conf, prob, rel     float64
	stalledSince        float64 // NaN when not stalled
	deactivate, running bool
	reason              string
}

func main() {
	trace := flag.String("trace", "", "trace file")
	format := flag.String("trace-format", "philly", "philly or alibaba")
	curves := flag.String("curves", "", "curves directory")
	limit := flag.Int("limit", 0, "first N jobs only")
	top := flag.Int("top", 30, "jobs to list")
	csvOut := flag.String("csv", "", "write one line per job to this file")
	solo := flag.Int("solo", -1, "run only this job (by id) alone on the cluster and print every planner decision")
	oracleMin := flag.Float64("oracle-min-improvement", 0, "bound the oracle by the meaningful-improvement rule (as planner simulate's flag)")
	flag.Parse()
	sc := &simulator.Scenario{Name: "trace", Trace: &simulator.TraceSource{Path: *trace, Format: *format, Limit: *limit}}
	if *curves != "" {
		sc.Curves = &simulator.CurveSource{Dir: *curves}
	}
	opt, err := sc.Options(simulator.DefaultOptions())
	must(err)
	opt.Deactivate = true
	opt.OracleMinImprovement = *oracleMin
	in, err := sc.Resolve()
	must(err)
	if *solo >= 0 {
		runSolo(in, *solo, opt)
		return
	}
	traj := map[string][][]obs{}
	for _, p := range []string{simulator.PolicyPlanner, simulator.PolicyOracle} {
		traj[p] = make([][]obs, len(in.Jobs))
	}
	opt.Observe = func(o simulator.Observation) {
		r := obs{now: o.Now, work: o.Work, verdict: o.Decision.Verdict, conf: o.Forecast.Confidence, prob: o.Forecast.PlateauProbability,
			rel: math.NaN(), stalledSince: math.NaN(), deactivate: o.Decision.Action == preempt.ActionDeactivate, running: o.Running}
		if o.Forecast.RelativeRemaining != nil {
			r.rel = *o.Forecast.RelativeRemaining
		}
		if o.Decision.StalledSince != nil {
			r.stalledSince = *o.Decision.StalledSince
		}
		if o.Policy == simulator.PolicyPlanner {
			r.reason = o.Decision.Reason
		}
		traj[o.Policy][o.Job.ID] = append(traj[o.Policy][o.Job.ID], r)
	}
	res := map[string]*simulator.Result{}
	for _, p := range []string{simulator.PolicyPlanner, simulator.PolicyOracle} {
		r, err := simulator.Run(in, p, opt)
		must(err)
		res[p] = r
		fmt.Printf("%s: plateau %.0f GPU-h, early stops %d (%.0f GPU-h), wall %.1fs\n", p, r.Summary.PlateauGPUHours,
			r.Summary.EarlyStops, r.Summary.EarlyStopGPUHours, r.Summary.WallSeconds)
	}
	rows := analyse(in, res, traj, *top, opt)
	if *csvOut != "" {
		f, err := os.Create(*csvOut)
		must(err)
		defer f.Close()
		fmt.Fprintln(f, "id,curve,gpus,dur,onset,obsOnset,stop,stall,firstAfter,plannerPP,oraclePP,excess,cat")
		for _, r := range rows {
			fmt.Fprintf(f, "%d,%s,%d,%.0f,%.0f,%.0f,%.0f,%.0f,%.0f,%.2f,%.2f,%.2f,%q\n", r.id, in.Jobs[r.id].CurveName, r.gpus, r.dur, r.onset, r.obsOnset,
				r.stopWork, r.stallStart, r.firstAfter, r.ppGPUh, r.poGPU, r.excess, r.cat)
		}
	}
}

type row struct {
	id            int
	excess        float64 // GPU-h, planner - oracle
	cat           string
	gpus          int
	dur, onset    float64 // seconds of work
	stopWork      float64 // NaN: not stopped
	firstAfter    float64 // work of the first decision at/after the onset
	stallStart    float64 // work at which the final stalled streak began
	ppGPUh, poGPU float64
	obsOnset      float64 // the onset on the values the job's reports show (work seconds)
	detail        string
}

func analyse(in *simulator.Input, res map[string]*simulator.Result, traj map[string][][]obs, top int, opt simulator.Options) []row {
	pl, or := res[simulator.PolicyPlanner].Jobs, res[simulator.PolicyOracle].Jobs
	var rows []row
	cats := map[string]float64{}
	catN := map[string]int{}
	// Lag components (GPU-h) for jobs stopped after the onset.
	comp := map[string]float64{}
	for i, j := range in.Jobs {
		r := row{id: i, gpus: j.GPUs, dur: j.Duration, onset: j.PlateauWork(), stopWork: math.NaN(), firstAfter: math.NaN(), stallStart: math.NaN()}
		r.ppGPUh, r.poGPU = pl[i].PostPlateau/3600, or[i].PostPlateau/3600
		r.obsOnset = observableOnset(j, opt) * j.Duration
		r.excess = r.ppGPUh - r.poGPU
		g := float64(j.GPUs) / 3600
		ts := traj[simulator.PolicyPlanner][i]
		for _, o := range ts {
			if o.work >= r.onset-1e-6 && math.IsNaN(r.firstAfter) {
				r.firstAfter = o.work
			}
		}
		if pl[i].Outcome == "deactivated" {
			r.stopWork = pl[i].Progress * j.Duration
		}
		noPlateau := j.PlateauWork() >= j.Duration
		switch {
		case noPlateau:
			r.cat = "no plateau in truth"
		case pl[i].Outcome == "deactivated" && r.stopWork < r.onset:
			r.cat = "planner stopped before onset (early)"
		case pl[i].Outcome == "deactivated":
			r.cat = "planner stopped after onset"
			// Final stalled streak start (work at StalledSince).
			last := ts[len(ts)-1]
			ss := last.stalledSince
			for _, o := range ts {
				if o.now >= ss-1e-6 {
					r.stallStart = o.work
					break
				}
			}
			lag := r.stopWork - r.onset
			a := math.Max(0, math.Min(lag, r.firstAfter-r.onset)) // waiting for the first forecast after the onset
			b := math.Max(0, math.Min(lag-a, r.stallStart-math.Max(r.firstAfter, r.onset)))
			c := math.Max(0, lag-a-b) // from the streak start to the stop
			comp["a. onset → first forecast after it (cadence)"] += a * g
			comp["b. first forecast after onset → stalled verdict (detection)"] += b * g
			grace := 7200.0
			comp["c1. stalled → stop: grace period (2h)"] += math.Min(c, grace) * g
			comp["c2. stalled → stop: beyond grace (cadence/conf/dwell)"] += math.Max(0, c-grace) * g
			if r.stallStart < r.onset {
				comp["(stall streak began before the onset)"] += 0
			}
			// Why detection lagged: verdicts between the first forecast after the onset and the streak;
			// each interval between two decisions is charged to the verdict that held over it.
			vs := map[preempt.Verdict]int{}
			for k, o := range ts {
				if o.work >= r.onset && o.work < r.stallStart {
					vs[o.verdict]++
					if k+1 < len(ts) {
						why := string(o.verdict)
						if o.verdict == preempt.Progressing && o.prob >= 0.8 {
							why += " (probability ok, curve remaining > 2%)"
						} else if o.verdict == preempt.Progressing {
							why += " (plateau probability < 0.8)"
						}
						comp["b. detection, by the verdict that held: "+why] += (math.Min(ts[k+1].work, r.stallStart) - o.work) * g
					}
				}
			}
			r.detail = fmt.Sprintf("verdicts onset→stall %v", vs)
		default:
			r.cat = "planner never stopped (plateaued in truth)"
			vs := map[preempt.Verdict]int{}
			var lastAfter *obs
			for k := range ts {
				if ts[k].work >= r.onset {
					vs[ts[k].verdict]++
					lastAfter = &ts[k]
				}
			}
			sub := "no forecast after onset"
			if lastAfter != nil {
				sub = classifyNever(ts, r.onset)
				r.detail = fmt.Sprintf("verdicts after onset %v; last: %s", vs, trunc(lastAfter.reason, 220))
			}
			r.cat += ": " + sub
		}
		cats[r.cat] += r.excess
		catN[r.cat]++
		rows = append(rows, r)
	}
	fmt.Printf("\nexcess planner - oracle GPU-h after plateau by category (total %.0f)\n", sumExcess(rows))
	keys := make([]string, 0, len(cats))
	for k := range cats {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(a, b int) bool { return cats[keys[a]] > cats[keys[b]] })
	for _, k := range keys {
		fmt.Printf("  %10.0f  %6d jobs  %s\n", cats[k], catN[k], k)
	}
	fmt.Printf("\nplanner post-plateau GPU-h of jobs stopped after the onset, by lag component\n")
	ck := make([]string, 0, len(comp))
	for k := range comp {
		ck = append(ck, k)
	}
	sort.Strings(ck)
	for _, k := range ck {
		fmt.Printf("  %10.0f  %s\n", comp[k], k)
	}
	sort.Slice(rows, func(a, b int) bool { return rows[a].excess > rows[b].excess })
	fmt.Printf("\ntop %d jobs by excess\n", top)
	defer sort.Slice(rows, func(a, b int) bool { return rows[a].id < rows[b].id })
	for _, r := range rows[:min(top, len(rows))] {
		j := in.Jobs[r.id]
		fmt.Printf("%6d %-28s gpus %3d dur %7.1fh onset %.2f stop %.2f stall %.2f first>=onset %.2f excess %7.0f (pl %7.0f or %6.0f) %s\n  %s\n",
			r.id, trunc(j.CurveName, 28), r.gpus, r.dur/3600, r.onset/r.dur, r.stopWork/r.dur, r.stallStart/r.dur, r.firstAfter/r.dur,
			r.excess, r.ppGPUh, r.poGPU, r.cat, r.detail)
	}
	return rows
}

// observableOnset is the plateau onset (run fraction) by the truth's
// definition, computed on the values the job's reports carry (the latest
// evaluation at each report instant, without queueing): what a forecaster
// can see. 1 when it never plateaus.
func observableOnset(j *simulator.Job, opt simulator.Options) float64 {
	c := j.Curve
	if c == nil {
		return 1
	}
	every := math.Min(opt.ReportMax, math.Max(opt.ReportMin, j.Duration/float64(opt.ReportsPerRun)))
	sign := c.Objective.Sign()
	var xs, best []float64
	b := math.Inf(1)
	for t := every; t <= j.Duration+1e-9; t += every {
		x := t / j.Duration
		v, ok := c.At(x)
		if !ok || math.IsNaN(v) {
			continue
		}
		b = math.Min(b, sign*v)
		xs, best = append(xs, x), append(best, b)
	}
	if len(best) == 0 {
		return 1
	}
	first, final := best[0], best[len(best)-1]
	for i, v := range best {
		if g := first - v; g > 0 && v-final <= simulator.PlateauEpsilon*g {
			if i == len(best)-1 {
				return 1
			}
			return xs[i]
		}
	}
	return 1
}

// classifyNever names why a job plateaued in truth was never stopped, from
// the decisions after its onset.
func classifyNever(ts []obs, onset float64) string {
	var after []obs
	for _, o := range ts {
		if o.work >= onset {
			after = append(after, o)
		}
	}
	stalled, lowConf := 0, 0
	for _, o := range after {
		if o.verdict.Stalled() {
			stalled++
			if o.conf < 0.7 {
				lowConf++
			}
		}
	}
	last := after[len(after)-1]
	switch {
	case stalled > 0 && lowConf == stalled:
		return "stalled but confidence < stop floor"
	case stalled > 0 && strings.Contains(last.reason, "no yield at"):
		return "stalled, near-done exemption"
	case stalled > 0:
		return fmt.Sprintf("stalled %d×, ended before grace/stop (last %s)", stalled, last.verdict)
	default:
		return "never stalled after onset (last " + string(last.verdict) + ")"
	}
}

func sumExcess(rows []row) float64 {
	s := 0.0
	for _, r := range rows {
		s += r.excess
	}
	return s
}

func trunc(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}

func must(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

// runSolo runs job id alone and prints the planner's decisions.
func runSolo(in *simulator.Input, id int, opt simulator.Options) {
	j := *in.Jobs[id]
	j.ID, j.Arrival = 0, 0
	one := &simulator.Input{Name: "solo", Queues: in.Queues, Jobs: []*simulator.Job{&j}}
	fmt.Printf("job %d %s: %d GPUs, %.1fh, onset %.3f\n", id, j.CurveName, j.GPUs, j.Duration/3600, j.PlateauWork()/j.Duration)
	opt.Observe = func(o simulator.Observation) {
		if o.Policy != simulator.PolicyPlanner {
			return
		}
		f := o.Forecast
		rel := math.NaN()
		if f.RelativeRemaining != nil {
			rel = *f.RelativeRemaining
		}
		fmt.Printf("  x %.3f  %-11s p %.2f rel %.4f conf %.2f pts %d  %s\n", o.Work/j.Duration, o.Decision.Verdict, f.PlateauProbability, rel, f.Confidence, f.ObjectivePts, trunc(o.Decision.Reason, 160))
	}
	r, err := simulator.Run(one, simulator.PolicyPlanner, opt)
	must(err)
	fmt.Printf("outcome %s at progress %.3f\n", r.Jobs[0].Outcome, r.Jobs[0].Progress)
}
