package plugin

import (
	"time"

	fwk "k8s.io/kube-scheduler/framework"

	"github.com/progress-planner/planner/pkg/gang"
)

// Less orders the scheduling queue: higher pod priority plus job boost
// first, then earlier arrival. A pod of a PodGroup arrives when its
// PodGroup was created, and pods arriving together go by PodGroup, so that
// a gang's pods stay next to each other in the queue as under
// Coscheduling's own QueueSort (which a profile cannot run together with
// this one). With no tracked job and no PodGroup involved it is the
// default PrioritySort order.
func (p *Plugin) Less(a, b fwk.QueuedPodInfo) bool {
	pa, ta, ka := p.queueKey(a)
	pb, tb, kb := p.queueKey(b)
	switch {
	case pa != pb:
		return pa > pb
	case !ta.Equal(tb):
		return ta.Before(tb)
	}
	return ka < kb
}

// queueKey is the pod's priority plus its job's effective boost (in 64
// bits, so that a boost cannot overflow a high priority), its arrival time
// and its PodGroup's key ("" for none).
func (p *Plugin) queueKey(q fwk.QueuedPodInfo) (int64, time.Time, string) {
	pod := q.GetPodInfo().GetPod()
	prio, at, key := int64(podPriority(pod)), q.GetTimestamp(), ""
	// The boost and the arrival do not depend on a quorum: no lookup.
	if g, ok := gang.Of(pod, nil); ok {
		if jf := p.forecasts.Get(pod.Namespace, g.Job); jf.Tracked() {
			prio += int64(jf.EffectiveBoost(p.clock.Now(), p.set.maxForecastAge))
		}
		if g.Kind == gang.KindPodGroup && p.podGroups != nil {
			if created, ok := p.podGroups.PodGroupCreated(g.Namespace, g.Name); ok {
				at, key = created, g.Key()
			}
		}
	}
	return prio, at, key
}
