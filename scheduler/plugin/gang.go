package plugin

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/pkg/scheduler/framework/preemption"
)

// preemptFunc is the Evaluator's PreemptPod.
type preemptFunc func(ctx context.Context, c preemption.Candidate, preemptor, victim *v1.Pod, pluginName string) error

// withGang wraps the Evaluator's victim deletion so that evicting a pod of
// a tracked job also evicts the job's other assigned pods on other nodes:
// a distributed job cannot run on part of its pods, and leaving them would
// hold GPUs for nothing. The Evaluator itself only deletes the victims on
// the chosen node (those of the gang there are all victims already, see
// groupsOnNode). Deleting a pod that is already gone is not an error.
func (p *Plugin) withGang(preempt preemptFunc) preemptFunc {
	return func(ctx context.Context, c preemption.Candidate, preemptor, victim *v1.Pod, pluginName string) error {
		if err := preempt(ctx, c, preemptor, victim, pluginName); err != nil {
			return err
		}
		job := jobName(victim)
		if job == "" || !p.forecasts.Get(victim.Namespace, job).Tracked() {
			return nil
		}
		members, err := p.evaluator.PodLister.Pods(victim.Namespace).List(labels.SelectorFromSet(labels.Set{JobLabel: job}))
		if err != nil {
			return fmt.Errorf("listing the pods of job %s/%s to evict with %s: %w", victim.Namespace, job, klog.KObj(victim), err)
		}
		logger := klog.FromContext(ctx)
		for _, m := range members {
			if m.UID == victim.UID || m.Spec.NodeName == "" || m.Spec.NodeName == c.Name() || m.DeletionTimestamp != nil {
				continue
			}
			logger.V(2).Info("Evicting the rest of a preempted gang", "preemptor", klog.KObj(preemptor), "victim", klog.KObj(victim),
				"member", klog.KObj(m), "node", m.Spec.NodeName, "job", klog.KRef(victim.Namespace, job))
			if err := preempt(ctx, c, preemptor, m, pluginName); err != nil {
				return fmt.Errorf("evicting %s with its gang member %s: %w", klog.KObj(m), klog.KObj(victim), err)
			}
		}
		return nil
	}
}
