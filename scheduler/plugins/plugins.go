// Package plugins lists the sigs.k8s.io/scheduler-plugins plugins that
// planner-scheduler registers next to ProgressAware: the same set, with the
// same names, as that distribution's own kube-scheduler build
// (cmd/scheduler/main.go of the pinned module), so that a configuration
// written for it runs unchanged. The e2e tests register the same list, so
// they run what the binary runs.
package plugins

import (
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"

	// The distribution's plugin args (CoschedulingArgs, CapacitySchedulingArgs…)
	// decode only once its config scheme is registered with kube-scheduler's.
	_ "sigs.k8s.io/scheduler-plugins/apis/config/scheme"
	"sigs.k8s.io/scheduler-plugins/pkg/capacityscheduling"
	"sigs.k8s.io/scheduler-plugins/pkg/coscheduling"
	"sigs.k8s.io/scheduler-plugins/pkg/networkaware/networkoverhead"
	"sigs.k8s.io/scheduler-plugins/pkg/networkaware/topologicalsort"
	"sigs.k8s.io/scheduler-plugins/pkg/noderesources"
	"sigs.k8s.io/scheduler-plugins/pkg/noderesourcetopology"
	"sigs.k8s.io/scheduler-plugins/pkg/podstate"
	"sigs.k8s.io/scheduler-plugins/pkg/preemptiontoleration"
	"sigs.k8s.io/scheduler-plugins/pkg/qos"
	"sigs.k8s.io/scheduler-plugins/pkg/sysched"
	"sigs.k8s.io/scheduler-plugins/pkg/trimaran/loadvariationriskbalancing"
	"sigs.k8s.io/scheduler-plugins/pkg/trimaran/lowriskovercommitment"
	"sigs.k8s.io/scheduler-plugins/pkg/trimaran/peaks"
	"sigs.k8s.io/scheduler-plugins/pkg/trimaran/targetloadpacking"
)

// Plugin is one registered plugin.
type Plugin struct {
	Name    string
	Factory frameworkruntime.PluginFactory
}

// SchedulerPlugins are the distribution's plugins, in its own order.
func SchedulerPlugins() []Plugin {
	return []Plugin{
		{capacityscheduling.Name, capacityscheduling.New},
		{coscheduling.Name, coscheduling.New},
		{loadvariationriskbalancing.Name, loadvariationriskbalancing.New},
		{networkoverhead.Name, networkoverhead.New},
		{topologicalsort.Name, topologicalsort.New},
		{noderesources.AllocatableName, noderesources.NewAllocatable},
		{noderesourcetopology.Name, noderesourcetopology.New},
		{preemptiontoleration.Name, preemptiontoleration.New},
		{targetloadpacking.Name, targetloadpacking.New},
		{lowriskovercommitment.Name, lowriskovercommitment.New},
		{sysched.Name, sysched.New},
		{peaks.Name, peaks.New},
		{podstate.Name, podstate.New},
		{qos.Name, qos.New},
	}
}

// Registry is SchedulerPlugins as an out-of-tree registry (for an
// in-process scheduler).
func Registry() frameworkruntime.Registry {
	r := frameworkruntime.Registry{}
	for _, p := range SchedulerPlugins() {
		r[p.Name] = p.Factory
	}
	return r
}
