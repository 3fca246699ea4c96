package plugin

import (
	"context"
	"slices"
	"time"

	v1 "k8s.io/api/core/v1"
	policy "k8s.io/api/policy/v1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
)

// SelectVictimsOnNode implements preemption.Interface with the planner's
// rules (package doc). nodeInfo and state are the Evaluator's copies.
func (p *Plugin) SelectVictimsOnNode(ctx context.Context, state fwk.CycleState, pod *v1.Pod,
	nodeInfo fwk.NodeInfo, pdbs []*policy.PodDisruptionBudget) ([]*v1.Pod, int, *fwk.Status) {
	logger := klog.FromContext(ctx)
	groups, planned, err := p.groupsOnNode(pod, nodeInfo, pdbs, p.clock.Now())
	if err != nil {
		return nil, 0, fwk.AsStatus(err)
	}
	if !planned {
		// No pod of a gang is involved: the default's choice.
		return p.DefaultPreemption.SelectVictimsOnNode(ctx, state, pod, nodeInfo, pdbs)
	}
	if len(groups) == 0 {
		return nil, 0, fwk.NewStatus(fwk.UnschedulableAndUnresolvable, "No preemption victims found for incoming pod")
	}

	remove := func(g *group) error {
		for _, pi := range g.infos {
			if err := nodeInfo.RemovePod(logger, pi.GetPod()); err != nil {
				return err
			}
			if s := p.fh.RunPreFilterExtensionRemovePod(ctx, state, pod, pi, nodeInfo); !s.IsSuccess() {
				return s.AsError()
			}
		}
		return nil
	}
	add := func(g *group) error {
		for _, pi := range g.infos {
			nodeInfo.AddPodInfo(pi)
			if s := p.fh.RunPreFilterExtensionAddPod(ctx, state, pod, pi, nodeInfo); !s.IsSuccess() {
				return s.AsError()
			}
		}
		return nil
	}

	// Remove every eligible group; if the preemptor does not fit even then,
	// this node cannot help.
	for _, g := range groups {
		if err := remove(g); err != nil {
			return nil, 0, fwk.AsStatus(err)
		}
	}
	if s := p.fh.RunFilterPluginsWithNominatedPods(ctx, state, pod, nodeInfo); !s.IsSuccess() {
		return nil, 0, s
	}
	// Give groups back, most valuable first (the reverse of the victim
	// order), while the preemptor still fits.
	slices.SortStableFunc(groups, compareVictims)
	var victims []*group
	for i := len(groups) - 1; i >= 0; i-- {
		g := groups[i]
		if err := add(g); err != nil {
			return nil, 0, fwk.AsStatus(err)
		}
		if p.fh.RunFilterPluginsWithNominatedPods(ctx, state, pod, nodeInfo).IsSuccess() {
			continue
		}
		if err := remove(g); err != nil {
			return nil, 0, fwk.AsStatus(err)
		}
		victims = append(victims, g)
		if v := logger.V(5); v.Enabled() { // the arguments allocate
			v.Info("Progress-aware preemption victim group", "preemptor", klog.KObj(pod), "node", klog.KObj(nodeInfo.Node()),
				"group", g.key, "protected", g.protected, "stalled", g.stalled, "workLostGPUSeconds", int64(g.workLost), "gangPods", g.gangPods)
		}
	}
	// victims are most valuable first, as the Evaluator expects.
	var pods []*v1.Pod
	violating := 0
	for _, g := range victims {
		pods = append(pods, g.pods...)
		if g.pdbViolating {
			violating += len(g.pods)
		}
	}
	return pods, violating, fwk.NewStatus(fwk.Success)
}

// groupsOnNode collects the eligible groups on a node and reports whether
// any eligible pod belongs to a gang (a tracked job's or a PodGroup's). A
// gang with a pod the preemptor may not evict is not eligible at all; a
// protected gang is eligible only with the priority margin.
func (p *Plugin) groupsOnNode(preemptor *v1.Pod, nodeInfo fwk.NodeInfo,
	pdbs []*policy.PodDisruptionBudget, now time.Time) ([]*group, bool, error) {
	prio := podPriority(preemptor)
	byKey := map[string]*group{}
	var order []*group
	blocked := map[string]bool{}
	planned := false
	for _, pi := range nodeInfo.GetPods() {
		pod := pi.GetPod()
		gg, jf, grouped := p.member(pod)
		key := pod.Namespace + "/" + pod.Name
		if grouped {
			key = gg.Key()
		}
		if podPriority(pod) >= prio {
			blocked[key] = true
			continue
		}
		planned = planned || grouped
		g := byKey[key]
		if g == nil {
			g = &group{key: key, job: jf, priority: podPriority(pod), start: podStart(pod)}
			if grouped {
				g.gang = &gg
			}
			byKey[key] = g
			order = append(order, g)
		}
		g.pods = append(g.pods, pod)
		g.infos = append(g.infos, pi)
		g.priority = max(g.priority, podPriority(pod))
		if s := podStart(pod); s.Before(g.start) {
			g.start = s
		}
	}
	out := order[:0]
	for _, g := range order {
		if blocked[g.key] {
			continue
		}
		if err := p.cost(g, now); err != nil {
			return nil, false, err
		}
		if g.protected && int64(prio)-int64(g.priority) < int64(p.set.protectionMargin) {
			continue
		}
		out = append(out, g)
	}
	markPDBViolations(out, pdbs)
	return out, planned, nil
}

// cost fills in the verdict-derived fields and the eviction cost of g.
func (p *Plugin) cost(g *group, now time.Time) error {
	if g.gang == nil {
		pod := g.pods[0]
		g.gangPods = 1
		g.workLost = workLost(now, weight(podGPUs(pod, p.set.gpuResource), 1), g.start, time.Time{})
		return nil
	}
	// JobForecast's methods take a nil forecast (an untracked PodGroup) as
	// no lease and no verdict.
	g.protected = g.job.Leased(now)
	g.stalled = g.job.Stalled(now, p.set.maxForecastAge)
	t, err := p.gang(g.key)
	if err != nil {
		return err
	}
	if t.pods < len(g.pods) { // the API lags the snapshot: count what is here
		t = gangTotals{}
		for _, pod := range g.pods {
			t.add(pod, p.set.gpuResource)
		}
	}
	if mm := int(g.gang.MinMember); mm > 0 && t.pods-len(g.pods) >= mm {
		// The gang's pods elsewhere keep its quorum: only these go, and
		// only they are lost (withGang leaves the rest running).
		g.partial = true
		t = gangTotals{}
		for _, pod := range g.pods {
			t.add(pod, p.set.gpuResource)
		}
	}
	g.gangPods = t.pods
	start := t.start
	if start.IsZero() || g.start.Before(start) {
		start = g.start
	}
	var lastReport time.Time
	if g.job != nil {
		lastReport = g.job.LastReport
	}
	g.workLost = workLost(now, weight(t.gpus, int64(g.gangPods)), start, lastReport)
	return nil
}

// weight is GPUs, or the pod count for a group without GPUs, so that the
// time still orders such groups.
func weight(gpus, pods int64) int64 {
	if gpus > 0 {
		return gpus
	}
	return pods
}
