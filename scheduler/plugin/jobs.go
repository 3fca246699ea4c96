package plugin

import (
	"time"

	v1 "k8s.io/api/core/v1"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	jobsetapi "sigs.k8s.io/jobset/api/jobset/v1alpha2"
)

// JobLabel names a pod's JobSet; the Trainer names the JobSet after the
// TrainJob, so the value is also the TrainJob's and the ProgressForecast's
// name. (Trainer v2.2.0 puts no TrainJob label of its own on pods.)
const JobLabel = jobsetapi.JobSetNameKey

// jobName is the TrainJob a pod belongs to, "" for none.
func jobName(p *v1.Pod) string { return p.Labels[JobLabel] }

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
