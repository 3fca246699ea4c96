package plugin

import (
	fwk "k8s.io/kube-scheduler/framework"
)

// Less orders the scheduling queue: higher pod priority plus job boost
// first, then earlier arrival. With no tracked job involved it is the
// default PrioritySort order.
func (p *Plugin) Less(a, b fwk.QueuedPodInfo) bool {
	pa, pb := p.queuePriority(a), p.queuePriority(b)
	return pa > pb || (pa == pb && a.GetTimestamp().Before(b.GetTimestamp()))
}

// queuePriority is the pod's priority plus its job's effective boost, in
// 64 bits so that a boost cannot overflow a high priority.
func (p *Plugin) queuePriority(q fwk.QueuedPodInfo) int64 {
	pod := q.GetPodInfo().GetPod()
	prio := int64(podPriority(pod))
	if job := jobName(pod); job != "" {
		if jf := p.forecasts.Get(pod.Namespace, job); jf.Tracked() {
			prio += int64(jf.EffectiveBoost(p.clock.Now(), p.set.maxForecastAge))
		}
	}
	return prio
}
