package plugin

import (
	"context"
	"slices"
	"strconv"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	policy "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	clientsetfake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/apis/config"
	internalcache "k8s.io/kubernetes/pkg/scheduler/backend/cache"
	internalqueue "k8s.io/kubernetes/pkg/scheduler/backend/queue"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/defaultbinder"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/defaultpreemption"
	plfeature "k8s.io/kubernetes/pkg/scheduler/framework/plugins/feature"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/noderesources"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/queuesort"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
	tf "k8s.io/kubernetes/pkg/scheduler/testing/framework"
	testingclock "k8s.io/utils/clock/testing"
	schedv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/progress-planner/planner/pkg/gang"
	"github.com/progress-planner/planner/pkg/preempt"
)

const (
	ns  = "ml"
	gpu = v1.ResourceName("nvidia.com/gpu")
)

// now is the fixed instant of every test.
var now = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

// gpuNode is a node with n GPUs and room for anything else.
func gpuNode(name string, n int) *v1.Node {
	return st.MakeNode().Name(name).Capacity(map[v1.ResourceName]string{
		gpu: itoa(n), v1.ResourceCPU: "64", v1.ResourceMemory: "512Gi",
	}).Obj()
}

// jobPod is a running pod of TrainJob job ("" for none) on node.
func jobPod(name, job, node string, prio int32, gpus int, started time.Time) *v1.Pod {
	w := st.MakePod().Name(name).Namespace(ns).UID(name).Node(node).Priority(prio).
		Req(map[v1.ResourceName]string{gpu: itoa(gpus)}).StartTime(metav1.NewTime(started)).
		CreationTimestamp(metav1.NewTime(started))
	if job != "" {
		w = w.Label(JobLabel, job)
	}
	p := w.Obj()
	if p.Labels == nil {
		p.Labels = map[string]string{}
	}
	return p
}

// batchJobPod labels p as a pod of batch/v1 Job job (as the Job
// controller does), the job's gang by pkg/gang's job rule.
func batchJobPod(p *v1.Pod, job string) *v1.Pod {
	p.Labels[gang.JobNameLabel] = job
	return p
}

// preemptor is a pending pod asking for gpus GPUs.
func preemptor(prio int32, gpus int) *v1.Pod {
	return st.MakePod().Name("preemptor").Namespace(ns).UID("preemptor").Priority(prio).
		Req(map[v1.ResourceName]string{gpu: itoa(gpus)}).Obj()
}

// forecastOf is a fresh decision with verdict v whose job last reported
// `since` before now.
func forecastOf(job string, v preempt.Verdict, since time.Duration) *JobForecast {
	return &JobForecast{Namespace: ns, Name: job, Verdict: v, Mode: preempt.ModeEnforce,
		DecidedAt: now.Add(-time.Minute), LastReport: now.Add(-since)}
}

// leased is forecastOf NearDone with a lease ending at until.
func leased(job string, since time.Duration, until time.Time) *JobForecast {
	f := forecastOf(job, preempt.NearDone, since)
	f.ProtectedUntil = until
	return f
}

func forecasts(fs ...*JobForecast) StaticForecasts {
	m := StaticForecasts{}
	for _, f := range fs {
		m[f.Namespace+"/"+f.Name] = f
	}
	return m
}

// cluster is one preemption scenario.
type cluster struct {
	nodes []*v1.Node
	pods  []*v1.Pod
	pdbs  []*policy.PodDisruptionBudget
	fc    StaticForecasts
	args  *Args
	// pgs are the scheduler-plugins PodGroups (nil: none known).
	pgs StaticPodGroups
}

// postFilterFactory builds the PostFilter plugin under test on a framework.
type postFilterFactory func(ctx context.Context, fh fwk.Handle) (fwk.PostFilterPlugin, error)

func progressAware(fc StaticForecasts, args *Args) postFilterFactory {
	return progressAwareWith(fc, args, nil)
}

// progressAwareWith is progressAware with PodGroups.
func progressAwareWith(fc StaticForecasts, args *Args, pgs StaticPodGroups) postFilterFactory {
	return func(ctx context.Context, fh fwk.Handle) (fwk.PostFilterPlugin, error) {
		var obj runtime.Object
		if args != nil {
			obj = args
		}
		o := Options{Features: &plfeature.Features{}, Forecasts: fc, Clock: testingclock.NewFakePassiveClock(now)}
		if pgs != nil {
			o.PodGroups = pgs
		}
		return NewWithOptions(ctx, obj, fh, o)
	}
}

// pgPod is a running pod of the PodGroup pg (and, when job is not "", of
// the JobSet job, as a TrainJob run with Trainer's coscheduling) on node.
func pgPod(name, pg, job, node string, prio int32, gpus int, started time.Time) *v1.Pod {
	p := jobPod(name, job, node, prio, gpus, started)
	p.Labels[PodGroupLabel] = pg
	return p
}

// podGroups are PodGroups of the given minMembers, keyed by name.
func podGroups(minMembers map[string]int32) StaticPodGroups {
	s := StaticPodGroups{}
	for name, mm := range minMembers {
		s[ns+"/"+name] = &schedv1alpha1.PodGroup{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, CreationTimestamp: metav1.NewTime(now.Add(-7 * time.Hour))},
			Spec:       schedv1alpha1.PodGroupSpec{MinMember: mm},
		}
	}
	return s
}

func defaultPreemption(ctx context.Context, fh fwk.Handle) (fwk.PostFilterPlugin, error) {
	return defaultpreemption.New(ctx, &config.DefaultPreemptionArgs{MinCandidateNodesPercentage: 10, MinCandidateNodesAbsolute: 100}, fh, plfeature.Features{})
}

// env is a scheduler framework over a fake clientset holding c.
type env struct {
	ctx   context.Context
	cs    *clientsetfake.Clientset
	fw    framework.Framework
	state fwk.CycleState
	pf    fwk.PostFilterPlugin
}

var nodeResourcesFit = frameworkruntime.FactoryAdapter(plfeature.Features{}, noderesources.NewFit)

func newEnv(tb testing.TB, c cluster, pre *v1.Pod, mk postFilterFactory) *env {
	tb.Helper()
	logger, ctx := ktesting.NewTestContext(tb)
	if _, bench := tb.(*testing.B); bench {
		// Benchmarks log only what klog prints by default.
		logger = klog.Background()
		ctx = klog.NewContext(context.Background(), logger)
	}
	ctx, cancel := context.WithCancel(ctx)
	tb.Cleanup(cancel)
	objs := []runtime.Object{pre}
	for _, p := range c.pods {
		objs = append(objs, p)
	}
	for _, p := range c.pdbs {
		objs = append(objs, p)
	}
	cs := clientsetfake.NewClientset(objs...)
	informerFactory := informers.NewSharedInformerFactory(cs, 0)
	fw, err := tf.NewFramework(ctx, []tf.RegisterPluginFunc{
		tf.RegisterQueueSortPlugin(queuesort.Name, queuesort.New),
		tf.RegisterPluginAsExtensions(noderesources.Name, nodeResourcesFit, "Filter", "PreFilter"),
		tf.RegisterBindPlugin(defaultbinder.Name, defaultbinder.New),
	}, "",
		frameworkruntime.WithClientSet(cs),
		frameworkruntime.WithEventRecorder(&events.FakeRecorder{}),
		frameworkruntime.WithInformerFactory(informerFactory),
		frameworkruntime.WithPodNominator(internalqueue.NewSchedulingQueue(nil, informerFactory)),
		frameworkruntime.WithSnapshotSharedLister(internalcache.NewSnapshot(c.pods, c.nodes)),
		frameworkruntime.WithLogger(logger),
		frameworkruntime.WithWaitingPods(frameworkruntime.NewWaitingPodsMap()),
	)
	if err != nil {
		tb.Fatal(err)
	}
	pf, err := mk(ctx, fw)
	if err != nil {
		tb.Fatal(err)
	}
	informerFactory.Start(ctx.Done())
	informerFactory.WaitForCacheSync(ctx.Done())
	state := framework.NewCycleState()
	if _, s, _ := fw.RunPreFilterPlugins(ctx, state, pre); !s.IsSuccess() {
		tb.Fatalf("PreFilter: %v", s)
	}
	return &env{ctx: ctx, cs: cs, fw: fw, state: state, pf: pf}
}

// unschedulableEverywhere is the filter result that sends a pod to PostFilter.
func unschedulableEverywhere(nodes []*v1.Node) fwk.NodeToStatusReader {
	m := framework.NewDefaultNodeToStatus()
	for _, n := range nodes {
		m.Set(n.Name, fwk.NewStatus(fwk.Unschedulable, "Insufficient nvidia.com/gpu"))
	}
	return m
}

// preemptOnce runs PostFilter for pre on c and returns the nominated node,
// the names of the pods it deleted (sorted) and the status.
func preemptOnce(tb testing.TB, c cluster, pre *v1.Pod, mk postFilterFactory) (string, []string, *fwk.Status) {
	tb.Helper()
	e := newEnv(tb, c, pre, mk)
	res, status := e.pf.PostFilter(e.ctx, e.state, pre, unschedulableEverywhere(c.nodes))
	nominated := ""
	if res != nil && res.NominatingInfo != nil {
		nominated = res.NominatedNodeName
	}
	left, err := e.cs.CoreV1().Pods(ns).List(e.ctx, metav1.ListOptions{})
	if err != nil {
		tb.Fatal(err)
	}
	alive := map[string]bool{}
	for _, p := range left.Items {
		alive[p.Name] = true
	}
	var deleted []string
	for _, p := range c.pods {
		if !alive[p.Name] {
			deleted = append(deleted, p.Name)
		}
	}
	slices.Sort(deleted)
	return nominated, deleted, status
}

func itoa(n int) string { return strconv.Itoa(n) }
