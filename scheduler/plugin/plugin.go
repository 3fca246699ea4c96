package plugin

import (
	"context"
	"fmt"
	"sync/atomic"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/apis/config"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/defaultpreemption"
	plfeature "k8s.io/kubernetes/pkg/scheduler/framework/plugins/feature"
	"k8s.io/kubernetes/pkg/scheduler/framework/preemption"
	"k8s.io/kubernetes/pkg/scheduler/metrics"
	"k8s.io/utils/clock"
)

// Name of the plugin in the registry and in KubeSchedulerConfiguration.
const Name = "ProgressAware"

// Plugin is the QueueSort and PostFilter plugin. It embeds DefaultPreemption
// for what it does not change (candidate-node sampling, preemptor
// eligibility, the victims map) and for the fallback when no tracked job is
// involved; its own Evaluator runs the planner's victim rules.
type Plugin struct {
	*defaultpreemption.DefaultPreemption

	fh        fwk.Handle
	set       settings
	forecasts Forecasts
	podGroups PodGroups
	clock     clock.PassiveClock
	async     bool
	evaluator *preemption.Evaluator
	// podIndex is the scheduler's pod informer indexed by gang (gangIndex);
	// nil when the index could not be added.
	podIndex cache.Indexer
	// cycle memoises gang totals for the preemption in progress; PostFilter
	// replaces it (preemptions run one at a time, their per-node victim
	// selection in parallel).
	cycle atomic.Pointer[gangCache]
}

var (
	_ fwk.QueueSortPlugin   = (*Plugin)(nil)
	_ fwk.PostFilterPlugin  = (*Plugin)(nil)
	_ fwk.PreEnqueuePlugin  = (*Plugin)(nil)
	_ fwk.EnqueueExtensions = (*Plugin)(nil)
	_ preemption.Interface  = (*Plugin)(nil)
)

// Options are what New takes from its environment; tests replace them.
type Options struct {
	// Features default to the process's feature gates.
	Features *plfeature.Features
	// Forecasts default to an informer on ProgressForecasts through the
	// handle's kubeconfig.
	Forecasts Forecasts
	// PodGroups default to an informer on scheduler-plugins PodGroups when
	// the API serves them, else to none (every PodGroup gang counts all of
	// its pods).
	PodGroups PodGroups
	// Clock defaults to the real clock.
	Clock clock.PassiveClock
}

// New is the registry's factory (app.WithPlugin(Name, New)).
func New(ctx context.Context, obj runtime.Object, fh fwk.Handle) (fwk.Plugin, error) {
	return NewWithOptions(ctx, obj, fh, Options{})
}

// NewWithOptions builds the plugin with explicit options.
func NewWithOptions(ctx context.Context, obj runtime.Object, fh fwk.Handle, o Options) (*Plugin, error) {
	set, err := decodeArgs(obj)
	if err != nil {
		return nil, err
	}
	fts := plfeature.NewSchedulerFeaturesFromGates(utilfeature.DefaultFeatureGate)
	if o.Features != nil {
		fts = *o.Features
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	if o.Forecasts == nil {
		inf, err := newInformerForecasts(ctx, fh.KubeConfig())
		if err != nil {
			return nil, err
		}
		o.Forecasts = inf
	}
	if o.PodGroups == nil {
		pgs, err := newInformerPodGroups(ctx, fh.KubeConfig())
		if err != nil {
			return nil, err
		}
		o.PodGroups = pgs
	}
	dp, err := defaultpreemption.New(ctx, &config.DefaultPreemptionArgs{
		MinCandidateNodesPercentage: set.minCandidateNodesPercentage,
		MinCandidateNodesAbsolute:   set.minCandidateNodesAbsolute,
	}, fh, fts)
	if err != nil {
		return nil, fmt.Errorf("building the default preemption %s falls back to: %w", Name, err)
	}
	p := &Plugin{DefaultPreemption: dp, fh: fh, set: set, forecasts: o.Forecasts, podGroups: o.PodGroups, clock: o.Clock, async: fts.EnableAsyncPreemption}
	p.podIndex = addGangIndex(fh.SharedInformerFactory().Core().V1().Pods().Informer())
	if p.podIndex == nil {
		klog.FromContext(ctx).Info("Could not index pods by gang (informer already started); gang costs scan the snapshot")
	}
	p.evaluator = preemption.NewEvaluator(Name, fh, p, fts.EnableAsyncPreemption)
	p.evaluator.PreemptPod = p.withGang(p.evaluator.PreemptPod)
	return p, nil
}

// Name implements fwk.Plugin.
func (p *Plugin) Name() string { return Name }

// Evaluator is the plugin's preemption evaluator (tests replace its
// PreemptPod to observe deletions).
func (p *Plugin) Evaluator() *preemption.Evaluator { return p.evaluator }

// PostFilter preempts through the plugin's own Evaluator.
func (p *Plugin) PostFilter(ctx context.Context, state fwk.CycleState, pod *v1.Pod, m fwk.NodeToStatusReader) (*fwk.PostFilterResult, *fwk.Status) {
	defer metrics.PreemptionAttempts.Inc()
	p.cycle.Store(newGangCache())
	result, status := p.evaluator.Preempt(ctx, state, pod, m)
	if msg := status.Message(); msg != "" {
		klog.FromContext(ctx).V(4).Info("Progress-aware preemption", "pod", klog.KObj(pod), "status", msg)
		return result, fwk.NewStatus(status.Code(), "preemption: "+msg)
	}
	return result, status
}

// PreEnqueue holds back a pod whose asynchronous preemption is still
// running, as DefaultPreemption does for its own evaluator.
func (p *Plugin) PreEnqueue(_ context.Context, pod *v1.Pod) *fwk.Status {
	if p.async && p.evaluator.IsPodRunningPreemption(pod.GetUID()) {
		return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, "waiting for the preemption for this pod to be finished")
	}
	return nil
}

// EventsToRegister: a pod held back by PreEnqueue is released by the
// deletion of its victims; which deletion suffices is for the filters to
// say, so the hint never requeues by itself (as in DefaultPreemption).
func (p *Plugin) EventsToRegister(_ context.Context) ([]fwk.ClusterEventWithHint, error) {
	if !p.async {
		return nil, nil
	}
	skip := func(klog.Logger, *v1.Pod, any, any) (fwk.QueueingHint, error) { return fwk.QueueSkip, nil }
	return []fwk.ClusterEventWithHint{
		{Event: fwk.ClusterEvent{Resource: fwk.Pod, ActionType: fwk.Delete}, QueueingHintFn: skip},
	}, nil
}
