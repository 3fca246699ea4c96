//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	configv1 "k8s.io/kube-scheduler/config/v1"
	schedconfig "k8s.io/kubernetes/pkg/scheduler/apis/config"
	configtesting "k8s.io/kubernetes/pkg/scheduler/apis/config/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	schedv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/progress-planner/planner/api/v1alpha1"
	"github.com/progress-planner/planner/pkg/preempt"
	"github.com/progress-planner/planner/scheduler/plugin"
)

// The scenarios of docs/scheduler-plugin.md on the real control plane
// (kube-apiserver and etcd; the scheduler in-process; Node objects with
// nvidia.com/gpu capacity and no kubelet). TestProgressAwarePreemption: two
// 8-GPU nodes are full, one with a plateaued job (priority 200), one with a
// near-done job under a NearDone lease (priority 100); an 8-GPU pod of
// priority 1000 arrives. With the plugin the plateaued job is evicted and
// the near-done job keeps running; the default scheduler evicts the
// near-done job (the lowest-priority victim).

const (
	gpu      = v1.ResourceName("nvidia.com/gpu")
	crdDir   = "../../config/crd/bases"
	lowPC    = "planner-e2e-low"    // 100: the near-done job
	midPC    = "planner-e2e-mid"    // 200: the plateaued job
	urgentPC = "planner-e2e-urgent" // 1000: the arriving pod
)

// job is one training job of a scenario: pods 8-GPU pods of priority
// class pc, and the ProgressForecast the planner would publish for it.
type job struct {
	name     string
	pods     int
	pc       string
	verdict  preempt.Verdict
	reported time.Duration // time since the job's last progress report
	leased   bool          // a NearDone lease for the next hour
}

// scenario is a set of 8-GPU nodes filled by jobs, then an urgent 8-GPU pod.
type scenario struct {
	nodes int
	jobs  []job
}

func TestProgressAwarePreemption(t *testing.T) {
	cfg, c := setup(t)
	sc := scenario{nodes: 2, jobs: []job{
		{name: "plateaued", pods: 1, pc: midPC, verdict: preempt.Plateaued, reported: 20 * time.Minute},
		{name: "near-done", pods: 1, pc: lowPC, verdict: preempt.NearDone, reported: time.Minute, leased: true},
	}}
	withPlugin := runScenario(t, c, "plugin", inProcess(t, cfg, pluginProfiles(t)), sc)
	withDefault := runScenario(t, c, "default", inProcess(t, cfg, defaultProfiles(t)), sc)
	if !slices.Equal(withPlugin, []string{"plateaued-0"}) {
		t.Errorf("with the plugin the victims are %v, want [plateaued-0]", withPlugin)
	}
	if !slices.Equal(withDefault, []string{"near-done-0"}) {
		t.Errorf("with the default scheduler the victims are %v, want [near-done-0] (the lowest priority)", withDefault)
	}
}

// TestProgressAwareGangPreemption: the plateaued job runs on two nodes;
// preempting one of its pods evicts both, and the near-done job on the
// third node keeps running. The default scheduler evicts the near-done job.
func TestProgressAwareGangPreemption(t *testing.T) {
	cfg, c := setup(t)
	sc := scenario{nodes: 3, jobs: []job{
		{name: "plateaued", pods: 2, pc: midPC, verdict: preempt.Plateaued, reported: 20 * time.Minute},
		{name: "near-done", pods: 1, pc: lowPC, verdict: preempt.NearDone, reported: time.Minute, leased: true},
	}}
	withPlugin := runScenario(t, c, "gang-plugin", inProcess(t, cfg, pluginProfiles(t)), sc)
	withDefault := runScenario(t, c, "gang-default", inProcess(t, cfg, defaultProfiles(t)), sc)
	if !slices.Equal(withPlugin, []string{"plateaued-0", "plateaued-1"}) {
		t.Errorf("with the plugin the victims are %v, want the whole plateaued gang", withPlugin)
	}
	if !slices.Equal(withDefault, []string{"near-done-0"}) {
		t.Errorf("with the default scheduler the victims are %v, want [near-done-0]", withDefault)
	}
}

// setup starts the control plane with the planner's CRDs (and any others
// given) and the priority classes of the scenarios.
func setup(t *testing.T, extraCRDs ...string) (*rest.Config, client.Client) {
	t.Helper()
	cfg := startControlPlane(t, append([]string{crdDir}, extraCRDs...)...)
	c := newClient(t, cfg)
	for name, value := range map[string]int32{lowPC: 100, midPC: 200, urgentPC: 1000} {
		pc := &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Value: value}
		if err := c.Create(context.Background(), pc); err != nil {
			t.Fatal(err)
		}
	}
	return cfg, c
}

// defaultProfiles is kube-scheduler's default profile.
func defaultProfiles(t *testing.T) []schedconfig.KubeSchedulerProfile {
	return configtesting.V1ToInternalWithDefaults(t, configv1.KubeSchedulerConfiguration{
		Profiles: []configv1.KubeSchedulerProfile{{SchedulerName: ptr.To("default-scheduler")}},
	}).Profiles
}

// schedulerRun starts a scheduler and returns the scheduler name its pods
// must carry and a function that stops it.
type schedulerRun func() (schedulerName string, stop func())

// inProcess runs kube-scheduler in the test process with profiles.
func inProcess(t *testing.T, cfg *rest.Config, profiles []schedconfig.KubeSchedulerProfile) schedulerRun {
	return func() (string, func()) {
		return profiles[0].SchedulerName, startScheduler(context.Background(), t, cfg, profiles)
	}
}

// runScenario runs sc with the scheduler run starts (one scheduler at a
// time, on nodes and in a namespace of its own) and returns the names of
// the preempted pods. Pods that were not preempted must still be bound
// where they were, and the urgent pod must end up on a victim's node.
func runScenario(t *testing.T, c client.Client, variant string, run schedulerRun, sc scenario) []string {
	t.Helper()
	ctx := context.Background()
	ns := "sched-" + variant
	if err := c.Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	var nodes []string
	for i := range sc.nodes {
		n := fmt.Sprintf("%s-gpu-%d", variant, i)
		createGPUNode(ctx, t, c, n, variant, 8)
		nodes = append(nodes, n)
	}
	defer func() {
		for _, n := range nodes {
			_ = c.Delete(ctx, &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: n}})
		}
	}()
	now := time.Now()
	for _, j := range sc.jobs {
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

	var pods []*v1.Pod
	nodeOf := map[string]string{}
	for _, j := range sc.jobs {
		for i := range j.pods {
			p := createPod(ctx, t, c, ns, fmt.Sprintf("%s-%d", j.name, i), j.name, j.pc, schedulerName, variant)
			nodeOf[p.Name] = waitBound(ctx, t, c, p)
			pods = append(pods, p)
		}
	}
	t.Logf("%s: placement %v", variant, nodeOf)

	urgent := createPod(ctx, t, c, ns, "urgent-0", "", urgentPC, schedulerName, variant)
	node := waitBound(ctx, t, c, urgent)
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
	onVictimNode := false
	for _, v := range victims {
		onVictimNode = onVictimNode || nodeOf[v] == node
	}
	if !onVictimNode {
		t.Errorf("%s: urgent pod bound to %s, where no victim (%v) ran", variant, node, victims)
	}
	t.Logf("%s: urgent pod bound to %s after preempting %v", variant, node, victims)
	return victims
}

func newClient(t *testing.T, cfg *rest.Config) client.Client {
	t.Helper()
	s := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	utilruntime.Must(v1alpha1.AddToScheme(s))
	utilruntime.Must(schedv1alpha1.AddToScheme(s))
	c, err := client.New(cfg, client.Options{Scheme: s})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// createGPUNode creates a Ready node with gpus GPUs (capacity and
// allocatable through the status subresource, as a device plugin would
// report them).
func createGPUNode(ctx context.Context, t *testing.T, c client.Client, name, variant string, gpus int64) {
	t.Helper()
	n := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"planner-e2e/variant": variant, v1.LabelHostname: name}}}
	if err := c.Create(ctx, n); err != nil {
		t.Fatal(err)
	}
	res := v1.ResourceList{
		gpu: *resource.NewQuantity(gpus, resource.DecimalSI), v1.ResourceCPU: resource.MustParse("64"),
		v1.ResourceMemory: resource.MustParse("512Gi"), v1.ResourcePods: resource.MustParse("110"),
	}
	n.Status = v1.NodeStatus{Capacity: res, Allocatable: res, Conditions: []v1.NodeCondition{{Type: v1.NodeReady, Status: v1.ConditionTrue}}}
	if err := c.Status().Update(ctx, n); err != nil {
		t.Fatal(err)
	}
	// The apiserver's TaintNodesByCondition admission taints a new node
	// not-ready; the node lifecycle controller (not running here) would
	// lift it once the node reports Ready.
	n.Spec.Taints = nil
	if err := c.Update(ctx, n); err != nil {
		t.Fatal(err)
	}
}

// createForecast writes the ProgressForecast the planner would publish for
// job: a decision made now with verdict v, the job's last report at
// report, and a NearDone lease until leaseEnd when given.
func createForecast(ctx context.Context, t *testing.T, c client.Client, ns, job string, v preempt.Verdict, report time.Time, leaseEnd *time.Time) {
	t.Helper()
	d := preempt.Decision{At: unix(time.Now()), Verdict: v, VerdictSince: unix(report), Mode: preempt.ModeEnforce,
		Reason: fmt.Sprintf("e2e: %s", v)}
	if leaseEnd != nil {
		d.ProtectedUntil = ptr.To(unix(*leaseEnd))
	}
	raw, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	pf := &v1alpha1.ProgressForecast{ObjectMeta: metav1.ObjectMeta{Name: job, Namespace: ns}, Spec: v1alpha1.ProgressForecastSpec{JobRef: v1alpha1.JobRef{APIVersion: "trainer.kubeflow.org/v1alpha1", Kind: "TrainJob", Name: job}}}
	if err := c.Create(ctx, pf); err != nil {
		t.Fatal(err)
	}
	pf.Status = v1alpha1.ProgressForecastStatus{Verdict: string(v), Mode: string(preempt.ModeEnforce), Reason: d.Reason,
		LastReportTime: ptr.To(metav1.NewTime(report)), Decision: &runtime.RawExtension{Raw: raw}}
	pf.Status.SetDecision(d.At, d.VerdictSince, d.StalledSince, d.ProtectedUntil)
	if err := c.Status().Update(ctx, pf); err != nil {
		t.Fatal(err)
	}
}

func unix(t time.Time) float64 { return float64(t.UnixNano()) / 1e9 }

// createPod creates an 8-GPU pod of job (the JobSet label the Trainer's
// pods carry; "" for none) for schedulerName on the variant's nodes.
func createPod(ctx context.Context, t *testing.T, c client.Client, ns, name, job, pc, schedulerName, variant string) *v1.Pod {
	t.Helper()
	labels := map[string]string{}
	if job != "" {
		labels[plugin.JobLabel] = job
	}
	return createLabelledPod(ctx, t, c, ns, name, labels, pc, schedulerName, variant)
}

// createLabelledPod is createPod with the pod's labels given.
func createLabelledPod(ctx context.Context, t *testing.T, c client.Client, ns, name string, labels map[string]string, pc, schedulerName, variant string) *v1.Pod {
	t.Helper()
	p := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels},
		Spec: v1.PodSpec{
			SchedulerName:     schedulerName,
			PriorityClassName: pc,
			NodeSelector:      map[string]string{"planner-e2e/variant": variant},
			Containers: []v1.Container{{Name: "train", Image: "trainer:e2e", Resources: v1.ResourceRequirements{
				Requests: v1.ResourceList{gpu: resource.MustParse("8")}, Limits: v1.ResourceList{gpu: resource.MustParse("8")},
			}}},
		},
	}
	if err := c.Create(ctx, p); err != nil {
		t.Fatal(err)
	}
	return p
}

// waitBound waits for the scheduler to bind p and returns its node.
func waitBound(ctx context.Context, t *testing.T, c client.Client, p *v1.Pod) string {
	t.Helper()
	node := ""
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, waitTimeout, true, func(ctx context.Context) (bool, error) {
		var got v1.Pod
		if err := c.Get(ctx, client.ObjectKeyFromObject(p), &got); err != nil {
			return false, err
		}
		node = got.Spec.NodeName
		return node != "", nil
	}); err != nil {
		t.Fatalf("pod %s/%s not bound: %v", p.Namespace, p.Name, err)
	}
	return node
}

// fakeKubelet finishes the deletion of preempted pods, as the kubelet would
// after their containers stop: without a kubelet a bound pod deleted with a
// grace period stays Terminating and keeps its node's GPUs in the
// scheduler's view. It records nothing; the test reads the victims from
// the API.
func fakeKubelet(ctx context.Context, t *testing.T, c client.Client, ns string) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(200 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			var pods v1.PodList
			if err := c.List(ctx, &pods, client.InNamespace(ns)); err != nil {
				continue
			}
			for i := range pods.Items {
				if p := &pods.Items[i]; p.DeletionTimestamp != nil {
					if err := c.Delete(ctx, p, client.GracePeriodSeconds(0)); err != nil && !apierrors.IsNotFound(err) {
						t.Logf("fake kubelet: deleting %s: %v", p.Name, err)
					}
				}
			}
		}
	}()
	return func() { cancel(); <-done }
}
