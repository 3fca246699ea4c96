// Package clustersnap turns a live cluster's state, as pkg/clusterview
// reads it (read-only), into a simulator scenario: `planner simulate
// --from-cluster` simulates forward from now, and --export-scenario writes
// the snapshot as scenario YAML to re-run and share offline.
//
// Time 0 is the snapshot. The mapping, and what it leaves out:
//
//   - ClusterQueues: the GPU quota over all flavors (one resource: GPUs),
//     the cohort, the GPU borrowing limit, withinClusterQueue preemption
//     (LowerOrNewerEqualPriority is simulated as LowerPriority, noted);
//     reclaimWithinCohort, borrowWithinCohort, fair sharing and lending
//     limits are not simulated (docs/simulator.md, "What is not modelled").
//   - LocalQueues: recorded; a job names the ClusterQueue it feeds.
//   - Workloads, neither finished nor deactivated: admitted ones arrive at
//     0 (admitted first), pending ones at 1 s in creation order, so the
//     simulator's first pass starts from the cluster's admitted set and
//     its queue order. Resources are GPUs; the priority is the base
//     priority (a boost is the planner's to recompute). An admitted job's
//     run time is what its forecast's ETA leaves (the running time so far
//     is gone from the simulation); a job without a known ETA gets the
//     default duration, and is counted in a note.
//   - A tracked job continues its own curve (ownCurve): the objective's
//     stored history, placed on the run by each report's step over the
//     total, then the forecast's continuation to its predicted final
//     value (flat when it has plateaued). The simulated job starts where
//     the job is (JobSpec.RanFor, the time the ETA's pace says it has
//     run), and under the planner policy its history holds the stored
//     reports, so its first simulated forecast judges what the
//     controller's did. A job whose history cannot be placed (no step
//     total, fewer than three finite values) or whose forecast came from
//     Options.Latest (no refit, so no predicted final value) continues on
//     a simple curve instead: plateaued at once when its forecast says
//     so, else improving to its end.
package clustersnap

import (
	"fmt"
	"math"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/progress-planner/planner/api/v1alpha1"
	"github.com/progress-planner/planner/pkg/clusterview"
	"github.com/progress-planner/planner/pkg/forecast"
	"github.com/progress-planner/planner/pkg/kueueext"
	"github.com/progress-planner/planner/pkg/report"
	"github.com/progress-planner/planner/simulator"
)

// Options of the conversion.
type Options struct {
	// GPUResource is the resource counted as GPUs (nvidia.com/gpu).
	GPUResource corev1.ResourceName
	// Now is the snapshot's instant (time 0).
	Now time.Time
	// DefaultDuration is the run time, in seconds, of a job without a
	// known ETA.
	DefaultDuration float64
	// Horizon, when positive, is how far ahead new jobs arrive: the
	// arrivals of the last Horizon seconds repeat (repeatArrivals), or,
	// with Arrivals, the trace's first Horizon seconds.
	Horizon float64
	// Arrivals, when set, are the new jobs instead of the repeated ones
	// (--arrivals FILE): a trace job goes to the ClusterQueue its group
	// names, else to ArrivalsQueue.
	Arrivals      *simulator.Trace
	ArrivalsQueue string
	// Latest, when set, are the controller's own latest forecasts
	// (kueueext.Planner.LatestForecasts, in the planner's process): a job
	// found there takes its ETA, moved on by the time since, and plateau
	// call from it instead of a refit of its stored history.
	Latest map[types.NamespacedName]kueueext.LatestForecast
}

// noETANote says where the run time of a job without a known ETA comes
// from.
func noETANote(sc *simulator.Scenario, o Options) string {
	if len(sc.RunTimes) == 0 {
		return fmt.Sprintf("without a known ETA: run time %s (--default-duration; no finished Workload to learn from)", simulator.Seconds(o.DefaultDuration))
	}
	return fmt.Sprintf("without a known ETA: run time drawn in each run from %d finished Workloads' runs and %d admitted ones' so far (Kaplan–Meier)", len(sc.RunTimes), len(sc.RunSoFar))
}

// plateauedNow: a curve whose plateau starts right after the snapshot
// (SimpleCurve's onset as a share of the remaining run).
const plateauedNow = 0.02

// Scenario builds the scenario of snapshot s. The notes say what was
// approximated or skipped, job by job counts.
func Scenario(s *clusterview.Snapshot, o Options) (*simulator.Scenario, []string, error) {
	gpu := o.GPUResource
	if gpu == "" {
		gpu = "nvidia.com/gpu"
	}
	if !(o.DefaultDuration > 0) {
		return nil, nil, fmt.Errorf("clustersnap: the default duration must be > 0")
	}
	sc := &simulator.Scenario{
		Name:        "cluster",
		Description: "snapshot of the cluster at " + o.Now.UTC().Format(time.RFC3339) + "; time 0 is the snapshot",
	}
	var notes []string
	known := map[string]bool{}
	for i := range s.ClusterQueues {
		q, note := queueOf(&s.ClusterQueues[i], gpu)
		if note != "" {
			notes = append(notes, note)
		}
		sc.Queues = append(sc.Queues, q)
		known[q.Name] = true
	}
	for _, lq := range s.LocalQueues {
		sc.LocalQueues = append(sc.LocalQueues, simulator.LocalQueue{Namespace: lq.Namespace, Name: lq.Name, ClusterQueue: string(lq.Spec.ClusterQueue)})
	}
	viewOf := s.ViewOf(gpu)
	running, pending, skipped, jobNotes := workloadJobs(s, o, viewOf, known)
	notes = append(notes, jobNotes...)
	noETA, noGPU, noQueue, inactive := skipped.noETA, skipped.noGPU, skipped.noQueue, skipped.inactive
	if skipped.ownCurve > 0 {
		notes = append(notes, fmt.Sprintf("%d jobs continue their own stored history, then their forecast", skipped.ownCurve))
	}
	// Kueue's queue order after priority: creation time, then name.
	for _, l := range [][]pendingJob{running, pending} {
		sort.SliceStable(l, func(a, b int) bool {
			if !l[a].created.Equal(l[b].created) {
				return l[a].created.Before(l[b].created)
			}
			return l[a].key < l[b].key
		})
	}
	for _, j := range running {
		sc.Jobs = append(sc.Jobs, j.spec)
	}
	sc.RunTimes, sc.RunSoFar = runTimes(s, o.Now)
	for _, j := range pending {
		j.spec.Arrival = 1
		sc.Jobs = append(sc.Jobs, j.spec)
	}
	switch {
	case o.Arrivals != nil:
		arr, err := traceArrivals(o, known)
		if err != nil {
			return nil, nil, err
		}
		sc.Jobs = append(sc.Jobs, arr...)
		notes = append(notes, fmt.Sprintf("arrivals: %d jobs of the trace's first %s arrive from 1 s on", len(arr), simulator.Seconds(o.Horizon)))
	case o.Horizon > 0:
		sc.Recent = recentArrivals(s, o, viewOf, known)
		notes = append(notes, fmt.Sprintf("arrivals: over the next %s, drawn in each run from the %d Workloads created in the %s before the snapshot, at their rate",
			sc.Recent.Window, len(sc.Recent.Jobs), sc.Recent.Window))
	}
	for _, c := range []struct {
		n    int
		what string
	}{
		{noETA, noETANote(sc, o)},
		{noGPU, "requesting no " + string(gpu) + ": left out"},
		{noQueue, "in no known ClusterQueue: left out"},
		{inactive, "deactivated: left out"},
	} {
		if c.n > 0 {
			notes = append(notes, fmt.Sprintf("%d Workloads %s", c.n, c.what))
		}
	}
	return sc, notes, nil
}

// queueOf maps a ClusterQueue to a simulator queue.
func queueOf(cq *kueue.ClusterQueue, gpu corev1.ResourceName) (simulator.Queue, string) {
	q := simulator.Queue{Name: cq.Name, GPUs: clusterview.QuotaGPUs(cq, gpu), Cohort: string(cq.Spec.CohortName)}
	limited, limit := false, 0
	for _, rg := range cq.Spec.ResourceGroups {
		for _, f := range rg.Flavors {
			for _, r := range f.Resources {
				if r.Name != gpu {
					continue
				}
				if r.BorrowingLimit == nil {
					// One flavor without a limit lets the queue borrow
					// without one.
					return withPreemption(q, cq)
				}
				limited = true
				limit = report.ClampGPUs(int64(limit) + int64(report.ClampGPUs(r.BorrowingLimit.Value())))
			}
		}
	}
	if limited && q.Cohort != "" {
		q.BorrowingLimit = &limit
	}
	return withPreemption(q, cq)
}

func withPreemption(q simulator.Queue, cq *kueue.ClusterQueue) (simulator.Queue, string) {
	// Kueue's default is Never (the simulator's is LowerPriority).
	p := cq.Spec.Preemption
	if p == nil || p.WithinClusterQueue == "" || p.WithinClusterQueue == kueue.PreemptionPolicyNever {
		q.WithinClusterQueue = simulator.PreemptNever
		return q, ""
	}
	switch p.WithinClusterQueue {
	case kueue.PreemptionPolicyLowerPriority:
		q.WithinClusterQueue = simulator.PreemptLowerPriority
	default:
		q.WithinClusterQueue = simulator.PreemptLowerPriority
		return q, fmt.Sprintf("ClusterQueue %s: withinClusterQueue %s simulated as LowerPriority", cq.Name, p.WithinClusterQueue)
	}
	return q, ""
}

// recentArrivals: the Workloads created in the window [from, now),
// finished ones included, with their GPUs, ClusterQueue and priority, as
// the sample each simulated future draws its arrivals from
// (simulator.RecentArrivals); a job's run time is its last run's
// (admission to finish) when it finished, else unknown. The window is
// the last Horizon, or, in a snapshot whose oldest Workload is younger,
// from that one on: the arrival rate is the one observed.
func recentArrivals(s *clusterview.Snapshot, o Options, viewOf func(*kueue.Workload) report.WorkloadView, known map[string]bool) *simulator.RecentArrivals {
	from := o.Now.Add(-time.Duration(o.Horizon * float64(time.Second)))
	oldest := o.Now
	for i := range s.Workloads {
		if c := s.Workloads[i].CreationTimestamp.Time; !c.IsZero() && c.Before(oldest) {
			oldest = c
		}
	}
	if oldest.After(from) {
		from = oldest
	}
	r := &simulator.RecentArrivals{Window: durationSeconds(o.Now.Sub(from).Seconds())}
	for i := range s.Workloads {
		wl := &s.Workloads[i]
		v := viewOf(wl)
		if v.CreatedAt.Before(from) || !v.CreatedAt.Before(o.Now) || v.GPUs == 0 || !known[v.ClusterQueue] {
			continue
		}
		js := simulator.JobSpec{Name: fmt.Sprintf("next/%s/%s", v.Namespace, v.Name), Queue: v.ClusterQueue, GPUs: v.GPUs,
			Priority: v.BasePriority, Duration: simulator.Seconds(o.DefaultDuration), UnknownDuration: true}
		if run := lastRun(wl); run > 0 {
			js.Duration, js.UnknownDuration = durationSeconds(run), false
		}
		r.Jobs = append(r.Jobs, js)
	}
	return r
}

// runTimes are the snapshot's observed run times, the distribution a job
// whose run time nothing forecasts draws from: finished Workloads' last
// runs, and how long the admitted ones have run so far (censored: they
// will run longer; simulator.Scenario.RunSoFar).
func runTimes(s *clusterview.Snapshot, now time.Time) (done, soFar []simulator.Seconds) {
	for i := range s.Workloads {
		wl := &s.Workloads[i]
		if run := lastRun(wl); run > 0 {
			done = append(done, durationSeconds(run))
		} else if ran := runningFor(wl, now); ran >= 1 {
			soFar = append(soFar, durationSeconds(ran))
		}
	}
	return done, soFar
}

// ranFor is runningFor as a job's JobSpec.RanFor (0: not running).
func ranFor(wl *kueue.Workload, now time.Time) simulator.Seconds {
	if ran := runningFor(wl, now); ran > 0 {
		return durationSeconds(ran)
	}
	return 0
}

// durationSeconds is a measured duration as the simulator takes one: whole
// seconds in [1, simulator.MaxSeconds] (a scenario rejects 0 and anything
// past its horizon).
func durationSeconds(v float64) simulator.Seconds {
	return simulator.Seconds(math.Min(math.Round(math.Max(1, v)), simulator.MaxSeconds))
}

// runningFor is how long an admitted, unfinished Workload has held its
// quota (0 when it does not).
func runningFor(wl *kueue.Workload, now time.Time) float64 {
	var since time.Time
	for _, c := range wl.Status.Conditions {
		switch {
		case c.Type == kueue.WorkloadFinished && c.Status == "True":
			return 0
		case c.Type == kueue.WorkloadQuotaReserved && c.Status == "True":
			since = c.LastTransitionTime.Time
		}
	}
	if since.IsZero() || !now.After(since) {
		return 0
	}
	return now.Sub(since).Seconds()
}

// lastRun is a finished Workload's time from its last quota reservation
// to its finish, in seconds (0 when not both known).
func lastRun(wl *kueue.Workload) float64 {
	var start, end time.Time
	for _, c := range wl.Status.Conditions {
		switch c.Type {
		case kueue.WorkloadQuotaReserved:
			start = c.LastTransitionTime.Time
		case kueue.WorkloadFinished:
			if c.Status == "True" {
				end = c.LastTransitionTime.Time
			}
		}
	}
	if start.IsZero() || end.IsZero() || !end.After(start) {
		return 0
	}
	return end.Sub(start).Seconds()
}

// traceArrivals: the jobs of o.Arrivals submitted within o.Horizon of the
// trace's first (all of them when Horizon is 0), 1 s + their offset after
// the snapshot, at priority 0.
func traceArrivals(o Options, known map[string]bool) ([]simulator.JobSpec, error) {
	if o.ArrivalsQueue != "" && !known[o.ArrivalsQueue] {
		return nil, fmt.Errorf("arrivals: no ClusterQueue %q", o.ArrivalsQueue)
	}
	var out []simulator.JobSpec
	for _, tj := range o.Arrivals.Jobs {
		if o.Horizon > 0 && tj.Arrival > o.Horizon {
			break // jobs are in arrival order
		}
		q := tj.Group
		if !known[q] {
			if o.ArrivalsQueue == "" {
				return nil, fmt.Errorf("arrivals: line %d: group %q is no ClusterQueue of the cluster (give --arrivals-queue)", tj.Line, tj.Group)
			}
			q = o.ArrivalsQueue
		}
		out = append(out, simulator.JobSpec{Name: fmt.Sprintf("arrival/%d/%s", tj.Line, tj.Name), Queue: q, GPUs: tj.GPUs,
			Duration: simulator.Seconds(tj.Duration), Arrival: simulator.Seconds(1 + tj.Arrival)})
	}
	return out, nil
}

// pendingJob is a Workload's job with its place in Kueue's queue order.
type pendingJob struct {
	spec    simulator.JobSpec
	created time.Time
	key     string
}

// JobName is a Workload's job name in the scenario: NS/JOB for a Workload
// owned by a job, NS/WORKLOAD otherwise.
func JobName(v report.WorkloadView) string {
	if v.Job != "" {
		return v.Namespace + "/" + v.Job
	}
	return v.Namespace + "/" + v.Name
}

// etaInterval is the forecast's 80 % ETA interval as the job's run-time
// interval (each seed draws within it), or none when it does not bracket
// the run time d within the simulator's range.
func etaInterval(d, lo, hi float64) (simulator.Seconds, simulator.Seconds) {
	lo, hi = math.Round(lo), math.Round(hi)
	if !(lo >= 1 && lo <= d && d <= hi && hi <= simulator.MaxSeconds) {
		return 0, 0
	}
	return simulator.Seconds(lo), simulator.Seconds(hi)
}

// skipCounts count the Workloads left out or approximated, for the notes.
type skipCounts struct{ noETA, noGPU, noQueue, inactive, ownCurve int }

// workloadJobs maps the snapshot's unfinished Workloads in known queues
// to jobs: admitted ones (running) and the others (pending), each with
// its forecast's ETA as run time where there is one.
func workloadJobs(s *clusterview.Snapshot, o Options, viewOf func(*kueue.Workload) report.WorkloadView, known map[string]bool) (running, pending []pendingJob, sk skipCounts, notes []string) {
	forecastFor := s.ForecastIndex()
	for i := range s.Workloads {
		wl := &s.Workloads[i]
		v := viewOf(wl)
		switch {
		case v.State == report.Finished:
			continue
		case v.State == report.Inactive:
			sk.inactive++
			continue
		case v.GPUs == 0:
			sk.noGPU++
			continue
		case !known[v.ClusterQueue]:
			sk.noQueue++
			continue
		}
		js := simulator.JobSpec{Name: JobName(v), Queue: v.ClusterQueue, GPUs: v.GPUs, Priority: v.BasePriority,
			Duration: simulator.Seconds(o.DefaultDuration)}
		if pf := forecastFor(wl); pf != nil {
			fut, err := jobForecast(pf, o)
			if err != nil {
				notes = append(notes, err.Error())
			}
			if eta := fut.eta; eta.Known && eta.Value > 0 && eta.Value <= simulator.MaxSeconds {
				js.Duration = durationSeconds(eta.Value)
				js.DurationLo, js.DurationHi = etaInterval(float64(js.Duration), eta.Lo, eta.Hi)
				if withOwnCurve(&js, fut) {
					sk.ownCurve++
				}
			} else {
				sk.noETA++
				js.UnknownDuration, js.RanFor = true, ranFor(wl, o.Now)
			}
			if fut.plateaued && js.Curve == nil {
				js.PlateauAt = plateauedNow
			}
		} else {
			sk.noETA++
			js.UnknownDuration, js.RanFor = true, ranFor(wl, o.Now)
		}
		if v.Boost != 0 {
			// The live planner's yield or protection holds in the
			// simulation (simulator.JobSpec.Boost).
			b := v.Boost
			js.Boost = &b
		}
		pj := pendingJob{spec: js, created: v.CreatedAt, key: v.Namespace + "/" + v.Name}
		if v.State == report.Running {
			running = append(running, pj)
		} else {
			pending = append(pending, pj)
		}
	}
	return running, pending, sk, notes
}

// jobFuture is what a tracked job's forecast says of its future.
type jobFuture struct {
	eta       forecast.Estimate
	plateaued bool
	// own is the job's curve from its stored history on (ownCurve); nil
	// when the forecast came from Options.Latest or the history cannot be
	// placed on the run.
	own *ownCurve
}

// jobForecast is the ETA and plateau call of the job pf records: the
// controller's latest forecast when Options.Latest has it (its ETA less
// the time since), else a forecast of the stored history as of o.Now,
// with the job's own curve.
func jobForecast(pf *v1alpha1.ProgressForecast, o Options) (jobFuture, error) {
	if l, ok := o.Latest[types.NamespacedName{Namespace: pf.Namespace, Name: pf.Name}]; ok && l.ForecastUID == pf.UID {
		eta := l.ETA
		if since := o.Now.Sub(l.At).Seconds(); eta.Known && since > 0 {
			eta.Value, eta.Lo, eta.Hi = eta.Value-since, math.Max(eta.Lo-since, 0), math.Max(eta.Hi-since, 0)
		}
		return jobFuture{eta: eta, plateaued: l.Plateaued}, nil
	}
	fc, h, _, err := clusterview.ForecastOf(pf, o.Now)
	if fc == nil {
		return jobFuture{}, err
	}
	return jobFuture{eta: fc.ETA, plateaued: fc.Plateaued, own: ownCurveOf(h, fc)}, err
}
