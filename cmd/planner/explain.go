package main

import (
	"fmt"
	"strings"
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"

	"github.com/progress-planner/planner/pkg/clusterview"
	"github.com/progress-planner/planner/pkg/report"
)

type explainFlags struct {
	kube      kubeFlags
	output    *outputFlag
	gpu       string
	admission admissionFlags
}

func newExplainCmd() *cobra.Command {
	var fl explainFlags
	cmd := &cobra.Command{
		Use:   "explain [NAMESPACE/]NAME",
		Short: "Explain why a job (or Workload) is waiting, running or was preempted",
		Long: `Explain answers "why is my job waiting / why was it preempted" from the
live cluster: the job's Kueue Workload and ClusterQueue, its position among
the waiting Workloads (effective priority, then creation time, as Kueue
orders them), base priority + priority boost = effective priority, the
admitted Workloads it could preempt or is protected from (or, for a running
job, the waiting ones that could preempt it), and the planner's verdict,
reason and evidence from the job's ProgressForecast. For a waiting job it
estimates when it will be admitted, with an 80 % interval, by simulating
the cluster forward (--admission-runs futures, the scenario
'planner simulate --from-cluster' builds: the queue ahead, each job's
forecast ETA and its interval, borrowing, preemption, the planner's
yields) and says what freed the GPUs.

NAME is a job: a TrainJob, or a job of another kind the planner tracks
(batch/v1 Job, JobSet), found through its ProgressForecast of the same
name. Its Workload is the one the controller acts on: the unfinished one it
controls; while Kueue holds several, explain names them and explains none.
NAME may also be a Workload. Read-only. docs/report.md has the details.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error { return runExplain(cmd, args[0], &fl) },
	}
	fl.kube.add(cmd, "namespace of NAME (default: the context's namespace)")
	fl.output = addOutputFlag(cmd, formatTable, formatJSON)
	cmd.Flags().StringVar(&fl.gpu, "gpu-resource", "nvidia.com/gpu", "resource name counted as GPUs")
	fl.admission.add(cmd)
	return cmd
}

func runExplain(cmd *cobra.Command, arg string, fl *explainFlags) error {
	c, ns, err := fl.kube.client()
	if err != nil {
		return err
	}
	name := arg
	if a, b, ok := strings.Cut(arg, "/"); ok {
		if a == "" || b == "" || strings.Contains(b, "/") {
			return usageErrorf("%q: want [NAMESPACE/]NAME", arg)
		}
		ns, name = a, b
	}
	ctx := cmd.Context()
	var uid types.UID
	var tj trainer.TrainJob
	switch err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, &tj); {
	case err == nil:
		uid = tj.UID
	case apierrors.IsNotFound(err), isNoMatch(err):
	default:
		return fmt.Errorf("TrainJob %s/%s: %w", ns, name, err)
	}
	snap, err := clusterview.Read(ctx, c, ns)
	if err != nil {
		return err
	}
	// ClusterQueues are cluster-scoped, but the queue's other Workloads
	// may live in other namespaces: read them all when allowed.
	if all, err := clusterview.Read(ctx, c, ""); err == nil {
		snap.Workloads, snap.LocalQueues = all.Workloads, all.LocalQueues
	}
	now := time.Now()
	in, err := snap.ExplainInput(ns, name, uid, clusterview.Options{GPUResource: gpuName(fl.gpu), Now: now})
	if err != nil {
		return err
	}
	e := report.Explain(in)
	if err := fl.admission.estimate(snap, fl.gpu, now, &e); err != nil {
		return err
	}
	return report.WriteExplanation(cmd.OutOrStdout(), e, fl.output.String())
}
