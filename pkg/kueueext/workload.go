package kueueext

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/progress-planner/planner/pkg/jobframework"
	"github.com/progress-planner/planner/pkg/workloads"
)

// WorkloadFacts is what the planner reads from a TrainJob's Workload.
type WorkloadFacts struct {
	Name string
	UID  types.UID
	// BasePriority is spec.priority (0 when unset).
	BasePriority int32
	// GPUs requested: GPU resource of each pod (containers summed, or the
	// largest init container if larger) times the pod set's count, summed
	// over pod sets.
	GPUs int
	// QueueName is the LocalQueue; ClusterQueue is from status.admission
	// when quota is reserved (the controller fills it from the LocalQueue
	// otherwise).
	QueueName     string
	ClusterQueue  string
	QuotaReserved bool
	// Admitted: the Admitted condition is True (quota reserved and all
	// admission checks passed); AdmittedAt is its transition time.
	Admitted   bool
	AdmittedAt *time.Time
	// Active is spec.active (default true).
	Active   bool
	Finished bool
	// Evictions counts evictions of any cause (status.schedulingStats).
	Evictions int
	// Evicted is the Evicted condition when True.
	Evicted *metav1.Condition
	// Boost is the parsed priority-boost annotation (0 when absent or not
	// an integer); BoostValue the raw annotation, BoostSet whether present.
	Boost      int32
	BoostValue string
	BoostSet   bool
	// BoostOwners are the field managers owning the annotation
	// (managedFields), "name (Operation)", sorted.
	BoostOwners []string
	// ForeignOwners are BoostOwners other than the planner.
	ForeignOwners []string
}

// ReadWorkload extracts the facts the planner needs from a Workload.
func ReadWorkload(wl *kueue.Workload, gpu corev1.ResourceName) WorkloadFacts {
	f := WorkloadFacts{
		Name:          wl.Name,
		UID:           wl.UID,
		QueueName:     string(wl.Spec.QueueName),
		Active:        wl.Spec.Active == nil || *wl.Spec.Active,
		QuotaReserved: apimeta.IsStatusConditionTrue(wl.Status.Conditions, kueue.WorkloadQuotaReserved),
		Finished:      apimeta.IsStatusConditionTrue(wl.Status.Conditions, kueue.WorkloadFinished),
	}
	if wl.Spec.Priority != nil {
		f.BasePriority = *wl.Spec.Priority
	}
	for i := range wl.Spec.PodSets {
		ps := &wl.Spec.PodSets[i]
		f.GPUs += int(ps.Count) * podResource(&ps.Template.Spec, gpu)
	}
	if wl.Status.Admission != nil && f.QuotaReserved {
		f.ClusterQueue = string(wl.Status.Admission.ClusterQueue)
	}
	if c := apimeta.FindStatusCondition(wl.Status.Conditions, kueue.WorkloadAdmitted); c != nil && c.Status == metav1.ConditionTrue {
		f.Admitted = true
		t := c.LastTransitionTime.Time
		f.AdmittedAt = &t
	}
	if c := apimeta.FindStatusCondition(wl.Status.Conditions, kueue.WorkloadEvicted); c != nil && c.Status == metav1.ConditionTrue {
		cc := *c
		f.Evicted = &cc
	}
	if s := wl.Status.SchedulingStats; s != nil {
		for _, e := range s.Evictions {
			f.Evictions += int(e.Count)
		}
	}
	if v, ok := wl.Annotations[AnnotationPriorityBoost]; ok {
		f.BoostSet, f.BoostValue = true, v
		if b, err := strconv.ParseInt(strings.TrimSpace(v), 10, 32); err == nil {
			f.Boost = int32(b)
		}
	}
	f.BoostOwners = BoostOwners(wl.ManagedFields)
	f.ForeignOwners = ForeignBoostOwners(wl.ManagedFields)
	return f
}

// Running reports whether the Workload holds its resources: admitted,
// active and not finished.
func (f WorkloadFacts) Running() bool { return f.Admitted && f.Active && !f.Finished }

// Pending reports whether the Workload waits for admission.
func (f WorkloadFacts) Pending() bool { return !f.QuotaReserved && f.Active && !f.Finished }

// podResource is a pod's effective request of one resource: the containers'
// sum (restartable init containers, i.e. sidecars, included), or the
// largest regular init container if that is larger. A container without a
// request counts its limit.
func podResource(spec *corev1.PodSpec, name corev1.ResourceName) int {
	get := func(c *corev1.Container) int64 {
		if q, ok := c.Resources.Requests[name]; ok {
			return q.Value()
		}
		if q, ok := c.Resources.Limits[name]; ok {
			return q.Value()
		}
		return 0
	}
	var sum, initMax int64
	for i := range spec.Containers {
		sum += get(&spec.Containers[i])
	}
	for i := range spec.InitContainers {
		c := &spec.InitContainers[i]
		if c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			sum += get(c)
		} else {
			initMax = max(initMax, get(c))
		}
	}
	return int(max(sum, initMax))
}

// fieldsV1 is the JSON shape of a managedFields entry's fieldsV1.
type fieldsV1 map[string]json.RawMessage

// BoostOwners returns the field managers that own the priority-boost
// annotation according to managedFields, as "manager (Operation)", sorted.
// Entries for subresources (status) are ignored.
func BoostOwners(entries []metav1.ManagedFieldsEntry) []string {
	var out []string
	for _, e := range entries {
		if e.Subresource != "" || e.FieldsV1 == nil || !ownsAnnotation(e.FieldsV1.Raw, AnnotationPriorityBoost) {
			continue
		}
		s := e.Manager + " (" + string(e.Operation) + ")"
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	slices.Sort(out)
	return out
}

// ForeignBoostOwners returns the managers other than the planner that own
// the priority-boost annotation, sorted and without duplicates.
func ForeignBoostOwners(entries []metav1.ManagedFieldsEntry) []string {
	var out []string
	for _, e := range entries {
		if e.Subresource != "" || e.FieldsV1 == nil || e.Manager == FieldManager {
			continue
		}
		if ownsAnnotation(e.FieldsV1.Raw, AnnotationPriorityBoost) && !slices.Contains(out, e.Manager) {
			out = append(out, e.Manager)
		}
	}
	slices.Sort(out)
	return out
}

// PlannerOwnsBoost reports whether the planner's field manager owns the
// annotation.
func PlannerOwnsBoost(entries []metav1.ManagedFieldsEntry) bool {
	for _, e := range entries {
		if e.Subresource == "" && e.FieldsV1 != nil && e.Manager == FieldManager && ownsAnnotation(e.FieldsV1.Raw, AnnotationPriorityBoost) {
			return true
		}
	}
	return false
}

func ownsAnnotation(raw []byte, key string) bool {
	// Most entries (Kueue's, the job controllers') never name the key:
	// skip parsing those. The key's last path segment is matched, which no
	// JSON escaping of '/' can hide.
	if !bytes.Contains(raw, []byte(key[strings.LastIndexByte(key, '/')+1:])) {
		return false
	}
	var root fieldsV1
	if json.Unmarshal(raw, &root) != nil {
		return false
	}
	var md fieldsV1
	if json.Unmarshal(root["f:metadata"], &md) != nil {
		return false
	}
	var ann fieldsV1
	if json.Unmarshal(md["f:annotations"], &ann) != nil {
		return false
	}
	_, ok := ann["f:"+key]
	return ok
}

// PlannerEviction returns the time of an eviction the planner caused, when
// the Workload is evicted (Evicted=True) after lastRecorded and either
// the planner's negative boost was in effect before it (preemption), or
// the planner deactivated it before it.
func PlannerEviction(evicted *metav1.Condition, appliedBoost int32, boostChanged, deactivated, lastRecorded *time.Time) *time.Time {
	if evicted == nil || evicted.Status != metav1.ConditionTrue {
		return nil
	}
	at := evicted.LastTransitionTime.Time
	if lastRecorded != nil && !at.After(*lastRecorded) {
		return nil
	}
	switch evicted.Reason {
	case kueue.WorkloadDeactivated:
		if deactivated != nil && !deactivated.After(at) {
			return &at
		}
	default:
		if appliedBoost < 0 && boostChanged != nil && !boostChanged.After(at) {
			return &at
		}
	}
	return nil
}

// nudgeValue returns a different spelling of the same boost, so that
// re-writing the annotation changes it without changing the priority:
// absent → "0", "N" → "+N" or "-0N", and back. Kueue v0.17 requeues a
// waiting Workload when its priority-boost annotation string changes
// (wakeRespell; kueuecaps.go says why v0.19 does not).
func nudgeValue(current string, set bool) string {
	if !set || strings.TrimSpace(current) == "" {
		return "0"
	}
	v, err := strconv.ParseInt(strings.TrimSpace(current), 10, 32)
	if err != nil {
		return current
	}
	canonical := strconv.FormatInt(v, 10)
	if current != canonical {
		return canonical
	}
	if v < 0 {
		return "-0" + strconv.FormatInt(-v, 10)
	}
	return "+" + canonical
}

// dipValues returns the boost one below the current one (the dip) and the
// value that restores the current priority: the current string, or "0" when
// the annotation was absent (not a removal: Kueue's status writes co-own
// the annotation and would keep the dip, see setBoost). ok is false when the
// current value is not an integer or is the lowest one.
func dipValues(current string, set bool) (dip, restore string, ok bool) {
	if !set || strings.TrimSpace(current) == "" {
		return "-1", "0", true
	}
	v, err := strconv.ParseInt(strings.TrimSpace(current), 10, 32)
	if err != nil || v == math.MinInt32 {
		return "", "", false
	}
	return strconv.FormatInt(v-1, 10), current, true
}

// hasWorkloadPriorityClass reports whether Kueue's PriorityChanged sees wl
// as having a WorkloadPriorityClass: then lowering its boost while admitted
// makes Kueue retry the ClusterQueue's waiting Workloads by itself
// (v0.17.0 and v0.19.2, TestLoweredBoostNeedsNudge).
func hasWorkloadPriorityClass(wl *kueue.Workload) bool {
	ref := wl.Spec.PriorityClassRef
	return ref != nil && ref.Kind == kueue.WorkloadPriorityClassKind && ref.Group == kueue.WorkloadPriorityClassGroup
}

// workloadApply is a server-side apply configuration of a Workload's
// priority-boost annotation only (absent when value is ""). The UID makes
// the apply fail instead of creating a Workload that has just been deleted;
// a non-empty resourceVersion makes it conditional (optimistic concurrency).
func workloadApply(name, namespace string, uid types.UID, resourceVersion, value string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion(kueue.SchemeGroupVersion.String())
	u.SetKind("Workload")
	u.SetName(name)
	u.SetNamespace(namespace)
	u.SetUID(uid)
	if resourceVersion != "" {
		u.SetResourceVersion(resourceVersion)
	}
	if value != "" {
		u.SetAnnotations(map[string]string{AnnotationPriorityBoost: value})
	}
	return u
}

// workloadIO reads and writes Kueue Workloads for the reconciler.
type workloadIO struct {
	c         client.Client
	gpu       corev1.ResourceName
	maxNudges int

	// indexer registers cacheIndexes with the manager's cache on first
	// use (nil: the client has them, as the tests' fake client does).
	// Lazily, because Kueue's CRDs may appear only after the planner
	// starts, and only on the replica that leads.
	indexer client.FieldIndexer
	mu      sync.Mutex
	indexed bool
}

// Field indexes of the cache that wakeWaiting lists by: a ClusterQueue's
// LocalQueues, and a LocalQueue's Workloads (a waiting Workload's
// ClusterQueue is its LocalQueue's). A job's Workloads are listed by
// jobframework.WorkloadJobUIDIndex.
const (
	indexLocalQueueClusterQueue = "spec.clusterQueue"
	indexWorkloadQueueName      = "spec.queueName"
)

// cacheIndexes are those indexes, for the manager's cache and for the
// tests' fake client.
var cacheIndexes = []struct {
	obj     client.Object
	field   string
	extract client.IndexerFunc
}{
	{&kueue.LocalQueue{}, indexLocalQueueClusterQueue, func(o client.Object) []string {
		return []string{string(o.(*kueue.LocalQueue).Spec.ClusterQueue)}
	}},
	{&kueue.Workload{}, indexWorkloadQueueName, func(o client.Object) []string {
		return []string{string(o.(*kueue.Workload).Spec.QueueName)}
	}},
	{&kueue.Workload{}, jobframework.WorkloadJobUIDIndex, jobframework.WorkloadJobUID},
}

func (w *workloadIO) ensureIndexes(ctx context.Context) error {
	if w.indexer == nil {
		return nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.indexed {
		return nil
	}
	for _, ix := range cacheIndexes {
		if err := w.indexer.IndexField(ctx, ix.obj, ix.field, ix.extract); err != nil {
			return fmt.Errorf("index %T by %s: %w", ix.obj, ix.field, err)
		}
	}
	w.indexed = true
	return nil
}

// findWorkload is the Workload of job (jobframework.FindWorkloadIndexed,
// through the cache's index).
func (w *workloadIO) findWorkload(ctx context.Context, job workloads.Ref) (workloads.Match, error) {
	if err := w.ensureIndexes(ctx); err != nil {
		return workloads.Match{}, err
	}
	return jobframework.FindWorkloadIndexed(ctx, w.c, job)
}

// clusterQueueOf resolves a Workload's ClusterQueue: from its admission,
// else from its LocalQueue ("" when unknown).
func (w *workloadIO) clusterQueueOf(ctx context.Context, wl *kueue.Workload, lqCache map[string]string) string {
	if wl.Status.Admission != nil && apimeta.IsStatusConditionTrue(wl.Status.Conditions, kueue.WorkloadQuotaReserved) {
		return string(wl.Status.Admission.ClusterQueue)
	}
	if wl.Spec.QueueName == "" {
		return ""
	}
	key := wl.Namespace + "/" + string(wl.Spec.QueueName)
	if cq, ok := lqCache[key]; ok {
		return cq
	}
	var lq kueue.LocalQueue
	cq := ""
	if err := w.c.Get(ctx, types.NamespacedName{Namespace: wl.Namespace, Name: string(wl.Spec.QueueName)}, &lq); err == nil {
		cq = string(lq.Spec.ClusterQueue)
	}
	if lqCache != nil {
		lqCache[key] = cq
	}
	return cq
}

// setBoost writes the Workload's boost annotation by server-side apply
// (field manager "progress-planner", touching only that annotation). The
// value is written even when it is 0: removing the field would not work
// reliably, because Kueue's own status applies (BaseSSAWorkload) copy every
// annotation and so co-own it from the status subresource. Ownership is
// forced, which takes the field only from such status-subresource entries:
// the caller has checked at wl's resourceVersion that no other manager owns
// it (ForeignBoostOwners), and the resourceVersion precondition makes the
// write fail with a conflict if anything changed since.
func (w *workloadIO) setBoost(ctx context.Context, wl *kueue.Workload, value int32) error {
	u := workloadApply(wl.Name, wl.Namespace, wl.UID, wl.ResourceVersion, strconv.FormatInt(int64(value), 10))
	return w.c.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(FieldManager), client.ForceOwnership)
}

// deactivate sets spec.active=false (a merge patch: it fails if the
// Workload is gone, and never creates one).
func (w *workloadIO) deactivate(ctx context.Context, wl *kueue.Workload) error {
	patch := []byte(`{"spec":{"active":false}}`)
	return w.c.Patch(ctx, wl, client.RawPatch(types.MergePatchType, patch), client.FieldOwner(FieldManager))
}

// nudgeResult reports what wakeWaiting did.
type nudgeResult struct {
	Nudged  []string // namespace/name
	Skipped []string // namespace/name: reason
}

// wakeWaiting touches the boost annotation of up to maxNudges waiting
// Workloads of clusterQueue (highest effective priority first, then
// oldest), so that Kueue requeues them after the planner lowered the boost
// of an admitted Workload there (Kueue v0.17 and v0.19 do not do it by
// themselves for Workloads without a WorkloadPriorityClass), in the given
// style (kueuecaps.go). Workloads whose annotation another writer owns are
// skipped: the planner never fights over it.
func (w *workloadIO) wakeWaiting(ctx context.Context, clusterQueue string, except types.UID, style wakeStyle) (nudgeResult, error) {
	var res nudgeResult
	if clusterQueue == "" || w.maxNudges == 0 {
		return res, nil
	}
	if err := w.ensureIndexes(ctx); err != nil {
		return res, err
	}
	var lqs kueue.LocalQueueList
	if err := w.c.List(ctx, &lqs, client.MatchingFields{indexLocalQueueClusterQueue: clusterQueue}); err != nil {
		return res, fmt.Errorf("list LocalQueues of ClusterQueue %s: %w", clusterQueue, err)
	}
	// Read each candidate once (managedFields are JSON): the sort compares
	// the keys computed here.
	type candidate struct {
		wl      *kueue.Workload
		eff     int64
		foreign []string
	}
	var waiting []candidate
	for _, lq := range lqs.Items {
		var list kueue.WorkloadList
		if err := w.c.List(ctx, &list, client.InNamespace(lq.Namespace), client.MatchingFields{indexWorkloadQueueName: lq.Name}); err != nil {
			return res, fmt.Errorf("list Workloads of LocalQueue %s/%s: %w", lq.Namespace, lq.Name, err)
		}
		for i := range list.Items {
			wl := &list.Items[i]
			if wl.UID == except || wl.DeletionTimestamp != nil {
				continue
			}
			f := ReadWorkload(wl, "")
			if f.Pending() {
				waiting = append(waiting, candidate{wl, int64(f.BasePriority) + int64(f.Boost), f.ForeignOwners})
			}
		}
	}
	slices.SortFunc(waiting, func(a, b candidate) int {
		if c := cmp.Compare(b.eff, a.eff); c != 0 {
			return c
		}
		return a.wl.CreationTimestamp.Compare(b.wl.CreationTimestamp.Time)
	})
	for _, cand := range waiting {
		wl := cand.wl
		key := wl.Namespace + "/" + wl.Name
		if len(res.Nudged) >= w.maxNudges {
			res.Skipped = append(res.Skipped, key+": nudge limit reached")
			continue
		}
		if len(cand.foreign) > 0 {
			res.Skipped = append(res.Skipped, key+": annotation owned by "+strings.Join(cand.foreign, ", "))
			continue
		}
		cur, set := wl.Annotations[AnnotationPriorityBoost]
		first, restore, dip := nudgeValue(cur, set), "", style == wakeDip
		if dip {
			var ok bool
			if first, restore, ok = dipValues(cur, set); !ok {
				res.Skipped = append(res.Skipped, fmt.Sprintf("%s: boost %q cannot be lowered by one", key, cur))
				continue
			}
		}
		u := workloadApply(wl.Name, wl.Namespace, wl.UID, wl.ResourceVersion, first)
		// Forced for the reason setBoost is; the resourceVersion guards it.
		err := w.c.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(FieldManager), client.ForceOwnership)
		if err != nil {
			if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
				res.Skipped = append(res.Skipped, key+": changed meanwhile")
				continue
			}
			return res, fmt.Errorf("nudge %s: %w", key, err)
		}
		if dip {
			// Restore at once, forced and without a resourceVersion: Kueue
			// may have written the Workload's status in between (its status
			// writes co-own the annotation), and a Workload left at the dip
			// would wait one priority lower. What is lost is a write by
			// someone else within these few milliseconds.
			u := workloadApply(wl.Name, wl.Namespace, wl.UID, "", restore)
			if err := w.c.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(FieldManager), client.ForceOwnership); err != nil &&
				!apierrors.IsNotFound(err) {
				return res, fmt.Errorf("nudge %s: restoring boost %q after the dip to %s: %w", key, restore, first, err)
			}
		}
		res.Nudged = append(res.Nudged, key)
	}
	return res, nil
}
