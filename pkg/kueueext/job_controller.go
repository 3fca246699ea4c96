package kueueext

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/progress-planner/planner/api/v1alpha1"
	"github.com/progress-planner/planner/pkg/forecast"
	"github.com/progress-planner/planner/pkg/jobframework"
	"github.com/progress-planner/planner/pkg/plannerconfig"
	"github.com/progress-planner/planner/pkg/preempt"
	"github.com/progress-planner/planner/pkg/progress"
	"github.com/progress-planner/planner/pkg/workloads"
)

// Event reasons the planner emits (docs/controller.md lists them).
const (
	ReasonBoostChanged      = "PriorityBoostChanged"
	ReasonAdviseOnly        = "AdviseOnly"
	ReasonBoostDisabled     = "PriorityBoostDisabled"
	ReasonEnforcing         = "Enforcing"
	ReasonInvalidObjective  = "InvalidObjective"
	ReasonInvalidAnnotation = "InvalidAnnotation"
	ReasonReportsRejected   = "ReportsRejected"
	ReasonDeactivated       = "Deactivated"
	ReasonHistoryReset      = "HistoryReset"
	// ReasonImplausibleProgress: the job's progress claims failed the
	// integrity checks; it cannot earn protection while distrusted.
	ReasonImplausibleProgress = "ImplausibleProgress"
)

// Modes written to ProgressForecastStatus.Mode besides the policy's modes.
const modeAdviseOnly = "advise-only"

// Condition reasons.
const (
	condReasonAnnotation     = "Annotation"
	condReasonDefault        = "Default"
	condReasonNotReported    = "NotReported"
	condReasonInvalid        = "InvalidAnnotation"
	condReasonFound          = "Found"
	condReasonNoWorkload     = "NoWorkload"
	condReasonDuplicates     = "DuplicateWorkloads"
	condReasonNoKueue        = "KueueNotInstalled"
	condReasonEnforcing      = "Enforcing"
	condReasonAdviseMode     = "AdviseMode"
	condReasonForeignOwner   = "ForeignBoostOwner"
	condReasonBoostDisabled  = "PriorityBoostDisabled"
	condReasonFinished       = "Finished"
	condReasonDecoded        = "Decoded"
	condReasonDecodeFailed   = "DecodeFailed"
	condReasonNoForecast     = "NoDecisionYet"
	duplicateWorkloadBackoff = 5 * time.Second
	// retryAfter is the requeue delay after a ProgressForecast was
	// (re)created or changed under the planner.
	retryAfter = 200 * time.Millisecond
)

// errNameTaken: the job's ProgressForecast name is another kind's.
var errNameTaken = errors.New("name taken")

// JobReconciler is the level-based, idempotent reconciler of one kind of
// job (kind: a TrainJob, a batch/v1 Job, a JobSet; pkg/jobframework): it
// folds the job's new progress report into its history, forecasts and
// decides when the rate limit allows, applies the decision to the
// Workload, and writes the ProgressForecast status. Each kind has its own
// reconciler; they share the table of tracked jobs and Kueue's
// capabilities.
type JobReconciler struct {
	kind      jobframework.Adapter
	reports   jobframework.ReportSource // nil: the kind carries its own reports
	client    client.Client
	apiReader client.Reader
	recorder  events.EventRecorder
	clock     clock.PassiveClock
	cfg       plannerconfig.Config
	settings  forecast.Settings
	wl        *workloadIO

	kueueReady atomic.Bool
	caps       *kueueCaps
	arrivals   *arrivals
	// contact: whether the planner itself sees the cluster (shared by the
	// kinds' reconcilers).
	contact    *contact
	kueueClock kueueClock
	table      *jobTable
}

// jobKey names a tracked job across kinds.
type jobKey struct {
	Kind schema.GroupKind
	types.NamespacedName
}

// jobTable is the in-memory state of every tracked job, shared by the
// kinds' reconcilers so that planner_tracked_jobs and planner_jobs count
// them all.
type jobTable struct {
	mu       sync.Mutex
	jobs     map[jobKey]*jobState
	verdicts *verdictCounts // planner_jobs{verdict}
}

func newJobTable() *jobTable {
	return &jobTable{jobs: map[jobKey]*jobState{}, verdicts: newVerdictCounts(metricJobsByVerdict)}
}

// jobState is the in-memory state of one job. The history is persisted in
// the ProgressForecast status at every checkpoint
// (forecast.checkpointInterval) and when this replica stops leading
// (flush.go), so a crash loses at most one interval of reports.
type jobState struct {
	mu  sync.Mutex
	uid types.UID

	obj      *v1alpha1.ProgressForecast // as last written or loaded
	work     v1alpha1.ProgressForecastStatus
	hist     *progress.History
	decision preempt.Decision

	lastForecast time.Time
	// lastDataForecast: the last forecast that included new reports;
	// the rate limit on reports counts from it (schedule.go).
	lastDataForecast time.Time
	newData          bool
	// unsaved: a forecast or observation newer than the stored status
	// waits for the next checkpoint (forecast.checkpointInterval), due
	// checkpointAt.
	unsaved      bool
	checkpointAt time.Time
	// lastAccepted is when the watch delivered the newest accepted report,
	// and reportGap a moving average of the time between accepted reports
	// (planner clock): the rate limit waits about one gap for fresh data.
	lastAccepted time.Time
	reportGap    time.Duration
	// gapBaseline: lastAccepted is a report after the first, so the time
	// to the next is a gap (noteReportGap).
	gapBaseline bool
	// admittedAt is the Workload's admission time last seen (a change is
	// a readmission).
	admittedAt *time.Time
	urgent     []string
	factsKey   string
	objective  string

	rejectionsEvented int
	stopOptInErr      string
	// minImprovement is the job's own meaningful improvement (annotation
	// planner.progress.io/min-improvement), nil for the config's.
	minImprovement    *float64
	minImprovementErr string

	// eta: the predicted ends the ETA error is scored against
	// (outcomes.go).
	eta etaCheckpoints
	// latest is the last forecast for LatestForecasts, which reads it
	// without mu (held through a reconcile's API calls), and for a yield's
	// freed GPU-hours (lastETA).
	latest atomic.Pointer[latestEntry]
}

// lastETA is the last forecast's ETA; unknown before the first one.
func (st *jobState) lastETA() forecast.Estimate {
	if e := st.latest.Load(); e != nil {
		return e.ETA
	}
	return forecast.Estimate{}
}

// newJobReconciler returns kind's reconciler; reports is the source kind's
// adapter reads (nil when the kind carries its own), forgotten jobs are
// dropped from it.
func newJobReconciler(kind jobframework.Adapter, reports jobframework.ReportSource, c client.Client, apiReader client.Reader,
	rec events.EventRecorder, clk clock.PassiveClock, cfg plannerconfig.Config, s forecast.Settings) *JobReconciler {
	return &JobReconciler{
		kind: kind, reports: reports,
		client: c, apiReader: apiReader, recorder: rec, clock: clk, cfg: cfg, settings: s,
		wl:       &workloadIO{c: c, gpu: cfg.GPUResourceName(), maxNudges: cfg.Workloads.MaxNudges},
		caps:     newKueueCaps(c),
		table:    newJobTable(),
		arrivals: newArrivals(clk, kind),
		contact:  newContact(clk),
	}
}

// shareWith makes r use other's table of tracked jobs, Kueue capabilities
// and Workload I/O (one planner, several kinds: the Workload cache indexes
// are registered once).
func (r *JobReconciler) shareWith(other *JobReconciler) {
	r.table, r.caps, r.wl, r.contact = other.table, other.caps, other.wl, other.contact
}

// contactKey names r's kind in the shared contact (its group and kind).
func (r *JobReconciler) contactKey() string { return r.kind.GVK().GroupKind().String() }

// kindName is the kind for messages ("TrainJob", "Job", "JobSet").
func (r *JobReconciler) kindName() string { return r.kind.GVK().Kind }

// SetKueueAvailable tells the reconciler whether Kueue's API is served.
func (r *JobReconciler) SetKueueAvailable(ok bool) { r.kueueReady.Store(ok) }

// Reconcile implements reconcile.Reconciler.
func (r *JobReconciler) Reconcile(ctx context.Context, req reconcile.Request) (ctrl.Result, error) {
	start := time.Now()
	res, err := r.reconcile(ctx, req)
	result := "ok"
	if err != nil {
		result = "error"
		r.contact.failed(err)
	}
	metricReconcileDuration.WithLabelValues(result).Observe(time.Since(start).Seconds())
	return res, err
}

func (r *JobReconciler) key(nn types.NamespacedName) jobKey {
	return jobKey{Kind: r.kind.GVK().GroupKind(), NamespacedName: nn}
}

// forget drops a job that is gone or no longer tracked from the table, and
// a gone job's report from the report source.
func (r *JobReconciler) forget(nn types.NamespacedName, gone bool) {
	t := r.table
	t.mu.Lock()
	delete(t.jobs, r.key(nn))
	metricTrackedJobs.Set(float64(len(t.jobs)))
	t.mu.Unlock()
	t.verdicts.set(r.key(nn), "")
	if gone && r.reports != nil {
		apiVersion, kind := r.kind.GVK().ToAPIVersionAndKind()
		r.reports.Forget(workloads.Ref{APIVersion: apiVersion, Kind: kind, Namespace: nn.Namespace, Name: nn.Name})
	}
}

func (r *JobReconciler) state(nn types.NamespacedName, uid types.UID) *jobState {
	t := r.table
	t.mu.Lock()
	defer t.mu.Unlock()
	st, ok := t.jobs[r.key(nn)]
	if !ok || st.uid != uid {
		st = &jobState{uid: uid}
		t.jobs[r.key(nn)] = st
		metricTrackedJobs.Set(float64(len(t.jobs)))
	}
	return st
}

func (r *JobReconciler) event(regarding, related runtime.Object, typ, reason, action, note string) {
	if r.recorder == nil || isNilObject(regarding) {
		return
	}
	if isNilObject(related) {
		related = nil
	}
	r.recorder.Eventf(regarding, related, typ, reason, action, "%s", truncateString(outputText(note), 1000))
}

// isNilObject reports a nil interface or a typed nil pointer.
func isNilObject(o runtime.Object) bool {
	if o == nil {
		return true
	}
	v := reflect.ValueOf(o)
	return v.Kind() == reflect.Pointer && v.IsNil()
}

func (r *JobReconciler) reconcile(ctx context.Context, req reconcile.Request) (ctrl.Result, error) {
	logger := log.FromContext(ctx)
	job := r.kind.NewObject()
	if err := r.client.Get(ctx, req.NamespacedName, job); err != nil {
		if apierrors.IsNotFound(err) {
			r.forget(req.NamespacedName, true)
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, fmt.Errorf("get %s %s: %w", r.kindName(), req.NamespacedName, err)
	}
	if job.GetDeletionTimestamp() != nil {
		r.forget(req.NamespacedName, true)
		return ctrl.Result{}, nil
	}
	if !r.kind.Tracks(job) {
		r.forget(req.NamespacedName, false)
		return ctrl.Result{}, nil
	}
	st := r.state(req.NamespacedName, job.GetUID())
	st.mu.Lock()
	defer st.mu.Unlock()

	requeue, err := r.load(ctx, job, st)
	if errors.Is(err, errNameTaken) {
		logger.Info("not tracked: its ProgressForecast's name is taken by another kind of job", "kind", r.kindName(), "error", err.Error())
		r.forget(req.NamespacedName, false)
		return ctrl.Result{}, nil
	}
	if err != nil {
		return ctrl.Result{}, err
	}
	if requeue {
		return ctrl.Result{RequeueAfter: retryAfter}, nil
	}
	now := r.clock.Now()
	nowSec := unixSeconds(now)

	// 1. Observe a new report (delivered by the watch or the report
	// source at arrived).
	rep, hasReport := r.kind.Latest(job)
	arrived := r.arrivals.take(req.NamespacedName, now)
	if !rep.ReceivedAt.IsZero() && rep.ReceivedAt.Before(arrived) {
		arrived = rep.ReceivedAt
	}
	fresh := hasReport && r.observe(rep, st, now, arrived)

	// 2. Objective and stop opt-in from the job's annotations.
	choice, stopOptIn := r.readAnnotations(job, st)

	// 3. The Workload and the facts the policy needs.
	wl, facts, wf, backoff, err := r.workloadFacts(ctx, job, st, stopOptIn, now)
	if err != nil {
		return ctrl.Result{}, err
	}
	jobDone := r.kind.Finished(job) || (wf != nil && wf.Finished)
	if end, ok := succeededAt(wl); ok {
		st.eta.settle(unixSeconds(end))
	}
	running := !jobDone && ((wf != nil && wf.Running()) || (wf == nil && !r.kind.Suspended(job)))

	// The stored decision may have been edited by anyone who can write the
	// status: it counts only as far as the current policy allows.
	st.decision = preempt.Conform(st.decision, facts, r.cfg.Policy, nowSec)
	if !st.decision.IsZero() {
		st.work.AdvisedBoost = st.decision.AdvisedBoost
	}

	// 4. Forecast and decide when the rate limit allows.
	in := r.scheduleInput(st, facts, now, fresh, running, jobDone)
	sch := nextForecast(in)
	forecasted := false
	if sch.Run {
		r.forecastAndDecide(job, wl, st, choice, facts, now, nowSec, sch.Why)
		forecasted = true
	}
	if !st.decision.IsZero() {
		r.table.verdicts.set(r.key(req.NamespacedName), st.decision.Verdict)
	}

	// 5. Apply the decision (every reconcile: level-based).
	actErr := r.actuate(ctx, job, wl, wf, st, facts, now, jobDone)

	// 6. Persist.
	if err := r.writeStatus(ctx, st, forecasted, jobDone, now); err != nil {
		if apierrors.IsConflict(err) {
			logger.V(1).Info("ProgressForecast changed meanwhile; reloading", "error", err.Error())
			return ctrl.Result{RequeueAfter: retryAfter}, nil
		}
		return ctrl.Result{}, err
	}
	if actErr != nil {
		return ctrl.Result{}, actErr
	}

	// 7. Come back when the next forecast is due.
	if jobDone {
		return ctrl.Result{}, nil
	}
	in.LastForecast, in.LastDataForecast, in.NewData, in.Fresh, in.Urgent = st.lastForecast, st.lastDataForecast, st.newData, false, strings.Join(st.urgent, "; ")
	next := nextForecast(in)
	after := next.After
	if next.Run {
		after = r.cfg.Forecast.UrgentMinInterval.Duration
	}
	if backoff > 0 {
		after = min(after, backoff)
	}
	if st.unsaved {
		after = min(after, st.checkpointAt.Sub(now))
	}
	if after >= time.Duration(math.MaxInt64)/2 {
		return ctrl.Result{}, nil
	}
	return ctrl.Result{RequeueAfter: max(after, 100*time.Millisecond)}, nil
}

// scheduleInput is what decides the next forecast (schedule.go).
func (r *JobReconciler) scheduleInput(st *jobState, facts preempt.Facts, now time.Time, fresh, running, jobDone bool) scheduleInput {
	deadline := st.decision.NextChange(facts, r.cfg.Policy)
	in := scheduleInput{
		Now: now, LastForecast: st.lastForecast, LastDataForecast: st.lastDataForecast, Urgent: strings.Join(st.urgent, "; "),
		NewData: st.newData, Fresh: fresh, ReportGap: st.reportGap, LastAccepted: st.lastAccepted,
		Min: r.cfg.Forecast.MinInterval.Duration, UrgentMin: r.cfg.Forecast.UrgentMinInterval.Duration, Idle: r.cfg.Forecast.IdleInterval.Duration,
	}
	if !math.IsNaN(deadline) && running {
		in.Deadline = v1alpha1.TimeFromUnix(deadline)
	}
	if !running && !st.newData {
		// A suspended, pending or finished job makes no progress by
		// design: only forecast it again for new reports or urgent news.
		in.Idle = time.Duration(math.MaxInt64)
		if jobDone {
			in.Urgent = ""
		}
	}
	return in
}

// readAnnotations resolves the objective and the stop opt-in from the
// job's annotations, reporting an invalid one once per change.
func (r *JobReconciler) readAnnotations(job client.Object, st *jobState) (ObjectiveChoice, bool) {
	choice := ResolveObjective(job.GetAnnotations(), st.hist)
	r.objectiveCondition(job, st, choice)
	stopOptIn, optErr := ParseStopOptIn(job.GetAnnotations())
	if msg := errString(optErr); msg != st.stopOptInErr {
		st.stopOptInErr = msg
		if optErr != nil {
			r.event(job, nil, corev1.EventTypeWarning, ReasonInvalidAnnotation, "Validate", optErr.Error())
		}
	}
	r.minImprovement(job, st)
	return choice, stopOptIn
}

// load makes sure the ProgressForecast exists and the in-memory state
// matches it. requeue is true when it had to be (re)created.
func (r *JobReconciler) load(ctx context.Context, job client.Object, st *jobState) (requeue bool, err error) {
	key := types.NamespacedName{Namespace: job.GetNamespace(), Name: job.GetName()}
	var pf v1alpha1.ProgressForecast
	if err := r.client.Get(ctx, key, &pf); err != nil {
		if !apierrors.IsNotFound(err) {
			return false, err
		}
		if st.obj != nil {
			// Our cache may not have seen our own create yet, or the
			// forecast was deleted (by a user): ask the API server.
			live, err := r.livePF(ctx, job, st)
			if err != nil {
				return false, err
			}
			pf = *live
		} else {
			created, err := r.createPF(ctx, job)
			if err != nil {
				return false, err
			}
			pf = *created
		}
	}
	if owner, ok := workloads.ControllerOf(&pf); ok && owner.UID != job.GetUID() && !owner.IsKind(r.kind.GVK().Group, r.kind.GVK().Kind) {
		// Another kind's job of the same name has it: a ProgressForecast
		// is named like its job, so this one cannot have one.
		return false, fmt.Errorf("%w: ProgressForecast %s/%s belongs to %s", errNameTaken, pf.Namespace, pf.Name, owner)
	}
	if ref := metav1.GetControllerOf(&pf); ref == nil || ref.UID != job.GetUID() || pf.Spec.JobRef.Kind == "" {
		// Left over from an earlier job of the same name and kind (no
		// garbage collector ran), not ours, or written before spec.jobRef
		// (the planner cannot write a spec): replace it.
		if err := r.client.Delete(ctx, &pf, client.Preconditions{UID: &pf.UID}); err != nil && !apierrors.IsNotFound(err) {
			return false, fmt.Errorf("replace ProgressForecast %s/%s: %w", pf.Namespace, pf.Name, err)
		}
		st.obj = nil
		return true, nil
	}
	if st.obj != nil && st.hist != nil && st.obj.UID == pf.UID && pf.Status.Revision <= st.obj.Status.Revision {
		// The cache is behind (or equal to) what we wrote: keep memory.
		if pf.Status.Revision == st.obj.Status.Revision && pf.ResourceVersion != st.obj.ResourceVersion {
			// Metadata, or the admission publisher's field.
			st.obj.ObjectMeta = *pf.ObjectMeta.DeepCopy()
			st.obj.Status.AdmissionEstimate = pf.Status.AdmissionEstimate.DeepCopy()
		}
		return false, nil
	}
	r.restore(job, st, &pf)
	return false, nil
}

// livePF is the job's ProgressForecast as the API server has it when the
// cache has none but the planner holds one: the cache lags behind the
// planner's own create, or the forecast was deleted. A deleted one is
// created again, and the history restarts from it (said in an Event).
func (r *JobReconciler) livePF(ctx context.Context, job client.Object, st *jobState) (*v1alpha1.ProgressForecast, error) {
	var live v1alpha1.ProgressForecast
	err := r.apiReader.Get(ctx, client.ObjectKeyFromObject(st.obj), &live)
	if err == nil {
		return &live, nil
	}
	if !apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("get ProgressForecast %s: %w", st.obj.Name, err)
	}
	created, err := r.createPF(ctx, job)
	if err != nil {
		return nil, err
	}
	r.event(job, nil, corev1.EventTypeWarning, ReasonHistoryReset, "Recreate",
		"ProgressForecast "+st.obj.Name+" was deleted; created again, the history restarts")
	st.obj = nil // restore from the new object
	return created, nil
}

func (r *JobReconciler) createPF(ctx context.Context, job client.Object) (*v1alpha1.ProgressForecast, error) {
	apiVersion, kind := r.kind.GVK().ToAPIVersionAndKind()
	pf := &v1alpha1.ProgressForecast{
		ObjectMeta: metav1.ObjectMeta{
			Name:      job.GetName(),
			Namespace: job.GetNamespace(),
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: apiVersion,
				Kind:       kind,
				Name:       job.GetName(),
				UID:        job.GetUID(),
				Controller: ptr.To(true),
			}},
		},
		Spec: v1alpha1.ProgressForecastSpec{JobRef: v1alpha1.JobRef{APIVersion: apiVersion, Kind: kind, Name: job.GetName(), UID: job.GetUID()}},
	}
	if err := r.client.Create(ctx, pf); err != nil {
		if apierrors.IsAlreadyExists(err) {
			var existing v1alpha1.ProgressForecast
			if err := r.apiReader.Get(ctx, client.ObjectKeyFromObject(pf), &existing); err != nil {
				return nil, fmt.Errorf("get existing ProgressForecast: %w", err)
			}
			return &existing, nil
		}
		return nil, fmt.Errorf("create ProgressForecast: %w", err)
	}
	return pf, nil
}

// restore loads the state from a ProgressForecast (after a restart, a
// leader change, or the first time).
func (r *JobReconciler) restore(job client.Object, st *jobState, pf *v1alpha1.ProgressForecast) {
	st.obj = pf.DeepCopy()
	st.work = *pf.Status.DeepCopy()
	st.work.History, st.work.Decision = nil, nil
	// Stored times are the planner's own, unless someone edited them: one
	// in the future would hold an eviction cooldown or a stop off forever.
	now := r.clock.Now()
	for _, t := range []*metav1.Time{st.work.BoostChangedTime, st.work.LastPlannerEvictionTime, st.work.DeactivatedTime} {
		if t != nil {
			t.Time = notAfter(t.Time, now)
		}
	}
	limits := progress.DefaultLimits()
	limits.KeepMetrics = KeepMetrics(job.GetAnnotations())
	st.hist = progress.NewHistory(limits)
	st.decision = preempt.Decision{}
	st.lastForecast, st.lastDataForecast = time.Time{}, time.Time{}
	st.newData, st.urgent, st.factsKey = false, nil, ""
	if pf.Status.History != nil && len(pf.Status.History.Raw) > 0 {
		h, err := progress.UnmarshalHistory(pf.Status.History.Raw, limits)
		if err != nil {
			apimeta.SetStatusCondition(&st.work.Conditions, metav1.Condition{
				Type: v1alpha1.ConditionHistoryValid, Status: metav1.ConditionFalse, Reason: condReasonDecodeFailed,
				Message: truncateString("stored history could not be decoded, starting a new one: "+err.Error(), 1000),
			})
			r.event(job, nil, corev1.EventTypeWarning, ReasonHistoryReset, "Restore", "stored history could not be decoded, starting a new one: "+err.Error())
			st.work.ObservedStatusHash = ""
		} else {
			st.hist = h
			apimeta.SetStatusCondition(&st.work.Conditions, metav1.Condition{
				Type: v1alpha1.ConditionHistoryValid, Status: metav1.ConditionTrue, Reason: condReasonDecoded,
				Message: fmt.Sprintf("%d points restored", h.Len()),
			})
		}
	}
	if pf.Status.Decision != nil && len(pf.Status.Decision.Raw) > 0 {
		var d preempt.Decision
		if json.Unmarshal(pf.Status.Decision.Raw, &d) == nil {
			st.decision = d
		}
	}
	if pf.Status.Forecast != nil {
		// Never in the future: a forged time would hold off forecasts.
		st.lastForecast = notAfter(pf.Status.Forecast.Time.Time, now)
		st.lastDataForecast = st.lastForecast
	}
	st.objective = pf.Status.Objective
	st.rejectionsEvented = totalRejections(st.hist.Rejections())
}

// observe folds a new report into the history; it reports whether it was
// accepted. arrived is when the watch or the report source delivered it.
func (r *JobReconciler) observe(rep jobframework.Report, st *jobState, now, arrived time.Time) bool {
	h := rep.Hash
	if h == "" || h == st.work.ObservedStatusHash {
		return false
	}
	prevLen, prevSeg := st.hist.Len(), -1
	if n := st.hist.Len(); n > 0 {
		prevSeg = st.hist.Points()[n-1].Seg
	}
	t := unixSeconds(now)
	if lr := st.hist.LastReport(); !math.IsNaN(lr) && t < lr {
		t = lr // never out of order against our own history (clock steps back)
	}
	accepted, rejs := st.hist.Observe(t, rep.Status)
	st.work.ObservedStatusHash = h
	st.work.Observations++
	nowMeta := metav1.NewTime(now.UTC().Truncate(time.Second))
	st.work.LastObservedTime = &nowMeta
	if lu := rep.Status.LastUpdatedTime; lu != nil && !lu.IsZero() {
		lt := metav1.NewTime(*lu)
		st.work.LastReportTime = &lt
	}
	if accepted {
		metricObservations.WithLabelValues("accepted").Inc()
		st.newData = true
		st.noteReportGap(arrived)
	} else {
		metricObservations.WithLabelValues("refused").Inc()
	}
	for _, rj := range rejs {
		metricRejections.WithLabelValues(string(rj.Reason)).Inc()
	}
	if len(rejs) > 0 {
		last := rejs[len(rejs)-1]
		st.work.LastRejection = describeRejection(last)
	}
	counts := st.hist.Rejections()
	if len(counts) > 0 {
		st.work.Rejections = map[string]int32{}
		for k, v := range counts {
			st.work.Rejections[string(k)] = clampInt32(v)
		}
	}
	if pts := st.hist.Points(); accepted && len(pts) > prevLen && len(pts) > 0 {
		last := pts[len(pts)-1]
		if last.NonFinite || len(last.NaNMetrics) > 0 {
			addUrgent(st, "a non-finite metric was reported")
		}
		if prevSeg >= 0 && last.Seg > prevSeg {
			addUrgent(st, "the job restarted")
		}
	}
	return accepted
}

// maxReportGap bounds the remembered report gap: a job that reports rarely
// is forecast on the data it has rather than waited for.
const maxReportGap = 5 * time.Minute

// noteReportGap updates the moving average of the time between accepted
// reports (weight 1/4 on the newest gap, so one late report does not
// dominate). The gap after the first report is not sampled: that report
// may have waited in the job's status since before the planner started,
// so its arrival is the planner's start, and a short first gap would make
// the rate limit wait for reports not yet due for several reports (the
// scale benchmark at 60 s periods after a start).
func (st *jobState) noteReportGap(now time.Time) {
	first := st.gapBaseline
	st.gapBaseline = !st.lastAccepted.IsZero()
	if first && now.After(st.lastAccepted) {
		gap := min(now.Sub(st.lastAccepted), maxReportGap)
		if st.reportGap == 0 {
			st.reportGap = gap
		} else {
			st.reportGap += (gap - st.reportGap) / 4
		}
	}
	st.lastAccepted = now
}

func describeRejection(r progress.Rejection) string {
	// Field and detail are the job's own text (metric names, values).
	s := string(r.Reason) + " " + outputText(r.Field)
	if r.Detail != "" {
		s += " (" + truncateString(outputText(r.Detail), 64) + ")"
	}
	return s
}

func totalRejections(m map[progress.RejectReason]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

func addUrgent(st *jobState, why string) {
	if !slices.Contains(st.urgent, why) {
		st.urgent = append(st.urgent, why)
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// objectiveCondition records the objective choice: a changed objective is
// urgent, an invalid annotation is a condition and one Warning Event.
func (r *JobReconciler) objectiveCondition(job client.Object, st *jobState, c ObjectiveChoice) {
	obj := ""
	if c.Known {
		obj = c.Objective.String()
	}
	if obj != st.objective {
		if st.objective != "" {
			addUrgent(st, "the objective changed")
		}
		st.objective = obj
	}
	st.work.Objective, st.work.ObjectiveSource = obj, c.Source
	cond := metav1.Condition{Type: v1alpha1.ConditionObjectiveValid, Status: metav1.ConditionTrue}
	switch {
	case c.Err != nil:
		cond.Status, cond.Reason = metav1.ConditionFalse, condReasonInvalid
		cond.Message = c.Err.Error() + "; using the default objective (eval_loss when reported, else loss, minimized)"
	case c.Source == v1alpha1.ObjectiveFromAnnotation:
		cond.Reason, cond.Message = condReasonAnnotation, "objective "+obj+" from annotation "+AnnotationObjective
	case c.Known:
		cond.Reason, cond.Message = condReasonDefault, "default objective "+obj
	default:
		cond.Reason, cond.Message = condReasonNotReported, "no objective yet: the job reports neither eval_loss nor loss, and names none in annotation "+AnnotationObjective
	}
	cond.Message = truncateString(cond.Message, 1000)
	old := apimeta.FindStatusCondition(st.work.Conditions, v1alpha1.ConditionObjectiveValid)
	if c.Err != nil && (old == nil || old.Status != metav1.ConditionFalse || old.Message != cond.Message) {
		r.event(job, nil, corev1.EventTypeWarning, ReasonInvalidObjective, "Validate", cond.Message)
	}
	apimeta.SetStatusCondition(&st.work.Conditions, cond)
}

// workloadFacts finds the Workload and turns it into preempt.Facts. wf is
// nil when there is no usable Workload. backoff > 0 asks for a quick retry
// (duplicate Workloads).
func (r *JobReconciler) workloadFacts(ctx context.Context, job client.Object, st *jobState, stopOptIn bool, now time.Time) (
	wl *kueue.Workload, facts preempt.Facts, wf *WorkloadFacts, backoff time.Duration, err error) {
	facts = preempt.Facts{Namespace: job.GetNamespace(), StopOptIn: stopOptIn,
		WatchingSince: ptr.To(unixSeconds(r.contact.watchingSince(r.contactKey(), now)))}
	if t := st.work.LastPlannerEvictionTime; t != nil {
		facts.LastPlannerEvictionAt = ptr.To(unixSeconds(notAfter(t.Time, now)))
	}
	cond := metav1.Condition{Type: v1alpha1.ConditionWorkloadFound}
	key := "none"
	switch {
	case !r.kueueReady.Load():
		cond.Status, cond.Reason = metav1.ConditionFalse, condReasonNoKueue
		cond.Message = "Kueue's API (kueue.x-k8s.io/v1beta2 workloads) is not served; forecasting only"
		st.work.Workload, st.work.ClusterQueue = "", ""
		key = "no-kueue"
	default:
		var m workloads.Match
		if m, err = r.wl.findWorkload(ctx, jobframework.RefOf(r.kind, job)); err != nil {
			return nil, facts, nil, 0, fmt.Errorf("find Workload: %w", err)
		}
		wl = m.Workload
		switch {
		case m.Ambiguous:
			cond.Status, cond.Reason = metav1.ConditionFalse, condReasonDuplicates
			cond.Message = fmt.Sprintf("%d unfinished Workloads are controlled by this %s; waiting for Kueue to settle", len(m.Unfinished), r.kindName())
			backoff = duplicateWorkloadBackoff
			key = "duplicates"
		case wl == nil:
			cond.Status, cond.Reason = metav1.ConditionFalse, condReasonNoWorkload
			cond.Message = "no Workload labeled " + workloads.LabelJobUID + "=" + string(job.GetUID()) + " is controlled by this " + r.kindName() + " (not queued by Kueue?)"
			st.work.Workload, st.work.ClusterQueue = "", ""
			key = "no-workload"
		default:
			f := ReadWorkload(wl, r.cfg.GPUResourceName())
			if f.ClusterQueue == "" {
				f.ClusterQueue = r.wl.clusterQueueOf(ctx, wl, nil)
			}
			wf = &f
			cond.Status, cond.Reason = metav1.ConditionTrue, condReasonFound
			cond.Message = "Workload " + wl.Name
			st.work.Workload, st.work.ClusterQueue = wl.Name, f.ClusterQueue
			facts.BasePriority, facts.GPUs, facts.Evictions, facts.ClusterQueue = f.BasePriority, f.GPUs, f.Evictions, f.ClusterQueue
			facts.NotRunning = !f.Running()
			if f.Running() && f.AdmittedAt != nil {
				// Clamped for the policy only: the raw time tells a
				// readmission apart.
				facts.AdmittedAt = ptr.To(unixSeconds(r.kueueClock.read(*f.AdmittedAt, now)))
				if st.admittedAt != nil && !st.admittedAt.Equal(*f.AdmittedAt) {
					// Readmitted: the job restarts from a checkpoint even
					// when its counters will not show it.
					st.hist.Resume()
				}
				st.admittedAt = ptr.To(*f.AdmittedAt)
			}
			var boostChanged, deactivated, lastEv *time.Time
			if t := st.work.BoostChangedTime; t != nil {
				boostChanged = &t.Time
			}
			if t := st.work.DeactivatedTime; t != nil {
				deactivated = &t.Time
			}
			if t := st.work.LastPlannerEvictionTime; t != nil {
				lastEv = &t.Time
			}
			if at := PlannerEviction(f.Evicted, st.work.Boost, boostChanged, deactivated, lastEv); at != nil {
				// Stored as Kueue stamped it (the next eviction is told
				// apart by it), clamped for the policy.
				mt := metav1.NewTime(*at)
				st.work.LastPlannerEvictionTime = &mt
				if f.Evicted.Reason != kueue.WorkloadDeactivated {
					noteYield(f.GPUs, st.lastETA())
				}
				facts.LastPlannerEvictionAt = ptr.To(unixSeconds(r.kueueClock.read(*at, now)))
			}
			admitted := ""
			if f.AdmittedAt != nil {
				admitted = f.AdmittedAt.UTC().Format(time.RFC3339)
			}
			key = fmt.Sprintf("%s|%v|%s|%v|%v|%s|%d|%d|%d|%v", wl.UID, f.Running(), admitted, f.QuotaReserved, f.Finished,
				f.ClusterQueue, f.BasePriority, f.GPUs, f.Evictions, len(f.ForeignOwners) > 0)
		}
	}
	if st.factsKey != "" && st.factsKey != key {
		addUrgent(st, "the Workload changed (admission, eviction, queue or priority)")
	}
	st.factsKey = key
	cond.Message = truncateString(cond.Message, 1000)
	apimeta.SetStatusCondition(&st.work.Conditions, cond)
	return wl, facts, wf, backoff, nil
}

// minImprovement reads the job's planner.progress.io/min-improvement
// annotation into st; an invalid value is a Warning Event (once per
// distinct value) and the config's value applies, and a value below the
// config's floor (other than 0) is raised to the floor, with a Warning
// Event too.
func (r *JobReconciler) minImprovement(job client.Object, st *jobState) {
	st.minImprovement = nil
	v, ok := job.GetAnnotations()[AnnotationMinImprovement]
	if !ok {
		st.minImprovementErr = ""
		return
	}
	m, err := ParseMinImprovement(v)
	if err == nil {
		if floor := r.cfg.Forecast.AnnotationFloor(); m > 0 && m < floor {
			err = fmt.Errorf("annotation %s=%q is below the cluster's floor %g (forecast.minImprovementFloor); the floor applies",
				AnnotationMinImprovement, truncateString(v, 32), floor)
			m = floor
		}
		st.minImprovement = &m
	}
	if msg := errString(err); msg != st.minImprovementErr {
		st.minImprovementErr = msg
		if err != nil {
			r.event(job, nil, corev1.EventTypeWarning, ReasonInvalidAnnotation, "Validate", err.Error())
		}
	}
}

// actingVerdicts are the verdicts whose start (and end) is an Event.
func actingVerdict(v preempt.Verdict) bool {
	return v.Stalled() || v == preempt.NearDone || v == preempt.Untrusted
}

func (r *JobReconciler) forecastAndDecide(job client.Object, wl *kueue.Workload, st *jobState, choice ObjectiveChoice,
	facts preempt.Facts, now time.Time, nowSec float64, why string) {
	obj := choice.Objective
	t0 := time.Now()
	s := r.settings
	if st.minImprovement != nil {
		s.MinImprovement = *st.minImprovement
	}
	f := forecast.Fit(st.hist, obj, nowSec, s)
	metricFitDuration.Observe(time.Since(t0).Seconds())
	if st.obj != nil {
		st.latest.Store(&latestEntry{key: client.ObjectKeyFromObject(st.obj),
			LatestForecast: LatestForecast{ForecastUID: st.obj.UID, At: now, ETA: f.ETA, Plateaued: f.Plateaued}})
	}
	st.eta.record(&f, now)
	metricForecasts.WithLabelValues(triggerLabel(why)).Inc()

	prev := st.decision
	d := preempt.Decide(f, facts, prev, r.cfg.Policy)
	metricDecisions.WithLabelValues(string(d.Verdict)).Inc()
	st.decision = d
	st.lastForecast = now
	if st.newData {
		st.lastDataForecast = now
		if !st.lastAccepted.IsZero() {
			metricUpdateToDecision.Observe(max(now.Sub(st.lastAccepted), 0).Seconds())
		}
	}
	st.newData, st.urgent = false, nil

	st.work.Forecast = Summarize(f)
	st.work.Verdict = string(d.Verdict)
	st.work.AdvisedBoost = d.AdvisedBoost
	st.work.Reason = truncateString(outputText(d.Reason), 2000)

	distrustStarted := d.Distrust != nil && prev.Distrust == nil
	if distrustStarted {
		note := fmt.Sprintf("implausible progress, no protection until %s: %s; verdict %s: %s",
			v1alpha1.TimeFromUnix(d.Distrust.Until).UTC().Format(time.RFC3339), d.Distrust.Findings, d.Verdict, d.Reason)
		r.event(job, wl, corev1.EventTypeWarning, ReasonImplausibleProgress, "Forecast", note)
	}
	if prev.Verdict != d.Verdict && !(d.Verdict == preempt.Untrusted && distrustStarted) &&
		(actingVerdict(d.Verdict) || (actingVerdict(prev.Verdict) && d.Verdict == preempt.Progressing)) {
		typ := corev1.EventTypeNormal
		if d.Verdict == preempt.Diverging || d.Verdict == preempt.Hung || d.Verdict == preempt.Untrusted {
			typ = corev1.EventTypeWarning
		}
		r.event(job, wl, typ, string(d.Verdict), "Forecast", d.Reason)
	}
	if n := totalRejections(st.hist.Rejections()); n > st.rejectionsEvented {
		note := fmt.Sprintf("%d report values refused since the last forecast (%s); latest: %s",
			n-st.rejectionsEvented, formatCounts(st.hist.Rejections()), st.work.LastRejection)
		r.event(job, nil, corev1.EventTypeWarning, ReasonReportsRejected, "Observe", note)
		st.rejectionsEvented = n
	}
}

func triggerLabel(why string) string {
	switch {
	case strings.HasPrefix(why, "first"):
		return "first"
	case why == "new reports":
		return "reports"
	case strings.HasPrefix(why, "no forecast"):
		return "idle"
	case strings.HasPrefix(why, "a decision deadline"):
		return "deadline"
	}
	return "urgent"
}

func formatCounts(m map[progress.RejectReason]int) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, string(k))
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s: %d", k, m[progress.RejectReason(k)])
	}
	return "totals " + strings.Join(parts, ", ")
}

// actuate applies the current decision to the Workload: the boost, waking
// waiting Workloads after lowering an admitted one, and the stop action.
// In advise mode the decided boost is 0, so the planner only resets a boost
// it wrote earlier (to "0").
func (r *JobReconciler) actuate(ctx context.Context, job client.Object, wl *kueue.Workload, wf *WorkloadFacts,
	st *jobState, facts preempt.Facts, now time.Time, jobDone bool) error {
	enforce, canWrite := r.enforcement(ctx, job, wl, wf, st, facts, now, jobDone)
	if !canWrite || st.decision.IsZero() {
		return nil
	}
	if stop, err := r.applyBoost(ctx, job, wl, wf, st, now); stop || err != nil {
		return err
	}
	return r.applyStop(ctx, job, wl, wf, st, facts, now, enforce)
}

// enforcement decides whether the planner may write the Workload, and
// says so: the Enforcing condition, the status's mode and adviseOnly, and
// the Events and metric of a change into advise-only. enforce is the
// policy's mode; canWrite whether the boost may be written (in advise
// mode only to reset the planner's own).
func (r *JobReconciler) enforcement(ctx context.Context, job client.Object, wl *kueue.Workload, wf *WorkloadFacts,
	st *jobState, facts preempt.Facts, now time.Time, jobDone bool) (enforce, canWrite bool) {
	d := st.decision
	mode := string(r.cfg.Policy.Effective(job.GetNamespace(), facts.ClusterQueue).Mode)
	enforce = preempt.Mode(mode) == preempt.ModeEnforce
	owned := wf != nil && PlannerOwnsBoost(wl.ManagedFields)
	st.work.Boost = 0
	if owned {
		st.work.Boost = wf.Boost
	}

	cond := metav1.Condition{Type: v1alpha1.ConditionEnforcing, Status: metav1.ConditionFalse}
	adviseOnly, cause := "", ""
	canWrite = false
	switch {
	case jobDone:
		cond.Reason, cond.Message = condReasonFinished, "the job finished; nothing to apply"
	case !r.kueueReady.Load():
		adviseOnly, cause = "Kueue is not installed (kueue.x-k8s.io/v1beta2 Workloads are not served)", "no-kueue"
		cond.Reason = condReasonNoKueue
	case wl == nil || wf == nil:
		adviseOnly, cause = "the "+r.kindName()+" has no single unfinished Workload", "no-workload"
		cond.Reason = condReasonNoWorkload
	case len(wf.ForeignOwners) > 0 || (wf.BoostSet && wf.Boost != 0 && !owned):
		owners := strings.Join(wf.ForeignOwners, ", ")
		if owners == "" {
			owners = "an unknown writer (no managedFields entry)"
		}
		adviseOnly = fmt.Sprintf("annotation %s=%q on Workload %s is managed by %s; the planner does not fight over it",
			AnnotationPriorityBoost, wf.BoostValue, wl.Name, owners)
		cause = "foreign-owner"
		cond.Reason = condReasonForeignOwner
	case r.caps.boostGate(ctx, wl, now) == gateOff:
		adviseOnly = fmt.Sprintf("Kueue's PriorityBoost feature gate is off: it ignores %s, so a boost on Workload %s would have no effect; "+
			"the planner writes none (turn the gate on in Kueue's configuration)", AnnotationPriorityBoost, wl.Name)
		cause = "boost-disabled"
		cond.Reason = condReasonBoostDisabled
	case !enforce:
		canWrite = true // only to reset a boost the planner wrote earlier
		cond.Reason, cond.Message = condReasonAdviseMode, "the policy's mode for this job is advise"
	default:
		canWrite = true
		cond.Status, cond.Reason, cond.Message = metav1.ConditionTrue, condReasonEnforcing, "the planner writes the priority boost of Workload "+wl.Name
		if d.IsZero() {
			cond.Reason, cond.Message = condReasonNoForecast, "no decision yet"
		}
	}
	if adviseOnly != "" {
		cond.Message = adviseOnly
		if enforce {
			mode = modeAdviseOnly
		}
	}
	cond.Message = truncateString(cond.Message, 1000)
	old := apimeta.FindStatusCondition(st.work.Conditions, v1alpha1.ConditionEnforcing)
	if adviseOnly != "" && (old == nil || old.Reason != cond.Reason) {
		metricAdviseOnly.WithLabelValues(cause).Inc()
		if cause == "boost-disabled" {
			note := adviseOnly
			if !d.IsZero() {
				note += fmt.Sprintf(" (advised boost %+d: %s)", d.AdvisedBoost, d.Reason)
			}
			r.event(job, wl, corev1.EventTypeWarning, ReasonBoostDisabled, "SetPriorityBoost", note)
		}
		if cause == "foreign-owner" {
			note := adviseOnly
			if !d.IsZero() {
				note += fmt.Sprintf(" (advised boost %+d: %s)", d.AdvisedBoost, d.Reason)
			}
			r.event(job, wl, corev1.EventTypeWarning, ReasonAdviseOnly, "SetPriorityBoost", note)
			r.event(wl, job, corev1.EventTypeWarning, ReasonAdviseOnly, "SetPriorityBoost", note)
		}
	}
	if old != nil && old.Reason == condReasonForeignOwner && cond.Reason == condReasonEnforcing {
		r.event(job, wl, corev1.EventTypeNormal, ReasonEnforcing, "SetPriorityBoost",
			"no other writer owns "+AnnotationPriorityBoost+" on Workload "+wl.Name+" any more; the planner writes it again")
	}
	apimeta.SetStatusCondition(&st.work.Conditions, cond)
	st.work.Mode = mode
	st.work.AdviseOnly = adviseOnly

	return enforce, canWrite
}

// applyBoost writes the decided boost when it differs from the Workload's,
// and wakes the ClusterQueue's waiting Workloads after a lowered one where
// Kueue would not retry them itself. stop ends the actuation (the
// Workload changed or went away: decide again on its new state).
func (r *JobReconciler) applyBoost(ctx context.Context, job client.Object, wl *kueue.Workload, wf *WorkloadFacts,
	st *jobState, now time.Time) (stop bool, err error) {
	d := st.decision
	if desired := d.Boost; desired != wf.Boost {
		if err := r.wl.setBoost(ctx, wl, desired); err != nil {
			if apierrors.IsConflict(err) {
				// The Workload changed between our read and our write (or
				// was replaced): decide again on the new state shortly.
				addUrgent(st, "the Workload changed while the boost was written")
				return true, nil
			}
			if apierrors.IsNotFound(err) {
				return true, nil
			}
			return true, fmt.Errorf("set priority boost on Workload %s: %w", wl.Name, err)
		}
		dir := "raise"
		if desired < wf.Boost {
			dir = "lower"
		}
		metricBoostChanges.WithLabelValues(dir).Inc()
		t := metav1.NewTime(now.UTC().Truncate(time.Second))
		st.work.Boost, st.work.BoostChangedTime = desired, &t
		note := fmt.Sprintf("priority boost %+d (was %+d), effective priority %d: %s", desired, wf.Boost,
			int64(wf.BasePriority)+int64(desired), d.Reason)
		switch {
		case desired >= wf.Boost || !wf.QuotaReserved:
		case hasWorkloadPriorityClass(wl):
			// Kueue retries the ClusterQueue's waiting Workloads itself
			// (within its 1 s requeue batch): touching them would only
			// add writes (docs/compatibility.md, "Waking waiting Workloads").
			note += fmt.Sprintf("; Kueue retries the waiting Workloads in ClusterQueue %s itself (WorkloadPriorityClass %s)",
				wf.ClusterQueue, wl.Spec.PriorityClassRef.Name)
		default:
			style := r.caps.generation().wakeStyle()
			res, err := r.wl.wakeWaiting(ctx, wf.ClusterQueue, wl.UID, style)
			if err != nil {
				log.FromContext(ctx).Error(err, "waking waiting Workloads", "clusterQueue", wf.ClusterQueue, "style", string(style))
			}
			metricNudges.Add(float64(len(res.Nudged)))
			if len(res.Nudged) > 0 {
				note += fmt.Sprintf("; woke %d waiting Workload(s) in ClusterQueue %s", len(res.Nudged), wf.ClusterQueue)
			}
			if len(res.Skipped) > 0 {
				log.FromContext(ctx).Info("waiting Workloads not woken", "clusterQueue", wf.ClusterQueue, "skipped", res.Skipped)
			}
		}
		r.event(job, wl, corev1.EventTypeNormal, ReasonBoostChanged, "SetPriorityBoost", note)
		r.event(wl, job, corev1.EventTypeNormal, ReasonBoostChanged, "SetPriorityBoost", note)
	}

	return false, nil
}

// applyStop deactivates the Workload once per decision made during the
// current admission, when the policy says so and the queue opted in.
func (r *JobReconciler) applyStop(ctx context.Context, job client.Object, wl *kueue.Workload, wf *WorkloadFacts,
	st *jobState, facts preempt.Facts, now time.Time, enforce bool) error {
	d := st.decision
	if enforce && d.Action == preempt.ActionDeactivate && wf.Running() && facts.AdmittedAt != nil && d.At >= *facts.AdmittedAt &&
		(st.work.DeactivatedTime == nil || d.At > unixSeconds(st.work.DeactivatedTime.Time)) {
		if err := r.wl.deactivate(ctx, wl); err != nil {
			if apierrors.IsNotFound(err) {
				return nil
			}
			return fmt.Errorf("deactivate Workload %s: %w", wl.Name, err)
		}
		metricDeactivations.Inc()
		metricGPUHoursSaved.Add(max(d.GPUHoursSaved, 0))
		t := metav1.NewTime(now.UTC().Truncate(time.Second))
		st.work.DeactivatedTime, st.work.LastPlannerEvictionTime = &t, &t
		note := fmt.Sprintf("stopped: Workload %s set to spec.active=false; saves %.1f GPU-hours: %s", wl.Name, d.GPUHoursSaved, d.Reason)
		r.event(job, wl, corev1.EventTypeWarning, ReasonDeactivated, "Deactivate", note)
		r.event(wl, job, corev1.EventTypeWarning, ReasonDeactivated, "Deactivate", note)
	}
	return nil
}

// writeStatus persists the status at once when something a reader acts on
// changed (readerRelevant), and a new forecast with the history at the
// next checkpoint (forecast.checkpointInterval after the last write), or
// at once when the job is done.
func (r *JobReconciler) writeStatus(ctx context.Context, st *jobState, forecasted, done bool, now time.Time) error {
	if st.obj == nil {
		return nil
	}
	want := *st.work.DeepCopy()
	// admissionEstimate is the admission publisher's (pkg/admissionstatus):
	// carried as the object last seen has it, never decided here.
	want.AdmissionEstimate = st.obj.Status.AdmissionEstimate.DeepCopy()
	if !st.decision.IsZero() {
		want.SetDecision(st.decision.At, st.decision.VerdictSince, st.decision.StalledSince, st.decision.ProtectedUntil)
	}
	st.unsaved = st.unsaved || forecasted
	changed := !equality.Semantic.DeepEqual(readerRelevant(st.obj.Status), readerRelevant(want))
	due := st.unsaved && (done || !now.Before(st.checkpointAt))
	if !changed && !due {
		return nil
	}
	hist, err := st.hist.MarshalJSON()
	if err != nil {
		return fmt.Errorf("encode history: %w", err)
	}
	status := want
	status.Revision = st.obj.Status.Revision + 1
	status.History = &runtime.RawExtension{Raw: hist}
	if !st.decision.IsZero() {
		b, err := json.Marshal(st.decision)
		if err != nil {
			return fmt.Errorf("encode decision: %w", err)
		}
		status.Decision = &runtime.RawExtension{Raw: b}
	}
	pf := st.obj.DeepCopy()
	pf.Status = status
	err = r.client.Status().Update(ctx, pf)
	if apierrors.IsConflict(err) {
		// Someone changed the object (metadata, or another planner after a
		// leader change). If the status is still ours, retry on top of it.
		var fresh v1alpha1.ProgressForecast
		if gerr := r.apiReader.Get(ctx, client.ObjectKeyFromObject(pf), &fresh); gerr != nil {
			return errors.Join(err, gerr)
		}
		if fresh.Status.Revision != st.obj.Status.Revision || fresh.UID != st.obj.UID {
			st.hist = nil // reload from the object on the next reconcile
			st.obj = nil
			return err
		}
		pf.ObjectMeta = *fresh.ObjectMeta.DeepCopy()
		pf.Status.AdmissionEstimate = fresh.Status.AdmissionEstimate
		err = r.client.Status().Update(ctx, pf)
	}
	if err != nil {
		if apierrors.IsConflict(err) {
			st.hist, st.obj = nil, nil
		}
		return err
	}
	st.obj = pf
	st.unsaved, st.checkpointAt = false, now.Add(r.cfg.Forecast.CheckpointInterval.Duration)
	// Continue from what the API server stored: its times have second
	// precision, and comparing nanosecond times in memory with them would
	// make every later reconcile look changed and write again.
	st.work = *pf.Status.DeepCopy()
	st.work.History, st.work.Decision = nil, nil
	return nil
}

// readerRelevant is the status without what changes with every report or
// forecast (observation bookkeeping, the forecast summary and the reason's
// figures, the raw fields, the revision): what is left is what readers act
// on, written at once; the rest waits for the next checkpoint.
func readerRelevant(s v1alpha1.ProgressForecastStatus) v1alpha1.ProgressForecastStatus {
	c := *s.DeepCopy()
	c.Revision = 0
	c.History, c.Decision = nil, nil
	c.Observations = 0
	c.LastObservedTime, c.LastReportTime = nil, nil
	c.ObservedStatusHash = ""
	c.Rejections, c.LastRejection = nil, ""
	c.DecidedTime = nil // changes with every decision, like the observation times
	c.Forecast, c.Reason = nil, ""
	return c
}
