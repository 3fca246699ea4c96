package main

import (
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"github.com/spf13/cobra"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	ctrlconfig "sigs.k8s.io/controller-runtime/pkg/client/config"

	"github.com/progress-planner/planner/pkg/admissionstatus"
	"github.com/progress-planner/planner/pkg/jobframework"
	"github.com/progress-planner/planner/pkg/kueueext"
	"github.com/progress-planner/planner/pkg/plannerconfig"
	"github.com/progress-planner/planner/pkg/podwebhook"
	"github.com/progress-planner/planner/pkg/progressendpoint"
)

type runFlags struct {
	config      string
	kube        kubeFlags
	logFormat   string
	verbosity   int
	printConfig bool
	apiQPS      float32
	apiBurst    int
	uiAddr      string
	uiRefresh   time.Duration
	// Secure metrics (docs/observability.md).
	metricsSecure  bool
	metricsCertDir string
	// The progress endpoint (docs/progress-sources.md); override the
	// config's progressEndpoint section when set.
	endpointAddr    string
	endpointCertDir string
	podWebhookPort  int
}

func newRunCmd() *cobra.Command {
	var fl runFlags
	cmd := &cobra.Command{
		Use:   "run",
		Short: "Run the controller: forecast TrainJobs and set Kueue priority boosts",
		Long: `Run starts the Progress Planner controller. It watches Kubeflow Trainer v2
TrainJobs and their Kueue Workloads, keeps a ProgressForecast per TrainJob
(kubectl get pf), and applies the decision policy by writing only the
Workload annotation kueue.x-k8s.io/priority-boost.

--config names the component config file (kind PlannerConfiguration): leader
election, metrics and health endpoints, the forecast rate limit, and the
decision policy. Every field is optional; --print-config prints the
effective config (defaults filled in) and exits. An invalid config is
refused with the field and the rule it breaks.

Missing Trainer, Kueue or ProgressForecast CRDs are logged and reported
(metric planner_api_available); the controller keeps running and starts
its watches when they appear.

docs/controller.md describes everything in detail.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runController(cmd, fl) },
	}
	f := cmd.Flags()
	f.StringVar(&fl.config, "config", "", "component config file (PlannerConfiguration YAML); defaults when absent")
	fl.kube.add(cmd, "")
	f.StringVar(&fl.logFormat, "log-format", "json", "log format: json or text")
	f.IntVarP(&fl.verbosity, "v", "v", 0, "log verbosity (0: info; higher: more detail)")
	f.BoolVar(&fl.printConfig, "print-config", false, "print the effective config and exit")
	// client-go's defaults (5 requests/s, burst 10) throttle the planner far
	// below its own forecast rate limit with hundreds of jobs
	// (BenchmarkPlannerScale, docs/benchmarks.md).
	f.Float32Var(&fl.apiQPS, "kube-api-qps", 50, "sustained requests per second to the API server")
	f.IntVar(&fl.apiBurst, "kube-api-burst", 100, "request burst to the API server")
	f.StringVar(&fl.uiAddr, "ui-addr", "", "serve the read-only report page on this address: :8082 is loopback only, 0.0.0.0:8082 every interface; off when empty (docs/report.md)")
	// Off by default: a workstation's planner listens on loopback only. The
	// shipped manifests and the chart turn it on.
	f.BoolVar(&fl.metricsSecure, "metrics-secure", false, "serve metrics over HTTPS, each request authenticated and authorized by the API server (a scraper needs get on the non-resource URL /metrics)")
	f.StringVar(&fl.metricsCertDir, "metrics-cert-dir", "", "with --metrics-secure: directory holding tls.crt and tls.key; empty: a self-signed certificate made in memory at start")
	f.DurationVar(&fl.uiRefresh, "ui-refresh", 30*time.Second, "how often the report page is rebuilt and reloads itself")
	f.StringVar(&fl.endpointAddr, "progress-endpoint-bind-address", "", "serve the KEP-2779 progress endpoint (HTTPS) on this address, e.g. :9443; 0 turns it off; empty: the config's progressEndpoint.bindAddress (default off)")
	f.IntVar(&fl.podWebhookPort, "progress-endpoint-pod-webhook-port", -1, "serve the mutating webhook that points opted-in jobs' pods at the progress endpoint on this port, e.g. 9444; 0 turns it off; -1: the config's progressEndpoint.podWebhook.port (default off)")
	f.StringVar(&fl.endpointCertDir, "progress-endpoint-cert-dir", "", "directory with tls.crt and tls.key for the progress endpoint (e.g. a cert-manager Secret); empty: the config's, else the planner manages its own CA in a Secret")
	return cmd
}

// Limits of planner run's flags (docs/limits.md).
const (
	maxAPIQPS   = 10000
	maxAPIBurst = 100000
)

func runController(cmd *cobra.Command, fl runFlags) error {
	if fl.logFormat != "json" && fl.logFormat != "text" {
		return usageErrorf("--log-format %q: want json or text", fl.logFormat)
	}
	cfg := plannerconfig.DefaultConfig()
	if fl.config != "" {
		c, err := plannerconfig.LoadConfig(fl.config)
		if err != nil {
			return err
		}
		cfg = c
	}
	if err := endpointFlags(&cfg, fl); err != nil {
		return err
	}
	if fl.printConfig {
		b, err := cfg.YAML()
		if err != nil {
			return err
		}
		_, err = cmd.OutOrStdout().Write(b)
		return err
	}
	logger := newLogger(fl.logFormat, fl.verbosity)
	ctrl.SetLogger(logger)
	klog.SetLogger(logger)

	if !(fl.apiQPS > 0 && fl.apiQPS <= maxAPIQPS) || fl.apiBurst < 1 || fl.apiBurst > maxAPIBurst {
		return usageErrorf("--kube-api-qps %g must be in (0, %d] and --kube-api-burst %d in [1, %d]", fl.apiQPS, maxAPIQPS, fl.apiBurst, maxAPIBurst)
	}
	if fl.uiRefresh < time.Second || fl.uiRefresh > time.Hour {
		return usageErrorf("--ui-refresh %s must be in [1s, 1h]", fl.uiRefresh)
	}
	if fl.verbosity < 0 || fl.verbosity > 10 {
		return usageErrorf("-v %d must be in [0, 10]", fl.verbosity)
	}
	rc, err := fl.kube.restConfig()
	if err != nil {
		return err
	}
	rc.QPS, rc.Burst = fl.apiQPS, fl.apiBurst
	var mopts []kueueext.ManagerOption
	if fl.metricsSecure {
		mopts = append(mopts, kueueext.WithSecureMetrics(fl.metricsCertDir))
	} else if fl.metricsCertDir != "" {
		return usageErrorf("--metrics-cert-dir needs --metrics-secure")
	}
	mgr, err := kueueext.NewManager(rc, cfg, mopts...)
	if err != nil {
		return fmt.Errorf("create manager: %w", err)
	}
	// With the progress endpoint on, its reports are the job framework's
	// report source: batch/v1 Jobs and JobSets are tracked too, and a
	// TrainJob whose reporter posts there is read from it
	// (docs/progress-sources.md).
	opts := kueueext.Options{Config: cfg}
	var src *jobframework.MemorySource
	if cfg.ProgressEndpoint.Enabled() {
		src = jobframework.NewMemorySource()
		opts.Reports = src
	}
	planner, err := kueueext.Setup(mgr, opts)
	if err != nil {
		return fmt.Errorf("set up the planner: %w", err)
	}
	if src != nil {
		if err := progressendpoint.Setup(mgr, cfg.ProgressEndpoint, progressendpoint.ToSource(src)); err != nil {
			return fmt.Errorf("set up the progress endpoint: %w", err)
		}
		if err := podwebhook.Setup(mgr, cfg.ProgressEndpoint); err != nil {
			return fmt.Errorf("set up the pod webhook: %w", err)
		}
	}
	if pub := admissionstatus.New(cfg, mgr.GetClient(), mgr.GetAPIReader(), mgr.GetClient(), clock.RealClock{}, logger.WithName("admission-estimates")); pub != nil {
		pub.Latest = planner.LatestForecasts
		if err := mgr.Add(pub); err != nil {
			return fmt.Errorf("add the admission estimates: %w", err)
		}
	}
	if err := addReportUI(mgr, cfg, fl, logger, planner.LatestForecasts); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	vi := versionInfo()
	logger.Info("starting", "version", vi.Version, "commit", vi.Commit, "config", fl.config,
		"leaderElection", cfg.LeaderElection.Enabled, "mode", cfg.Policy.Mode, "metricsSecure", fl.metricsSecure)
	return mgr.Start(ctx)
}

// endpointFlags applies the progress endpoint's flags over the config.
func endpointFlags(cfg *plannerconfig.Config, fl runFlags) error {
	if fl.endpointAddr != "" {
		cfg.ProgressEndpoint.BindAddress = fl.endpointAddr
	}
	if fl.endpointCertDir != "" {
		cfg.ProgressEndpoint.CertDir = fl.endpointCertDir
	}
	if fl.podWebhookPort >= 0 {
		cfg.ProgressEndpoint.PodWebhook.Port = fl.podWebhookPort
	}
	if err := cfg.Validate(); err != nil {
		return usageErrorf("--progress-endpoint-*: %v", err)
	}
	return nil
}

func newLogger(format string, verbosity int) logr.Logger {
	opts := &slog.HandlerOptions{Level: slog.Level(-verbosity)}
	var h slog.Handler
	if format == "text" {
		h = slog.NewTextHandler(os.Stderr, opts)
	} else {
		h = slog.NewJSONHandler(os.Stderr, opts)
	}
	return logr.FromSlogHandler(h)
}

// restConfig loads a client config: --kubeconfig (and --context) when
// given, else controller-runtime's defaults ($KUBECONFIG, in-cluster,
// ~/.kube/config).
func restConfig(kubeconfig, kubeContext string) (*rest.Config, error) {
	if kubeconfig == "" {
		rc, err := ctrlconfig.GetConfigWithContext(kubeContext)
		if err != nil {
			return nil, fmt.Errorf("kubeconfig: %w", err)
		}
		return rc, nil
	}
	rules := &clientcmd.ClientConfigLoadingRules{ExplicitPath: kubeconfig}
	overrides := &clientcmd.ConfigOverrides{CurrentContext: kubeContext}
	rc, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, overrides).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("kubeconfig %s: %w", kubeconfig, err)
	}
	return rc, nil
}
