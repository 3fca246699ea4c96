package main

import (
	"fmt"
	"math"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/progress-planner/planner/pkg/kueueext"
	"github.com/progress-planner/planner/pkg/progress"
	"github.com/progress-planner/planner/pkg/replay"
)

type replayFlags struct {
	trainJob string
	speed    float64
	from     float64
	limit    int
	kube     kubeFlags
	quiet    bool
}

func newReplayCmd() *cobra.Command {
	var fl replayFlags
	cmd := &cobra.Command{
		Use:   "replay HISTORY.jsonl --trainjob NAMESPACE/NAME",
		Short: "Write a history file's reports into a TrainJob's status, as the Trainer status server does",
		Long: `Replay reads a progress history (JSON Lines: a ProgressHistory header line,
then one trainerStatus report a line) and writes each report into the
TrainJob's status.trainerStatus the way the Kubeflow Trainer status server
does: server-side apply on the status subresource with field manager
"trainer-status", progress and ETA as integers, lastUpdatedTime from this
machine's clock. Reports are spaced as recorded (their t), divided by
--speed; --speed 0 writes them back to back.

A report the API server refuses (invalid) is reported and skipped, like the
status server answers it with 422; a missing TrainJob stops the replay.
Used by the e2e tests and for demos.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error { return runReplay(cmd, args[0], fl) },
	}
	f := cmd.Flags()
	f.StringVar(&fl.trainJob, "trainjob", "", "the TrainJob to write, NAMESPACE/NAME (required)")
	f.Float64Var(&fl.speed, "speed", 1, "replay speed: 60 plays an hour in a minute; 0 writes back to back")
	f.Float64Var(&fl.from, "from", 0, "skip reports before this t (seconds)")
	f.IntVar(&fl.limit, "limit", 0, "write at most this many reports (0: all)")
	fl.kube.add(cmd, "")
	f.BoolVarP(&fl.quiet, "quiet", "q", false, "print only the summary")
	return cmd
}

func runReplay(cmd *cobra.Command, path string, fl replayFlags) error {
	ns, name, ok := strings.Cut(fl.trainJob, "/")
	if fl.trainJob == "" || !ok || ns == "" || name == "" || strings.Contains(name, "/") {
		return usageErrorf("--trainjob %q: want NAMESPACE/NAME", fl.trainJob)
	}
	if !(fl.speed >= 0) || math.IsInf(fl.speed, 0) {
		return usageErrorf("--speed %g: want a finite number >= 0", fl.speed)
	}
	if !(fl.from >= 0 && fl.from <= maxRunSeconds) {
		return usageErrorf("--from %g: want seconds in [0, %d] (ten years)", fl.from, maxRunSeconds)
	}
	if fl.limit < 0 {
		return usageErrorf("--limit %d: want a number >= 0", fl.limit)
	}
	hf, err := progress.ReadHistoryPath(path)
	if err != nil {
		return err
	}
	var reports []progress.FileReport
	for _, r := range hf.Reports {
		if r.T >= fl.from {
			reports = append(reports, r)
		}
	}
	if fl.limit > 0 && len(reports) > fl.limit {
		reports = reports[:fl.limit]
	}
	if len(reports) == 0 {
		return fmt.Errorf("%s: no reports at t >= %g", path, fl.from)
	}
	rc, err := fl.kube.restConfig()
	if err != nil {
		return err
	}
	c, err := client.New(rc, client.Options{Scheme: kueueext.NewScheme()})
	if err != nil {
		return fmt.Errorf("client: %w", err)
	}
	ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	out, errOut := cmd.OutOrStdout(), cmd.ErrOrStderr()
	refused := 0
	key := types.NamespacedName{Namespace: ns, Name: name}
	written, err := replay.Run(ctx, c, key, reports, replay.Options{
		Speed: fl.speed,
		OnReport: func(i int, r progress.FileReport, werr error) error {
			if werr != nil {
				refused++
				fmt.Fprintf(errOut, "report %d (t=%gs) refused: %v\n", i, r.T, werr)
			} else if !fl.quiet {
				fmt.Fprintf(out, "%d/%d t=%gs%s\n", i+1, len(reports), r.T, describeReport(r.TrainerStatus))
			}
			return nil
		},
	})
	fmt.Fprintf(out, "replayed %d of %d reports into TrainJob %s (%d refused)\n", written, len(reports), key, refused)
	return err
}

func describeReport(s progress.TrainerStatus) string {
	var b strings.Builder
	if s.ProgressPercentage != nil {
		fmt.Fprintf(&b, " progress=%g%%", *s.ProgressPercentage)
	}
	for _, m := range s.Metrics {
		if m.Name == "current_step" || m.Name == "loss" || m.Name == "eval_loss" {
			fmt.Fprintf(&b, " %s=%s", m.Name, m.Value)
		}
	}
	return b.String()
}
