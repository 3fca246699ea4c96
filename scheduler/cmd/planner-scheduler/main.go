// Command planner-scheduler is kube-scheduler with the planner's
// progress-aware plugin registered (docs/scheduler-plugin.md). It takes
// every kube-scheduler flag; enable the plugin in a profile of the
// KubeSchedulerConfiguration passed with --config (config/scheduler/).
package main

import (
	"os"

	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register" // JSON log format, as kube-scheduler
	_ "k8s.io/component-base/metrics/prometheus/clientgo"
	_ "k8s.io/component-base/metrics/prometheus/version"
	"k8s.io/kubernetes/cmd/kube-scheduler/app"

	"github.com/progress-planner/planner/scheduler/plugin"
)

func main() {
	cmd := app.NewSchedulerCommand(app.WithPlugin(plugin.Name, plugin.New))
	os.Exit(cli.Run(cmd))
}
