package plugin

import (
	"context"
	"math"
	"time"

	v1 "k8s.io/api/core/v1"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"
)

// nodeCost summarises one candidate node's victims by the victim rules,
// counted over groups (a gang counts once, with its whole cost).
type nodeCost struct {
	protected, pdbViolations, notStalled int64
	highestPriority                      int64
	workLost                             float64
	gangPods                             int64
	earliestStart                        time.Time
	gang                                 bool // a victim belongs to a gang
}

// OrderedScoreFuncs picks among candidate nodes by the same rules as the
// victims, applied to each node's whole victim set: fewest protected
// groups, fewest PDB violations, fewest groups that are not stalled, lowest
// highest priority, least work lost, fewest pods evicted (gangs included),
// then the latest-started victims. When no victim on any node belongs to a
// gang it returns nil, which makes the Evaluator use the default
// node order.
func (p *Plugin) OrderedScoreFuncs(_ context.Context, nodesToVictims map[string]*extenderv1.Victims) []func(node string) int64 {
	now := p.clock.Now()
	costs := make(map[string]nodeCost, len(nodesToVictims))
	anyGang := false
	for node, v := range nodesToVictims {
		c, err := p.nodeCost(v, now)
		if err != nil {
			// Without the costs the rules cannot rank the nodes; the
			// default order is a safe choice.
			return nil
		}
		costs[node] = c
		anyGang = anyGang || c.gang
	}
	if !anyGang {
		return nil
	}
	return []func(string) int64{
		func(n string) int64 { return -costs[n].protected },
		func(n string) int64 { return -costs[n].pdbViolations },
		func(n string) int64 { return -costs[n].notStalled },
		func(n string) int64 { return -costs[n].highestPriority },
		func(n string) int64 { return -int64(math.Round(costs[n].workLost)) },
		func(n string) int64 { return -costs[n].gangPods },
		func(n string) int64 {
			if s := costs[n].earliestStart; !s.IsZero() {
				return s.UnixNano()
			}
			return math.MinInt64
		},
	}
}

func (p *Plugin) nodeCost(v *extenderv1.Victims, now time.Time) (nodeCost, error) {
	c := nodeCost{pdbViolations: v.NumPDBViolations, highestPriority: math.MinInt64}
	seen := map[string]*group{}
	for _, pod := range v.Pods {
		p.victimGroup(pod, seen)
		c.highestPriority = max(c.highestPriority, int64(podPriority(pod)))
		if s := podStart(pod); c.earliestStart.IsZero() || s.Before(c.earliestStart) {
			c.earliestStart = s
		}
	}
	for _, g := range seen {
		if err := p.cost(g, now); err != nil {
			return c, err
		}
		c.gang = c.gang || g.gang != nil
		if g.protected {
			c.protected++
		}
		if !g.stalled {
			c.notStalled++
		}
		c.workLost += g.workLost
		c.gangPods += int64(g.gangPods)
	}
	return c, nil
}

// victimGroup adds pod to its group in seen.
func (p *Plugin) victimGroup(pod *v1.Pod, seen map[string]*group) {
	gg, jf, grouped := p.member(pod)
	key := pod.Namespace + "/" + pod.Name
	if grouped {
		key = gg.Key()
	}
	g := seen[key]
	if g == nil {
		g = &group{key: key, job: jf, priority: podPriority(pod), start: podStart(pod)}
		if grouped {
			g.gang = &gg
		}
		seen[key] = g
	}
	g.pods = append(g.pods, pod)
	if s := podStart(pod); s.Before(g.start) {
		g.start = s
	}
}
