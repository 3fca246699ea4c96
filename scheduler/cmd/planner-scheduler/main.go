// Command planner-scheduler is kube-scheduler with the planner's
// progress-aware plugin registered next to the scheduler-plugins
// distribution's plugins (sigs.k8s.io/scheduler-plugins, the pinned module,
// not copies), so that one binary serves clusters that use Coscheduling
// gangs or CapacityScheduling quotas (docs/scheduler-plugin.md, "With
// scheduler-plugins"). It takes every kube-scheduler flag; enable plugins
// in a profile of the KubeSchedulerConfiguration passed with --config
// (config/scheduler/).
package main

import (
	"os"

	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register" // JSON log format, as kube-scheduler
	_ "k8s.io/component-base/metrics/prometheus/clientgo"
	_ "k8s.io/component-base/metrics/prometheus/version"
	"k8s.io/kubernetes/cmd/kube-scheduler/app"

	"github.com/progress-planner/planner/scheduler/plugin"
	"github.com/progress-planner/planner/scheduler/plugins"
)

func main() {
	opts := []app.Option{app.WithPlugin(plugin.Name, plugin.New)}
	for _, p := range plugins.SchedulerPlugins() {
		opts = append(opts, app.WithPlugin(p.Name, p.Factory))
	}
	os.Exit(cli.Run(app.NewSchedulerCommand(opts...)))
}
