package plugin

import (
	"time"

	v1 "k8s.io/api/core/v1"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"

	"github.com/progress-planner/planner/pkg/gang"
)

// JobLabel names a pod's JobSet; the Trainer names the JobSet after the
// TrainJob, so the value is also the TrainJob's and the ProgressForecast's
// name. (Trainer v2.2.0 puts no TrainJob label of its own on pods.)
const JobLabel = gang.JobSetNameLabel

// PodGroupLabel names a pod's scheduler-plugins PodGroup.
const PodGroupLabel = gang.PodGroupLabel

// member is how the plugin sees a pod: its gang (pkg/gang, with PodGroup
// quorums from p.podGroups), its job's forecast when the job is tracked,
// and whether the pod is evicted only with its gang. A tracked job's pods
// are a gang (as before PodGroups); so are a PodGroup's pods whether the
// job is tracked or not, because the PodGroup itself declares that they
// run together and Coscheduling placed them so.
func (p *Plugin) member(pod *v1.Pod) (g gang.Gang, jf *JobForecast, grouped bool) {
	g, ok := gang.Of(pod, p.podGroups)
	if !ok {
		return g, nil, false
	}
	if jf = p.forecasts.Get(pod.Namespace, g.Job); !jf.Tracked() {
		jf = nil
	}
	return g, jf, jf != nil || g.Declared()
}

// podGPUs is what the pod requests of the GPU resource (the larger of the
// sum over containers and any init container, as the scheduler counts it).
func podGPUs(p *v1.Pod, resource v1.ResourceName) int64 {
	var sum, initMax int64
	for i := range p.Spec.Containers {
		if q, ok := p.Spec.Containers[i].Resources.Requests[resource]; ok {
			sum += q.Value()
		}
	}
	for i := range p.Spec.InitContainers {
		if q, ok := p.Spec.InitContainers[i].Resources.Requests[resource]; ok && q.Value() > initMax {
			initMax = q.Value()
		}
	}
	return max(sum, initMax)
}

// podStart is when the pod started running, else when it was created.
func podStart(p *v1.Pod) time.Time {
	if p.Status.StartTime != nil {
		return p.Status.StartTime.Time
	}
	return p.CreationTimestamp.Time
}

// podPriority is the pod's priority (0 when unset).
func podPriority(p *v1.Pod) int32 { return corev1helpers.PodPriority(p) }
