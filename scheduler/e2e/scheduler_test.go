//go:build e2e

package e2e

import (
	"context"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	schedoptions "k8s.io/kubernetes/cmd/kube-scheduler/app/options"
	"k8s.io/kubernetes/pkg/scheduler"
	schedconfig "k8s.io/kubernetes/pkg/scheduler/apis/config"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
	"k8s.io/kubernetes/pkg/scheduler/profile"

	"github.com/progress-planner/planner/scheduler/plugin"
	"github.com/progress-planner/planner/scheduler/plugins"
)

// configFile is the shipped example configuration (relative to this
// directory); the plugin scenario runs the scheduler with its profile.
const configFile = "../../config/scheduler/scheduler-config.yaml"

// pluginProfiles loads the example configuration's profiles.
func pluginProfiles(t *testing.T) []schedconfig.KubeSchedulerProfile {
	return profilesFrom(t, configFile)
}

// profilesFrom loads a KubeSchedulerConfiguration file's profiles.
func profilesFrom(t *testing.T, file string) []schedconfig.KubeSchedulerProfile {
	t.Helper()
	cfg, err := schedoptions.LoadConfigFromFile(klog.Background(), file)
	if err != nil {
		t.Fatalf("loading %s: %v", file, err)
	}
	return cfg.Profiles
}

// startScheduler runs kube-scheduler's scheduler in-process with the given
// profiles (the out-of-tree registry of planner-scheduler: ProgressAware
// and the scheduler-plugins plugins) until the returned stop
// is called or the test ends. Binding is the scheduler's own; no kubelet
// runs, so pods stay Pending on their node.
func startScheduler(ctx context.Context, t *testing.T, cfg *rest.Config, profiles []schedconfig.KubeSchedulerProfile) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(ctx)
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	informerFactory := scheduler.NewInformerFactory(cs, 0)
	dynInformerFactory := dynamicinformer.NewDynamicSharedInformerFactory(dyn, 0)
	broadcaster := events.NewBroadcaster(&events.EventSinkImpl{Interface: cs.EventsV1()})
	sched, err := scheduler.New(ctx, cs, informerFactory, dynInformerFactory, profile.NewRecorderFactory(broadcaster),
		scheduler.WithKubeConfig(cfg),
		scheduler.WithProfiles(profiles...),
		scheduler.WithFrameworkOutOfTreeRegistry(registry()),
		scheduler.WithPodInitialBackoffSeconds(1),
		scheduler.WithPodMaxBackoffSeconds(2),
	)
	if err != nil {
		cancel()
		t.Fatalf("building the scheduler: %v", err)
	}
	for name, fw := range sched.Profiles {
		recordPlugins(name, fw.ListPlugins())
	}
	broadcaster.StartRecordingToSink(ctx.Done())
	informerFactory.Start(ctx.Done())
	dynInformerFactory.Start(ctx.Done())
	informerFactory.WaitForCacheSync(ctx.Done())
	dynInformerFactory.WaitForCacheSync(ctx.Done())
	done := make(chan struct{})
	go func() { defer close(done); sched.Run(ctx) }()
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		<-done
		broadcaster.Shutdown()
		informerFactory.Shutdown()
		dynInformerFactory.Shutdown()
	}
	t.Cleanup(stop)
	return stop
}

var (
	pluginsMu sync.Mutex
	// pluginsOf is, per scheduler name, the plugins of each extension point
	// of the profile an in-process scheduler last ran, as its framework
	// expanded them from the configuration.
	pluginsOf = map[string]*schedconfig.Plugins{}
)

func recordPlugins(name string, p *schedconfig.Plugins) {
	pluginsMu.Lock()
	defer pluginsMu.Unlock()
	pluginsOf[name] = p
}

// enabledAt names the plugins a profile runs at an extension point, in order.
func enabledAt(name string, point func(*schedconfig.Plugins) schedconfig.PluginSet) []string {
	pluginsMu.Lock()
	defer pluginsMu.Unlock()
	var out []string
	if p := pluginsOf[name]; p != nil {
		for _, e := range point(p).Enabled {
			out = append(out, e.Name)
		}
	}
	return out
}

// registry is what cmd/planner-scheduler registers.
func registry() frameworkruntime.Registry {
	r := plugins.Registry()
	r[plugin.Name] = plugin.New
	return r
}

// waitTimeout bounds every wait on the scheduler.
const waitTimeout = 60 * time.Second
