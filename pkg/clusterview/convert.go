package clusterview

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"

	"github.com/progress-planner/planner/api/v1alpha1"
	"github.com/progress-planner/planner/internal/humanize"
	"github.com/progress-planner/planner/pkg/forecast"
	"github.com/progress-planner/planner/pkg/kueueext"
	"github.com/progress-planner/planner/pkg/preempt"
	"github.com/progress-planner/planner/pkg/progress"
	"github.com/progress-planner/planner/pkg/report"
	"github.com/progress-planner/planner/pkg/workloads"
)

// Options of the conversion.
type Options struct {
	// GPUResource is the resource counted as GPUs (nvidia.com/gpu).
	GPUResource corev1.ResourceName
	// Now is the instant the stored histories are forecast for.
	Now time.Time
}

func (o Options) gpu() corev1.ResourceName {
	if o.GPUResource == "" {
		return "nvidia.com/gpu"
	}
	return o.GPUResource
}

// QuotaGPUs is a ClusterQueue's nominal GPU quota over all flavors.
func QuotaGPUs(cq *kueue.ClusterQueue, gpu corev1.ResourceName) int {
	n := 0
	for _, rg := range cq.Spec.ResourceGroups {
		for _, f := range rg.Flavors {
			for _, r := range f.Resources {
				if r.Name == gpu {
					// Clamped at each step: a "GPU" resource that is memory
					// counts bytes (64Gi = 6.9e10).
					n = report.ClampGPUs(int64(n) + int64(report.ClampGPUs(r.NominalQuota.Value())))
				}
			}
		}
	}
	return n
}

// jobOf is the name of the job wl belongs to (workloads.JobOf: a
// TrainJob, batch/v1 Job, JobSet or any other kind Kueue runs; "" when
// none).
func jobOf(wl *kueue.Workload) string {
	if job, ok := workloads.JobOf(wl); ok {
		return job.Name
	}
	return ""
}

// forecastJob is the job a ProgressForecast records: its controller owner
// reference, else the job its spec.jobRef names, else (an object written
// by hand without either) the TrainJob of its own name, UID unknown.
func forecastJob(pf *v1alpha1.ProgressForecast) workloads.Ref {
	if job, ok := workloads.ControllerOf(pf); ok {
		return job
	}
	if r := pf.Spec.JobRef; r.Kind != "" && r.Name != "" {
		return workloads.Ref{APIVersion: r.APIVersion, Kind: r.Kind, Namespace: pf.Namespace, Name: r.Name, UID: r.UID}
	}
	return trainJob(pf.Namespace, pf.Name, "")
}

// trainJob names the TrainJob ns/name (uid "" when unknown).
func trainJob(ns, name string, uid types.UID) workloads.Ref {
	return workloads.RefTo(trainer.GroupVersion.WithKind(trainer.TrainJobKind), &metav1.ObjectMeta{Namespace: ns, Name: name, UID: uid})
}

// ViewOf returns the report's view of a Workload (state, GPUs, priority,
// ClusterQueue — from its admission, else its LocalQueue — and owning
// TrainJob), the LocalQueues indexed once.
func (s *Snapshot) ViewOf(gpu corev1.ResourceName) func(wl *kueue.Workload) report.WorkloadView {
	lqs := s.lqMap()
	if gpu == "" {
		gpu = Options{}.gpu()
	}
	return func(wl *kueue.Workload) report.WorkloadView { return s.view(wl, lqs, gpu) }
}

// ForecastIndex returns a lookup of a Workload's ProgressForecast: the
// one recording that Workload, else the one of the job it belongs to
// (workloads.JobOf; the controller names a job's ProgressForecast after
// it) — in both cases only when the forecast is of the Workload's job
// (workloads.Same: a recreated job's forecast is not its predecessor's).
// nil when there is none.
func (s *Snapshot) ForecastIndex() func(wl *kueue.Workload) *v1alpha1.ProgressForecast {
	byWorkload := map[string]*v1alpha1.ProgressForecast{}
	byJob := map[string]*v1alpha1.ProgressForecast{}
	for i := range s.Forecasts {
		pf := &s.Forecasts[i]
		byJob[pf.Namespace+"/"+pf.Name] = pf
		if pf.Status.Workload != "" {
			byWorkload[pf.Namespace+"/"+pf.Status.Workload] = pf
		}
	}
	return func(wl *kueue.Workload) *v1alpha1.ProgressForecast {
		job, ok := workloads.JobOf(wl)
		if pf := byWorkload[wl.Namespace+"/"+wl.Name]; pf != nil && (!ok || workloads.Same(job, forecastJob(pf))) {
			return pf
		}
		if pf := byJob[wl.Namespace+"/"+job.Name]; ok && pf != nil && workloads.Same(job, forecastJob(pf)) {
			return pf
		}
		return nil
	}
}

func (s *Snapshot) lqMap() map[string]string {
	m := map[string]string{}
	for _, lq := range s.LocalQueues {
		m[lq.Namespace+"/"+lq.Name] = string(lq.Spec.ClusterQueue)
	}
	return m
}

// view turns a Workload into the explain/report view.
func (s *Snapshot) view(wl *kueue.Workload, lqs map[string]string, gpu corev1.ResourceName) report.WorkloadView {
	f := kueueext.ReadWorkload(wl, gpu)
	v := report.WorkloadView{Namespace: wl.Namespace, Name: wl.Name, Job: jobOf(wl), LocalQueue: f.QueueName,
		ClusterQueue: f.ClusterQueue, GPUs: f.GPUs, BasePriority: f.BasePriority, Boost: f.Boost, CreatedAt: wl.CreationTimestamp.Time}
	if v.ClusterQueue == "" {
		v.ClusterQueue = lqs[wl.Namespace+"/"+f.QueueName]
	}
	switch {
	case f.Finished:
		v.State = report.Finished
	case !f.Active:
		v.State = report.Inactive
	case f.QuotaReserved:
		v.State = report.Running
	default:
		v.State = report.Waiting
	}
	return v
}

// ForecastOf forecasts a ProgressForecast's stored history as of now with
// its stored objective, and decodes its latest decision. Either may be nil
// (no history yet, no decision yet).
func ForecastOf(pf *v1alpha1.ProgressForecast, now time.Time) (*forecast.Forecast, *progress.History, *preempt.Decision, error) {
	var d *preempt.Decision
	if pf.Status.Decision != nil && len(pf.Status.Decision.Raw) > 0 {
		d = &preempt.Decision{}
		if err := json.Unmarshal(pf.Status.Decision.Raw, d); err != nil {
			return nil, nil, nil, fmt.Errorf("ProgressForecast %s/%s: decision: %w", pf.Namespace, pf.Name, err)
		}
	}
	if pf.Status.History == nil || len(pf.Status.History.Raw) == 0 {
		return nil, nil, d, nil
	}
	h, err := progress.UnmarshalHistory(pf.Status.History.Raw, progress.DefaultLimits())
	if err != nil {
		return nil, nil, d, fmt.Errorf("ProgressForecast %s/%s: %w", pf.Namespace, pf.Name, err)
	}
	obj, err := progress.ParseObjective(pf.Status.Objective)
	if err != nil {
		o, ok := progress.DefaultObjective(h)
		if !ok {
			return nil, h, d, nil
		}
		obj = o
	}
	fc := forecast.Fit(h, obj, float64(now.UnixNano())/1e9, forecast.DefaultSettings())
	return &fc, h, d, nil
}

// ReportInput builds the report's input: one job per Workload (TrainJobs
// joined with their ProgressForecast), plus ProgressForecasts without a
// Workload, and every ClusterQueue with its GPU quota. Per-job problems
// (an undecodable history) are returned as notes, not errors.
func (s *Snapshot) ReportInput(o Options) (report.Input, []string) {
	gpu := o.gpu()
	lqs := s.lqMap()
	in := report.Input{GeneratedAt: o.Now, Interval: forecast.DefaultSettings().Interval}
	var notes []string
	forecastFor := s.ForecastIndex()
	used := map[types.NamespacedName]bool{}
	addPF := func(j *report.JobInput, pf *v1alpha1.ProgressForecast) {
		used[types.NamespacedName{Namespace: pf.Namespace, Name: pf.Name}] = true
		fc, h, d, err := ForecastOf(pf, o.Now)
		if err != nil {
			notes = append(notes, err.Error())
		}
		j.Forecast, j.History, j.Decision = fc, h, d
		j.Verdict, j.Reason = pf.Status.Verdict, pf.Status.Reason
		if j.Name == "" {
			j.Name = pf.Name
		}
	}
	for i := range s.Workloads {
		wl := &s.Workloads[i]
		v := s.view(wl, lqs, gpu)
		if v.State == report.Finished {
			continue
		}
		j := report.JobInput{Namespace: v.Namespace, Name: v.Name, Queue: v.ClusterQueue, GPUs: v.GPUs, State: v.State,
			BasePriority: v.BasePriority, Boost: v.Boost, CreatedAt: float64(v.CreatedAt.Unix())}
		if pf := forecastFor(wl); pf != nil {
			j.Name = pf.Name // the TrainJob's name: what users know
			addPF(&j, pf)
		}
		in.Jobs = append(in.Jobs, j)
	}
	for i := range s.Forecasts {
		pf := &s.Forecasts[i]
		if used[types.NamespacedName{Namespace: pf.Namespace, Name: pf.Name}] {
			continue
		}
		j := report.JobInput{Namespace: pf.Namespace, Queue: pf.Status.ClusterQueue, State: report.State("no workload"), Boost: pf.Status.Boost}
		addPF(&j, pf)
		in.Jobs = append(in.Jobs, j)
	}
	for i := range s.ClusterQueues {
		cq := &s.ClusterQueues[i]
		in.Queues = append(in.Queues, report.QueueInput{Name: cq.Name, QuotaGPUs: QuotaGPUs(cq, gpu)})
	}
	return in, notes
}

// ExplainInput finds the Workload of ns/name and gathers its
// ClusterQueue's Workloads and the planner's record (explainTarget says
// which Workload).
func (s *Snapshot) ExplainInput(ns, name string, jobUID types.UID, o Options) (report.ExplainInput, error) {
	gpu := o.gpu()
	lqs := s.lqMap()
	target, pf, err := s.explainTarget(ns, name, jobUID)
	if err != nil {
		return report.ExplainInput{}, err
	}
	in := report.ExplainInput{Target: s.view(target, lqs, gpu), QuotaGPUs: -1}
	for i := range s.Workloads {
		v := s.view(&s.Workloads[i], lqs, gpu)
		if v.ClusterQueue == in.Target.ClusterQueue && v.ClusterQueue != "" {
			in.Queue = append(in.Queue, v)
		}
	}
	for i := range s.ClusterQueues {
		cq := &s.ClusterQueues[i]
		if cq.Name == in.Target.ClusterQueue {
			in.QuotaGPUs = QuotaGPUs(cq, gpu)
			if p := cq.Spec.Preemption; p != nil {
				in.WithinClusterQueue = string(p.WithinClusterQueue)
			}
		}
	}
	if pf != nil {
		in.Planner = PlannerViewOf(pf, o.Now)
	}
	return in, nil
}

// explainTarget is what `planner explain ns/name` explains: the Workload of
// the job ns/name by workloads.For, the rule the controller applies, else
// the Workload named name. The job is the TrainJob ns/name when one exists
// (its UID is jobUID); otherwise the job of any kind the ProgressForecast
// ns/name records (the controller names a job's forecast after it; its UID
// from there, else unknown and the Workloads are matched by name). pf is
// the job's ProgressForecast, or the Workload's (nil when none). Several
// unfinished Workloads of the job are an error that names them: the
// controller waits for Kueue to settle, and explain does not pick one the
// controller does not.
func (s *Snapshot) explainTarget(ns, name string, jobUID types.UID) (target *kueue.Workload, pf *v1alpha1.ProgressForecast, err error) {
	job := trainJob(ns, name, jobUID)
	for i := range s.Forecasts {
		f := &s.Forecasts[i]
		if f.Namespace != ns || f.Name != name {
			continue
		}
		if fj := forecastJob(f); jobUID == "" || workloads.Same(fj, job) {
			pf = f
			if jobUID == "" {
				job = fj
			}
		}
	}
	m := workloads.For(job, s.Workloads)
	if m.Workload != nil {
		return m.Workload, pf, nil
	}
	for i := range s.Workloads {
		if wl := &s.Workloads[i]; wl.Namespace == ns && wl.Name == name {
			return wl, s.ForecastIndex()(wl), nil
		}
	}
	if m.Ambiguous {
		return nil, nil, fmt.Errorf("%s/%s: %s; the controller waits until one is left (explain one of them by its Workload name)", ns, name, m.Reason)
	}
	return nil, nil, fmt.Errorf("no Workload for %s/%s: %s, and no Workload has that name", ns, name, m.Reason)
}

// PlannerViewOf reads the planner's record: verdict, reason, boost, mode
// and the evidence lines from the forecast summary and the decision.
func PlannerViewOf(pf *v1alpha1.ProgressForecast, now time.Time) report.PlannerView {
	st := &pf.Status
	v := report.PlannerView{Found: true, Verdict: st.Verdict, Reason: st.Reason, Mode: st.Mode, AdviseOnly: st.AdviseOnly,
		Boost: st.Boost, AdvisedBoost: st.AdvisedBoost}
	add := func(format string, args ...any) { v.Evidence = append(v.Evidence, fmt.Sprintf(format, args...)) }
	if f := st.Forecast; f != nil {
		add("forecast at %s: %d reports, %d objective points, %d segment(s)", f.Time.UTC().Format(time.RFC3339), f.Reports, f.ObjectivePoints, max(f.Segments, 1))
		if f.Progress != "" {
			add("progress %s (step %s)", f.Progress, orDash(f.Step))
		}
		if f.ETA != "" {
			add("ETA %s [%s]; the job itself claims %s", f.ETA, orDash(f.ETARange), orDash(f.ReportedETA))
		}
		if f.Current != "" {
			add("%s now %s, best %s, predicted final %s [%s]", objectiveName(st.Objective), f.Current, orDash(f.Best), orDash(f.Predicted), orDash(f.PredictedRange))
		}
		if f.PlateauProbability != "" {
			add("plateau probability %s, remaining improvement %s of the gain so far, confidence %s", f.PlateauProbability, orDash(f.RelativeRemaining), orDash(f.Confidence))
		}
		if f.Diverging {
			add("diverging")
		}
		if f.Hung {
			add("hung: no progress for longer than the job's report rhythm allows")
		}
		for _, i := range f.Integrity {
			add("integrity: %s", i)
		}
		for _, n := range f.Notes {
			add("note: %s", n)
		}
	}
	if len(st.Rejections) > 0 {
		var parts []string
		for k, n := range st.Rejections {
			parts = append(parts, fmt.Sprintf("%s %d", k, n))
		}
		slices.Sort(parts)
		add("refused reports/values: %s", strings.Join(parts, ", "))
	}
	if st.Decision != nil && len(st.Decision.Raw) > 0 {
		var d preempt.Decision
		if err := json.Unmarshal(st.Decision.Raw, &d); err == nil {
			nowS := float64(now.UnixNano()) / 1e9
			add("verdict %s held for %s", d.Verdict, humanize.Duration(max(0, nowS-d.VerdictSince)))
			if d.ProtectedUntil != nil {
				add("protected (lease) for another %s", humanize.Duration(max(0, *d.ProtectedUntil-nowS)))
			}
			if d.Distrust != nil && d.Distrust.Until > nowS {
				add("distrusted for another %s: %s", humanize.Duration(max(0, d.Distrust.Until-nowS)), d.Distrust.Findings)
			}
			if d.HeldBy != "" {
				add("boost held by %s", d.HeldBy)
			}
		}
	}
	return v
}

func objectiveName(obj string) string {
	if m, _, ok := strings.Cut(obj, ","); ok {
		return m
	}
	if obj == "" {
		return "objective"
	}
	return obj
}

func orDash(s string) string {
	if s == "" {
		return "—"
	}
	return s
}
