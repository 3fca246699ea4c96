package plugin

import (
	"context"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/progress-planner/planner/api/v1alpha1"
)

// progressForecasts is the planner's CRD resource.
var progressForecasts = v1alpha1.GroupVersion.WithResource("progressforecasts")

// syncWait bounds how long New waits for the first list of
// ProgressForecasts. A scheduler must start without them (the CRD may not
// be installed yet); until the cache fills, every job is untracked and the
// plugin behaves like the default.
const syncWait = 30 * time.Second

// forecastEntry is what the informer stores: the decoded forecast, not the
// CR (whose history can be tens of kilobytes).
type forecastEntry struct {
	metav1.TypeMeta
	metav1.ObjectMeta
	forecast *JobForecast // nil when the CR could not be decoded
}

func (e *forecastEntry) DeepCopyObject() runtime.Object {
	c := &forecastEntry{TypeMeta: e.TypeMeta, forecast: e.forecast}
	e.ObjectMeta.DeepCopyInto(&c.ObjectMeta)
	return c
}

// informerForecasts serves Forecasts from a dynamic informer.
type informerForecasts struct {
	indexer cache.Indexer
}

func newInformerForecasts(ctx context.Context, cfg *rest.Config) (*informerForecasts, error) {
	if cfg == nil {
		return nil, fmt.Errorf("%s needs a kubeconfig to watch %s", Name, progressForecasts.Resource)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("dynamic client for %s: %w", progressForecasts.Resource, err)
	}
	factory := dynamicinformer.NewDynamicSharedInformerFactory(dyn, 0)
	inf := factory.ForResource(progressForecasts).Informer()
	if err := inf.SetTransform(transformForecast); err != nil {
		return nil, fmt.Errorf("setting the %s transform: %w", progressForecasts.Resource, err)
	}
	factory.Start(ctx.Done())
	syncCtx, cancel := context.WithTimeout(ctx, syncWait)
	defer cancel()
	if !cache.WaitForCacheSync(syncCtx.Done(), inf.HasSynced) {
		klog.FromContext(ctx).Info("ProgressForecasts not listed yet; every job counts as untracked until they are",
			"resource", progressForecasts.String(), "waited", syncWait)
	}
	return &informerForecasts{indexer: inf.GetIndexer()}, nil
}

// transformForecast decodes a ProgressForecast once, when it is stored.
func transformForecast(obj any) (any, error) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return obj, nil // tombstones and anything else pass through
	}
	e := &forecastEntry{ObjectMeta: metav1.ObjectMeta{
		Namespace: u.GetNamespace(), Name: u.GetName(), UID: u.GetUID(), ResourceVersion: u.GetResourceVersion(),
	}}
	var pf v1alpha1.ProgressForecast
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &pf); err != nil {
		klog.V(4).InfoS("Ignoring an undecodable ProgressForecast", "progressForecast", klog.KObj(u), "err", err)
		return e, nil
	}
	jf, err := FromProgressForecast(&pf)
	if err != nil {
		klog.V(4).InfoS("Ignoring a ProgressForecast without a usable decision", "progressForecast", klog.KObj(u), "err", err)
		return e, nil
	}
	e.forecast = &jf
	return e, nil
}

// Get implements Forecasts.
func (f *informerForecasts) Get(namespace, name string) *JobForecast {
	obj, ok, err := f.indexer.GetByKey(namespace + "/" + name)
	if err != nil || !ok {
		return nil
	}
	if e, ok := obj.(*forecastEntry); ok {
		return e.forecast
	}
	return nil
}
