package kueueext

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/discovery"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"
	jobset "sigs.k8s.io/jobset/api/jobset/v1alpha2"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	mpi "github.com/kubeflow/mpi-operator/pkg/apis/kubeflow/v2beta1"
	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	kftraining "github.com/kubeflow/training-operator/pkg/apis/kubeflow.org/v1"

	"github.com/progress-planner/planner/api/v1alpha1"
	"github.com/progress-planner/planner/pkg/forecast"
	"github.com/progress-planner/planner/pkg/jobframework"
	"github.com/progress-planner/planner/pkg/plannerconfig"
	"github.com/progress-planner/planner/pkg/workloads"
)

// NewScheme returns a scheme with the kinds the planner reads and writes:
// the built-in kinds (batch/v1 Jobs among them), Trainer v1alpha1, JobSet
// v1alpha2, the Training and MPI Operators' kinds, Kueue v1beta2 and
// planner.progress.io/v1alpha1.
func NewScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	utilruntime.Must(trainer.AddToScheme(s))
	utilruntime.Must(jobset.AddToScheme(s))
	utilruntime.Must(kftraining.AddToScheme(s))
	utilruntime.Must(mpi.AddToScheme(s))
	utilruntime.Must(kueue.AddToScheme(s))
	utilruntime.Must(v1alpha1.AddToScheme(s))
	return s
}

// ManagerOption changes the manager's options beyond the config.
type ManagerOption func(*ctrl.Options)

// WithSecureMetrics serves the metrics endpoint over HTTPS, every request
// authenticated (TokenReview) and authorized (SubjectAccessReview: get on
// the non-resource URL /metrics) by the API server, as Kueue does; the
// planner then needs create on tokenreviews and subjectaccessreviews
// (config/rbac). certDir holds tls.crt and tls.key; empty: a self-signed
// certificate is generated in memory at start.
func WithSecureMetrics(certDir string) ManagerOption {
	return func(o *ctrl.Options) {
		o.Metrics.SecureServing = true
		o.Metrics.FilterProvider = filters.WithAuthenticationAndAuthorization
		o.Metrics.CertDir = certDir
	}
}

// NewManager creates the controller-runtime manager `planner run` uses:
// leader election, the metrics endpoint and /healthz and /readyz, all from
// the config. The cache keeps managedFields only for Workloads (the
// planner reads the boost annotation's owner from them).
func NewManager(rc *rest.Config, cfg plannerconfig.Config, mopts ...ManagerOption) (manager.Manager, error) {
	le := cfg.LeaderElection
	opts := ctrl.Options{
		Scheme:                        NewScheme(),
		Metrics:                       metricsserver.Options{BindAddress: cfg.Metrics.BindAddress},
		HealthProbeBindAddress:        cfg.Health.BindAddress,
		PprofBindAddress:              cfg.Pprof.BindAddress,
		LeaderElection:                le.Enabled,
		LeaderElectionID:              le.LeaseName,
		LeaderElectionNamespace:       cfg.LeaderElectionNamespace(),
		LeaderElectionReleaseOnCancel: true,
		LeaseDuration:                 ptr.To(le.LeaseDuration.Duration),
		RenewDeadline:                 ptr.To(le.RenewDeadline.Duration),
		RetryPeriod:                   ptr.To(le.RetryPeriod.Duration),
		Cache:                         cache.Options{DefaultTransform: stripManagedFieldsExceptWorkloads},
	}
	for _, o := range mopts {
		o(&opts)
	}
	mgr, err := ctrl.NewManager(rc, opts)
	if err != nil {
		return nil, err
	}
	if cfg.Health.BindAddress != "0" {
		if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
			return nil, err
		}
		if err := mgr.AddReadyzCheck("ping", healthz.Ping); err != nil {
			return nil, err
		}
	}
	return mgr, nil
}

func stripManagedFieldsExceptWorkloads(obj any) (any, error) {
	if _, ok := obj.(*kueue.Workload); ok {
		return obj, nil
	}
	if a, ok := obj.(metav1.Object); ok {
		a.SetManagedFields(nil)
	}
	return obj, nil
}

// Options configure Setup.
type Options struct {
	Config plannerconfig.Config
	// Clock is the planner's clock (observation times, forecasts,
	// decisions); nil is the real clock. Tests inject a fake one.
	Clock clock.PassiveClock
	// Settings for forecast.Fit; nil is forecast.DefaultSettings().
	Settings *forecast.Settings
	// SkipNameValidation allows several planners in one process (tests).
	SkipNameValidation bool
	// Reports is where the progress of kinds that carry none in their own
	// object (batch/v1 Jobs, JobSets) comes from, and that of TrainJobs
	// whose reporter posts to the planner's endpoint. Nil: only TrainJobs
	// are tracked, from their status (jobframework.Built).
	Reports jobframework.ReportSource
}

// Planner is the controller added to a manager by Setup.
type Planner struct {
	mgr     manager.Manager
	opts    Options
	kinds   []*kindController
	watcher *apiWatcher

	disc discovery.DiscoveryInterface

	mu sync.Mutex
}

// kindController is one job kind's reconciler and, once its API is served,
// its controller.
type kindController struct {
	kind             jobframework.Kind
	rec              *JobReconciler
	ctrl             controller.Controller
	workloadsWatched bool
}

// Setup adds the planner to mgr: an API watcher (on every replica) that
// starts one controller (leader only) per built job kind
// (jobframework.Built) once the kind and ProgressForecasts are served, and
// adds each controller's Workload watch once Kueue is.
func Setup(mgr manager.Manager, opts Options) (*Planner, error) {
	if err := opts.Config.Validate(); err != nil {
		return nil, err
	}
	RegisterMetrics()
	clk := opts.Clock
	if clk == nil {
		clk = clock.RealClock{}
	}
	settings := forecast.DefaultSettings()
	if opts.Settings != nil {
		settings = *opts.Settings
	}
	settings.MinImprovement = opts.Config.Forecast.MinImprovement
	disc, err := discovery.NewDiscoveryClientForConfig(mgr.GetConfig())
	if err != nil {
		return nil, fmt.Errorf("discovery client: %w", err)
	}
	p := &Planner{mgr: mgr, opts: opts, disc: disc}
	for _, k := range jobframework.Built(opts.Reports) {
		rec := newJobReconciler(k.Adapter, opts.Reports, mgr.GetClient(), mgr.GetAPIReader(), mgr.GetEventRecorder(ControllerName), clk, opts.Config, settings)
		if len(p.kinds) > 0 {
			rec.shareWith(p.kinds[0].rec)
		} else {
			rec.wl.indexer = mgr.GetFieldIndexer()
		}
		p.kinds = append(p.kinds, &kindController{kind: k, rec: rec})
	}
	flusher := &checkpointFlusher{rec: p.kinds[0].rec, log: mgr.GetLogger().WithName("checkpoints")}
	if err := mgr.Add(flusher); err != nil {
		return nil, err
	}
	p.watcher = &apiWatcher{
		probe:    func() (APIStatus, error) { return ProbeAPIs(disc) },
		interval: opts.Config.CRDCheckInterval.Duration,
		onChange: p.apisChanged,
		log:      mgr.GetLogger().WithName("apis"),
	}
	if err := mgr.Add(p.watcher); err != nil {
		return nil, err
	}
	return p, nil
}

// APIStatus is the latest API probe (ok false before the first).
func (p *Planner) APIStatus() (APIStatus, bool) { return p.watcher.Status() }

// Started reports whether a job kind's controller has been created (it
// runs once this replica leads).
func (p *Planner) Started() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, kc := range p.kinds {
		if kc.ctrl != nil {
			return true
		}
	}
	return false
}

func (p *Planner) apisChanged(s APIStatus) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	caps := p.kinds[0].rec.caps // shared by every kind
	for _, kc := range p.kinds {
		kc.rec.SetKueueAvailable(s.Workloads)
	}
	if s.Workloads && caps.generation() == kueueGenUnknown {
		// Once, when Kueue is first seen: which API generation it serves,
		// for the log and planner_kueue_info (kueuecaps.go). A failure is
		// retried at the next check.
		log := p.mgr.GetLogger().WithName("kueue")
		if gen, err := DetectKueueGeneration(p.disc); err != nil {
			log.Error(err, "detecting Kueue's API generation")
		} else {
			caps.setGeneration(gen)
			log.Info("Kueue detected", "kueueAPI", string(gen), "wake", string(gen.wakeStyle()),
				"signal", "ClusterQueue spec.concurrentAdmissionPolicy in the OpenAPI v3 document of kueue.x-k8s.io/v1beta2")
		}
	}
	var errs []error
	for _, kc := range p.kinds {
		if err := p.startKind(kc, s); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// startKind creates kc's controller once its kind and ProgressForecasts
// are served (a kind whose CRD is not installed waits), and adds its
// Workload watch once Kueue is.
func (p *Planner) startKind(kc *kindController, s APIStatus) error {
	gvk := kc.kind.GVK()
	if kc.ctrl == nil && s.ProgressForecasts && s.Serves(kc.kind.Resource) {
		opts := controller.Options{MaxConcurrentReconciles: p.opts.Config.Forecast.MaxConcurrentReconciles}
		if p.opts.SkipNameValidation {
			opts.SkipNameValidation = ptr.To(true)
		}
		b := ctrl.NewControllerManagedBy(p.mgr).
			Named(strings.ToLower(gvk.Kind)+"-progress").
			// contact first: it sees every delivery, even those the
			// next predicate filters (the planner's own status writes
			// coming back prove the server answers).
			For(kc.kind.NewObject(), builder.WithPredicates(kc.rec.contact.predicate(kc.rec.contactKey()), kc.rec.arrivals.predicate())).
			Owns(&v1alpha1.ProgressForecast{}, builder.WithPredicates(kc.rec.contact.predicate(""), createOrDelete())).
			WithOptions(opts)
		if p.opts.Reports != nil {
			// Reports that arrive outside the object (the progress
			// endpoint; for a TrainJob too, when its reporter posts
			// there) wake the job's reconcile through the source's channel.
			b = b.WatchesRawSource(source.Channel(p.opts.Reports.Events(gvk.GroupKind()), &handler.EnqueueRequestForObject{}))
		}
		c, err := b.Build(kc.rec)
		if err != nil {
			return fmt.Errorf("%s controller: %w", gvk.Kind, err)
		}
		kc.ctrl = c
	}
	if kc.ctrl != nil && s.Workloads && !kc.workloadsWatched {
		src := source.Kind(p.mgr.GetCache(), &kueue.Workload{}, handler.TypedEnqueueRequestsFromMapFunc(workloadToJob(gvk.GroupKind())))
		if err := kc.ctrl.Watch(src); err != nil {
			return fmt.Errorf("watch Workloads for %s: %w", gvk.Kind, err)
		}
		kc.workloadsWatched = true
	}
	return nil
}

// createOrDelete lets only creations and deletions of ProgressForecasts
// through: the planner's own status writes must not trigger reconciles.
func createOrDelete() predicate.Predicate {
	return predicate.Funcs{
		UpdateFunc:  func(event.UpdateEvent) bool { return false },
		GenericFunc: func(event.GenericEvent) bool { return false },
	}
}

// workloadToJob maps a Workload to the job of kind gk that controls it.
func workloadToJob(gk schema.GroupKind) func(context.Context, *kueue.Workload) []reconcile.Request {
	return func(_ context.Context, wl *kueue.Workload) []reconcile.Request {
		job, ok := workloads.JobOf(wl)
		if !ok || !job.IsKind(gk.Group, gk.Kind) {
			return nil
		}
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: job.Namespace, Name: job.Name}}}
	}
}
