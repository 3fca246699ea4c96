package main

import (
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/progress-planner/planner/simulator"
)

// whatIfFlags: --set applies what-if knobs to a run; --sweep runs a grid
// of them (docs/simulator.md, "Capacity planning").
type whatIfFlags struct {
	sets, sweeps []string
	seeds        int
	goal         string
	workers      int
	job          jobFlags
	jobChanges   int
}

// sweepDefaultPolicies: a sweep compares Kueue alone with the planner
// unless --policies says otherwise (oracle and LAS are references for one
// scenario, not capacity answers).
var sweepDefaultPolicies = []string{simulator.PolicyKueue, simulator.PolicyPlanner}

func (f *whatIfFlags) add(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringArrayVar(&f.sets, "set", nil, "what-if KNOB=VALUE (repeatable): gpus=N|+N|-N, gpus.QUEUE=..., borrowingLimit.QUEUE=N|none, deactivate=true, deactivate.QUEUE=true, policy.PATH=VALUE (e.g. policy.stability.minDwell=30m), arrival-rate=X")
	fl.StringArrayVar(&f.sweeps, "sweep", nil, "sweep one knob (give twice for two): KNOB=V1,V2,... or KNOB=FROM:TO:STEP (e.g. gpus=32:64:8, gpus.team-a=+0:+16:8)")
	fl.IntVar(&f.seeds, "seeds", 1, "with --sweep: run every point under this many seeds (the scenario's seed and the next ones)")
	fl.StringVar(&f.goal, "goal", "", "with --sweep: answer the smallest setting of the first knob meeting METRIC<=VALUE, e.g. 'queueing.p95<=1h' (metrics: queueing.p50|p95|mean, jct.mean|p95, plateau.gpuh, early-stops, saved.gpuh, preemptions, utilization)")
	fl.IntVar(&f.workers, "workers", 0, "with --sweep: runs at a time (default: GOMAXPROCS, every core)")
	fl.IntVar(&f.jobChanges, "job-changes", 0, "with --set: also run without the what-ifs and list up to N jobs per policy that the what-if stopped (with the policy's reason) or admitted 10m or more later (with what ended each wait, before and after); -o table or json")
	f.job.add(cmd)
}

// jobChangeMinDelay: a later first admission counts as a change from 10m.
const jobChangeMinDelay = 600

// addJobChanges runs the scenario without the what-ifs and records in
// cmp, per policy, the first f.jobChanges jobs the what-ifs stopped or
// delayed, with the reasons both runs' event logs give. Both runs record
// events for this (recordJobEvents); keepEvents false drops them
// afterwards, so that -o json carries them only when --events asked.
func (f *whatIfFlags) addJobChanges(baseIn *simulator.Input, baseOpt simulator.Options, pols []string, cmp *simulator.Comparison, keepEvents bool) error {
	if f.jobChanges <= 0 {
		return nil
	}
	if len(f.sets) == 0 {
		return usageErrorf("--job-changes needs --set")
	}
	base, err := simulator.Compare(baseIn, pols, 0, baseOpt)
	if err != nil {
		return fmt.Errorf("the run without the what-ifs: %w", err)
	}
	for i, r := range cmp.Results {
		cs, err := simulator.JobChanges(base.Results[i], r, jobChangeMinDelay)
		if err != nil {
			return err
		}
		cmp.JobChanges = append(cmp.JobChanges, simulator.KeepJobChanges(r.Summary.Policy, cs, f.jobChanges))
		if !keepEvents {
			r.Records = nil
		}
	}
	return nil
}

// recordJobEvents: --job-changes explains delays from the runs' events.
func (f *whatIfFlags) recordJobEvents(opt *simulator.Options) {
	if f.jobChanges > 0 {
		opt.RecordEvents = true
	}
}

func (f *whatIfFlags) sweeping() bool { return len(f.sweeps) > 0 }

func (f *whatIfFlags) settings() ([]simulator.Setting, error) {
	var out []simulator.Setting
	for _, s := range f.sets {
		st, err := simulator.ParseSetting(s)
		if err != nil {
			return nil, usageErrorf("--set: %v", err)
		}
		out = append(out, st)
	}
	return out, nil
}

// apply applies the --set what-ifs to a single run.
func (f *whatIfFlags) apply(in *simulator.Input, opt simulator.Options) (*simulator.Input, simulator.Options, error) {
	if f.job.asJob {
		return nil, opt, usageErrorf("--as-job needs --sweep")
	}
	if len(f.sets) == 0 {
		return in, opt, nil
	}
	st, err := f.settings()
	if err != nil {
		return nil, opt, err
	}
	return simulator.ApplyWhatIf(in, opt, st)
}

// spec builds the sweep from the flags; seed is the scenario's.
func (f *whatIfFlags) spec(pols []string, seed uint64) (simulator.SweepSpec, error) {
	sp := simulator.SweepSpec{Policies: pols}
	var err error
	if sp.Fixed, err = f.settings(); err != nil {
		return sp, err
	}
	for _, s := range f.sweeps {
		a, err := simulator.ParseAxis(s)
		if err != nil {
			return sp, usageErrorf("--sweep: %v", err)
		}
		sp.Axes = append(sp.Axes, a)
	}
	if f.seeds < 1 || f.seeds > 1000 {
		return sp, usageErrorf("--seeds %d: must be in [1, 1000]", f.seeds)
	}
	for i := range f.seeds {
		sp.Seeds = append(sp.Seeds, seed+uint64(i))
	}
	if err := sp.Validate(); err != nil {
		return sp, usageErrorf("--sweep: %v", err)
	}
	return sp, nil
}

func runSweep(cmd *cobra.Command, sc *simulator.Scenario, opt simulator.Options, pols []string, f whatIfFlags, output, outFile string) error {
	sp, err := f.spec(pols, sc.Seed)
	if err != nil {
		return err
	}
	if f.job.asJob {
		return writeSweepJob(cmd, sc, opt, sp, f.job, outFile)
	}
	var goal *simulator.Goal
	if f.goal != "" {
		g, err := simulator.ParseGoal(f.goal)
		if err != nil {
			return usageErrorf("--goal: %v", err)
		}
		goal = &g
	}
	sc.KeepFiles()
	var progress func(done, total int)
	if p, _ := cmd.Flags().GetString("progress"); p == "on" || (p == "auto" && isTerminal(os.Stderr)) {
		progress = func(done, total int) { fmt.Fprintf(os.Stderr, "\r\033[Ksweep: %d/%d runs", done, total) }
	}
	sw, err := simulator.RunSweep(sc.ResolveSeed, opt, sp, f.workers, progress)
	if progress != nil {
		fmt.Fprint(os.Stderr, "\r\033[K")
	}
	if err != nil {
		return err
	}
	return writeSweep(cmd, sw, goal, output, outFile)
}

func writeSweep(cmd *cobra.Command, sw *simulator.Sweep, goal *simulator.Goal, output, outFile string) error {
	if goal != nil {
		sw.AnswerGoal(*goal)
	}
	return writeOutput(cmd, outFile, func(w io.Writer) error {
		switch output {
		case "json":
			return sw.WriteJSON(w)
		case "html":
			return sw.WriteHTML(w)
		}
		return sw.WriteTable(w)
	})
}
