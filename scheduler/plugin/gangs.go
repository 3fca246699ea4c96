package plugin

import (
	"fmt"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/progress-planner/planner/pkg/gang"
)

// gangIndex indexes the scheduler's pod informer by gang key (pkg/gang), so
// that a gang's pods are found without scanning every pod in the cluster.
const gangIndex = "planner.progress.io/gang"

func indexByGang(obj any) ([]string, error) {
	pod, ok := obj.(*v1.Pod)
	if !ok {
		return nil, nil
	}
	// The key does not depend on a PodGroup's minMember: no lookup.
	if g, ok := gang.Of(pod, nil); ok {
		return []string{g.Key()}, nil
	}
	return nil, nil
}

// gangTotals is one gang's footprint on the whole cluster: its pods
// bound to nodes and not being deleted.
type gangTotals struct {
	pods  int
	gpus  int64
	start time.Time // earliest pod start
}

func (t *gangTotals) add(pod *v1.Pod, resource v1.ResourceName) {
	t.pods++
	t.gpus += podGPUs(pod, resource)
	if s := podStart(pod); t.start.IsZero() || s.Before(t.start) {
		t.start = s
	}
}

// gangCache memoises gang totals for one preemption (PostFilter call): the
// per-node victim selection runs in parallel and asks for the same gangs.
type gangCache struct {
	mu sync.Mutex
	m  map[string]gangTotals
}

func newGangCache() *gangCache { return &gangCache{m: map[string]gangTotals{}} }

// gang returns the totals of the gang key (gang.Gang.Key), from the cache
// of the current preemption when there is one.
func (p *Plugin) gang(key string) (gangTotals, error) {
	c := p.cycle.Load()
	if c == nil {
		return p.countGang(key)
	}
	c.mu.Lock()
	t, ok := c.m[key]
	c.mu.Unlock()
	if ok {
		return t, nil
	}
	t, err := p.countGang(key)
	if err != nil {
		return t, err
	}
	c.mu.Lock()
	c.m[key] = t
	c.mu.Unlock()
	return t, nil
}

// countGang counts a gang's bound pods through the pod index, or, when the
// index could not be added, by scanning the scheduler's snapshot. The
// index reflects the API (a pod the scheduler has assumed but not yet bound
// is not counted); the cost it feeds is an estimate either way.
func (p *Plugin) countGang(key string) (gangTotals, error) {
	var t gangTotals
	if p.podIndex != nil {
		objs, err := p.podIndex.ByIndex(gangIndex, key)
		if err != nil {
			return t, fmt.Errorf("looking up the pods of gang %s: %w", key, err)
		}
		for _, o := range objs {
			if pod, ok := o.(*v1.Pod); ok && pod.Spec.NodeName != "" && pod.DeletionTimestamp == nil {
				t.add(pod, p.set.gpuResource)
			}
		}
		return t, nil
	}
	nodes, err := p.fh.SnapshotSharedLister().NodeInfos().List()
	if err != nil {
		return t, fmt.Errorf("listing the snapshot's nodes to count gang %s: %w", key, err)
	}
	for _, ni := range nodes {
		for _, pi := range ni.GetPods() {
			if pod := pi.GetPod(); pod.DeletionTimestamp == nil {
				if g, ok := gang.Of(pod, nil); ok && g.Key() == key {
					t.add(pod, p.set.gpuResource)
				}
			}
		}
	}
	return t, nil
}

// addGangIndex adds gangIndex to the pod informer; the scheduler builds
// plugins before it starts its informers, so this normally succeeds.
func addGangIndex(inf cache.SharedIndexInformer) cache.Indexer {
	if err := inf.AddIndexers(cache.Indexers{gangIndex: indexByGang}); err != nil {
		return nil
	}
	return inf.GetIndexer()
}

// workLost is the cost of evicting a gang (or a lone pod) at now: its GPUs
// (its pods, when it has no GPUs) times the time since the job's last
// progress report. Without a report, or with one from before the gang
// started (a restarted job), everything since the start is lost; a report
// from the future (the job's clock is untrusted) counts as now.
func workLost(now time.Time, weight int64, start, lastReport time.Time) float64 {
	from := start
	if lastReport.After(from) {
		from = lastReport
	}
	if from.After(now) {
		from = now
	}
	return float64(weight) * now.Sub(from).Seconds()
}
