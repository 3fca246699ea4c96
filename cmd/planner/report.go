package main

import (
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"

	"github.com/progress-planner/planner/pkg/clusterview"
	"github.com/progress-planner/planner/pkg/forecast"
	"github.com/progress-planner/planner/pkg/offline"
	"github.com/progress-planner/planner/pkg/progress"
	"github.com/progress-planner/planner/pkg/report"
)

type reportFlags struct {
	kube       kubeFlags
	allNS      bool
	output     *outputFlag
	out        string
	atFraction float64
	queue      string
	quota      int
	sizes      string
	objective  string
	gpu        string
}

func newReportCmd() *cobra.Command {
	var fl reportFlags
	cmd := &cobra.Command{
		Use:   "report [PATH...]",
		Short: "Report every job's forecast and each ClusterQueue's capacity forecast",
		Long: `Report prints, per job, its queue, GPUs, progress, ETA with its interval, the
objective now and its predicted final value with its interval, the
planner's verdict, boost and reason; and per ClusterQueue a capacity
forecast: the GPUs the running jobs are expected to free within 1h, 6h and
24h (median and interval), and when a job of N GPUs submitted now would
likely be admitted.

Without files it reads the live cluster (ProgressForecasts, Workloads,
LocalQueues, ClusterQueues; read-only) through the kubeconfig. With history
files or directories (searched for *.jsonl, as backtest does; JSON Lines,
docs/forecast-json.md) each file is one running job in
one queue (--queue, --quota), forecast as of its last report or
--at-fraction of its run, decided under the default policy with the facts
planner forecast assumes.

-o html writes one self-contained page with SVG charts (each job's curve
with its forecast band and plateau marker, each queue's capacity
timeline). docs/report.md has the details.`,
		RunE: func(cmd *cobra.Command, args []string) error { return runReport(cmd, args, &fl) },
	}
	f := cmd.Flags()
	fl.kube.add(cmd, "live: only this namespace's jobs (default: all namespaces)")
	f.BoolVarP(&fl.allNS, "all-namespaces", "A", false, "live: all namespaces (the default unless -n is given)")
	fl.output = addOutputFlag(cmd, formatTable, formatJSON, formatMarkdown, formatHTML)
	f.StringVar(&fl.out, "out", "", "write to this file instead of standard output")
	f.Float64Var(&fl.atFraction, "at-fraction", -1, "files: forecast each file at this fraction of its run (default: its last report)")
	f.StringVar(&fl.queue, "queue", "offline", "files: the ClusterQueue name the jobs are reported in")
	f.IntVar(&fl.quota, "quota", 0, "files: the queue's GPU quota (default: the jobs' GPUs summed)")
	f.StringVar(&fl.sizes, "admit-sizes", "1,8", "job sizes (GPUs) whose admission time is estimated, comma-separated")
	f.StringVar(&fl.objective, "objective", "", "files: objective METRIC[,minimize|maximize][,target=X] (default: the header's)")
	f.StringVar(&fl.gpu, "gpu-resource", "nvidia.com/gpu", "live: resource name counted as GPUs")
	return cmd
}

func gpuName(s string) corev1.ResourceName { return corev1.ResourceName(s) }

func parseSizes(s string) ([]int, error) {
	var out []int
	for _, p := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(p))
		if err != nil || n < 1 || n > report.MaxGPUs {
			return nil, fmt.Errorf("--admit-sizes %q: want integers in [1, %d] separated by commas", s, report.MaxGPUs)
		}
		out = append(out, n)
	}
	return out, nil
}

func runReport(cmd *cobra.Command, args []string, fl *reportFlags) error {
	sizes, err := parseSizes(fl.sizes)
	if err != nil {
		return usageErrorf("%v", err)
	}
	var in report.Input
	if len(args) > 0 {
		paths, perr := progress.HistoryPaths(args)
		if perr != nil {
			return perr
		}
		if len(paths) == 0 {
			return fmt.Errorf("%s: no *.jsonl history files", strings.Join(args, ", "))
		}
		in, err = offlineInput(cmd, paths, fl)
	} else {
		in, err = liveInput(cmd, fl)
	}
	if err != nil {
		return err
	}
	in.AdmitSizes = sizes
	r := report.Build(in)
	var w io.Writer = cmd.OutOrStdout()
	if fl.out != "" {
		f, err := os.Create(fl.out)
		if err != nil {
			return err
		}
		defer f.Close()
		w = f
	}
	if err := r.Write(w, fl.output.String()); err != nil {
		return err
	}
	if c, ok := w.(io.Closer); ok && fl.out != "" {
		return c.Close()
	}
	return nil
}

// offlineInput forecasts each history file the way planner forecast does
// (offline.Forecast: the default policy, assumed facts) and reports
// them as running jobs of one queue.
func offlineInput(cmd *cobra.Command, paths []string, fl *reportFlags) (report.Input, error) {
	var objFlag *progress.Objective
	if fl.objective != "" {
		o, err := progress.ParseObjective(fl.objective)
		if err != nil {
			return report.Input{}, usageErrorf("--objective: %v", err)
		}
		objFlag = &o
	}
	if cmd.Flags().Changed("at-fraction") && !(fl.atFraction >= 0 && fl.atFraction <= 1) {
		return report.Input{}, usageErrorf("--at-fraction %v: want a fraction in [0, 1]", fl.atFraction)
	}
	if fl.quota < 0 || fl.quota > report.MaxGPUs {
		return report.Input{}, usageErrorf("--quota %d: must be in [0, %d] (0: the jobs' GPUs summed)", fl.quota, report.MaxGPUs)
	}
	in := report.Input{Source: "history files", GeneratedAt: time.Now(), Interval: forecast.DefaultSettings().Interval}
	total := 0
	for _, p := range paths {
		c, err := offline.Load(p, cmd.InOrStdin(), offline.CutSpec{Frac: fl.atFraction, FracSet: cmd.Flags().Changed("at-fraction")})
		if err != nil {
			return report.Input{}, err
		}
		out, err := offline.Forecast(c, objFlag)
		if err != nil {
			return report.Input{}, err
		}
		h := c.H
		fc, d := out.Forecast, out.Decision
		name := c.Header.Name
		if name == "" {
			name = p
		}
		// The file's outcome holds as of the cut only when the cut reaches
		// the run's end (the default, its last report).
		outcome := ""
		if o := c.Header.Outcome; o != nil && (c.Cut.Basis == "last-report" || c.Cut.At >= o.EndSeconds) {
			outcome = o.Status
		}
		in.Jobs = append(in.Jobs, report.JobInput{Name: name, Queue: fl.queue, GPUs: out.AssumedFacts.GPUs, State: report.Running,
			Boost: d.Boost, Forecast: &fc, Decision: &d, History: h, Outcome: outcome})
		total += out.AssumedFacts.GPUs
	}
	quota := fl.quota
	if quota <= 0 {
		quota = total
	}
	in.Queues = []report.QueueInput{{Name: fl.queue, QuotaGPUs: quota}}
	return in, nil
}

// liveInput reads the cluster.
func liveInput(cmd *cobra.Command, fl *reportFlags) (report.Input, error) {
	c, _, err := fl.kube.client()
	if err != nil {
		return report.Input{}, err
	}
	ns := fl.kube.namespace
	if fl.allNS {
		ns = ""
	}
	snap, err := clusterview.Read(cmd.Context(), c, ns)
	if err != nil {
		return report.Input{}, err
	}
	in, notes := snap.ReportInput(clusterview.Options{GPUResource: gpuName(fl.gpu), Now: time.Now()})
	in.Source = "live cluster"
	if fl.kube.context != "" {
		in.Source += " (context " + fl.kube.context + ")"
	}
	for _, m := range append(snap.Missing, notes...) {
		fmt.Fprintln(cmd.ErrOrStderr(), "planner report:", m)
	}
	return in, nil
}

func isNoMatch(err error) bool { return meta.IsNoMatchError(err) }
