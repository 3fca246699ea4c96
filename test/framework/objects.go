//go:build e2e

package framework

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	kftrainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/progress-planner/planner/pkg/workloads"
)

// Names and keys the suites share with Kueue.
const (
	// GPU is the resource every queue and TrainJob here counts.
	GPU corev1.ResourceName = "nvidia.com/gpu"
	// GPUFlavor is the ResourceFlavor CreateGPUQueue uses.
	GPUFlavor = "gpu"
	// TorchRuntime is the ClusterTrainingRuntime InstallTorchRuntime installs
	// and CreateTrainJob references.
	TorchRuntime = "torch-distributed"

	QueueNameLabel          = "kueue.x-k8s.io/queue-name"
	PriorityClassLabel      = "kueue.x-k8s.io/priority-class"
	PriorityBoostAnnotation = "kueue.x-k8s.io/priority-boost"
)

// DefaultWait bounds the helpers' own waits (queue activation).
const DefaultWait = 30 * time.Second

// RequeueBatchPeriod is Kueue v0.17.0's batch period for retrying
// inadmissible Workloads after a ClusterQueue changes (unexported
// requeueBatchPeriod in pkg/cache/queue). A Workload that just became
// pending may be retried once more within it; a test that wants Kueue
// quiescent watches the Workload stay pending for longer than that.
const RequeueBatchPeriod = 1 * time.Second

// ErrNoWorkload is returned (wrapped) by WorkloadFor when the TrainJob has no
// Workload yet.
var ErrNoWorkload = errors.New("no Workload controlled by the TrainJob")

// ErrAmbiguousWorkload is returned (wrapped) by WorkloadFor when several
// unfinished Workloads are controlled by the TrainJob (the controller waits
// for one to be left).
var ErrAmbiguousWorkload = errors.New("several unfinished Workloads controlled by the TrainJob")

// CreateNamespace creates a namespace; an existing one is fine.
func (e *Env) CreateNamespace(ctx context.Context, name string) error {
	err := e.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}})
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	return err
}

// CreateGPUQueue creates (if missing) the ResourceFlavor GPUFlavor, a
// ClusterQueue name with a nominal quota of gpus nvidia.com/gpu,
// BestEffortFIFO and preemption withinClusterQueue: LowerPriority, the
// namespace, and a LocalQueue name in it pointing at the ClusterQueue. It
// returns once Kueue reports both queues Active.
func (e *Env) CreateGPUQueue(ctx context.Context, namespace, name string, gpus int) (*kueue.ClusterQueue, *kueue.LocalQueue, error) {
	if err := e.CreateNamespace(ctx, namespace); err != nil {
		return nil, nil, err
	}
	rf := &kueue.ResourceFlavor{ObjectMeta: metav1.ObjectMeta{Name: GPUFlavor}}
	if err := e.Client.Create(ctx, rf); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, nil, fmt.Errorf("ResourceFlavor %s: %w", GPUFlavor, err)
	}
	cq := &kueue.ClusterQueue{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: kueue.ClusterQueueSpec{
			NamespaceSelector: &metav1.LabelSelector{},
			QueueingStrategy:  kueue.BestEffortFIFO,
			ResourceGroups: []kueue.ResourceGroup{{
				CoveredResources: []corev1.ResourceName{GPU},
				Flavors: []kueue.FlavorQuotas{{
					Name: GPUFlavor,
					Resources: []kueue.ResourceQuota{{
						Name:         GPU,
						NominalQuota: *resource.NewQuantity(int64(gpus), resource.DecimalSI),
					}},
				}},
			}},
			Preemption: &kueue.ClusterQueuePreemption{
				WithinClusterQueue: kueue.PreemptionPolicyLowerPriority,
			},
		},
	}
	if err := e.Client.Create(ctx, cq); err != nil {
		return nil, nil, fmt.Errorf("ClusterQueue %s: %w", name, err)
	}
	lq := &kueue.LocalQueue{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec:       kueue.LocalQueueSpec{ClusterQueue: kueue.ClusterQueueReference(name)},
	}
	if err := e.Client.Create(ctx, lq); err != nil {
		return nil, nil, fmt.Errorf("LocalQueue %s/%s: %w", namespace, name, err)
	}
	if _, err := e.WaitFor(ctx, cq, DefaultWait, func() bool {
		return apimeta.IsStatusConditionTrue(cq.Status.Conditions, kueue.ClusterQueueActive)
	}); err != nil {
		return nil, nil, fmt.Errorf("ClusterQueue %s not Active: %w (conditions %v)", name, err, cq.Status.Conditions)
	}
	if _, err := e.WaitFor(ctx, lq, DefaultWait, func() bool {
		return apimeta.IsStatusConditionTrue(lq.Status.Conditions, kueue.LocalQueueActive)
	}); err != nil {
		return nil, nil, fmt.Errorf("LocalQueue %s/%s not Active: %w (conditions %v)", namespace, name, err, lq.Status.Conditions)
	}
	return cq, lq, nil
}

// CreateWorkloadPriorityClass creates a Kueue WorkloadPriorityClass.
func (e *Env) CreateWorkloadPriorityClass(ctx context.Context, name string, value int32) (*kueue.WorkloadPriorityClass, error) {
	wpc := &kueue.WorkloadPriorityClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Value: value}
	if err := e.Client.Create(ctx, wpc); err != nil {
		return nil, fmt.Errorf("WorkloadPriorityClass %s: %w", name, err)
	}
	return wpc, nil
}

// InstallTorchRuntime creates the torch-distributed ClusterTrainingRuntime
// exactly as the trainer module ships it
// (manifests/base/runtimes/torch_distributed.yaml); an existing one is kept.
func (e *Env) InstallTorchRuntime(ctx context.Context) (*kftrainer.ClusterTrainingRuntime, error) {
	data, err := os.ReadFile(e.manifests.torchRuntime)
	if err != nil {
		return nil, err
	}
	rt := &kftrainer.ClusterTrainingRuntime{}
	if err := yaml.UnmarshalStrict(data, rt); err != nil {
		return nil, fmt.Errorf("%s: %w", e.manifests.torchRuntime, err)
	}
	if rt.Name != TorchRuntime {
		return nil, fmt.Errorf("%s defines %q, want %q", e.manifests.torchRuntime, rt.Name, TorchRuntime)
	}
	if err := e.Client.Create(ctx, rt); apierrors.IsAlreadyExists(err) {
		return rt, e.Client.Get(ctx, client.ObjectKeyFromObject(rt), rt)
	} else if err != nil {
		return nil, fmt.Errorf("ClusterTrainingRuntime %s: %w", TorchRuntime, err)
	}
	return rt, nil
}

// CreateTrainJob creates a one-node TrainJob on the torch-distributed
// ClusterTrainingRuntime asking for gpus nvidia.com/gpu, in LocalQueue queue
// and, when priorityClass is not empty, WorkloadPriorityClass priorityClass.
// It leaves spec.suspend unset: Kueue's mutating webhook suspends it, and the
// returned object (the apiserver's answer) shows that it did.
func (e *Env) CreateTrainJob(ctx context.Context, ns, name, queue string, gpus int, priorityClass string) (*kftrainer.TrainJob, error) {
	q := *resource.NewQuantity(int64(gpus), resource.DecimalSI)
	tj := &kftrainer.TrainJob{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: ns,
			Name:      name,
			Labels:    map[string]string{QueueNameLabel: queue},
		},
		Spec: kftrainer.TrainJobSpec{
			RuntimeRef: kftrainer.RuntimeRef{
				Name:     TorchRuntime,
				APIGroup: ptr.To(kftrainer.GroupVersion.Group),
				Kind:     ptr.To(kftrainer.ClusterTrainingRuntimeKind),
			},
			Trainer: &kftrainer.Trainer{
				NumNodes: ptr.To[int32](1),
				ResourcesPerNode: &corev1.ResourceRequirements{
					Requests: corev1.ResourceList{GPU: q},
					Limits:   corev1.ResourceList{GPU: q},
				},
			},
		},
	}
	if priorityClass != "" {
		tj.Labels[PriorityClassLabel] = priorityClass
	}
	if err := e.createTrainJob(ctx, tj); err != nil {
		return nil, fmt.Errorf("TrainJob %s/%s: %w", ns, name, err)
	}
	return tj, nil
}

// runtimeCacheWait bounds how long createTrainJob waits for the Trainer's
// validating webhook to see a just-installed runtime.
const runtimeCacheWait = 30 * time.Second

// createTrainJob creates tj, retrying while the Trainer's validating webhook
// denies it for a runtime it has not seen yet: the webhook looks runtimes up
// in its informer cache, which lags a fresh ClusterTrainingRuntime under load
// (a real cluster behaves the same way). Any other error returns at once.
func (e *Env) createTrainJob(ctx context.Context, tj *kftrainer.TrainJob) error {
	deadline := time.Now().Add(runtimeCacheWait)
	for {
		err := e.Client.Create(ctx, tj)
		if err == nil || !runtimeNotSeen(err) || time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (waiting for the webhook to see runtime %s: %w)", err, TorchRuntime, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// runtimeNotSeen reports the Trainer webhook's denial for a runtime its cache
// does not hold yet: `admission webhook "vtrainjob.kb.io" denied the request:
// … "torch-distributed" not found: specified clusterTrainingRuntime must be
// created before the TrainJob is created` (Trainer v2.2 and v2.3).
func runtimeNotSeen(err error) bool {
	msg := err.Error()
	return strings.Contains(msg, "denied the request") &&
		strings.Contains(msg, TorchRuntime) && strings.Contains(msg, "not found")
}

// WorkloadFor returns the Workload Kueue created for tj, as the controller
// finds it (listed by workloads.Selector, chosen by workloads.For).
// ErrNoWorkload (wrapped) when there is none, ErrAmbiguousWorkload
// (wrapped) when several unfinished ones exist (briefly, while Kueue
// replaces one).
func (e *Env) WorkloadFor(ctx context.Context, tj *kftrainer.TrainJob) (*kueue.Workload, error) {
	job := workloads.RefTo(kftrainer.GroupVersion.WithKind(kftrainer.TrainJobKind), tj)
	var list kueue.WorkloadList
	if err := e.Client.List(ctx, &list, client.InNamespace(tj.Namespace), client.MatchingLabels(workloads.Selector(job))); err != nil {
		return nil, err
	}
	m := workloads.For(job, list.Items)
	switch {
	case m.Ambiguous:
		return nil, fmt.Errorf("%s: %w", m.Reason, ErrAmbiguousWorkload)
	case m.Workload == nil:
		return nil, fmt.Errorf("%s: %w", m.Reason, ErrNoWorkload)
	}
	return m.Workload, nil
}

// WaitForWorkload polls WorkloadFor until the TrainJob has a Workload.
func (e *Env) WaitForWorkload(ctx context.Context, tj *kftrainer.TrainJob, timeout time.Duration) (*kueue.Workload, error) {
	var wl *kueue.Workload
	_, err := Poll(ctx, timeout, func(ctx context.Context) (bool, error) {
		w, err := e.WorkloadFor(ctx, tj)
		if errors.Is(err, ErrNoWorkload) || errors.Is(err, ErrAmbiguousWorkload) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		wl = w
		return true, nil
	})
	if err != nil {
		return nil, fmt.Errorf("Workload of TrainJob %s/%s: %w", tj.Namespace, tj.Name, err)
	}
	return wl, nil
}

// WaitFor re-reads obj (by its namespace and name) every PollInterval until
// cond, which inspects obj, holds, or timeout passes. obj holds the last
// state read. It returns the time it waited.
func (e *Env) WaitFor(ctx context.Context, obj client.Object, timeout time.Duration, cond func() bool) (time.Duration, error) {
	key := client.ObjectKeyFromObject(obj)
	return Poll(ctx, timeout, func(ctx context.Context) (bool, error) {
		if err := e.Client.Get(ctx, key, obj); err != nil {
			if apierrors.IsNotFound(err) {
				return false, nil
			}
			return false, err
		}
		return cond(), nil
	})
}

// SetPriorityBoost merge-patches wl's kueue.x-k8s.io/priority-boost
// annotation to boost (what the planner does, with its own field manager).
func (e *Env) SetPriorityBoost(ctx context.Context, wl *kueue.Workload, boost int32) error {
	patch := fmt.Appendf(nil, `{"metadata":{"annotations":{%q:%q}}}`, PriorityBoostAnnotation, strconv.Itoa(int(boost)))
	return e.Client.Patch(ctx, wl, client.RawPatch(types.MergePatchType, patch), client.FieldOwner("planner-e2e"))
}

// SetPriorityBoostValue writes the boost annotation verbatim, or removes it
// when value is nil (a merge patch, field manager planner-e2e).
func (e *Env) SetPriorityBoostValue(ctx context.Context, wl *kueue.Workload, value *string) error {
	v := "null"
	if value != nil {
		v = strconv.Quote(*value)
	}
	patch := fmt.Appendf(nil, `{"metadata":{"annotations":{%q:%s}}}`, PriorityBoostAnnotation, v)
	return e.Client.Patch(ctx, wl, client.RawPatch(types.MergePatchType, patch), client.FieldOwner("planner-e2e"))
}

// WorkloadAdmitted reports Kueue's Admitted condition.
func WorkloadAdmitted(wl *kueue.Workload) bool {
	return apimeta.IsStatusConditionTrue(wl.Status.Conditions, kueue.WorkloadAdmitted)
}

// WorkloadQuotaReserved reports Kueue's QuotaReserved condition.
func WorkloadQuotaReserved(wl *kueue.Workload) bool {
	return apimeta.IsStatusConditionTrue(wl.Status.Conditions, kueue.WorkloadQuotaReserved)
}

// WorkloadEvicted reports Kueue's Evicted condition.
func WorkloadEvicted(wl *kueue.Workload) bool {
	return apimeta.IsStatusConditionTrue(wl.Status.Conditions, kueue.WorkloadEvicted)
}

// TrainJobSuspended reports spec.suspend (unset counts as running).
func TrainJobSuspended(tj *kftrainer.TrainJob) bool {
	return ptr.Deref(tj.Spec.Suspend, false)
}

// HoldsFor re-reads obj every PollInterval for the whole of d and fails as
// soon as cond, which inspects obj, is false. obj holds the last state read.
func (e *Env) HoldsFor(ctx context.Context, obj client.Object, d time.Duration, cond func() bool) error {
	key := client.ObjectKeyFromObject(obj)
	return Consistently(ctx, d, func(ctx context.Context) (bool, error) {
		if err := e.Client.Get(ctx, key, obj); err != nil {
			return false, err
		}
		return cond(), nil
	})
}
