package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"

	"github.com/progress-planner/planner/pkg/plannerconfig"
	"github.com/progress-planner/planner/simulator"
)

// simulateOptions are planner simulate's flags, completed into a scenario
// and simulator options and run in the kubectl pattern: scenario
// (Complete), options (Validate), run.
type simulateOptions struct {
	traceFile, traceFormat, curvesDir, scenarioFile string
	policies, outFile                               string
	output                                          *outputFlag
	seed                                            uint64
	deactivate                                      bool
	minImprovement, oracleMinImprovement            float64
	limit, clusterGPUs                              int
	singleQueue                                     bool
	priorities, checkpoint                          string
	cadenceFirst, cadenceMin, cadenceMax            string
	cadenceGrowth                                   float64
	reportsPerRun                                   int
	eventsFile, exportScenario                      string
	progress                                        string
	printDefault, targets                           bool
	capacity                                        capacityBacktestFlags
	admission                                       admissionBacktestFlags
	whatIf                                          whatIfFlags
	cluster                                         clusterFlags
}

func newSimulateCmd() *cobra.Command {
	o := &simulateOptions{}
	cmd := &cobra.Command{
		Use:   "simulate",
		Short: "Simulate a shared GPU cluster under Kueue and compare kueue, planner, oracle and LAS",
		Long: `Simulate replays jobs through a discrete-event model of a GPU cluster under
Kueue semantics (ClusterQueues, cohort borrowing, priority order, preemption
withinClusterQueue: LowerPriority, checkpoint loss on eviction) and compares
policies on identical arrivals and learning curves:

  kueue    Kueue alone, no boosts
  planner  forecast.Fit + preempt.Decide on each job's own history (the
           controller's code), boosts applied as kueue.x-k8s.io/priority-boost
  oracle   preempt.Decide on a forecast built from the ground truth
  las      least attained GPU service (Tiresias-style), as a peer reference

With no arguments it runs the built-in scenario (Philly-like job sizes and
run times, parametric curves; see docs/simulator.md) in seconds. --deactivate
is the what-if in which every queue opts in to the policy's Deactivate.`,
		Example: `  planner simulate
  planner simulate --deactivate -o html --out report.html
  planner simulate --trace ../shared/data/traces/pollux/philly.csv --trace-format philly \
      --curves ../shared/data/curves --deactivate
  planner simulate --scenario small.yaml --policies kueue --events events.json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return o.run(cmd) },
	}
	o.addFlags(cmd)
	cmd.AddCommand(newSimulateUnitCmd(), newSimulateCollectCmd())
	return cmd
}

func (o *simulateOptions) addFlags(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVar(&o.traceFile, "trace", "", "cluster trace to replay (CSV)")
	f.StringVar(&o.traceFormat, "trace-format", simulator.FormatPhilly, "trace format: philly (timestamp,duration,num_gpus,gpu_time,cluster) or alibaba (openb_pod_list)")
	f.StringVar(&o.curvesDir, "curves", "", "directory of progress-history files: jobs get recorded curves matched by duration class and time-scaled (default: built-in parametric families)")
	f.StringVar(&o.scenarioFile, "scenario", "", "YAML scenario file (default: the built-in scenario; see --print-default)")
	f.StringVar(&o.policies, "policies", strings.Join(simulator.AllPolicies, ","), "policies to compare")
	f.Uint64Var(&o.seed, "seed", 1, "seed of every random draw (default: the scenario's)")
	f.BoolVar(&o.deactivate, "deactivate", false, "what-if: every queue opts in to the policy's Deactivate action")
	f.Float64Var(&o.minImprovement, "min-improvement", 0.01, "what-if: the meaningful improvement (share of the metric's own value) below which a job may be called Plateaued (docs/policy.md; the controller's forecast.minImprovement)")
	f.Float64Var(&o.oracleMinImprovement, "oracle-min-improvement", 0, "bound the oracle by the trust rule: it stops a job only once less than this share of the metric's own value is still to gain (e.g. 0.02), so its saving is the most a stop policy obeying that rule can reach (docs/simulator.md); 0: the true plateau onset")
	o.output = addOutputFlag(cmd, formatTable, formatJSON, formatHTML)
	f.StringVar(&o.outFile, "out", "", "write the output to this file instead of standard output")
	f.IntVar(&o.limit, "limit", 0, "replay only the first N usable rows of the trace file and stop reading there (sorted by submission as usual); these are the N earliest submissions only in a file sorted by submission time: the Alibaba pod list is, the Pollux philly.csv is not")
	f.IntVar(&o.clusterGPUs, "cluster-gpus", 0, "trace: cluster capacity (default: the trace's mean demand / 0.85)")
	f.BoolVar(&o.singleQueue, "single-queue", false, "trace: one ClusterQueue instead of one per trace group (Philly virtual cluster, Alibaba QoS)")
	f.StringVar(&o.priorities, "priorities", "", "priority mix VALUE:SHARE,... (e.g. 0:0.8,1000:0.2; default: the scenario's, all 0 for traces)")
	f.StringVar(&o.checkpoint, "checkpoint", "30m", "running time between checkpoints (an evicted job loses the work since its last)")
	f.StringVar(&o.cadenceFirst, "cadence-first", "1h", "first forecast of a job this long after admission")
	f.StringVar(&o.cadenceMin, "cadence-min", "1h", "at most one forecast per job per this much simulated time")
	f.StringVar(&o.cadenceMax, "cadence-max", "12h", "at least one forecast per running job per this much")
	f.Float64Var(&o.cadenceGrowth, "cadence-growth", 0.5, "forecast interval = growth × the job's running time, within [min, max]")
	f.IntVar(&o.reportsPerRun, "reports-per-run", 100, "a job reports about this many times over its planned run (every duration/N, between 1m and 1h)")
	f.StringVar(&o.eventsFile, "events", "", "write the scenario's jobs and each policy's ordered admissions, preemptions and completions (JSON)")
	f.StringVar(&o.exportScenario, "export-scenario", "", "write the resolved jobs as a scenario YAML with an explicit job list (--from-cluster: the snapshot as read, before any seed's draws)")
	f.StringVar(&o.progress, "progress", "auto", "progress bar on standard error: auto (only on a terminal), on or off")
	f.BoolVar(&o.printDefault, "print-default", false, "print the built-in scenario (YAML) and exit")
	f.BoolVar(&o.targets, "targets", false, "also evaluate the Philly experiment's targets (plateau GPU-hours, JCT, past-90% preemptions, distance to the oracle; docs/simulator.md), each met or MISSED")
	o.capacity.add(cmd)
	o.admission.add(cmd)
	o.whatIf.add(cmd)
	o.cluster.add(cmd)
}

// run is planner simulate: the scenario from the flags, the simulator's
// options, then a sweep, the capacity backtest or one comparison.
func (o *simulateOptions) run(cmd *cobra.Command) error {
	tuneGCForBatch()
	if o.printDefault {
		_, err := cmd.OutOrStdout().Write(simulator.DefaultScenarioYAML())
		return err
	}
	pols, err := simulator.ParsePolicies(o.policies)
	if err != nil {
		return usageErrorf("--policies: %v", err)
	}
	sc, err := o.scenario(cmd)
	if err != nil {
		return err
	}
	opt, err := o.options(cmd, sc)
	if err != nil {
		return err
	}
	if o.whatIf.sweeping() {
		if !cmd.Flags().Changed("policies") {
			pols = sweepDefaultPolicies
		}
		return runSweep(cmd, sc, opt, pols, o.whatIf, o.output.String(), o.outFile)
	}
	in, err := sc.Resolve()
	if err != nil {
		return err
	}
	o.whatIf.recordJobEvents(&opt)
	baseIn, baseOpt := in, opt // the run without the what-ifs, for --job-changes
	if in, opt, err = o.whatIf.apply(in, opt); err != nil {
		return err
	}
	if o.whatIf.jobChanges > 0 && o.output.String() == "html" {
		return usageErrorf("--job-changes prints with -o table or json")
	}
	if o.capacity.enabled {
		return runCapacityBacktest(cmd, in, opt, o.capacity)
	}
	if o.admission.enabled {
		return runAdmissionBacktest(cmd, in, opt, o.admission)
	}
	if o.exportScenario != "" {
		write := writeExport
		if o.cluster.from {
			write = writeSnapshot
		}
		if err := write(o.exportScenario, sc, in); err != nil {
			return err
		}
	}
	return o.compare(cmd, sc, in, opt, pols, baseIn, baseOpt)
}

// scenario chooses the scenario (--from-cluster, --scenario, --trace or
// the built-in one) and applies the trace flags to it.
func (o *simulateOptions) scenario(cmd *cobra.Command) (*simulator.Scenario, error) {
	var err error
	flags := cmd.Flags()
	var sc *simulator.Scenario
	switch {
	case o.cluster.from:
		if o.scenarioFile != "" || o.traceFile != "" {
			return nil, usageErrorf("--from-cluster replaces --scenario and --trace")
		}
		if sc, err = o.cluster.scenario(cmd, o.traceFormat); err != nil {
			return nil, err
		}
	case o.scenarioFile != "":
		if sc, err = simulator.LoadScenario(o.scenarioFile); err != nil {
			return nil, err
		}
	case o.traceFile != "":
		sc = &simulator.Scenario{Name: "trace"}
	default:
		sc = simulator.DefaultScenario()
	}
	if o.traceFile != "" {
		if o.traceFormat != simulator.FormatPhilly && o.traceFormat != simulator.FormatAlibaba {
			return nil, usageErrorf("--trace-format %q: want philly or alibaba", o.traceFormat)
		}
		sc.Jobs, sc.Generate = nil, nil
		sc.Trace = &simulator.TraceSource{Path: o.traceFile, Format: o.traceFormat}
		if sc.Name == "" || sc.Name == "built-in" {
			sc.Name = "trace"
		}
	} else if flags.Changed("trace-format") && (!o.cluster.from || o.cluster.arrivals == "") {
		return nil, usageErrorf("--trace-format needs --trace (or --from-cluster --arrivals)")
	}
	if o.limit < 0 || o.limit > simulator.MaxJobs {
		return nil, usageErrorf("--limit %d: must be in [0, %d]", o.limit, simulator.MaxJobs)
	}
	if o.clusterGPUs < 0 || o.clusterGPUs > simulator.MaxGPUs {
		return nil, usageErrorf("--cluster-gpus %d: must be in [0, %d]", o.clusterGPUs, simulator.MaxGPUs)
	}
	if sc.Trace != nil {
		if flags.Changed("limit") {
			sc.Trace.Limit = o.limit
		}
		if flags.Changed("cluster-gpus") {
			sc.Trace.ClusterGPUs = o.clusterGPUs
		}
		if o.singleQueue {
			sc.Trace.SingleQueue = true
		}
	} else if flags.Changed("limit") || flags.Changed("cluster-gpus") || o.singleQueue {
		return nil, usageErrorf("--limit, --cluster-gpus and --single-queue apply to --trace")
	}
	if o.curvesDir != "" {
		sc.Curves = &simulator.CurveSource{Dir: o.curvesDir}
	}
	if flags.Changed("seed") {
		sc.Seed = o.seed
	}
	if flags.Changed("priorities") {
		if sc.Priorities, err = parsePriorityMix(o.priorities); err != nil {
			return nil, usageErrorf("--priorities: %v", err)
		}
	}
	return sc, nil
}

// options turns the run flags into the simulator's options (the
// scenario's, overridden by what was given) and validates them.
func (o *simulateOptions) options(cmd *cobra.Command, sc *simulator.Scenario) (simulator.Options, error) {
	flags := cmd.Flags()
	opt, err := sc.Options(simulator.DefaultOptions())
	if err != nil {
		return simulator.Options{}, err
	}
	if flags.Changed("deactivate") {
		opt.Deactivate = o.deactivate
	}
	if flags.Changed("checkpoint") {
		if opt.Checkpoint, err = simulator.ParseSeconds(o.checkpoint); err != nil {
			return simulator.Options{}, usageErrorf("--checkpoint: %v", err)
		}
	}
	for _, f := range []struct {
		name string
		val  string
		dst  *simulator.Seconds
	}{{"cadence-first", o.cadenceFirst, &opt.Cadence.First}, {"cadence-min", o.cadenceMin, &opt.Cadence.Min}, {"cadence-max", o.cadenceMax, &opt.Cadence.Max}} {
		if flags.Changed(f.name) {
			v, err := simulator.ParseSeconds(f.val)
			if err != nil {
				return simulator.Options{}, usageErrorf("--%s: %v", f.name, err)
			}
			*f.dst = simulator.Seconds(v)
		}
	}
	if flags.Changed("cadence-growth") {
		opt.Cadence.Growth = o.cadenceGrowth
	}
	if flags.Changed("min-improvement") {
		if !(o.minImprovement >= 0 && o.minImprovement <= plannerconfig.MaxMinImprovement) {
			return simulator.Options{}, usageErrorf("--min-improvement %g: must be in [0, %g]", o.minImprovement, plannerconfig.MaxMinImprovement)
		}
		opt.Forecast.MinImprovement = o.minImprovement
	}
	if flags.Changed("oracle-min-improvement") {
		if !(o.oracleMinImprovement >= 0 && o.oracleMinImprovement <= plannerconfig.MaxMinImprovement) {
			return simulator.Options{}, usageErrorf("--oracle-min-improvement %g: must be in [0, %g]", o.oracleMinImprovement, plannerconfig.MaxMinImprovement)
		}
		opt.OracleMinImprovement = o.oracleMinImprovement
	}
	if flags.Changed("reports-per-run") {
		opt.ReportsPerRun = o.reportsPerRun // range-checked with the other options below
	}
	opt.RecordEvents = o.eventsFile != ""
	if err := opt.Validate(); err != nil {
		return simulator.Options{}, usageErrorf("%v", err)
	}
	return opt, nil
}

// compare runs the policies on the resolved jobs and writes the output.
func (o *simulateOptions) compare(cmd *cobra.Command, sc *simulator.Scenario, in *simulator.Input, opt simulator.Options,
	pols []string, baseIn *simulator.Input, baseOpt simulator.Options) error {
	switch o.progress {
	case "auto":
		if isTerminal(os.Stderr) {
			opt.Progress = progressBar(os.Stderr)
		}
	case "on":
		opt.Progress = progressBar(os.Stderr)
	case "off":
	default:
		return usageErrorf("--progress %q: want auto, on or off", o.progress)
	}
	cmp, err := simulator.Compare(in, pols, sc.Seed, opt)
	if opt.Progress != nil {
		fmt.Fprint(os.Stderr, "\r\033[K")
	}
	if err != nil {
		return err
	}
	if !o.targets {
		// The targets are the Philly --deactivate experiment's
		// (docs/simulator.md); on any other scenario a MISSED line
		// reads as the product failing, so they are opt-in.
		cmp.Checks = nil
	}
	if o.eventsFile != "" {
		if err := writeEvents(o.eventsFile, sc, in, cmp); err != nil {
			return err
		}
	}
	if err := o.whatIf.addJobChanges(baseIn, baseOpt, pols, cmp, o.eventsFile != ""); err != nil {
		return err
	}
	return writeOutput(cmd, o.outFile, func(w io.Writer) error {
		switch o.output.String() {
		case "json":
			return cmp.WriteJSON(w)
		case "html":
			return cmp.WriteHTML(w)
		}
		if err := cmp.WriteTable(w); err != nil {
			return err
		}
		for _, p := range cmp.JobChanges {
			if err := simulator.WriteJobChanges(w, p); err != nil {
				return err
			}
		}
		return nil
	})
}

func parsePriorityMix(s string) ([]simulator.PriorityClass, error) {
	var out []simulator.PriorityClass
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		v, sh, ok := strings.Cut(part, ":")
		if !ok {
			return nil, fmt.Errorf("%q: want VALUE:SHARE", part)
		}
		val, err := strconv.ParseInt(strings.TrimSpace(v), 10, 32)
		if err != nil {
			return nil, fmt.Errorf("%q: priority %q is not a 32-bit integer", part, v)
		}
		share, err := strconv.ParseFloat(strings.TrimSpace(sh), 64)
		if err != nil || !(share >= 0) {
			return nil, fmt.Errorf("%q: share %q is not a number >= 0", part, sh)
		}
		out = append(out, simulator.PriorityClass{Name: v, Value: int32(val), Share: share})
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("empty")
	}
	return out, nil
}

func isTerminal(f *os.File) bool {
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// progressBar draws "\r policy [#####     ] 123/456 jobs" at most five
// times a second.
func progressBar(w io.Writer) func(policy string, done, total int) {
	var last time.Time
	return func(policy string, done, total int) {
		if now := time.Now(); now.Sub(last) < 200*time.Millisecond && done < total {
			return
		} else {
			last = now
		}
		const width = 30
		n := 0
		if total > 0 {
			n = done * width / total
		}
		fmt.Fprintf(w, "\r\033[Ksimulating %s [%s%s] %d/%d jobs", policy, strings.Repeat("#", n), strings.Repeat(" ", width-n), done, total)
	}
}

// writeOutput runs write on standard output or, when path is set (and not
// "-"), on that file, buffered; a failed write or close is the error.
func writeOutput(cmd *cobra.Command, path string, write func(io.Writer) error) error {
	w := cmd.OutOrStdout()
	var f *os.File
	if path != "" && path != "-" {
		var err error
		if f, err = os.Create(path); err != nil {
			return err
		}
		defer f.Close()
		w = f
	}
	bw := bufio.NewWriter(w)
	err := write(bw)
	if err == nil {
		err = bw.Flush()
	}
	if err == nil && f != nil {
		err = f.Close()
	}
	return err
}

// exportedJob is the fidelity harness's view of a job.
type exportedJob struct {
	Name      string  `json:"name"`
	Queue     string  `json:"queue"`
	Arrival   float64 `json:"arrivalSeconds"`
	GPUs      int     `json:"gpus"`
	Priority  int32   `json:"priority"`
	Duration  float64 `json:"durationSeconds"`
	PlateauAt float64 `json:"plateauAt"`
	Curve     string  `json:"curve"`
}

func exportJobs(in *simulator.Input) []exportedJob {
	out := make([]exportedJob, 0, len(in.Jobs))
	for _, j := range in.Jobs {
		out = append(out, exportedJob{Name: j.Name, Queue: j.Queue, Arrival: j.Arrival, GPUs: j.GPUs, Priority: j.Priority,
			Duration: j.Duration, PlateauAt: j.Curve.Onset, Curve: j.CurveName})
	}
	return out
}

// writeEvents writes the jobs and each policy's event order, for a run of
// the same scenario on a real control plane to be compared with.
func writeEvents(path string, sc *simulator.Scenario, in *simulator.Input, cmp *simulator.Comparison) error {
	doc := struct {
		Scenario   string                        `json:"scenario"`
		Seed       uint64                        `json:"seed"`
		Checkpoint simulator.Seconds             `json:"checkpointInterval"`
		Queues     []simulator.Queue             `json:"queues"`
		Jobs       []exportedJob                 `json:"jobs"`
		Events     map[string][]simulator.Record `json:"events"`
	}{Scenario: in.Name, Seed: sc.Seed, Checkpoint: cmp.Settings.CheckpointInterval, Queues: in.Queues, Jobs: exportJobs(in), Events: map[string][]simulator.Record{}}
	for _, r := range cmp.Results {
		doc.Events[r.Summary.Policy] = r.Records
	}
	b, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

// writeExport writes the resolved jobs as a scenario with an explicit job
// list (curves become simple curves with the same plateau onset).
func writeExport(path string, sc *simulator.Scenario, in *simulator.Input) error {
	desc := "exported from " + in.Source
	if sc.Description != "" {
		desc += ": " + sc.Description
	}
	out := simulator.Scenario{Name: in.Name, Description: desc, Seed: sc.Seed, Queues: in.Queues, LocalQueues: sc.LocalQueues,
		CheckpointInterval: sc.CheckpointInterval, Reports: sc.Reports, Cadence: sc.Cadence, LAS: sc.LAS, Policy: sc.Policy, Deactivate: sc.Deactivate}
	for _, j := range in.Jobs {
		js := simulator.JobSpec{Name: j.Name, Queue: j.Queue, Arrival: simulator.Seconds(j.Arrival), GPUs: j.GPUs, Priority: j.Priority,
			Duration: simulator.Seconds(j.Duration), TotalSteps: j.TotalSteps, CheckpointInterval: simulator.Seconds(j.Checkpoint)}
		if j.Curve.Onset < 1 {
			js.PlateauAt = j.Curve.Onset
		}
		out.Jobs = append(out.Jobs, js)
	}
	b, err := yaml.Marshal(out)
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o644)
}

// writeSnapshot writes a --from-cluster scenario as it was read, before
// any seed's draws or what-if: the jobs with their run-time intervals,
// own curves and live boosts, the observed run times and the recent
// arrivals, so that it re-runs offline as it runs here.
func writeSnapshot(path string, sc *simulator.Scenario, _ *simulator.Input) error {
	b, err := yaml.Marshal(sc)
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o644)
}

// tuneGCForBatch trades memory for speed in a batch run: the simulator
// allocates at a high rate (a forecast per decision) while its live heap is
// a few hundred MB, so the default GOGC=100 collects often. GOGC=300 with a
// soft memory limit of 1.75 GiB keeps the whole-trace run within its 2 GiB
// budget (docs/simulator.md, "Speed"). GOGC and GOMEMLIMIT in the
// environment win.
func tuneGCForBatch() {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(300)
	}
	if os.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(1792 << 20)
	}
}
