//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	schedconfig "k8s.io/kubernetes/pkg/scheduler/apis/config"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	schedv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/progress-planner/planner/pkg/preempt"
	"github.com/progress-planner/planner/scheduler/plugin"
)

// The "with scheduler-plugins" scenarios of docs/scheduler-plugin.md: the
// PodGroup and ElasticQuota CRDs installed from the pinned
// sigs.k8s.io/scheduler-plugins module's manifests, the scheduler with
// planner-scheduler's registry (ProgressAware and the scheduler-plugins
// plugins, from that module).

const (
	coschedulingConfig = "../../config/scheduler/scheduler-config-coscheduling.yaml"
	capacityConfig     = "../../config/scheduler/scheduler-config-capacityscheduling.yaml"
)

// schedulerPluginsDir is the pinned scheduler-plugins module in the module
// cache (the version scheduler/go.mod selects).
func schedulerPluginsDir(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "sigs.k8s.io/scheduler-plugins").Output()
	dir := strings.TrimSpace(string(out))
	if err != nil || dir == "" {
		t.Fatalf("sigs.k8s.io/scheduler-plugins is not in the module cache (go mod download sigs.k8s.io/scheduler-plugins): %v", err)
	}
	return dir
}

// setupSchedulerPlugins is setup with the PodGroup and ElasticQuota CRDs
// from the pinned module's manifests.
func setupSchedulerPlugins(t *testing.T) (*rest.Config, client.Client) {
	t.Helper()
	dir := schedulerPluginsDir(t)
	return setup(t,
		filepath.Join(dir, "manifests", "coscheduling", "crd.yaml"),
		filepath.Join(dir, "manifests", "capacityscheduling", "crd.yaml"))
}

// inProcessFile runs the scheduler in-process with the profile of a
// configuration file, renamed to schedulerName when that is not "".
func inProcessFile(t *testing.T, cfg *rest.Config, file, schedulerName string) schedulerRun {
	profiles := profilesFrom(t, file)
	if schedulerName != "" {
		profiles[0].SchedulerName = schedulerName
	}
	return inProcess(t, cfg, profiles)
}

// gangJob is a PodGroup of 8-GPU pods and, when verdict is set, the
// ProgressForecast the planner would publish for its job (named after the
// PodGroup, as Trainer's coscheduling names it after the TrainJob).
type gangJob struct {
	name      string
	pods      int
	minMember int32
	pc        string
	verdict   preempt.Verdict
	reported  time.Duration
	leased    bool
}

// runGangScenario fills nodes 8-GPU nodes with the running gangs, then
// creates the waiting gang and waits until all of its pods are bound. It
// returns the preempted pods, sorted; the others must still be where they
// were.
func runGangScenario(t *testing.T, c client.Client, variant string, run schedulerRun, nodes int, running []gangJob, waiting gangJob) []string {
	t.Helper()
	ctx := context.Background()
	ns := "sched-" + variant
	if err := c.Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	for i := range nodes {
		createGPUNode(ctx, t, c, fmt.Sprintf("%s-gpu-%d", variant, i), variant, 8)
	}
	now := time.Now()
	for _, j := range running {
		if j.verdict == "" {
			continue
		}
		var lease *time.Time
		if j.leased {
			lease = ptr.To(now.Add(time.Hour))
		}
		createForecast(ctx, t, c, ns, j.name, j.verdict, now.Add(-j.reported), lease)
	}
	schedulerName, stop := run()
	defer stop()
	stopKubelet := fakeKubelet(ctx, t, c, ns)
	defer stopKubelet()

	nodeOf := map[string]string{}
	var pods []*v1.Pod
	for _, j := range running {
		ps := createGang(ctx, t, c, ns, j, schedulerName, variant)
		for _, p := range ps {
			nodeOf[p.Name] = waitBound(ctx, t, c, p)
		}
		pods = append(pods, ps...)
	}
	t.Logf("%s: placement %v", variant, nodeOf)
	for _, p := range createGang(ctx, t, c, ns, waiting, schedulerName, variant) {
		t.Logf("%s: %s bound to %s", variant, p.Name, waitBound(ctx, t, c, p))
	}
	var victims []string
	for _, p := range pods {
		var got v1.Pod
		err := c.Get(ctx, client.ObjectKeyFromObject(p), &got)
		switch {
		case apierrors.IsNotFound(err) || (err == nil && got.DeletionTimestamp != nil):
			victims = append(victims, p.Name)
		case err != nil:
			t.Fatal(err)
		case got.Spec.NodeName != nodeOf[p.Name]:
			t.Errorf("%s: pod %s moved from %s to %q", variant, p.Name, nodeOf[p.Name], got.Spec.NodeName)
		}
	}
	slices.Sort(victims)
	t.Logf("%s: the waiting gang preempted %v", variant, victims)
	return victims
}

// createGang creates j's PodGroup and its pods.
func createGang(ctx context.Context, t *testing.T, c client.Client, ns string, j gangJob, schedulerName, variant string) []*v1.Pod {
	t.Helper()
	pg := &schedv1alpha1.PodGroup{ObjectMeta: metav1.ObjectMeta{Name: j.name, Namespace: ns}, Spec: schedv1alpha1.PodGroupSpec{MinMember: j.minMember}}
	if err := c.Create(ctx, pg); err != nil {
		t.Fatal(err)
	}
	var pods []*v1.Pod
	for i := range j.pods {
		pods = append(pods, createLabelledPod(ctx, t, c, ns, fmt.Sprintf("%s-%d", j.name, i),
			map[string]string{plugin.PodGroupLabel: j.name}, j.pc, schedulerName, variant))
	}
	return pods
}

// TestCoschedulingGangPreemption: four full 8-GPU nodes run two PodGroup
// gangs of two pods: a plateaued job (priority 200) and a near-done job
// under a NearDone lease (priority 100). A gang of two urgent pods
// (priority 1000, minMember 2) arrives. With ProgressAware + Coscheduling
// (the shipped configuration) the plateaued gang is preempted as a whole
// and the urgent gang runs on its nodes; with scheduler-plugins' own
// Coscheduling configuration (DefaultPreemption) in the same binary, the
// near-done gang is the one preempted.
func TestCoschedulingGangPreemption(t *testing.T) {
	cfg, c := setupSchedulerPlugins(t)
	dir := schedulerPluginsDir(t)
	running := []gangJob{
		{name: "plateaued", pods: 2, minMember: 2, pc: midPC, verdict: preempt.Plateaued, reported: 20 * time.Minute},
		{name: "near-done", pods: 2, minMember: 2, pc: lowPC, verdict: preempt.NearDone, reported: time.Minute, leased: true},
	}
	waiting := gangJob{name: "urgent", pods: 2, minMember: 2, pc: urgentPC}
	withPlugin := runGangScenario(t, c, "pg-plugin", inProcessFile(t, cfg, coschedulingConfig, ""), 4, running, waiting)
	distribution := filepath.Join(dir, "manifests", "coscheduling", "scheduler-config.yaml")
	withDefault := runGangScenario(t, c, "pg-default", inProcessFile(t, cfg, distribution, "coscheduling-only"), 4, running, waiting)
	if !slices.Equal(withPlugin, []string{"plateaued-0", "plateaued-1"}) {
		t.Errorf("with ProgressAware + Coscheduling the victims are %v, want the whole plateaued gang", withPlugin)
	}
	// The composition docs/scheduler-plugin.md describes, as the framework
	// expanded the shipped configuration.
	for _, want := range []struct {
		point   string
		plugins func(*schedconfig.Plugins) schedconfig.PluginSet
		names   []string
	}{
		{"QueueSort", func(p *schedconfig.Plugins) schedconfig.PluginSet { return p.QueueSort }, []string{"ProgressAware"}},
		{"PostFilter", func(p *schedconfig.Plugins) schedconfig.PluginSet { return p.PostFilter }, []string{"ProgressAware", "Coscheduling"}},
		{"Permit", func(p *schedconfig.Plugins) schedconfig.PluginSet { return p.Permit }, []string{"Coscheduling"}},
	} {
		if got := enabledAt("planner-scheduler", want.plugins); !slices.Equal(got, want.names) {
			t.Errorf("%s of %s: %v, want %v", want.point, coschedulingConfig, got, want.names)
		}
	}
	if got := enabledAt("planner-scheduler", func(p *schedconfig.Plugins) schedconfig.PluginSet { return p.PreFilter }); !slices.Contains(got, "Coscheduling") {
		t.Errorf("PreFilter of %s: %v, want Coscheduling among them", coschedulingConfig, got)
	}
	if !slices.Equal(withDefault, []string{"near-done-0", "near-done-1"}) {
		t.Errorf("with Coscheduling and DefaultPreemption the victims are %v, want the near-done gang (the lowest priority)", withDefault)
	}
}

// TestPlannerSchedulerCommandCoscheduling runs the gang scenario with the
// planner-scheduler binary and the shipped ProgressAware + Coscheduling
// configuration (leader election included; only the credentials are
// added).
func TestPlannerSchedulerCommandCoscheduling(t *testing.T) {
	cfg, c := setupSchedulerPlugins(t)
	running := []gangJob{
		{name: "plateaued", pods: 2, minMember: 2, pc: midPC, verdict: preempt.Plateaued, reported: 20 * time.Minute},
		{name: "near-done", pods: 2, minMember: 2, pc: lowPC, verdict: preempt.NearDone, reported: time.Minute, leased: true},
	}
	waiting := gangJob{name: "urgent", pods: 2, minMember: 2, pc: urgentPC}
	victims := runGangScenario(t, c, "pg-command", runBinary(t, cfg, coschedulingConfig, "planner-scheduler"), 4, running, waiting)
	if !slices.Equal(victims, []string{"plateaued-0", "plateaued-1"}) {
		t.Errorf("planner-scheduler preempted %v, want the whole plateaued gang", victims)
	}
}

// TestCoschedulingAloneSchedulesGang: the planner-scheduler binary with
// scheduler-plugins' own Coscheduling configuration (ProgressAware not
// enabled) still schedules gangs all-or-nothing, as in scheduler-plugins'
// integration test: two pods of a PodGroup with minMember 3 stay pending,
// the third lets all three bind.
func TestCoschedulingAloneSchedulesGang(t *testing.T) {
	cfg, c := setupSchedulerPlugins(t)
	ctx := context.Background()
	distribution := filepath.Join(schedulerPluginsDir(t), "manifests", "coscheduling", "scheduler-config.yaml")
	schedulerName, stop := runBinary(t, cfg, distribution, "default-scheduler")()
	defer stop()
	const ns, variant = "sched-coscheduling", "coscheduling"
	if err := c.Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		createGPUNode(ctx, t, c, fmt.Sprintf("%s-gpu-%d", variant, i), variant, 8)
	}
	pg := &schedv1alpha1.PodGroup{ObjectMeta: metav1.ObjectMeta{Name: "gang", Namespace: ns}, Spec: schedv1alpha1.PodGroupSpec{MinMember: 3}}
	if err := c.Create(ctx, pg); err != nil {
		t.Fatal(err)
	}
	labels := func() map[string]string { return map[string]string{plugin.PodGroupLabel: "gang"} }
	var pods []*v1.Pod
	for i := range 2 {
		pods = append(pods, createLabelledPod(ctx, t, c, ns, fmt.Sprintf("gang-%d", i), labels(), lowPC, schedulerName, variant))
	}
	// Two of three: Coscheduling's PreFilter turns them away (not enough
	// siblings), whatever room there is.
	staysUnbound(ctx, t, c, 5*time.Second, pods...)
	pods = append(pods, createLabelledPod(ctx, t, c, ns, "gang-2", labels(), lowPC, schedulerName, variant))
	nodes := map[string]bool{}
	for _, p := range pods {
		nodes[waitBound(ctx, t, c, p)] = true
	}
	if len(nodes) != 3 {
		t.Errorf("the gang's 8-GPU pods share nodes: %v", nodes)
	}
}

// TestCapacitySchedulingCombination: ProgressAware + CapacityScheduling
// (the shipped configuration) enforces an ElasticQuota: in a namespace
// whose quota allows 8 GPUs, a second 8-GPU pod stays pending though a
// node is free, and a pod in a namespace without a quota schedules.
func TestCapacitySchedulingCombination(t *testing.T) {
	cfg, c := setupSchedulerPlugins(t)
	ctx := context.Background()
	schedulerName, stop := inProcessFile(t, cfg, capacityConfig, "")()
	defer stop()
	// Only CapacityScheduling preempts; ProgressAware orders the queue.
	if got := enabledAt(schedulerName, func(p *schedconfig.Plugins) schedconfig.PluginSet { return p.PostFilter }); !slices.Equal(got, []string{"CapacityScheduling"}) {
		t.Errorf("PostFilter of %s: %v, want [CapacityScheduling]", capacityConfig, got)
	}
	if got := enabledAt(schedulerName, func(p *schedconfig.Plugins) schedconfig.PluginSet { return p.QueueSort }); !slices.Equal(got, []string{"ProgressAware"}) {
		t.Errorf("QueueSort of %s: %v, want [ProgressAware]", capacityConfig, got)
	}
	const ns, variant = "sched-quota", "quota"
	for _, n := range []string{ns, ns + "-free"} {
		if err := c.Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: n}}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 3 {
		createGPUNode(ctx, t, c, fmt.Sprintf("%s-gpu-%d", variant, i), variant, 8)
	}
	eight := v1.ResourceList{gpu: resource.MustParse("8")}
	eq := &schedv1alpha1.ElasticQuota{ObjectMeta: metav1.ObjectMeta{Name: "team", Namespace: ns}, Spec: schedv1alpha1.ElasticQuotaSpec{Min: eight, Max: eight}}
	if err := c.Create(ctx, eq); err != nil {
		t.Fatal(err)
	}
	// CapacityScheduling sees the quota through its informer; give it a
	// moment, then the first pod must fit and the second must not.
	time.Sleep(2 * time.Second)
	first := createLabelledPod(ctx, t, c, ns, "first", nil, lowPC, schedulerName, variant)
	waitBound(ctx, t, c, first)
	second := createLabelledPod(ctx, t, c, ns, "second", nil, lowPC, schedulerName, variant)
	free := createLabelledPod(ctx, t, c, ns+"-free", "free", nil, lowPC, schedulerName, variant)
	waitBound(ctx, t, c, free)
	staysUnbound(ctx, t, c, 5*time.Second, second)
}

// staysUnbound checks for d that none of pods is bound to a node.
func staysUnbound(ctx context.Context, t *testing.T, c client.Client, d time.Duration, pods ...*v1.Pod) {
	t.Helper()
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(200 * time.Millisecond) {
		for _, p := range pods {
			var got v1.Pod
			if err := c.Get(ctx, client.ObjectKeyFromObject(p), &got); err != nil {
				t.Fatal(err)
			}
			if got.Spec.NodeName != "" {
				t.Fatalf("%s bound to %s", p.Name, got.Spec.NodeName)
			}
		}
	}
}
