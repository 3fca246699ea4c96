package kueueext

import (
	"context"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/progress-planner/planner/api/v1alpha1"
	"github.com/progress-planner/planner/pkg/jobframework"
	"github.com/progress-planner/planner/pkg/preempt"
	"github.com/progress-planner/planner/pkg/workloads"
)

// The generic reconciler on a kind whose progress is not in its object: a
// Kueue-queued batch/v1 Job whose reports arrive through the in-memory
// ReportSource (as the progress endpoint will deliver them).

func batchJob(name string, uid types.UID, labels map[string]string) *batchv1.Job {
	return &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, UID: uid, Labels: labels}}
}

var queued = map[string]string{jobframework.QueueNameLabel: "lq"}

// workloadOfJob is workloadFor's Workload, controlled by a batch/v1 Job.
func workloadOfJob(name string, job *batchv1.Job, admitted bool) *kueue.Workload {
	wl := workloadFor(name, trainJob(job.Name, job.UID, nil), admitted)
	wl.OwnerReferences[0].APIVersion, wl.OwnerReferences[0].Kind = "batch/v1", "Job"
	return wl
}

func (f *fixture) reconcileWith(r *JobReconciler, name string) reconcile.Result {
	f.t.Helper()
	res, err := r.Reconcile(context.Background(), reconcile.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: name}})
	if err != nil {
		f.t.Fatalf("reconcile %s: %v", name, err)
	}
	return res
}

func TestReconcileBatchJobFromReportSource(t *testing.T) {
	job := batchJob("sweep", "sweep-uid", queued)
	wl := workloadOfJob("job-sweep-00001", job, true)
	f := newFixture(t, testConfig(), job, wl, localQueue())
	src := jobframework.NewMemorySource()
	kind := jobframework.BatchJob{Reports: src}
	r := f.newKindReconciler(kind, src)
	ref := jobframework.RefOf(kind, job)

	// Before any report: a ProgressForecast naming the Job, no forecast.
	f.reconcileWith(r, "sweep")
	pf := f.pf("sweep")
	want := v1alpha1.JobRef{APIVersion: "batch/v1", Kind: "Job", Name: "sweep", UID: "sweep-uid"}
	if pf.Spec.JobRef != want {
		t.Fatalf("spec.jobRef %+v, want %+v", pf.Spec.JobRef, want)
	}
	if owner, ok := workloads.ControllerOf(pf); !ok || owner.UID != job.UID || !owner.IsKind("batch", "Job") {
		t.Errorf("owner %+v", owner)
	}
	if pf.Status.Observations != 0 || pf.Status.Workload != wl.Name {
		t.Errorf("before reports: observations %d workload %q", pf.Status.Observations, pf.Status.Workload)
	}

	hf := exampleHistory(t, "synth__early-plateau")
	n := len(hf.Reports) * 7 / 10
	for _, rep := range hf.Reports[:n] {
		at := t0.Add(time.Duration(rep.T * float64(time.Second)))
		f.clock.SetTime(at)
		src.Put(ref, rep.TrainerStatus, at)
		f.reconcileWith(r, "sweep")
	}
	st := f.pf("sweep").Status
	if st.Verdict != string(preempt.Plateaued) || st.Observations != int64(n) {
		t.Fatalf("verdict %q, %d observations after %d reports; reason: %s", st.Verdict, st.Observations, n, st.Reason)
	}
	if got := f.workload(wl.Name).Annotations[AnnotationPriorityBoost]; got != "-100" || st.Boost != -100 {
		t.Errorf("Workload boost %q, status boost %d; want -100", got, st.Boost)
	}
	if c := apimeta.FindStatusCondition(st.Conditions, v1alpha1.ConditionWorkloadFound); c == nil || c.Status != metav1.ConditionTrue {
		t.Errorf("WorkloadFound %+v", c)
	}
	if ev := f.ev.byReason(string(preempt.Plateaued)); len(ev) != 1 || ev[0].name != "sweep" || ev[0].kind != "*v1.Job" {
		t.Errorf("verdict events %+v", ev)
	}
	// The same report again is not a new observation.
	f.clock.Step(10 * time.Second)
	f.reconcileWith(r, "sweep")
	if got := f.pf("sweep").Status.Observations; got != int64(n) {
		t.Errorf("a reconcile without a new report observed: %d, want %d", got, n)
	}

	// The Job is deleted: its report is dropped from the source.
	if err := f.c.Delete(context.Background(), job); err != nil {
		t.Fatal(err)
	}
	f.reconcileWith(r, "sweep")
	if _, ok := src.Latest(ref); ok {
		t.Error("the deleted Job's report is still held")
	}
}

// A Job Kueue does not queue gets no ProgressForecast, and the Job
// reconciler leaves a TrainJob's ProgressForecast of the same name alone.
func TestReconcileBatchJobNotTracked(t *testing.T) {
	plain := batchJob("plain", "plain-uid", nil)
	tj := trainJob("same", "tj-uid", nil)
	clash := batchJob("same", "job-uid", queued)
	f := newFixture(t, testConfig(), plain, tj, clash, localQueue())
	src := jobframework.NewMemorySource()
	r := f.newKindReconciler(jobframework.BatchJob{Reports: src}, src)

	f.reconcileWith(r, "plain")
	var pf v1alpha1.ProgressForecast
	if err := f.c.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: "plain"}, &pf); !apierrors.IsNotFound(err) {
		t.Errorf("an unqueued Job got a ProgressForecast (%v)", err)
	}

	f.reconcile("same") // the TrainJob's
	before := f.pf("same")
	for range 3 {
		f.reconcileWith(r, "same")
	}
	after := f.pf("same")
	if after.UID != before.UID || after.Spec.JobRef.Kind != "TrainJob" || !strings.HasPrefix(after.Spec.JobRef.APIVersion, "trainer.kubeflow.org/") {
		t.Errorf("the Job reconciler replaced the TrainJob's ProgressForecast: %+v", after.Spec.JobRef)
	}
}

// A reconcile with nothing new writes nothing, even when the last decision
// was made at a time with a fraction of a second: the API server keeps
// whole seconds, and comparing the decision's times at a finer precision
// made every reconcile write the status again (one PUT per report in the
// endpoint's load benchmark).
// TestReconcileCheckpointCadence: with forecast.checkpointInterval 5m the
// forecasts of a 13-minute history reach the ProgressForecast at most once
// per 5 minutes, except that each change of verdict and boost is written at
// once; a forecast left unsaved is written when its checkpoint is due (the
// reconcile asks to come back by then), and a finished job's at once.
func TestReconcileCheckpointCadence(t *testing.T) {
	cfg := testConfig()
	cfg.Forecast.CheckpointInterval = preempt.Dur(5 * time.Minute)
	job := batchJob("sweep", "sweep-uid", queued)
	wl := workloadOfJob("job-sweep-00001", job, true)
	f := newFixture(t, cfg, job, wl, localQueue())
	src := jobframework.NewMemorySource()
	kind := jobframework.BatchJob{Reports: src}
	r := f.newKindReconciler(kind, src)
	ref := jobframework.RefOf(kind, job)

	hf := exampleHistory(t, "synth__early-plateau")
	n := len(hf.Reports) * 8 / 10
	writes, changes := 0, 0
	var last v1alpha1.ProgressForecastStatus
	var res reconcile.Result
	for _, rep := range hf.Reports[:n] {
		at := t0.Add(time.Duration(rep.T * float64(time.Second)))
		f.clock.SetTime(at)
		src.Put(ref, rep.TrainerStatus, at)
		st := r.state(types.NamespacedName{Namespace: ns, Name: "sweep"}, job.UID)
		verdict, boost := st.decision.Verdict, st.work.Boost
		res = f.reconcileWith(r, "sweep")
		cur := f.pf("sweep").Status
		if cur.Revision != last.Revision {
			writes++
		}
		if st.decision.Verdict != verdict || st.work.Boost != boost {
			changes++
			// A verdict or boost is never left for the checkpoint.
			if cur.Verdict != string(st.decision.Verdict) || cur.Boost != st.work.Boost {
				t.Errorf("at %s: in memory %s/%d, stored %s/%d", at.Sub(t0), st.decision.Verdict, st.work.Boost, cur.Verdict, cur.Boost)
			}
		}
		last = cur
	}
	span := f.clock.Now().Sub(t0)
	if budget := int(span/(5*time.Minute)) + 1 + changes; writes > budget {
		t.Errorf("%d status writes over %s with %d verdict or boost changes; want at most %d", writes, span, changes, budget)
	}
	t.Logf("%d reports over %s: %d status writes, %d verdict or boost changes, last stored observations %d", n, span.Round(time.Second), writes, changes, last.Observations)
	if last.Verdict != string(preempt.Plateaued) || last.Boost != -100 {
		t.Fatalf("stored verdict %s boost %d, want Plateaued -100", last.Verdict, last.Boost)
	}
	if last.Observations >= int64(n) {
		t.Fatalf("every observation stored (%d) although the last checkpoint is not due", last.Observations)
	}
	// The reconcile comes back by the checkpoint, which writes the rest.
	st := r.state(types.NamespacedName{Namespace: ns, Name: "sweep"}, job.UID)
	due := st.checkpointAt.Sub(f.clock.Now())
	if res.RequeueAfter <= 0 || res.RequeueAfter > due {
		t.Errorf("RequeueAfter %s, want in (0, %s]", res.RequeueAfter, due)
	}
	f.clock.Step(due)
	f.reconcileWith(r, "sweep")
	if got := f.pf("sweep").Status; got.Observations != int64(n) || got.Revision == last.Revision {
		t.Errorf("after the checkpoint: %d observations (want %d), revision %d → %d", got.Observations, n, last.Revision, got.Revision)
	}
}

// At shutdown the leader writes the checkpoints still due, so a rolling
// update loses no report; a job already saved is not written again.
func TestFlushCheckpointsAtShutdown(t *testing.T) {
	cfg := testConfig()
	cfg.Forecast.CheckpointInterval = preempt.Dur(30 * time.Minute)
	jobA, jobB := batchJob("a", "a-uid", queued), batchJob("b", "b-uid", queued)
	f := newFixture(t, cfg, jobA, jobB, workloadOfJob("job-a-00001", jobA, true), workloadOfJob("job-b-00001", jobB, true), localQueue())
	src := jobframework.NewMemorySource()
	kind := jobframework.BatchJob{Reports: src}
	r := f.newKindReconciler(kind, src)
	hf := exampleHistory(t, "synth__early-plateau")
	n := 20
	for _, rep := range hf.Reports[:n] {
		at := t0.Add(time.Duration(rep.T * float64(time.Second)))
		f.clock.SetTime(at)
		src.Put(jobframework.RefOf(kind, jobA), rep.TrainerStatus, at)
		f.reconcileWith(r, "a")
	}
	src.Put(jobframework.RefOf(kind, jobB), hf.Reports[0].TrainerStatus, f.clock.Now())
	f.reconcileWith(r, "b") // its first write saves it
	if got := f.pf("a").Status.Observations; got >= int64(n) {
		t.Fatalf("a: %d observations stored before the flush; the test needs some unsaved", got)
	}
	revB := f.pf("b").Status.Revision
	written, left, err := r.flushCheckpoints(context.Background())
	if err != nil || written != 1 || left != 0 {
		t.Fatalf("flush: written %d, left %d, err %v; want 1, 0, nil", written, left, err)
	}
	if got := f.pf("a").Status.Observations; got != int64(n) {
		t.Errorf("a: %d observations stored after the flush, want %d", got, n)
	}
	if got := f.pf("b").Status.Revision; got != revB {
		t.Errorf("b written again by the flush: revision %d → %d", revB, got)
	}
	// A stopped flush leaves the rest for the next leader, and says so.
	src.Put(jobframework.RefOf(kind, jobA), hf.Reports[n].TrainerStatus, f.clock.Now().Add(time.Minute))
	f.clock.Step(time.Minute)
	f.reconcileWith(r, "a")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if written, left, err := r.flushCheckpoints(ctx); written != 0 || left != 1 || err == nil {
		t.Errorf("cancelled flush: written %d, left %d, err %v; want 0, 1 and an error", written, left, err)
	}
}

func TestReconcileNoWriteWithoutChange(t *testing.T) {
	job := batchJob("sweep", "sweep-uid", queued)
	f := newFixture(t, testConfig(), job, workloadOfJob("job-sweep-00001", job, true), localQueue())
	src := jobframework.NewMemorySource()
	kind := jobframework.BatchJob{Reports: src}
	r := f.newKindReconciler(kind, src)
	hf := exampleHistory(t, "synth__early-plateau")
	for _, rep := range hf.Reports[:5] {
		at := t0.Add(time.Duration(rep.T*float64(time.Second)) + 437*time.Millisecond)
		f.clock.SetTime(at)
		src.Put(jobframework.RefOf(kind, job), rep.TrainerStatus, at)
		f.reconcileWith(r, "sweep")
	}
	before := f.pf("sweep").Status.Revision
	f.clock.Step(time.Second)
	f.reconcileWith(r, "sweep")
	if after := f.pf("sweep").Status.Revision; after != before {
		t.Errorf("a reconcile with nothing new wrote the status: revision %d → %d", before, after)
	}
}
