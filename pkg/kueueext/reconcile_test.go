package kueueext

import (
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/types"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"

	"github.com/progress-planner/planner/api/v1alpha1"
	"github.com/progress-planner/planner/examples"
	"github.com/progress-planner/planner/internal/humanize"
	"github.com/progress-planner/planner/pkg/forecast"
	"github.com/progress-planner/planner/pkg/jobframework"
	"github.com/progress-planner/planner/pkg/plannerconfig"
	"github.com/progress-planner/planner/pkg/preempt"
	"github.com/progress-planner/planner/pkg/progress"
	"github.com/progress-planner/planner/pkg/workloads"
)

// These tests drive the reconciler against controller-runtime's fake client
// (server-side apply and managedFields included): the control flow of
// observe → forecast → decide → actuate → persist, fast and without a
// control plane. Kueue's reaction to the boost (eviction, admission) is in
// the e2e suite (test/e2e, real control plane).

type recordedEvent struct {
	kind, name, typ, reason, note string
}

type eventLog struct {
	mu     sync.Mutex
	events []recordedEvent
}

func (l *eventLog) Eventf(regarding, _ runtime.Object, typ, reason, _, note string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	kind := fmt.Sprintf("%T", regarding)
	name := ""
	if o, ok := regarding.(client.Object); ok {
		name = o.GetName()
	}
	l.events = append(l.events, recordedEvent{kind, name, typ, reason, fmt.Sprintf(note, args...)})
}

func (l *eventLog) byReason(reason string) []recordedEvent {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []recordedEvent
	for _, e := range l.events {
		if e.reason == reason {
			out = append(out, e)
		}
	}
	return out
}

var _ events.EventRecorder = (*eventLog)(nil)

func testConfig() plannerconfig.Config {
	c := plannerconfig.DefaultConfig()
	c.Policy.Evidence.MinAge = preempt.Dur(0)
	c.Policy.Stability.MinDwell = preempt.Dur(0)
	// Every forecast written, so that each test reads the latest
	// (TestReconcileCheckpointCadence covers the default cadence).
	c.Forecast.CheckpointInterval = preempt.Dur(0)
	return c
}

type fixture struct {
	t     *testing.T
	c     client.Client
	ot    clienttesting.ObjectTracker
	clock *clocktesting.FakeClock
	rec   *JobReconciler
	ev    *eventLog
	cfg   plannerconfig.Config
	// boostGate is what the PriorityBoost probe reports (gateOn unless a test says otherwise).
	boostGate gateState
}

const ns = "team"

func newFixture(t *testing.T, cfg plannerconfig.Config, objs ...client.Object) *fixture {
	t.Helper()
	// A plain object tracker keeps managedFields as written; server-side
	// apply of the boost annotation is emulated by applyWorkload.
	scheme := NewScheme()
	ot := clienttesting.NewObjectTracker(scheme, serializer.NewCodecFactory(scheme).UniversalDecoder())
	b := fake.NewClientBuilder().WithScheme(scheme)
	for _, ix := range cacheIndexes {
		b = b.WithIndex(ix.obj, ix.field, ix.extract)
	}
	c := b.WithObjectTracker(ot).
		WithStatusSubresource(&trainer.TrainJob{}, &kueue.Workload{}, &v1alpha1.ProgressForecast{}).
		WithInterceptorFuncs(interceptor.Funcs{Apply: func(ctx context.Context, c client.WithWatch, obj runtime.ApplyConfiguration, opts ...client.ApplyOption) error {
			return applyWorkload(ctx, c, ot, obj, opts...)
		}}).
		WithReturnManagedFields().
		WithObjects(objs...).Build()
	f := &fixture{t: t, c: c, ot: ot, clock: clocktesting.NewFakeClock(t0), ev: &eventLog{}, cfg: cfg, boostGate: gateOn}
	f.rec = f.newReconciler()
	return f
}

// applyWorkload emulates server-side apply of a Workload apply
// configuration that carries at most the priority-boost annotation, as the
// planner sends it: uid and resourceVersion preconditions, conflicts with
// other owners of the annotation unless forced, ownership recorded in
// managedFields, and removal of the annotation when its only owner stops
// applying it.
func applyWorkload(ctx context.Context, c client.WithWatch, ot clienttesting.ObjectTracker, obj runtime.ApplyConfiguration, opts ...client.ApplyOption) error {
	uc, ok := obj.(interface{ UnstructuredContent() map[string]any })
	if !ok {
		return fmt.Errorf("test apply: unsupported %T", obj)
	}
	u := &unstructured.Unstructured{Object: uc.UnstructuredContent()}
	if u.GetKind() != "Workload" {
		return fmt.Errorf("test apply: unsupported kind %q", u.GetKind())
	}
	ao := &client.ApplyOptions{}
	ao.ApplyOptions(opts)
	gr := schema.GroupResource{Group: kueue.SchemeGroupVersion.Group, Resource: "workloads"}
	var wl kueue.Workload
	if err := c.Get(ctx, types.NamespacedName{Namespace: u.GetNamespace(), Name: u.GetName()}, &wl); err != nil {
		if apierrors.IsNotFound(err) && u.GetUID() != "" {
			return apierrors.NewConflict(gr, u.GetName(), fmt.Errorf("uid mismatch"))
		}
		return err
	}
	if uid := u.GetUID(); uid != "" && uid != wl.UID {
		return apierrors.NewConflict(gr, u.GetName(), fmt.Errorf("uid mismatch"))
	}
	if rv := u.GetResourceVersion(); rv != "" && rv != wl.ResourceVersion {
		return apierrors.NewConflict(gr, u.GetName(), fmt.Errorf("resourceVersion mismatch"))
	}
	val, set := u.GetAnnotations()[AnnotationPriorityBoost]
	var kept []metav1.ManagedFieldsEntry
	othersOwn := false
	for _, e := range wl.ManagedFields {
		if e.Manager == ao.FieldManager && e.Operation == metav1.ManagedFieldsOperationApply {
			continue
		}
		if e.FieldsV1 != nil && ownsAnnotation(e.FieldsV1.Raw, AnnotationPriorityBoost) {
			if set && wl.Annotations[AnnotationPriorityBoost] != val && !ptr.Deref(ao.Force, false) {
				return apierrors.NewConflict(gr, u.GetName(), fmt.Errorf("Apply failed with 1 conflict: conflict with %q: .metadata.annotations", e.Manager))
			}
			if set && ptr.Deref(ao.Force, false) {
				continue
			}
			othersOwn = true
		}
		kept = append(kept, e)
	}
	if set {
		if wl.Annotations == nil {
			wl.Annotations = map[string]string{}
		}
		wl.Annotations[AnnotationPriorityBoost] = val
		kept = append(kept, mf(ao.FieldManager, metav1.ManagedFieldsOperationApply, "", boostFields))
	} else if !othersOwn {
		delete(wl.Annotations, AnnotationPriorityBoost)
	}
	if err := c.Update(ctx, &wl); err != nil {
		return err
	}
	return setManagedFields(ot, &wl, kept)
}

var workloadsGVR = kueue.SchemeGroupVersion.WithResource("workloads")

// setManagedFields writes managedFields through the tracker (the fake
// client's Update keeps the stored ones).
func setManagedFields(ot clienttesting.ObjectTracker, wl *kueue.Workload, entries []metav1.ManagedFieldsEntry) error {
	o, err := ot.Get(workloadsGVR, wl.Namespace, wl.Name)
	if err != nil {
		return err
	}
	stored := o.(*kueue.Workload).DeepCopy()
	stored.ManagedFields = entries
	return ot.Update(workloadsGVR, stored, wl.Namespace)
}

func (f *fixture) newReconciler() *JobReconciler {
	return f.newKindReconciler(jobframework.TrainJob{}, nil)
}

// newKindReconciler is the reconciler of kind, fed by reports (nil for a
// kind that carries its own).
func (f *fixture) newKindReconciler(kind jobframework.Adapter, reports jobframework.ReportSource) *JobReconciler {
	r := newJobReconciler(kind, reports, f.c, f.c, f.ev, f.clock, f.cfg, forecast.DefaultSettings())
	r.SetKueueAvailable(true)
	// The fake client runs no webhook: a dry run of any annotation passes,
	// which the real probe reads as PriorityBoost off.
	r.caps.probe = func(context.Context, *kueue.Workload) (gateState, error) { return f.boostGate, nil }
	return r
}

func (f *fixture) reconcile(name string) reconcile.Result {
	f.t.Helper()
	res, err := f.rec.Reconcile(context.Background(), reconcile.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: name}})
	if err != nil {
		f.t.Fatalf("reconcile %s: %v", name, err)
	}
	return res
}

func (f *fixture) setStatus(name string, s progress.TrainerStatus) {
	f.t.Helper()
	var tj trainer.TrainJob
	if err := f.c.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, &tj); err != nil {
		f.t.Fatal(err)
	}
	ts := FromForecastStatus(s, f.clock.Now())
	tj.Status.TrainerStatus = &ts
	if err := f.c.Status().Update(context.Background(), &tj); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fixture) pf(name string) *v1alpha1.ProgressForecast {
	f.t.Helper()
	var pf v1alpha1.ProgressForecast
	if err := f.c.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, &pf); err != nil {
		f.t.Fatal(err)
	}
	return &pf
}

func (f *fixture) workload(name string) *kueue.Workload {
	f.t.Helper()
	var wl kueue.Workload
	if err := f.c.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, &wl); err != nil {
		f.t.Fatal(err)
	}
	return &wl
}

func trainJob(name string, uid types.UID, annotations map[string]string) *trainer.TrainJob {
	return &trainer.TrainJob{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, UID: uid, Annotations: annotations}}
}

func workloadFor(name string, tj *trainer.TrainJob, admitted bool) *kueue.Workload {
	wl := &kueue.Workload{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: ns, UID: types.UID(name + "-uid"),
			Labels: map[string]string{workloads.LabelJobUID: string(tj.UID)},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: trainer.GroupVersion.String(), Kind: trainer.TrainJobKind,
				Name: tj.Name, UID: tj.UID, Controller: ptr.To(true)}},
			CreationTimestamp: metav1.NewTime(t0),
		},
		Spec: kueue.WorkloadSpec{
			QueueName: "lq", Priority: ptr.To[int32](0),
			PodSets: []kueue.PodSet{{Name: "node", Count: 8, Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				Containers: []corev1.Container{gpuContainer("trainer", 1, 1)}}}}},
		},
	}
	if admitted {
		wl.Status.Conditions = []metav1.Condition{
			cond(kueue.WorkloadQuotaReserved, metav1.ConditionTrue, "QuotaReserved", t0),
			cond(kueue.WorkloadAdmitted, metav1.ConditionTrue, "Admitted", t0),
		}
		wl.Status.Admission = &kueue.Admission{ClusterQueue: "cq"}
	}
	return wl
}

func localQueue() *kueue.LocalQueue {
	return &kueue.LocalQueue{ObjectMeta: metav1.ObjectMeta{Name: "lq", Namespace: ns}, Spec: kueue.LocalQueueSpec{ClusterQueue: "cq"}}
}

func exampleHistory(t *testing.T, name string) *progress.HistoryFile {
	t.Helper()
	b, err := fs.ReadFile(examples.FS, examples.Dir+"/"+name+".jsonl")
	if err != nil {
		t.Fatal(err)
	}
	hf, err := progress.ReadHistoryFile(strings.NewReader(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	return hf
}

// replayInto feeds reports [from, to) at their recorded times and
// reconciles after each.
func (f *fixture) replayInto(name string, reports []progress.FileReport) {
	f.t.Helper()
	for _, r := range reports {
		f.clock.SetTime(t0.Add(time.Duration(r.T * float64(time.Second))))
		f.setStatus(name, r.TrainerStatus)
		f.reconcile(name)
	}
}

func TestReconcilePlateauYields(t *testing.T) {
	a := trainJob("a", "a-uid", nil)
	b := trainJob("b", "b-uid", nil)
	wlA := workloadFor("trainjob-a-00001", a, true)
	wlB := workloadFor("trainjob-b-00002", b, false)
	f := newFixture(t, testConfig(), a, b, wlA, wlB, localQueue())

	hf := exampleHistory(t, "synth__early-plateau")
	n := len(hf.Reports) * 7 / 10
	f.replayInto("a", hf.Reports[:n])

	pf := f.pf("a")
	st := pf.Status
	if st.Verdict != string(preempt.Plateaued) {
		t.Fatalf("verdict %q after %d reports, want Plateaued; reason: %s", st.Verdict, n, st.Reason)
	}
	if st.Boost != -100 || st.AdvisedBoost != -100 || st.Mode != "enforce" || st.Workload != wlA.Name || st.ClusterQueue != "cq" {
		t.Errorf("status boost %d advised %d mode %q workload %q cq %q", st.Boost, st.AdvisedBoost, st.Mode, st.Workload, st.ClusterQueue)
	}
	if got := f.workload(wlA.Name).Annotations[AnnotationPriorityBoost]; got != "-100" {
		t.Errorf("A's boost annotation %q, want -100", got)
	}
	if !PlannerOwnsBoost(f.workload(wlA.Name).ManagedFields) {
		t.Error("the planner does not own A's boost annotation")
	}
	// B waits in the same ClusterQueue: woken by a dip of its boost (the
	// Kueue generation is unknown here), restored at once to the same
	// priority: "0".
	if got, ok := f.workload(wlB.Name).Annotations[AnnotationPriorityBoost]; !ok || got != "0" {
		t.Errorf("B's boost annotation %q (set %v) after the dip, want 0", got, ok)
	}
	if ev := f.ev.byReason(ReasonBoostChanged); len(ev) != 2 || !strings.Contains(ev[0].note, "priority boost -100 (was +0)") ||
		!strings.Contains(ev[0].note, "woke 1 waiting Workload") {
		t.Errorf("boost events %+v", ev)
	}
	if ev := f.ev.byReason(string(preempt.Plateaued)); len(ev) != 1 || ev[0].name != "a" {
		t.Errorf("verdict events %+v", ev)
	}
	if st.Observations != int64(n) || st.Forecast == nil || st.Forecast.Reports == 0 || st.History == nil || st.Decision == nil {
		t.Errorf("observations %d forecast %+v history %v decision %v", st.Observations, st.Forecast, st.History != nil, st.Decision != nil)
	}
	// Rate limit: far fewer forecasts than reports (one per 30s of a
	// report every ~10s), visible in the decision history of the status.
	if c := apimeta.FindStatusCondition(st.Conditions, v1alpha1.ConditionEnforcing); c == nil || c.Status != metav1.ConditionTrue {
		t.Errorf("Enforcing condition %+v", c)
	}

	// The history survives a restart: a new reconciler restores it.
	var stored preempt.Decision
	if err := json.Unmarshal(st.Decision.Raw, &stored); err != nil {
		t.Fatal(err)
	}
	// The typed decision fields say what the blob says (planner-scheduler
	// reads only them).
	if st.DecisionVersion != v1alpha1.DecisionVersion || st.DecidedTime == nil || st.VerdictSince == nil || st.StalledSince == nil ||
		stored.StalledSince == nil || st.StalledSince.Unix() != int64(*stored.StalledSince) || st.ProtectedUntil != nil ||
		st.DecidedTime.Unix() != int64(stored.At) {
		t.Errorf("typed decision fields: version %d decided %v verdictSince %v stalledSince %v protectedUntil %v; decision %+v",
			st.DecisionVersion, st.DecidedTime, st.VerdictSince, st.StalledSince, st.ProtectedUntil, stored)
	}
	f.rec = f.newReconciler()
	f.replayInto("a", hf.Reports[n:n+1])
	pf2 := f.pf("a")
	if pf2.Status.Observations != int64(n+1) {
		t.Errorf("after restart: %d observations, want %d", pf2.Status.Observations, n+1)
	}
	h, err := progress.UnmarshalHistory(pf2.Status.History.Raw, progress.DefaultLimits())
	if err != nil || h.Len() < n/2 {
		t.Errorf("after restart the history has %v points (%v)", h, err)
	}
	// No boost flapping: still one change.
	if ev := f.ev.byReason(ReasonBoostChanged); len(ev) != 2 {
		t.Errorf("boost changed again after restart: %+v", ev)
	}
}

func TestReconcileForecastRateLimit(t *testing.T) {
	a := trainJob("a", "a-uid", nil)
	f := newFixture(t, testConfig(), a, workloadFor("trainjob-a-00001", a, true))
	hf := exampleHistory(t, "synth__inverse-power")
	reports := hf.Reports[:60]
	forecasts, writes, observedAtWrite := 0, 0, 0
	var last time.Time
	lastRV := ""
	for i, r := range reports {
		f.clock.SetTime(t0.Add(time.Duration(r.T * float64(time.Second))))
		f.setStatus("a", r.TrainerStatus)
		f.reconcile("a")
		pf := f.pf("a")
		if ft := pf.Status.Forecast; ft != nil && !ft.Time.Time.Equal(last) {
			forecasts++
			last = ft.Time.Time
		}
		if pf.ResourceVersion != lastRV {
			writes++
			observedAtWrite = i + 1
			lastRV = pf.ResourceVersion
		}
	}
	span := reports[len(reports)-1].T - reports[0].T
	maxForecasts := int(span/30) + 2
	if forecasts > maxForecasts || forecasts < 2 {
		t.Errorf("%d forecasts for %d reports over %.0fs; want at most %d (one per 30s)", forecasts, len(reports), span, maxForecasts)
	}
	// Observation bookkeeping alone never writes: the ProgressForecast is
	// written when it is created and at forecasts (each write carries the
	// observations so far), not at every report.
	if writes > forecasts+2 {
		t.Errorf("%d ProgressForecast writes for %d forecasts and %d reports: reports alone cause writes", writes, forecasts, len(reports))
	}
	if got := f.pf("a").Status.Observations; got != int64(observedAtWrite) {
		t.Errorf("observations %d, want %d (the reports up to the last write)", got, observedAtWrite)
	}
}

func TestReconcileForeignOwnerAdviseOnly(t *testing.T) {
	a := trainJob("a", "a-uid", nil)
	wlA := workloadFor("trainjob-a-00001", a, true)
	f := newFixture(t, testConfig(), a, wlA, localQueue())
	// Someone else set the boost first.
	wl := f.workload(wlA.Name)
	wl.Annotations = map[string]string{AnnotationPriorityBoost: "5"}
	if err := f.c.Update(context.Background(), wl); err != nil {
		t.Fatal(err)
	}
	if err := setManagedFields(f.ot, wl, []metav1.ManagedFieldsEntry{mf("kubectl-annotate", metav1.ManagedFieldsOperationUpdate, "", boostFields)}); err != nil {
		t.Fatal(err)
	}
	hf := exampleHistory(t, "synth__early-plateau")
	f.replayInto("a", hf.Reports[:len(hf.Reports)*7/10])

	st := f.pf("a").Status
	if got := f.workload(wlA.Name).Annotations[AnnotationPriorityBoost]; got != "5" {
		t.Errorf("the planner overwrote a foreign boost: %q", got)
	}
	if st.Mode != modeAdviseOnly || !strings.Contains(st.AdviseOnly, "kubectl-annotate") || st.Boost != 0 {
		t.Errorf("mode %q adviseOnly %q boost %d", st.Mode, st.AdviseOnly, st.Boost)
	}
	if st.Verdict != string(preempt.Plateaued) || st.AdvisedBoost != -100 {
		t.Errorf("the planner should still decide: verdict %q advised %d", st.Verdict, st.AdvisedBoost)
	}
	if ev := f.ev.byReason(ReasonAdviseOnly); len(ev) != 2 {
		t.Errorf("want one AdviseOnly event on the TrainJob and one on the Workload, got %+v", ev)
	}
	if len(f.ev.byReason(ReasonBoostChanged)) != 0 {
		t.Error("boost change event without a boost change")
	}
}

func TestReconcileAdviseMode(t *testing.T) {
	cfg := testConfig()
	cfg.Policy.Mode = preempt.ModeAdvise
	a := trainJob("a", "a-uid", nil)
	wlA := workloadFor("trainjob-a-00001", a, true)
	f := newFixture(t, cfg, a, wlA, localQueue())
	hf := exampleHistory(t, "synth__early-plateau")
	f.replayInto("a", hf.Reports[:len(hf.Reports)*7/10])
	st := f.pf("a").Status
	if _, ok := f.workload(wlA.Name).Annotations[AnnotationPriorityBoost]; ok {
		t.Error("advise mode wrote a boost")
	}
	if st.Mode != "advise" || st.AdvisedBoost != -100 || st.Boost != 0 || st.Verdict != string(preempt.Plateaued) {
		t.Errorf("status mode %q advised %d boost %d verdict %q", st.Mode, st.AdvisedBoost, st.Boost, st.Verdict)
	}
}

func TestReconcileInvalidObjectiveAndGarbage(t *testing.T) {
	a := trainJob("a", "a-uid", map[string]string{AnnotationObjective: "accuracy,higher"})
	f := newFixture(t, testConfig(), a, workloadFor("trainjob-a-00001", a, true))
	hf := exampleHistory(t, "synth__inverse-power")
	f.replayInto("a", hf.Reports[:5])
	// Garbage: unparsable and impossible values (the report is refused).
	f.clock.Step(time.Second)
	f.setStatus("a", progress.TrainerStatus{ProgressPercentage: ptr.To(100.0),
		Metrics: []progress.MetricValue{{Name: "loss", Value: "lots"}, {Name: "current_step", Value: "-5"}}})
	f.reconcile("a")
	f.replayInto("a", hf.Reports[5:12]) // the planner carries on

	st := f.pf("a").Status
	c := apimeta.FindStatusCondition(st.Conditions, v1alpha1.ConditionObjectiveValid)
	if c == nil || c.Status != metav1.ConditionFalse || !strings.Contains(c.Message, "accuracy,higher") {
		t.Errorf("ObjectiveValid %+v", c)
	}
	if !strings.HasSuffix(st.Objective, "loss,minimize") || st.ObjectiveSource != v1alpha1.ObjectiveDefault {
		t.Errorf("objective %q from %q, want the default", st.Objective, st.ObjectiveSource)
	}
	if ev := f.ev.byReason(ReasonInvalidObjective); len(ev) != 1 {
		t.Errorf("want exactly one InvalidObjective event, got %+v", ev)
	}
	if st.Rejections["unparsable"] != 1 || st.Rejections["negative"] != 1 || st.LastRejection == "" {
		t.Errorf("rejections %v last %q", st.Rejections, st.LastRejection)
	}
	if st.Observations <= 6 || st.Forecast == nil || st.Forecast.Reports <= 5 {
		t.Errorf("observations %d forecast %+v: the planner did not carry on", st.Observations, st.Forecast)
	}
	if ev := f.ev.byReason(ReasonReportsRejected); len(ev) != 1 {
		t.Errorf("want one ReportsRejected event, got %+v", ev)
	}
}

func TestReconcileNoWorkloadNoKueue(t *testing.T) {
	a := trainJob("a", "a-uid", nil)
	f := newFixture(t, testConfig(), a)
	hf := exampleHistory(t, "synth__inverse-power")
	f.replayInto("a", hf.Reports[:3])
	st := f.pf("a").Status
	if st.Mode != modeAdviseOnly || !strings.Contains(st.AdviseOnly, "no single unfinished Workload") {
		t.Errorf("mode %q adviseOnly %q", st.Mode, st.AdviseOnly)
	}
	f.rec.SetKueueAvailable(false)
	f.replayInto("a", hf.Reports[3:4])
	st = f.pf("a").Status
	if c := apimeta.FindStatusCondition(st.Conditions, v1alpha1.ConditionWorkloadFound); c == nil || c.Reason != condReasonNoKueue {
		t.Errorf("WorkloadFound %+v", c)
	}
	if !strings.Contains(st.AdviseOnly, "Kueue is not installed") {
		t.Errorf("adviseOnly %q", st.AdviseOnly)
	}
}

func TestReconcileDeletedTrainJob(t *testing.T) {
	f := newFixture(t, testConfig())
	if res := f.reconcile("gone"); res != (reconcile.Result{}) {
		t.Errorf("result %+v", res)
	}
}

// A ProgressForecast left over from an earlier TrainJob of the same name
// (no garbage collector) is replaced.
func TestReconcileReplacesStaleProgressForecast(t *testing.T) {
	a := trainJob("a", "a-uid-2", nil)
	stale := &v1alpha1.ProgressForecast{ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: ns,
		OwnerReferences: []metav1.OwnerReference{{APIVersion: trainer.GroupVersion.String(), Kind: trainer.TrainJobKind,
			Name: "a", UID: "a-uid-1", Controller: ptr.To(true)}}},
		Spec: v1alpha1.ProgressForecastSpec{JobRef: v1alpha1.JobRef{APIVersion: "trainer.kubeflow.org/v1alpha1", Kind: "TrainJob", Name: "a"}}}
	f := newFixture(t, testConfig(), a, stale)
	f.reconcile("a")
	f.reconcile("a")
	pf := f.pf("a")
	if ref := metav1.GetControllerOf(pf); ref == nil || ref.UID != "a-uid-2" {
		t.Errorf("owner %+v", ref)
	}

	// One an older planner wrote (no spec.jobRef) is replaced too: the
	// planner cannot write a spec.
	b := trainJob("b", "b-uid", nil)
	legacy := &v1alpha1.ProgressForecast{ObjectMeta: metav1.ObjectMeta{Name: "b", Namespace: ns, UID: "legacy-uid",
		OwnerReferences: []metav1.OwnerReference{{APIVersion: trainer.GroupVersion.String(), Kind: trainer.TrainJobKind,
			Name: "b", UID: "b-uid", Controller: ptr.To(true)}}}}
	f = newFixture(t, testConfig(), b, legacy)
	f.reconcile("b")
	f.reconcile("b")
	if pf := f.pf("b"); pf.UID == "legacy-uid" || pf.Spec.JobRef.Kind != "TrainJob" || pf.Spec.JobRef.UID != "b-uid" {
		t.Errorf("legacy ProgressForecast kept: uid %s jobRef %+v", pf.UID, pf.Spec.JobRef)
	}
}

// A ProgressForecast a user deletes is created again on the next
// reconcile (its delete event triggers one), with an Event saying the
// history restarts; the planner does not keep writing to the deleted one.
func TestReconcileRecreatesDeletedProgressForecast(t *testing.T) {
	a := trainJob("a", "a-uid", nil)
	f := newFixture(t, testConfig(), a, workloadFor("trainjob-a-00001", a, true), localQueue())
	hf := exampleHistory(t, "synth__early-plateau")
	f.replayInto("a", hf.Reports[:20])
	old := f.pf("a")
	if old.Status.History == nil {
		t.Fatal("no history stored before the delete")
	}
	if err := f.c.Delete(context.Background(), old); err != nil {
		t.Fatal(err)
	}
	f.reconcile("a")
	pf := f.pf("a") // fails when it was not created again
	if pf.Status.Observations >= old.Status.Observations {
		t.Errorf("recreated with %d observations, the deleted one had %d: the history did not restart", pf.Status.Observations, old.Status.Observations)
	}
	if ev := f.ev.byReason(ReasonHistoryReset); len(ev) != 1 || !strings.Contains(ev[0].note, "was deleted; created again, the history restarts") {
		t.Errorf("HistoryReset Events %+v", ev)
	}
	// The next reports go into the new object.
	f.replayInto("a", hf.Reports[20:30])
	if pf = f.pf("a"); pf.Status.History == nil || pf.Status.Observations == 0 {
		t.Errorf("the recreated ProgressForecast holds no history: %+v", pf.Status)
	}
}

func TestReconcileHealthyJobLeftAlone(t *testing.T) {
	a := trainJob("a", "a-uid", nil)
	wlA := workloadFor("trainjob-a-00001", a, true)
	f := newFixture(t, testConfig(), a, wlA, localQueue())
	hf := exampleHistory(t, "synth__inverse-power")
	verdicts := map[string]int{}
	for _, r := range hf.Reports[:len(hf.Reports)*85/100] {
		f.replayInto("a", []progress.FileReport{r})
		verdicts[f.pf("a").Status.Verdict]++
	}
	if _, ok := f.workload(wlA.Name).Annotations[AnnotationPriorityBoost]; ok {
		t.Errorf("a healthy job got a boost; verdicts seen %v", verdicts)
	}
	if len(f.ev.events) != 0 {
		t.Errorf("events for a healthy job: %+v", f.ev.events)
	}
	if st := f.pf("a").Status; st.Verdict != string(preempt.Progressing) || st.Boost != 0 {
		t.Errorf("verdict %q boost %d (verdicts seen %v): %s", st.Verdict, st.Boost, verdicts, st.Reason)
	}
}

func TestReconcileForgedJumpEarnsNoProtection(t *testing.T) {
	a := trainJob("a", "a-uid", nil)
	wlA := workloadFor("trainjob-a-00001", a, true)
	f := newFixture(t, testConfig(), a, wlA, localQueue())
	hf := exampleHistory(t, "synth__inverse-power")
	n := len(hf.Reports) * 4 / 10
	f.replayInto("a", hf.Reports[:n])
	last := hf.Reports[n-1].T
	f.clock.SetTime(t0.Add(time.Duration((last + 10) * float64(time.Second))))
	f.setStatus("a", forgeNearDone(hf.Reports[n].TrainerStatus))
	f.reconcile("a")
	f.clock.SetTime(t0.Add(time.Duration((last + 40) * float64(time.Second))))
	f.reconcile("a") // the rate limit lets the forecast through now
	st := f.pf("a").Status
	// Untrusted, or Warming when the jump also wrecks the curve's
	// confidence: either way no protection.
	if (st.Verdict != string(preempt.Untrusted) && st.Verdict != string(preempt.Warming)) || st.Boost != 0 || st.AdvisedBoost != 0 {
		t.Errorf("verdict %q boost %d advised %d: %s", st.Verdict, st.Boost, st.AdvisedBoost, st.Reason)
	}
	if v, ok := f.workload(wlA.Name).Annotations[AnnotationPriorityBoost]; ok {
		t.Errorf("forged progress earned a boost %q", v)
	}
	ev := f.ev.byReason(ReasonImplausibleProgress)
	if len(ev) != 1 || ev[0].typ != corev1.EventTypeWarning || !strings.Contains(ev[0].note, "progress jumped") ||
		!strings.Contains(ev[0].note, "no protection until") {
		t.Errorf("ImplausibleProgress events %+v", ev)
	}
	// One event per distrust period, not one per forecast.
	f.clock.Step(35 * time.Second)
	f.setStatus("a", forgeNearDone(hf.Reports[n+1].TrainerStatus))
	f.reconcile("a")
	if ev := f.ev.byReason(ReasonImplausibleProgress); len(ev) != 1 {
		t.Errorf("%d ImplausibleProgress events after another forecast", len(ev))
	}
}

// forgeNearDone turns a report into a claim of 99% done: percentage and
// step counter jump, ETA one minute.
func forgeNearDone(s progress.TrainerStatus) progress.TrainerStatus {
	out := progress.TrainerStatus{ProgressPercentage: ptr.To(99.0), EstimatedRemainingSeconds: ptr.To(60.0)}
	total := ""
	for _, m := range s.Metrics {
		if m.Name == "total_steps" {
			total = m.Value
		}
	}
	for _, m := range s.Metrics {
		if m.Name == "current_step" && total != "" {
			var tot float64
			fmt.Sscan(total, &tot)
			m.Value = fmt.Sprint(int(tot * 0.99))
		}
		out.Metrics = append(out.Metrics, m)
	}
	return out
}

func TestReconcileStopOptIn(t *testing.T) {
	cfg := testConfig()
	cfg.Policy.Stop.GracePeriod = preempt.Dur(time.Minute)
	a := trainJob("a", "a-uid", map[string]string{AnnotationStopOptIn: "true"})
	wlA := workloadFor("trainjob-a-00001", a, true)
	f := newFixture(t, cfg, a, wlA, localQueue())
	hf := exampleHistory(t, "synth__early-plateau")
	f.replayInto("a", hf.Reports[:len(hf.Reports)*85/100])

	wl := f.workload(wlA.Name)
	st := f.pf("a").Status
	if wl.Spec.Active == nil || *wl.Spec.Active {
		t.Fatalf("Workload still active; verdict %q reason %s", st.Verdict, st.Reason)
	}
	if st.DeactivatedTime == nil || st.LastPlannerEvictionTime == nil {
		t.Errorf("deactivation not recorded: %+v", st)
	}
	ev := f.ev.byReason(ReasonDeactivated)
	if len(ev) != 2 || !strings.Contains(ev[0].note, "GPU-hours") || !strings.Contains(ev[0].note, "stop opted in by the job") {
		t.Errorf("Deactivated events %+v", ev)
	}
	// Once: the owner's reactivation is not undone by the same decision.
	wl.Spec.Active = ptr.To(true)
	if err := f.c.Update(context.Background(), wl); err != nil {
		t.Fatal(err)
	}
	f.reconcile("a")
	if wl := f.workload(wlA.Name); !ptr.Deref(wl.Spec.Active, true) {
		t.Error("the planner deactivated again on the same decision")
	}
}

// Issue 14: a tenant who can edit the ProgressForecast status forges the
// stored decision (mode enforce, boost 2000000000, revision bumped). The
// planner applies the current config's mode and the policy's boost range,
// never the stored ones.
func TestReconcileForgedDecision(t *testing.T) {
	for _, mode := range []preempt.Mode{preempt.ModeAdvise, preempt.ModeEnforce} {
		t.Run(string(mode), func(t *testing.T) {
			cfg := testConfig()
			cfg.Policy.Mode = mode
			a := trainJob("a", "a-uid", nil)
			wlA := workloadFor("trainjob-a-00001", a, true)
			f := newFixture(t, cfg, a, wlA, localQueue())
			hf := exampleHistory(t, "synth__early-plateau")
			f.replayInto("a", hf.Reports[:len(hf.Reports)/5])

			pf := f.pf("a")
			var d preempt.Decision
			if err := json.Unmarshal(pf.Status.Decision.Raw, &d); err != nil {
				t.Fatal(err)
			}
			d.Mode, d.Boost, d.AdvisedBoost = preempt.ModeEnforce, 2_000_000_000, 2_000_000_000
			d.Action, d.AdvisedAction = preempt.ActionDeactivate, preempt.ActionDeactivate
			raw, err := json.Marshal(d)
			if err != nil {
				t.Fatal(err)
			}
			pf.Status.Decision.Raw = raw
			pf.Status.Mode = string(preempt.ModeEnforce)
			pf.Status.AdvisedBoost = d.AdvisedBoost
			pf.Status.Revision++
			if err := f.c.Status().Update(context.Background(), pf); err != nil {
				t.Fatal(err)
			}
			// A restarted planner reads the forged state back; the clock
			// does not move, so no new forecast replaces the decision.
			f.rec = f.newReconciler()
			f.reconcile("a")

			wl := f.workload(wlA.Name)
			v, set := wl.Annotations[AnnotationPriorityBoost]
			b, _ := strconv.Atoi(v)
			p := cfg.Policy
			switch {
			case mode == preempt.ModeAdvise && set && b != 0:
				t.Errorf("advise mode wrote priority-boost %q", v)
			case set && (b < int(p.Boosts.Min) || b > int(p.Boosts.Max)):
				t.Errorf("priority-boost %q outside the policy's [%d, %d]", v, p.Boosts.Min, p.Boosts.Max)
			}
			if wl.Spec.Active != nil && !*wl.Spec.Active {
				t.Error("the forged Deactivate stopped the Workload")
			}
			st := f.pf("a").Status
			if st.Mode != string(mode) {
				t.Errorf("status mode %q, want the config's %q", st.Mode, mode)
			}
			var stored preempt.Decision
			if err := json.Unmarshal(st.Decision.Raw, &stored); err != nil {
				t.Fatal(err)
			}
			if stored.Mode != mode || stored.AdvisedBoost > p.Boosts.Max || st.AdvisedBoost != stored.AdvisedBoost {
				t.Errorf("stored decision kept the forgery: mode %s advised %d (status %d)", stored.Mode, stored.AdvisedBoost, st.AdvisedBoost)
			}
			t.Logf("mode %s: annotation %q (set %v), status boost %d", mode, v, set, st.Boost)
		})
	}
}

// Issue 14: terminal escapes, NUL and bidirectional overrides in the
// objective annotation and in reported metric names reach no status field
// and no Event raw; the refused annotation is a Warning Event.
func TestReconcileHostileText(t *testing.T) {
	const hostile = "\x1b]0;PWNED\x07\x1b[2J\u202e\x00"
	a := trainJob("a", "a-uid", map[string]string{AnnotationObjective: "eval_loss" + hostile})
	f := newFixture(t, testConfig(), a, workloadFor("trainjob-a-00001", a, true))
	hf := exampleHistory(t, "synth__inverse-power")
	f.replayInto("a", hf.Reports[:5])
	f.clock.Step(time.Second)
	f.setStatus("a", progress.TrainerStatus{Metrics: []progress.MetricValue{{Name: "loss" + hostile, Value: "lots" + hostile}, {Name: "train_loss", Value: "1.5"}}})
	f.reconcile("a")
	f.replayInto("a", hf.Reports[5:12])

	st := f.pf("a").Status
	if st.ObjectiveSource != v1alpha1.ObjectiveDefault {
		t.Errorf("objective %q from %q, want the default", st.Objective, st.ObjectiveSource)
	}
	texts := map[string]string{"objective": st.Objective, "lastRejection": st.LastRejection, "reason": st.Reason}
	for _, c := range st.Conditions {
		texts["condition "+c.Type] = c.Message
	}
	for _, e := range f.ev.events {
		texts["Event "+e.reason] = e.note
	}
	for where, s := range texts {
		if !printable(s) {
			t.Errorf("%s is not printable: %q", where, s)
		}
	}
	if !strings.Contains(st.LastRejection, `loss\x1b]0;PWNED\x07`) {
		t.Errorf("lastRejection %q does not name the hostile metric, escaped", st.LastRejection)
	}
	ev := f.ev.byReason(ReasonInvalidObjective)
	if len(ev) != 1 || !strings.Contains(ev[0].note, "only printable characters") {
		t.Errorf("want one InvalidObjective Event about printable characters, got %+v", ev)
	}
	t.Logf("rejections %v, last %q; InvalidObjective: %s", st.Rejections, st.LastRejection, ev[0].note)
}

// Issue 14: Kueue's clock an hour ahead of the planner's. The admission
// time is clamped to the planner's now (never "admitted -48m ago"), and
// the skew is reported.
func TestReconcileKueueClockAhead(t *testing.T) {
	cfg := testConfig()
	cfg.Policy.Evidence.MinAge = preempt.Dur(10 * time.Minute)
	a := trainJob("a", "a-uid", nil)
	wlA := workloadFor("trainjob-a-00001", a, true)
	ahead := t0.Add(time.Hour)
	for i := range wlA.Status.Conditions {
		wlA.Status.Conditions[i].LastTransitionTime = metav1.NewTime(ahead)
	}
	f := newFixture(t, cfg, a, wlA, localQueue())
	hf := exampleHistory(t, "synth__early-plateau")
	f.replayInto("a", hf.Reports[:len(hf.Reports)/5])

	st := f.pf("a").Status
	var d preempt.Decision
	if err := json.Unmarshal(st.Decision.Raw, &d); err != nil {
		t.Fatal(err)
	}
	if d.Verdict != preempt.Warming || !strings.Contains(d.Reason, "admitted 0s ago (need 10m)") || strings.Contains(d.Reason, "admitted -") {
		t.Errorf("verdict %s: %s; want Warming, admitted 0s ago", d.Verdict, d.Reason)
	}
	wantAhead := ahead.Sub(f.clock.Now()).Seconds()
	if got := metricValue(t, metricKueueClockAhead); got <= 0 || got > time.Hour.Seconds() {
		t.Errorf("planner_kueue_clock_ahead_seconds %v, want in (0, 3600]", got)
	} else {
		t.Logf("planner_kueue_clock_ahead_seconds %v (Kueue's newest time is %vs ahead now); reason: %s", got, wantAhead, d.Reason)
	}
	if metricValue(t, metricFutureTimes) == 0 {
		t.Error("planner_future_timestamps_total did not count the clamped times")
	}
}

func metricValue(t *testing.T, m prometheus.Metric) float64 {
	t.Helper()
	var out dto.Metric
	if err := m.Write(&out); err != nil {
		t.Fatal(err)
	}
	switch {
	case out.Gauge != nil:
		return out.Gauge.GetValue()
	case out.Counter != nil:
		return out.Counter.GetValue()
	}
	t.Fatalf("metric %v is neither a gauge nor a counter", m.Desc())
	return 0
}

// Issue 14: wakeWaiting finds the waiting Workloads of one ClusterQueue
// through the cache's indexes (its LocalQueues, their Workloads), never by
// listing every Workload; highest effective priority first, then oldest;
// foreign-owned annotations skipped; at most maxNudges.
func TestWakeWaitingIndexed(t *testing.T) {
	tj := trainJob("x", "x-uid", nil)
	mk := func(name, namespace, queue string, prio int32, age time.Duration, boost string, admitted bool) *kueue.Workload {
		wl := workloadFor(name, tj, admitted)
		wl.Namespace, wl.Spec.QueueName, wl.Spec.Priority = namespace, kueue.LocalQueueName(queue), ptr.To(prio)
		wl.CreationTimestamp = metav1.NewTime(t0.Add(-age))
		if boost != "" {
			wl.Annotations = map[string]string{AnnotationPriorityBoost: boost}
		}
		return wl
	}
	lq := func(namespace, name, cq string) *kueue.LocalQueue {
		return &kueue.LocalQueue{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace}, Spec: kueue.LocalQueueSpec{ClusterQueue: kueue.ClusterQueueReference(cq)}}
	}
	foreign := mk("foreign", "team", "lq", 100, time.Hour, "5", false)
	f := newFixture(t, testConfig(),
		lq("team", "lq", "cq"), lq("other", "lq2", "cq"), lq("team", "lq3", "elsewhere"),
		mk("running", "team", "lq", 1000, time.Hour, "", true), // admitted: not waiting
		mk("old-low", "team", "lq", 10, 3*time.Hour, "", false),
		mk("new-high", "other", "lq2", 10, time.Hour, "+50", false), // effective 60
		mk("old-high", "team", "lq", 60, 2*time.Hour, "", false),    // effective 60, older
		mk("other-cq", "team", "lq3", 1000, time.Hour, "", false),
		foreign,
	)
	if err := setManagedFields(f.ot, foreign, []metav1.ManagedFieldsEntry{mf("kubectl-annotate", metav1.ManagedFieldsOperationUpdate, "", boostFields)}); err != nil {
		t.Fatal(err)
	}
	var unindexed []string
	c := interceptor.NewClient(f.c.(client.WithWatch), interceptor.Funcs{
		List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			lo := (&client.ListOptions{}).ApplyOptions(opts)
			if lo.FieldSelector == nil {
				unindexed = append(unindexed, fmt.Sprintf("%T", list))
			}
			return c.List(ctx, list, opts...)
		},
	})
	w := &workloadIO{c: c, maxNudges: 2}
	res, err := w.wakeWaiting(context.Background(), "cq", "", wakeRespell)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"team/old-high", "other/new-high"}; !slices.Equal(res.Nudged, want) {
		t.Errorf("nudged %v, want %v", res.Nudged, want)
	}
	wantSkipped := []string{"team/foreign: annotation owned by kubectl-annotate", "team/old-low: nudge limit reached"}
	if !slices.Equal(res.Skipped, wantSkipped) {
		t.Errorf("skipped %v, want %v", res.Skipped, wantSkipped)
	}
	if len(unindexed) > 0 {
		t.Errorf("lists without an index: %v", unindexed)
	}
}

// Issue 15: the dip lowers a waiting Workload's boost by one and restores
// it (Kueue v0.19 keeps a Workload whose effective priority did not change
// among the inadmissible ones); the respelling keeps the value.
func TestDipValues(t *testing.T) {
	for _, tc := range []struct {
		cur          string
		set          bool
		dip, restore string
		ok           bool
	}{
		{"", false, "-1", "0", true},
		{"0", true, "-1", "0", true},
		{"+50", true, "49", "+50", true},
		{"-100", true, "-101", "-100", true},
		{"-2147483648", true, "", "", false},
		{"x", true, "", "", false},
	} {
		dip, restore, ok := dipValues(tc.cur, tc.set)
		if dip != tc.dip || restore != tc.restore || ok != tc.ok {
			t.Errorf("dipValues(%q, %v) = %q, %q, %v; want %q, %q, %v", tc.cur, tc.set, dip, restore, ok, tc.dip, tc.restore, tc.ok)
		}
	}
}

// Issue 15: waking by a dip writes value-1 then the old value, per Workload.
func TestWakeWaitingDip(t *testing.T) {
	tj := trainJob("x", "x-uid", nil)
	waiting := workloadFor("waiting", tj, false)
	waiting.Spec.QueueName = "lq"
	waiting.Annotations = map[string]string{AnnotationPriorityBoost: "+50"}
	f := newFixture(t, testConfig(), &kueue.LocalQueue{ObjectMeta: metav1.ObjectMeta{Name: "lq", Namespace: ns},
		Spec: kueue.LocalQueueSpec{ClusterQueue: "cq"}}, waiting)
	var written []string
	c := interceptor.NewClient(f.c.(client.WithWatch), interceptor.Funcs{
		Apply: func(ctx context.Context, c client.WithWatch, obj runtime.ApplyConfiguration, opts ...client.ApplyOption) error {
			u := obj.(interface{ GetAnnotations() map[string]string })
			v, ok := u.GetAnnotations()[AnnotationPriorityBoost]
			if !ok {
				v = "<absent>"
			}
			written = append(written, v)
			return c.Apply(ctx, obj, opts...)
		},
	})
	w := &workloadIO{c: c, maxNudges: 5}
	res, err := w.wakeWaiting(context.Background(), "cq", "", wakeDip)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{ns + "/waiting"}; !slices.Equal(res.Nudged, want) {
		t.Errorf("nudged %v, want %v", res.Nudged, want)
	}
	if want := []string{"49", "+50"}; !slices.Equal(written, want) {
		t.Errorf("written %v, want the dip then the restore %v", written, want)
	}
	if got := f.workload("waiting").Annotations[AnnotationPriorityBoost]; got != "+50" {
		t.Errorf("boost after the dip %q, want +50 again", got)
	}
}

// Issue 15: lowering an admitted Workload that has a WorkloadPriorityClass
// touches no waiting Workload (Kueue retries them itself), and with
// PriorityBoost off the planner writes nothing and says so.
func TestReconcileWakeAndBoostGate(t *testing.T) {
	setup := func(t *testing.T, gate gateState, wpc bool) (*fixture, *kueue.Workload, *kueue.Workload) {
		a := trainJob("a", "a-uid", nil)
		b := trainJob("b", "b-uid", nil)
		wlA := workloadFor("trainjob-a-00001", a, true)
		wlB := workloadFor("trainjob-b-00002", b, false)
		if wpc {
			wlA.Spec.PriorityClassRef = &kueue.PriorityClassRef{Group: kueue.WorkloadPriorityClassGroup, Kind: kueue.WorkloadPriorityClassKind, Name: "training"}
		}
		f := newFixture(t, testConfig(), a, b, wlA, wlB, localQueue())
		f.boostGate = gate
		hf := exampleHistory(t, "synth__early-plateau")
		f.replayInto("a", hf.Reports[:len(hf.Reports)*7/10])
		return f, wlA, wlB
	}
	t.Run("WorkloadPriorityClass: no nudge", func(t *testing.T) {
		f, wlA, wlB := setup(t, gateOn, true)
		if got := f.workload(wlA.Name).Annotations[AnnotationPriorityBoost]; got != "-100" {
			t.Fatalf("A's boost annotation %q, want -100", got)
		}
		if ev := f.ev.byReason(ReasonBoostChanged); len(ev) != 2 || !strings.Contains(ev[0].note, "Kueue retries the waiting Workloads") {
			t.Errorf("boost events %+v", ev)
		}
		if mf := f.workload(wlB.Name).ManagedFields; PlannerOwnsBoost(mf) {
			t.Error("the planner touched B's annotation although Kueue wakes it")
		}
	})
	t.Run("PriorityBoost off: advise-only, loud", func(t *testing.T) {
		f, wlA, _ := setup(t, gateOff, false)
		if got, ok := f.workload(wlA.Name).Annotations[AnnotationPriorityBoost]; ok {
			t.Errorf("A's boost annotation %q written with PriorityBoost off", got)
		}
		st := f.pf("a").Status
		c := apimeta.FindStatusCondition(st.Conditions, v1alpha1.ConditionEnforcing)
		if c == nil || c.Status != metav1.ConditionFalse || c.Reason != condReasonBoostDisabled || !strings.Contains(c.Message, "PriorityBoost feature gate is off") {
			t.Errorf("Enforcing condition %+v", c)
		}
		if st.Mode != modeAdviseOnly || st.AdvisedBoost != -100 || st.Boost != 0 {
			t.Errorf("mode %q advised %d boost %d", st.Mode, st.AdvisedBoost, st.Boost)
		}
		if ev := f.ev.byReason(ReasonBoostDisabled); len(ev) != 1 || !strings.Contains(ev[0].note, "PriorityBoost feature gate is off") {
			t.Errorf("PriorityBoostDisabled events %+v (want one, on the transition)", ev)
		}
		if ev := f.ev.byReason(ReasonBoostChanged); len(ev) != 0 {
			t.Errorf("boost events with PriorityBoost off: %+v", ev)
		}
		if v := metricValue(t, metricKueueBoostGate.WithLabelValues("off")); v != 1 {
			t.Errorf("planner_kueue_priority_boost{state=off} = %v, want 1", v)
		}
	})
}

// The admission publisher patches status.admissionEstimate alone; the
// reconciler's own status writes keep it.
func TestReconcileCarriesAdmissionEstimate(t *testing.T) {
	a := trainJob("a", "a-uid", nil)
	f := newFixture(t, testConfig(), a, workloadFor("trainjob-a-00001", a, true), localQueue())
	reports := exampleHistory(t, "synth__inverse-power").Reports
	f.replayInto("a", reports[:5])
	est := &v1alpha1.AdmissionEstimate{Time: metav1.NewTime(f.clock.Now().Truncate(time.Second)), Text: "expected in 12m"}
	patch := []byte(`{"status":{"admissionEstimate":{"time":"` + est.Time.UTC().Format(time.RFC3339) + `","text":"expected in 12m"}}}`)
	if err := f.c.Status().Patch(context.Background(), f.pf("a"), client.RawPatch(types.MergePatchType, patch)); err != nil {
		t.Fatal(err)
	}
	before := f.pf("a").Status
	f.replayInto("a", reports[5:10])
	after := f.pf("a").Status
	if after.Revision <= before.Revision || after.Observations <= before.Observations {
		t.Fatalf("the reconciler wrote nothing after the patch (revision %d → %d)", before.Revision, after.Revision)
	}
	if got := after.AdmissionEstimate; got == nil || got.Text != est.Text || !got.Time.Equal(&est.Time) {
		t.Errorf("admissionEstimate after the reconciler's writes: %+v, want the publisher's %+v", got, est)
	}
}

// The table's latest forecasts are the reconciler's own: keyed by the
// ProgressForecast, with its UID, the forecast time and the ETA the
// decision used.
func TestLatestForecasts(t *testing.T) {
	a := trainJob("a", "a-uid", nil)
	f := newFixture(t, testConfig(), a, workloadFor("trainjob-a-00001", a, true), localQueue())
	if got := f.rec.table.latest(); len(got) != 0 {
		t.Fatalf("before any report: %v", got)
	}
	f.replayInto("a", exampleHistory(t, "synth__inverse-power").Reports[:10])
	pf := f.pf("a")
	got, ok := f.rec.table.latest()[types.NamespacedName{Namespace: ns, Name: "a"}]
	if !ok {
		t.Fatalf("no latest forecast for team/a: %v", f.rec.table.latest())
	}
	st := f.rec.table.jobs[jobKey{Kind: f.rec.kind.GVK().GroupKind(), NamespacedName: types.NamespacedName{Namespace: ns, Name: "a"}}]
	if st == nil {
		t.Fatal("no job state for team/a")
	}
	if got.ForecastUID != pf.UID || !got.At.Equal(st.lastForecast) {
		t.Errorf("latest %+v, want UID %s, at %v", got, pf.UID, st.lastForecast)
	}
	if pf.Status.Forecast == nil || humanize.Duration(got.ETA.Value) != pf.Status.Forecast.ETA {
		t.Errorf("latest ETA %+v: want the one the stored forecast shows (%+v)", got.ETA, pf.Status.Forecast)
	}
	if !got.ETA.Known || !(got.ETA.Value > 0) {
		t.Errorf("ETA %+v: want a known ETA after 10 reports of a run with a total", got.ETA)
	}
}

// A healthy job preempted by other work and waiting in the queue is not
// Hung, however long it waits: the time it cannot run is not silence, so
// no Hung verdict and no -100 boost put it behind every waiting job of its
// priority (preempt Facts.NotRunning, set from the Workload).
func TestReconcileWaitingJobIsNotHung(t *testing.T) {
	a := trainJob("a", "a-uid", nil)
	wlA := workloadFor("trainjob-a-00001", a, true)
	f := newFixture(t, testConfig(), a, wlA, localQueue())
	hf := exampleHistory(t, "synth__inverse-power")
	f.replayInto("a", hf.Reports[:len(hf.Reports)*85/100])
	if v := f.pf("a").Status.Verdict; v != string(preempt.Progressing) {
		t.Fatalf("setup: verdict %q, want Progressing: %s", v, f.pf("a").Status.Reason)
	}

	// Preempted: Kueue evicts the Workload and takes its quota back.
	wl := f.workload(wlA.Name)
	at := f.clock.Now()
	wl.Status.Conditions = []metav1.Condition{
		cond(kueue.WorkloadQuotaReserved, metav1.ConditionFalse, "Pending", at),
		cond(kueue.WorkloadAdmitted, metav1.ConditionFalse, "NoReservation", at),
		cond(kueue.WorkloadEvicted, metav1.ConditionTrue, kueue.WorkloadEvictedByPreemption, at),
	}
	wl.Status.Admission = nil
	if err := f.c.Status().Update(context.Background(), wl); err != nil {
		t.Fatal(err)
	}
	for wait := 10 * time.Minute; wait <= 3*time.Hour; wait += 10 * time.Minute {
		f.clock.SetTime(at.Add(wait))
		f.reconcile("a")
		if st := f.pf("a").Status; st.Verdict == string(preempt.Hung) || st.Boost < 0 {
			t.Fatalf("waiting in the queue for %v: verdict %q, boost %d: %s", wait, st.Verdict, st.Boost, st.Reason)
		}
	}
	if b, ok := f.workload(wlA.Name).Annotations[AnnotationPriorityBoost]; ok {
		t.Errorf("a waiting job got boost %s", b)
	}
}

// The min-improvement annotation is tenant-written: a value below the
// cluster's floor would hold a job whose best creeps by a rounding error
// out of Plateaued, so it is raised to the floor with one Warning Event per
// distinct value. 0 (the rule off) and values at or above the floor apply
// as written.
func TestMinImprovementAnnotationFloor(t *testing.T) {
	cfg := testConfig()
	cfg.Forecast.MinImprovementFloor = 0.005
	r := &JobReconciler{cfg: cfg, recorder: &eventLog{}}
	log := r.recorder.(*eventLog)
	st := &jobState{} // one job, its annotation edited between reconciles
	for _, tc := range []struct {
		value  string
		want   float64
		events int
	}{
		{"0.0001", 0.005, 1},
		{"0.0001", 0.005, 1}, // the same value again: no second Event
		{"0", 0, 1},
		{"0.5%", 0.005, 1},
		{"0.02", 0.02, 1},
		{"0.001%", 0.005, 2},
	} {
		r.minImprovement(trainJob("a", "a-uid", map[string]string{AnnotationMinImprovement: tc.value}), st)
		if st.minImprovement == nil || *st.minImprovement != tc.want {
			t.Errorf("%q: min improvement %v, want %v", tc.value, st.minImprovement, tc.want)
		}
		if ev := log.byReason(ReasonInvalidAnnotation); len(ev) != tc.events {
			t.Errorf("%q: %d InvalidAnnotation events, want %d: %+v", tc.value, len(ev), tc.events, ev)
		} else if ev[len(ev)-1].typ != corev1.EventTypeWarning || !strings.Contains(ev[len(ev)-1].note, "floor 0.005 (forecast.minImprovementFloor)") {
			t.Errorf("%q: event %+v", tc.value, ev[len(ev)-1])
		}
	}
}
