package main

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/progress-planner/planner/examples"
	"github.com/progress-planner/planner/internal/textsafe"
	"github.com/progress-planner/planner/pkg/backtest"
)

func newBacktestCmd() *cobra.Command {
	var (
		o      backtestOptions
		output *outputFlag
	)
	cmd := &cobra.Command{
		Use:   "backtest [PATH...]",
		Short: "Score the planner's forecasts on recorded progress histories",
		Long: `Backtest truncates each progress history (JSON Lines, see docs/backtest.md)
at the cutoffs (fractions of outcome.endSeconds), forecasts from the prefix
and scores the forecast against the full history, next to the corpus
baselines: ETA error, time to target, final metric, plateau detection and
the labelled incidents (hang, divergence, plateau extension, preempt/resume).

PATH are history files or directories (searched recursively for *.jsonl).
Without a PATH the synthetic example histories built into the binary are
used.

A file of at most 50,000 reports and 16 MiB is scored whole. A bigger one
is read streaming and, where it holds more, thinned to at most 50,000
reports of about 16 MiB: every k-th report (k a power of two), the first
and the last, and the reports around each change of run state
(docs/limits.md); standard error says so.`,
		Example: `  planner backtest
  planner backtest ../shared/data/curves -o json > backtest.json
  planner backtest run1.jsonl run2.jsonl --cutoffs 0.1,0.5,0.9
  planner backtest ../shared/data/curves --eval-every 3 -o json > sparse.json
  planner backtest ../shared/data/curves --stop-at-gain 0.99
  planner backtest ../shared/data/curves --drop-total
  planner backtest ../shared/data/curves --seen-from 0.3
  planner backtest ../shared/data/curves --eval-pause 30 -o json > paused.json
  planner backtest ../shared/data/curves --loss-every 5 --eval-pause 24 -o json > silent.json
  planner backtest ../shared/data/curves --mirror-objective --time-scale 10 > recast.md
  planner backtest ../shared/data/curves --stress-battery > battery.md`,
		RunE: func(cmd *cobra.Command, args []string) error {
			cuts, err := o.validate(cmd)
			if err != nil {
				return err
			}
			var inputs []backtest.Input
			source := "files"
			if len(args) == 0 {
				source = "synthetic examples"
				inputs, err = backtest.FilesFromFS(examples.FS, examples.Dir)
			} else {
				inputs, err = backtest.FilesFromPaths(args)
			}
			if err != nil {
				return err
			}
			if len(inputs) == 0 {
				return fmt.Errorf("no *.jsonl history files in %s", strings.Join(args, " "))
			}
			start := time.Now()
			opt := backtest.Options{Cutoffs: cuts, Workers: o.workers, PerJob: o.perJob && output.String() == formatJSON, EvalEvery: o.every, EvalPause: o.pause, LossEvery: o.loss,
				StopAtGain: o.stopAt, DropTotal: o.noTotal, SeenFrom: o.seenFrom, Mirror: o.mirror, TimeScale: o.tscale}
			if o.lodo {
				return writeLODO(cmd, backtest.LeaveOneDatasetOut(inputs, opt), cuts, output.String(), len(inputs), start)
			}
			if o.battery {
				return writeBattery(cmd, backtest.StressBattery(inputs, opt, backtest.StressVariants), output.String(), len(inputs), start)
			}
			opt.OnThinned = func(name string, t backtest.Thinning) {
				fmt.Fprintf(cmd.ErrOrStderr(), "backtest: %s: %d reports, over the limits (%d reports, %d MiB): scored on %d of them (every %d-th, and %d kept around changes of run state)\n",
					textsafe.Line(name), t.Read, backtest.MaxReports, backtest.MaxFileBytes>>20, t.Kept, t.Stride, t.Pinned)
			}
			r := backtest.Run(inputs, opt)
			r.Source, r.Paths = source, args
			elapsed := time.Since(start)
			out := cmd.OutOrStdout()
			if output.String() == formatJSON {
				err = r.WriteJSON(out)
			} else {
				err = r.WriteTable(out)
			}
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "backtest: %d files (%s) scored in %.1fs\n", len(inputs), source, elapsed.Seconds())
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.cutoffs, "cutoffs", "0.25,0.5,0.75", "comma-separated run fractions (of outcome.endSeconds) to forecast at")
	output = addOutputFlag(cmd, formatTable, formatJSON)
	f.BoolVar(&o.perJob, "per-job", true, "json: include the per-file results with their forecasts")
	f.IntVar(&o.workers, "workers", 0, "files scored in parallel (0 = GOMAXPROCS)")
	f.BoolVar(&o.lodo, "leave-one-dataset-out", false, "re-choose the tuned constants for each dataset on the other datasets and report its figures under that choice next to the defaults' (docs/backtest.md 7.2); runs the backtest once per grid point")
	f.BoolVar(&o.battery, "stress-battery", false, "run the backtest once as recorded and once under each stress test and metamorphic check, and list the forecast-trust bounds each run misses (docs/backtest.md 7.53)")
	f.IntVar(&o.every, "eval-every", 1, "score each original run as if it evaluated its objective only at every N-th of its evaluations (and its last): a stress test for jobs that evaluate less often (docs/backtest.md 7.8)")
	f.Float64Var(&o.pause, "eval-pause", 0, "score each original run as if training stopped at each evaluation for this many of its median report intervals, reporting as it waits: a stress test for jobs whose progress stands still while they evaluate (docs/backtest.md 7.10)")
	f.Float64Var(&o.loss, "loss-every", 0, "score each original run without a fixed total as if it also logged a training loss every this many seconds between its recorded reports: with --eval-pause, a stress test for jobs that report often and fall silent to evaluate (docs/backtest.md 7.15)")
	f.Float64Var(&o.stopAt, "stop-at-gain", 0, "score each original run without a target as one that stops at a quality target, as MLPerf's do: the level where it had made this share (0-1] of its whole improvement, no fixed total; a stress test of the target-stop rules on datasets without targets (docs/backtest.md 7.26)")
	f.BoolVar(&o.noTotal, "drop-total", false, "score each original run with a target and a fixed total as one that stops at that target with no fixed total, as a language model trained to a quality target does (MLPerf gpt3, llama2 LoRA): a stress test of the time to target on a schedule the forecast cannot see (docs/backtest.md 7.34)")
	f.Float64Var(&o.seenFrom, "seen-from", 0, "score each original run as the planner sees a job it first saw at this share (0-0.9] of its run, every report before it dropped, as on a cluster the planner was installed on with jobs running: a stress test of the rules that read a job's early history (docs/backtest.md 7.56)")
	f.BoolVar(&o.mirror, "mirror-objective", false, "score every file with its objective mirrored (each value v read as -v, the direction flipped): a metamorphic check that nothing depends on which way the objective points (docs/backtest.md 7.20)")
	f.Float64Var(&o.tscale, "time-scale", 1, "score every file with its times multiplied by this factor: a metamorphic check for jobs far faster or slower than the corpus (docs/backtest.md 7.20)")
	return cmd
}

// writeLODO prints the leave-one-dataset-out report.
func writeLODO(cmd *cobra.Command, l *backtest.LODOReport, cuts []float64, output string, files int, start time.Time) error {
	out := cmd.OutOrStdout()
	var err error
	if output == formatJSON {
		err = l.WriteJSON(out)
	} else {
		err = l.WriteTable(out, cuts)
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(cmd.ErrOrStderr(), "backtest: %d files left out by dataset in %.1fs\n", files, time.Since(start).Seconds())
	return nil
}

// backtestOptions are the backtest command's flags.
type backtestOptions struct {
	cutoffs         string
	perJob          bool
	workers         int
	lodo, battery   bool
	every           int
	pause, loss     float64
	stopAt          float64
	seenFrom        float64
	noTotal, mirror bool
	tscale          float64
}

// batteryOwnFlags are the flags each run of the stress battery sets itself.
var batteryOwnFlags = []string{"eval-every", "eval-pause", "loss-every", "stop-at-gain", "drop-total", "seen-from", "mirror-objective", "time-scale", "leave-one-dataset-out"}

// validate checks the flags (every mistake a usage error naming the flag)
// and returns the cutoffs.
func (o *backtestOptions) validate(cmd *cobra.Command) ([]float64, error) {
	cuts, err := parseCutoffs(o.cutoffs)
	switch {
	case err != nil:
		return nil, &exitError{code: exitUsage, err: err}
	case o.every < 1:
		return nil, usageErrorf("--eval-every %d: must be at least 1", o.every)
	case !(o.pause >= 0 && o.pause <= backtest.MaxEvalPause):
		return nil, usageErrorf("--eval-pause %g: must be in [0, %d]", o.pause, backtest.MaxEvalPause)
	case o.loss != 0 && !(o.loss >= backtest.MinLossEvery && o.loss <= backtest.MaxLossEvery):
		return nil, usageErrorf("--loss-every %g: must be 0 or in [%d, %d] seconds", o.loss, backtest.MinLossEvery, backtest.MaxLossEvery)
	case !(o.stopAt >= 0 && o.stopAt <= 1):
		return nil, usageErrorf("--stop-at-gain %g: must be 0 or in (0, 1]", o.stopAt)
	case !(o.seenFrom >= 0 && o.seenFrom <= backtest.MaxSeenFrom):
		return nil, usageErrorf("--seen-from %g: must be 0 or in (0, %g]", o.seenFrom, backtest.MaxSeenFrom)
	case !(o.tscale >= backtest.MinTimeScale && o.tscale <= backtest.MaxTimeScale):
		return nil, usageErrorf("--time-scale %g: must be in [%g, %g]", o.tscale, backtest.MinTimeScale, backtest.MaxTimeScale)
	case o.workers < 0 || o.workers > backtest.MaxWorkers():
		return nil, usageErrorf("--workers %d: must be in [0, %d] (4 × GOMAXPROCS; 0 = GOMAXPROCS)", o.workers, backtest.MaxWorkers())
	}
	// The stress battery sets the stress flags itself, so none may be
	// given with it.
	for _, name := range batteryOwnFlags {
		if o.battery && cmd.Flags().Changed(name) {
			return nil, usageErrorf("--stress-battery runs every stress test itself: drop --%s", name)
		}
	}
	return cuts, nil
}

// writeBattery prints the stress battery's report.
func writeBattery(cmd *cobra.Command, s *backtest.StressReport, output string, files int, start time.Time) error {
	out := cmd.OutOrStdout()
	var err error
	if output == formatJSON {
		err = s.WriteJSON(out)
	} else {
		err = s.WriteTable(out)
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(cmd.ErrOrStderr(), "backtest: %d files scored under %d variants in %.1fs\n", files, len(s.Runs), time.Since(start).Seconds())
	return nil
}

// parseCutoffs parses "0.25,0.5,0.75"; every cutoff must lie in (0, 1].
func parseCutoffs(s string) ([]float64, error) {
	var out []float64
	for _, p := range strings.Split(s, ",") {
		p = strings.TrimSpace(p)
		if p == "" {
			continue
		}
		v, err := strconv.ParseFloat(p, 64)
		if err != nil || !(v > 0 && v <= 1) {
			return nil, fmt.Errorf("--cutoffs: %q is not a fraction in (0, 1]", p)
		}
		out = append(out, v)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("--cutoffs: no cutoff given")
	}
	return out, nil
}
