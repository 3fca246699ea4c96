//go:build e2e && kueue_v017

package framework

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	configapi "sigs.k8s.io/kueue/apis/config/v1beta2"
	qcache "sigs.k8s.io/kueue/pkg/cache/queue"
	schdcache "sigs.k8s.io/kueue/pkg/cache/scheduler"
	"sigs.k8s.io/kueue/pkg/constants"
	"sigs.k8s.io/kueue/pkg/controller/core"
	"sigs.k8s.io/kueue/pkg/controller/core/indexer"
	"sigs.k8s.io/kueue/pkg/controller/jobframework"
	"sigs.k8s.io/kueue/pkg/scheduler"
	preemptexpectations "sigs.k8s.io/kueue/pkg/scheduler/preemption/expectations"
	"sigs.k8s.io/kueue/pkg/util/kubeversion"
	"sigs.k8s.io/kueue/pkg/webhooks"
)

// The Kueue and Trainer this build of the framework is compiled against:
// the old pair, selected by the build tag kueue_v017 together with
// -modfile=test/compat/kueue-v017.mod (make e2e-compat). The control plane
// refuses to start when the module versions in the build list differ.
const (
	KueueVersion   = "v0.17.0"
	TrainerVersion = "v2.2.0"
	// KubernetesVersion and EtcdVersion: the kube-apiserver and etcd this
	// pair is tested on: the default pair's (hack/testbin), so a cold
	// `make test` builds one control plane; Kueue v0.17 is a client of
	// it like any other (it was also run on v1.35.4, docs/compatibility.md).
	KubernetesVersion = "v1.36.3"
	// RespellWakes: re-writing a waiting Workload's boost in another
	// spelling ("0" for none) makes Kueue retry it (measured by
	// TestLoweredBoostNeedsNudge; from v0.18 SchedulingEquivalenceHashing
	// keeps it inadmissible while its effective priority is unchanged).
	RespellWakes = true
	EtcdVersion  = "v3.6.8"
)

// wireKueue adds Kueue v0.17.0's caches, indexes, controllers, webhooks and
// scheduler to mgr as its cmd/kueue/main.go does.
func wireKueue(ctx context.Context, mgr manager.Manager, cfg *rest.Config, kcfg *configapi.Configuration, frameworks []string) error {
	cCache := schdcache.New(mgr.GetClient())
	requeuer := qcache.NewRequeuer()
	if err := mgr.Add(requeuer); err != nil {
		return err
	}
	preemptionExpectations := preemptexpectations.New()
	queues := qcache.NewManager(mgr.GetClient(), cCache, requeuer, qcache.WithPreemptionExpectations(preemptionExpectations))

	if err := indexer.Setup(ctx, mgr.GetFieldIndexer()); err != nil {
		return fmt.Errorf("indexes: %w", err)
	}
	if err := jobframework.SetupIndexes(ctx, mgr.GetFieldIndexer(), jobframework.WithEnabledFrameworks(frameworks)); err != nil {
		return fmt.Errorf("integration indexes: %w", err)
	}

	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return err
	}
	versionFetcher := kubeversion.NewServerVersionFetcher(dc)
	if err := mgr.Add(versionFetcher); err != nil {
		return err
	}
	if err := versionFetcher.FetchServerVersion(); err != nil {
		return fmt.Errorf("kubernetes server version (kube-apiserver must be built with version ldflags; see hack/build-testbins.sh): %w", err)
	}

	if failed, err := core.SetupControllers(mgr, queues, cCache, kcfg, nil, preemptionExpectations, nil); err != nil {
		return fmt.Errorf("core controller %s: %w", failed, err)
	}
	nsSelector, err := metav1.LabelSelectorAsSelector(kcfg.ManagedJobsNamespaceSelector)
	if err != nil {
		return err
	}
	if err := jobframework.SetupControllers(ctx, mgr, ctrl.Log.WithName("setup"),
		jobframework.WithManageJobsWithoutQueueName(kcfg.ManageJobsWithoutQueueName),
		jobframework.WithWaitForPodsReady(kcfg.WaitForPodsReady),
		jobframework.WithKubeServerVersion(versionFetcher),
		jobframework.WithEnabledFrameworks(frameworks),
		jobframework.WithManagerName(constants.KueueName),
		jobframework.WithLabelKeysToCopy(kcfg.Integrations.LabelKeysToCopy),
		jobframework.WithCache(cCache),
		jobframework.WithQueues(queues),
		jobframework.WithObjectRetentionPolicies(kcfg.ObjectRetentionPolicies),
		jobframework.WithManagedJobsNamespaceSelector(nsSelector),
	); err != nil {
		return fmt.Errorf("job integrations %v: %w", frameworks, err)
	}
	if failed, err := webhooks.Setup(mgr, nil); err != nil {
		return fmt.Errorf("webhook %s: %w", failed, err)
	}
	go queues.CleanUpOnContext(ctx)
	go cCache.CleanUpOnContext(ctx)

	sched := scheduler.New(queues, cCache, mgr.GetClient(), mgr.GetEventRecorderFor(constants.AdmissionName),
		scheduler.WithPreemptionExpectations(preemptionExpectations))
	if err := mgr.Add(sched); err != nil {
		return fmt.Errorf("scheduler: %w", err)
	}
	return nil
}
