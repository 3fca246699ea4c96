package main

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/progress-planner/planner/pkg/clustersnap"
	"github.com/progress-planner/planner/pkg/clusterview"
	"github.com/progress-planner/planner/simulator"
)

// clusterFlags: --from-cluster builds the scenario from the live cluster
// (read-only), with the connection flags of report and explain.
type clusterFlags struct {
	from                     bool
	kube                     kubeFlags
	gpu                      string
	defaultDuration, horizon string
	arrivals, arrivalsQueue  string
}

func (f *clusterFlags) add(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.BoolVar(&f.from, "from-cluster", false, "build the scenario from the live cluster (ClusterQueues, LocalQueues, admitted and pending Workloads, the planner's forecasts; read-only) and simulate forward from now; --export-scenario writes it")
	f.kube.add(cmd, "--from-cluster: only this namespace's Workloads (default: all namespaces)")
	fl.StringVar(&f.gpu, "gpu-resource", "nvidia.com/gpu", "--from-cluster: resource name counted as GPUs")
	fl.StringVar(&f.defaultDuration, "default-duration", "1h", "--from-cluster: run time of a job whose forecast gives no ETA (or that has none)")
	fl.StringVar(&f.horizon, "horizon", "24h", "--from-cluster: how far ahead new jobs arrive: the Workloads created in this window before now arrive again, as far apart (0: no new arrivals); with --arrivals, the trace's first window")
	fl.StringVar(&f.arrivals, "arrivals", "", "--from-cluster: new jobs from this trace (--trace-format) instead of the repeated recent ones; a job goes to the ClusterQueue its group (Philly virtual cluster, Alibaba QoS) names, else to --arrivals-queue")
	fl.StringVar(&f.arrivalsQueue, "arrivals-queue", "", "--from-cluster --arrivals: the ClusterQueue of trace jobs whose group names none")
}

// scenario reads the cluster (and the --arrivals trace, in format) and
// builds the scenario.
func (f *clusterFlags) scenario(cmd *cobra.Command, format string) (*simulator.Scenario, error) {
	dd, err := simulator.ParseSeconds(f.defaultDuration)
	if err != nil || dd <= 0 {
		return nil, usageErrorf("--default-duration %q: want a duration > 0", f.defaultDuration)
	}
	h, err := simulator.ParseSeconds(f.horizon)
	if err != nil {
		return nil, usageErrorf("--horizon: %v", err)
	}
	var arrivals *simulator.Trace
	if f.arrivals != "" {
		// Read whole: in a file not sorted by submission (Pollux's
		// philly.csv) the earliest jobs can be anywhere.
		if arrivals, err = simulator.ReadTraceFile(f.arrivals, format, 0); err != nil {
			return nil, err
		}
	} else if f.arrivalsQueue != "" {
		return nil, usageErrorf("--arrivals-queue needs --arrivals")
	}
	c, _, err := f.kube.client()
	if err != nil {
		return nil, err
	}
	snap, err := clusterview.Read(cmd.Context(), c, f.kube.namespace)
	if err != nil {
		return nil, fmt.Errorf("read the cluster: %w", err)
	}
	sc, notes, err := clustersnap.Scenario(snap, clustersnap.Options{GPUResource: gpuName(f.gpu), Now: time.Now(), DefaultDuration: dd, Horizon: h,
		Arrivals: arrivals, ArrivalsQueue: f.arrivalsQueue})
	if err != nil {
		return nil, err
	}
	for _, m := range append(snap.Missing, notes...) {
		fmt.Fprintln(cmd.ErrOrStderr(), "planner simulate --from-cluster:", m)
	}
	if len(sc.Queues) == 0 {
		return nil, fmt.Errorf("--from-cluster: no ClusterQueue with %s quota to simulate", f.gpu)
	}
	if len(sc.Jobs) == 0 {
		return nil, fmt.Errorf("--from-cluster: no admitted or pending Workload requesting %s, and none created in the last %s to repeat", f.gpu, f.horizon)
	}
	return sc, nil
}
