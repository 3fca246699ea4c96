package plugin

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/pkg/scheduler/framework/preemption"

	"github.com/progress-planner/planner/pkg/gang"
)

// preemptFunc is the Evaluator's PreemptPod.
type preemptFunc func(ctx context.Context, c preemption.Candidate, preemptor, victim *v1.Pod, pluginName string) error

// withGang wraps the Evaluator's victim deletion so that evicting a pod of
// a gang also evicts the gang's other assigned pods on other nodes: a
// distributed job cannot run on part of its pods, and leaving them would
// hold GPUs for nothing. The exception is a gang with a quorum (a
// PodGroup's minMember) that the pods left on other nodes still meet: they
// keep running, as Coscheduling would have let them start. The Evaluator
// itself only deletes the victims on the chosen node (those of the gang
// there are all victims already, see groupsOnNode). Deleting a pod that is
// already gone is not an error.
func (p *Plugin) withGang(preempt preemptFunc) preemptFunc {
	return func(ctx context.Context, c preemption.Candidate, preemptor, victim *v1.Pod, pluginName string) error {
		if err := preempt(ctx, c, preemptor, victim, pluginName); err != nil {
			return err
		}
		g, _, grouped := p.member(victim)
		if !grouped {
			return nil
		}
		members, err := p.evaluator.PodLister.Pods(victim.Namespace).List(labels.SelectorFromSet(g.MemberLabels()))
		if err != nil {
			return fmt.Errorf("listing the pods of gang %s to evict with %s: %w", g.Key(), klog.KObj(victim), err)
		}
		victims := map[types.UID]bool{}
		for _, v := range c.Victims().Pods {
			victims[v.UID] = true
		}
		var rest []*v1.Pod
		for _, m := range members {
			if victims[m.UID] || m.Spec.NodeName == "" || m.Spec.NodeName == c.Name() || m.DeletionTimestamp != nil {
				continue
			}
			if mg, ok := gang.Of(m, nil); !ok || mg.Key() != g.Key() {
				continue
			}
			rest = append(rest, m)
		}
		if g.MinMember > 0 && len(rest) >= int(g.MinMember) {
			return nil
		}
		logger := klog.FromContext(ctx)
		for _, m := range rest {
			logger.V(2).Info("Evicting the rest of a preempted gang", "preemptor", klog.KObj(preemptor), "victim", klog.KObj(victim),
				"member", klog.KObj(m), "node", m.Spec.NodeName, "gang", g.Key(), "rule", g.Rule)
			if err := preempt(ctx, c, preemptor, m, pluginName); err != nil {
				return fmt.Errorf("evicting %s with its gang member %s: %w", klog.KObj(m), klog.KObj(victim), err)
			}
		}
		return nil
	}
}
