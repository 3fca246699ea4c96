package plugin

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	schedv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"
	pgclientset "sigs.k8s.io/scheduler-plugins/pkg/generated/clientset/versioned"
	pginformers "sigs.k8s.io/scheduler-plugins/pkg/generated/informers/externalversions"
	pglisters "sigs.k8s.io/scheduler-plugins/pkg/generated/listers/scheduling/v1alpha1"
)

// PodGroups looks up scheduler-plugins PodGroups: their minMember (for
// pkg/gang) and when they were created (for the queue order).
// Implementations must be safe for concurrent use.
type PodGroups interface {
	PodGroupMinMember(namespace, name string) (int32, bool)
	PodGroupCreated(namespace, name string) (time.Time, bool)
}

// StaticPodGroups is a fixed set of PodGroups keyed by namespace/name, for
// tests and benchmarks.
type StaticPodGroups map[string]*schedv1alpha1.PodGroup

func (s StaticPodGroups) PodGroupMinMember(namespace, name string) (int32, bool) {
	pg, ok := s[namespace+"/"+name]
	if !ok {
		return 0, false
	}
	return pg.Spec.MinMember, true
}

func (s StaticPodGroups) PodGroupCreated(namespace, name string) (time.Time, bool) {
	pg, ok := s[namespace+"/"+name]
	if !ok {
		return time.Time{}, false
	}
	return pg.CreationTimestamp.Time, true
}

// noPodGroups is the source when the API serves no PodGroups: every
// PodGroup is unknown, so a PodGroup gang counts all of its pods.
type noPodGroups struct{}

func (noPodGroups) PodGroupMinMember(string, string) (int32, bool)   { return 0, false }
func (noPodGroups) PodGroupCreated(string, string) (time.Time, bool) { return time.Time{}, false }

// listerPodGroups serves PodGroups from an informer.
type listerPodGroups struct{ lister pglisters.PodGroupLister }

func (l listerPodGroups) PodGroupMinMember(namespace, name string) (int32, bool) {
	pg, err := l.lister.PodGroups(namespace).Get(name)
	if err != nil {
		return 0, false
	}
	return pg.Spec.MinMember, true
}

func (l listerPodGroups) PodGroupCreated(namespace, name string) (time.Time, bool) {
	pg, err := l.lister.PodGroups(namespace).Get(name)
	if err != nil {
		return time.Time{}, false
	}
	return pg.CreationTimestamp.Time, true
}

// newInformerPodGroups watches PodGroups when the API serves them
// (scheduling.x-k8s.io/v1alpha1, from scheduler-plugins' CRDs). Without
// the CRD the plugin still starts: PodGroup gangs then count every pod
// (minMember unknown); installing the CRD later needs a restart.
func newInformerPodGroups(ctx context.Context, cfg *rest.Config) (PodGroups, error) {
	logger := klog.FromContext(ctx)
	if cfg == nil {
		return noPodGroups{}, nil
	}
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("discovery client for podgroups: %w", err)
	}
	gv := schedv1alpha1.SchemeGroupVersion.String()
	if _, err := dc.ServerResourcesForGroupVersion(gv); err != nil {
		// Not served, or discovery failed: start anyway, on the safe side
		// (a PodGroup gang is evicted whole) rather than not at all.
		if apierrors.IsNotFound(err) {
			logger.Info("PodGroups not served; PodGroup gangs count all their pods", "groupVersion", gv)
		} else {
			logger.Error(err, "Discovering PodGroups failed; PodGroup gangs count all their pods until a restart", "groupVersion", gv)
		}
		return noPodGroups{}, nil
	}
	cs, err := pgclientset.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("podgroup client: %w", err)
	}
	factory := pginformers.NewSharedInformerFactory(cs, 0)
	inf := factory.Scheduling().V1alpha1().PodGroups()
	lister := inf.Lister() // registers the informer before Start
	factory.Start(ctx.Done())
	syncCtx, cancel := context.WithTimeout(ctx, syncWait)
	defer cancel()
	if !cache.WaitForCacheSync(syncCtx.Done(), inf.Informer().HasSynced) {
		logger.Info("PodGroups not listed yet; their gangs count all their pods until they are", "waited", syncWait)
	}
	return listerPodGroups{lister: lister}, nil
}
