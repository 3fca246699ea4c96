//go:build e2e

package framework

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/flowcontrol"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	crconfig "sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	configapi "sigs.k8s.io/kueue/apis/config/v1beta2"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	"sigs.k8s.io/kueue/pkg/controller/jobframework"
	"sigs.k8s.io/kueue/pkg/features"

	// The job integrations a control plane may enable (Options.Frameworks).
	// Each registers itself with jobframework in init; no other
	// integration is linked in.
	_ "sigs.k8s.io/kueue/pkg/controller/jobs/job"
	_ "sigs.k8s.io/kueue/pkg/controller/jobs/jobset"
	_ "sigs.k8s.io/kueue/pkg/controller/jobs/kubeflow/jobs/pytorchjob"
	_ "sigs.k8s.io/kueue/pkg/controller/jobs/kubeflow/jobs/tfjob"
	_ "sigs.k8s.io/kueue/pkg/controller/jobs/mpijob"
	_ "sigs.k8s.io/kueue/pkg/controller/jobs/trainjob"
)

// setFeatureGates turns Kueue's PriorityBoost gate on (unless extra turns
// it off) plus any extra gates in this process's default feature gate,
// which Kueue reads. The gate is process-global: every Start sets it again,
// so a test that turns it off does not leak into the next control plane.
func setFeatureGates(extra map[string]bool) error {
	gates := map[string]bool{string(features.PriorityBoost): true}
	for k, v := range extra {
		gates[k] = v
	}
	if err := utilfeature.DefaultMutableFeatureGate.SetFromMap(gates); err != nil {
		return fmt.Errorf("setting Kueue feature gates %v: %w", gates, err)
	}
	if want := gates[string(features.PriorityBoost)]; features.Enabled(features.PriorityBoost) != want {
		return fmt.Errorf("Kueue feature gate %s is not %v after setting it", features.PriorityBoost, want)
	}
	return nil
}

// kueueScheme mirrors cmd/kueue's scheme for what is linked in here.
func kueueScheme() (*runtime.Scheme, error) {
	s := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	utilruntime.Must(kueue.AddToScheme(s))
	utilruntime.Must(configapi.AddToScheme(s))
	if err := jobframework.ForEachIntegration(func(_ string, cb jobframework.IntegrationCallbacks) error {
		if cb.AddToScheme != nil {
			return cb.AddToScheme(s)
		}
		return nil
	}); err != nil {
		return nil, err
	}
	return s, nil
}

// newKueueManager wires Kueue's controllers, scheduler and webhooks
// into a controller-runtime manager the way cmd/kueue/main.go does (minus
// certificate management, leader election, metrics serving, visibility
// server, TAS, MultiKueue and provisioning, none of which the suites use).
// The webhook server listens where envtest pointed the webhook configurations.
func newKueueManager(ctx context.Context, cfg *rest.Config, wio *envtest.WebhookInstallOptions, frameworks []string) (manager.Manager, error) {
	scheme, err := kueueScheme()
	if err != nil {
		return nil, err
	}
	// The Configuration a default Kueue deployment runs with, with the
	// integrations under test enabled.
	kcfg := &configapi.Configuration{}
	scheme.Default(kcfg)
	kcfg.Integrations = &configapi.Integrations{Frameworks: frameworks}
	cfg = withKueueClientLimits(cfg, kcfg)

	mgr, err := ctrl.NewManager(cfg, manager.Options{
		Scheme:  scheme,
		Metrics: metricsserver.Options{BindAddress: "0"},
		WebhookServer: webhook.NewServer(webhook.Options{
			Host:    wio.LocalServingHost,
			Port:    wio.LocalServingPort,
			CertDir: wio.LocalServingCertDir,
		}),
		HealthProbeBindAddress: "0",
		// Several control planes may start, one after another, in one test
		// process; controller names are process-global otherwise.
		Controller: crconfig.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		return nil, fmt.Errorf("creating the manager: %w", err)
	}

	if err := wireKueue(ctx, mgr, cfg, kcfg, frameworks); err != nil {
		return nil, err
	}
	return mgr, nil
}

// withKueueClientLimits gives Kueue the client rate limits a real
// install runs with, as cmd/kueue/main.go applies them from its
// Configuration's clientConnection (defaulted per Kueue version), instead
// of the test environment's generous ones, which would overstate how fast
// Kueue reacts and hide its load on the API server.
func withKueueClientLimits(cfg *rest.Config, kcfg *configapi.Configuration) *rest.Config {
	cc := kcfg.ClientConnection
	if cc == nil || cc.QPS == nil || cc.Burst == nil || *cc.QPS < 0 {
		return cfg
	}
	out := rest.CopyConfig(cfg)
	out.QPS, out.Burst = *cc.QPS, int(*cc.Burst)
	out.RateLimiter = flowcontrol.NewTokenBucketRateLimiter(*cc.QPS, int(*cc.Burst))
	return out
}
