// Package report builds the planner's transparency and capacity report
// from plain inputs (per job: forecast, decision, queue, GPUs, admission;
// per ClusterQueue: quota) and renders it as a table, Markdown, JSON or one
// self-contained HTML page with SVG charts. It is pure: `planner report`
// (live or from history files), the live page of `planner run --ui-addr`
// and `planner explain` feed it; nothing here talks to Kubernetes.
package report

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/progress-planner/planner/internal/humanize"
	"github.com/progress-planner/planner/internal/queueorder"
	"github.com/progress-planner/planner/pkg/forecast"
	"github.com/progress-planner/planner/pkg/preempt"
	"github.com/progress-planner/planner/pkg/progress"
)

// Horizons are the capacity forecast's horizons: 1 h, 6 h and 24 h.
var Horizons = []float64{3600, 6 * 3600, 24 * 3600}

// Input is everything a report is built from.
type Input struct {
	Title  string
	Source string // where the data came from, for the reader
	// GeneratedAt is printed as is (tests fix it).
	GeneratedAt time.Time
	// Interval is the central coverage of every interval (forecast
	// settings; 0.8 by default).
	Interval float64
	Jobs     []JobInput
	Queues   []QueueInput
	// AdmitSizes are the job sizes (GPUs) "submitted now" for which the
	// admission time is estimated per queue; Priority is their priority.
	AdmitSizes []int
	Priority   int32
	// RefreshSeconds, when positive, makes the HTML page reload itself
	// (the live page).
	RefreshSeconds int
}

// JobInput is one Workload (a TrainJob's, or any other in a reported
// queue: those have no forecast but hold GPUs).
type JobInput struct {
	Namespace, Name string
	Queue           string // ClusterQueue
	GPUs            int
	State           State
	BasePriority    int32
	Boost           int32 // the priority-boost annotation in effect
	// CreatedAt orders waiting Workloads (Kueue's queue order after
	// priority); any time base, only compared.
	CreatedAt float64
	// Forecast is nil for a Workload the planner does not forecast.
	Forecast *forecast.Forecast
	Decision *preempt.Decision
	// Verdict and Reason override the decision's (e.g. the
	// ProgressForecast status fields when the decision is not stored).
	Verdict, Reason string
	// History, when set, is drawn in the job's chart.
	History *progress.History
	// Outcome is how the run ended when it is known to have ended as of
	// the forecast (a history file read to its end: its header's
	// outcome.status, e.g. completed, target_reached, aborted, unknown);
	// "" while it runs or when unknown.
	Outcome string
}

// State is a Workload's state as the report shows it.
type State string

// States.
const (
	Running  State = "running"
	Waiting  State = "waiting"
	Finished State = "finished"
	Inactive State = "inactive"
	// Stopped: the job's run ended before its planned end (a history
	// whose outcome says so).
	Stopped State = "stopped"
)

// QueueInput is one ClusterQueue: its GPU quota (nominal, the flavors'
// GPU resource summed).
type QueueInput struct {
	Name      string
	QuotaGPUs int
}

// Range is a value with the central interval around it.
type Range struct {
	Value float64 `json:"value"`
	Lo    float64 `json:"lo"`
	Hi    float64 `json:"hi"`
}

// Report is the built report (the JSON output).
type Report struct {
	Title       string     `json:"title"`
	Source      string     `json:"source,omitempty"`
	GeneratedAt time.Time  `json:"generatedAt"`
	Interval    float64    `json:"interval"`
	Jobs        []JobRow   `json:"jobs"`
	Queues      []QueueRow `json:"queues"`
	Refresh     int        `json:"-"`
	jobCharts   []jobChart
}

// JobRow is one job of the report. Durations are seconds, shares
// fractions, metric values in the metric's units; absent means unknown.
type JobRow struct {
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name"`
	Queue     string `json:"queue,omitempty"`
	GPUs      int    `json:"gpus"`
	State     State  `json:"state"`
	// StateNote says why the state is what it is when the history says
	// more than the Workload: how an ended run ended, or how long ago a
	// running job last reported when it is late.
	StateNote         string   `json:"stateNote,omitempty"`
	BasePriority      int32    `json:"basePriority"`
	Boost             int32    `json:"boost"`
	EffectivePriority int32    `json:"effectivePriority"`
	Progress          *float64 `json:"progress,omitempty"`
	ETA               *Range   `json:"eta,omitempty"`
	Metric            string   `json:"metric,omitempty"`
	Current           *float64 `json:"current,omitempty"`
	Predicted         *Range   `json:"predicted,omitempty"`
	PlateauProb       *float64 `json:"plateauProbability,omitempty"`
	Plateaued         bool     `json:"plateaued,omitempty"`
	Verdict           string   `json:"verdict,omitempty"`
	Reason            string   `json:"reason,omitempty"`
	// Admission: for a waiting job, when it is expected to be admitted
	// (SetAdmissions; the live page).
	Admission *AdmissionEstimate `json:"admission,omitempty"`
}

// SetAdmissions attaches admission estimates to the waiting jobs (keyed
// by NAMESPACE/NAME, as admission.ForWaiting returns them); a waiting job
// without a state note shows the estimate in its state cell.
func (r *Report) SetAdmissions(m map[string]*AdmissionEstimate) {
	for i := range r.Jobs {
		j := &r.Jobs[i]
		a := m[j.Key()]
		if j.State != Waiting || a == nil {
			continue
		}
		j.Admission = a
		if j.StateNote == "" {
			j.StateNote = a.Short()
		}
	}
}

// Key is NAMESPACE/NAME (NAME without a namespace).
func (r JobRow) Key() string {
	if r.Namespace == "" {
		return r.Name
	}
	return r.Namespace + "/" + r.Name
}

// QueueRow is one ClusterQueue's capacity forecast.
type QueueRow struct {
	Name        string `json:"name"`
	QuotaGPUs   int    `json:"quotaGPUs"`
	UsedGPUs    int    `json:"usedGPUs"`
	FreeGPUs    int    `json:"freeGPUs"`
	Running     int    `json:"running"`
	Waiting     int    `json:"waiting"`
	WaitingGPUs int    `json:"waitingGPUs"`
	// UnknownETA counts running jobs without an ETA (never counted as
	// freeing GPUs).
	UnknownETA int         `json:"unknownETA"`
	Freed      []Freed     `json:"freed"`
	Admission  []Admission `json:"admission"`
	timeline   timeline
}

// Build builds the report. Jobs are sorted by queue, state (running
// first), then name; queues by name (every queue a job names is reported,
// quota 0 when unknown).
func Build(in Input) *Report {
	iv := in.Interval
	if !(iv > 0 && iv < 1) {
		iv = 0.8
	}
	r := &Report{Title: in.Title, Source: in.Source, GeneratedAt: in.GeneratedAt, Interval: iv, Refresh: in.RefreshSeconds}
	if r.Title == "" {
		r.Title = "Progress Planner report"
	}
	jobs := slices.Clone(in.Jobs)
	for i := range jobs {
		jobs[i].GPUs = ClampGPUs(int64(jobs[i].GPUs))
	}
	// Ended runs sort after the running ones, as finished Workloads do.
	rank := func(j JobInput) int { return stateRank(RunStateOf(j.State, j.Forecast, j.Outcome).State) }
	slices.SortStableFunc(jobs, func(a, b JobInput) int {
		return cmp.Or(cmp.Compare(a.Queue, b.Queue), cmp.Compare(rank(a), rank(b)),
			cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	})
	for i := range jobs {
		row, ch := jobRow(&jobs[i])
		r.Jobs = append(r.Jobs, row)
		if ch != nil {
			r.jobCharts = append(r.jobCharts, *ch)
		}
	}
	quota := map[string]int{}
	var names []string
	for _, q := range in.Queues {
		if _, ok := quota[q.Name]; !ok {
			names = append(names, q.Name)
		}
		quota[q.Name] = ClampGPUs(int64(q.QuotaGPUs))
	}
	for _, j := range jobs {
		if _, ok := quota[j.Queue]; !ok && j.Queue != "" {
			quota[j.Queue] = 0
			names = append(names, j.Queue)
		}
	}
	slices.Sort(names)
	sizes := in.AdmitSizes
	if len(sizes) == 0 {
		sizes = []int{1, 8}
	}
	for _, name := range names {
		r.Queues = append(r.Queues, queueRow(name, quota[name], jobs, sizes, in.Priority, iv))
	}
	return r
}

func stateRank(s State) int {
	switch s {
	case Running:
		return 0
	case Waiting:
		return 1
	case Inactive:
		return 2
	case Finished, Stopped:
		return 3
	}
	return 4
}

func jobRow(j *JobInput) (JobRow, *jobChart) {
	row := JobRow{Namespace: j.Namespace, Name: j.Name, Queue: j.Queue, GPUs: j.GPUs, State: j.State,
		BasePriority: j.BasePriority, Boost: j.Boost, EffectivePriority: queueorder.EffectivePriority(j.BasePriority, j.Boost),
		Verdict: j.Verdict, Reason: j.Reason}
	if d := j.Decision; d != nil {
		if row.Verdict == "" {
			row.Verdict = string(d.Verdict)
		}
		if row.Reason == "" {
			row.Reason = d.Reason
		}
	}
	f := j.Forecast
	if f == nil {
		return row, nil
	}
	rs := RunStateOf(j.State, f, j.Outcome)
	row.State, row.StateNote = rs.State, rs.Note
	if rs.Ended {
		// The policy judges running jobs: Warming, Progressing, NearDone
		// or Hung would contradict an ended run. What the forecast saw in
		// the curve (a plateau, a divergence) stays true of it.
		switch v := preempt.Verdict(row.Verdict); v {
		case preempt.Plateaued, preempt.Diverging, preempt.Untrusted:
			row.Reason = rs.Note + "; the curve: " + curveEvidence(v, f, row.Reason)
		default:
			row.Verdict, row.Reason = "", rs.Note
		}
	}
	row.Progress = f.Progress
	// A stopped run has no time left to forecast.
	if f.ETA.Known && rs.State != Stopped {
		row.ETA = &Range{Value: f.ETA.Value, Lo: f.ETA.Lo, Hi: f.ETA.Hi}
	}
	row.Metric = f.Objective.Metric
	row.Current = f.Current
	if f.PredictedFinal.Known {
		row.Predicted = &Range{Value: f.PredictedFinal.Value, Lo: f.PredictedFinal.Lo, Hi: f.PredictedFinal.Hi}
	}
	if f.Reports > 0 {
		p := f.PlateauProbability
		row.PlateauProb = &p
	}
	row.Plateaued = f.Plateaued
	if f.Reports == 0 {
		return row, nil // nothing to draw yet
	}
	return row, newJobChart(row, j, rs.Ended)
}

// curveEvidence is the forecast's own evidence for a verdict kept on an
// ended run (not the policy's reason, which speaks of boosts and
// yielding).
func curveEvidence(v preempt.Verdict, f *forecast.Forecast, reason string) string {
	switch {
	case v == preempt.Plateaued && f.PlateauReason != "":
		return "plateaued (" + f.PlateauReason + ")"
	case v == preempt.Diverging && f.DivergenceReason != "":
		return "diverging (" + f.DivergenceReason + ")"
	case v == preempt.Untrusted && len(f.Integrity.Issues) > 0:
		return "untrusted progress (" + strings.Join(f.Integrity.Issues, "; ") + ")"
	}
	return reason
}

// RunState is what a job's history says about its run, beside the state
// of its Workload.
type RunState struct {
	// State is Finished or Stopped when the run has ended, else the
	// Workload's state.
	State State
	// Note says how the run ended, or how long ago a running job last
	// reported when it is late; "" when there is nothing to add.
	Note string
	// Ended: the run is over, so the policy's verdict about a running job
	// no longer applies and there is nothing left to forecast.
	Ended bool
}

// outcomeText says a history file's outcome.status in words.
func outcomeText(outcome string) string {
	switch outcome {
	case "completed":
		return "the run completed"
	case "target_reached":
		return "the run reached its target"
	case "aborted":
		return "the run was aborted"
	}
	return "the run ended (outcome " + outcome + ")"
}

// lateFactor: a running job is late when it has not reported for this
// many of its usual intervals (and at least lateMin seconds).
const (
	lateFactor = 3
	lateMin    = 60
)

// RunStateOf derives the run's state from the Workload's state, the
// forecast (as of f.Now) and the outcome the history's source reports
// (JobInput.Outcome; "" when the run is not known to have ended):
//
//   - finished: the outcome says completed or target_reached, or the
//     planner's own progress (the step counter over its total) reached
//     100 % — unless the progress is untrusted (integrity findings: a
//     forged 100 % must not end a job's scrutiny);
//   - stopped: the run ended short of that (aborted, or any other
//     outcome);
//   - otherwise the Workload's state, with the last report's age when a
//     running job is late.
func RunStateOf(state State, f *forecast.Forecast, outcome string) RunState {
	rs := RunState{State: state}
	if f == nil || f.Reports == 0 || state == Waiting || state == Inactive {
		return rs
	}
	trusted := len(f.Integrity.Issues) == 0
	done := f.Progress != nil && *f.Progress >= 1-1e-9
	progress := "progress " + fmtOptPct(f.Progress)
	if f.Step != nil && f.TotalSteps != nil {
		progress += fmt.Sprintf(" (step %s of %s)", humanize.Number(*f.Step), humanize.Number(*f.TotalSteps))
	}
	switch outcome {
	case "completed", "target_reached":
		if trusted {
			rs.State, rs.Ended = Finished, true
			rs.Note = "finished: " + outcomeText(outcome)
			if f.Progress != nil {
				rs.Note += ", " + progress
			}
			return rs
		}
	case "":
	default:
		if done && trusted {
			break // the counter reached its total: finished, below
		}
		rs.State, rs.Ended = Stopped, true
		rs.Note = "stopped: " + outcomeText(outcome) + " at " + progress
		return rs
	}
	if done && trusted {
		rs.State, rs.Ended = Finished, true
		rs.Note = "finished: " + progress
		if f.ETA.Known && f.ETA.Value == 0 {
			rs.Note += ", ETA 0s"
		}
		return rs
	}
	if state == Running && f.LastReport != nil {
		age := f.Now - *f.LastReport
		late := float64(lateMin)
		if f.ReportInterval != nil {
			late = math.Max(late, lateFactor**f.ReportInterval)
		}
		if age > late {
			rs.Note = "last report " + humanize.Duration(age) + " ago"
		}
	}
	return rs
}

func queueRow(name string, quota int, jobs []JobInput, sizes []int, prio int32, iv float64) QueueRow {
	q := QueueRow{Name: name, QuotaGPUs: quota}
	var running []RunningJob
	for _, j := range jobs {
		if j.Queue != name {
			continue
		}
		state := j.State
		if j.Outcome != "" && RunStateOf(j.State, j.Forecast, j.Outcome).Ended {
			// A history known to have ended (a file read to its end)
			// holds no GPUs. A live Workload keeps its quota until Kueue
			// finishes it, whatever its progress says.
			state = Finished
		}
		switch state {
		case Running:
			q.Running++
			q.UsedGPUs += j.GPUs
			rj := RunningJob{GPUs: j.GPUs}
			if j.Forecast != nil {
				rj.ETA = j.Forecast.ETA
			}
			if !rj.ETA.Known {
				q.UnknownETA++
			}
			running = append(running, rj)
		case Waiting:
			q.Waiting++
			q.WaitingGPUs += j.GPUs
		}
	}
	q.FreeGPUs = max(quota-q.UsedGPUs, 0)
	for _, h := range Horizons {
		q.Freed = append(q.Freed, FreedWithin(running, h, iv))
	}
	grid := AdmissionSearch()
	for _, n := range sizes {
		q.Admission = append(q.Admission, AdmitWhen(quota, q.FreeGPUs, aheadOf(name, jobs, prio), n, running, iv, grid))
	}
	q.timeline = newTimeline(q.FreeGPUs, quota, q.WaitingGPUs, running, iv)
	return q
}

// aheadOf is the GPUs of the queue's waiting Workloads a new submission at
// priority prio would be ordered behind: effective priority >= prio (the
// new one is the youngest, so ties go first).
func aheadOf(queue string, jobs []JobInput, prio int32) int {
	n := 0
	for _, j := range jobs {
		if j.Queue == queue && j.State == Waiting && queueorder.EffectivePriority(j.BasePriority, j.Boost) >= prio {
			n += j.GPUs
		}
	}
	return n
}

// timeline is a queue's forecast of free GPUs over the next 24 h.
type timeline struct {
	Hours          []float64
	Median, Lo, Hi []float64
	Quota, Waiting float64
}

func newTimeline(free, quota, waiting int, running []RunningJob, iv float64) timeline {
	tl := timeline{Quota: float64(quota), Waiting: float64(waiting)}
	a := (1 - iv) / 2
	for t := 0.0; t <= 24*3600; t += 900 {
		d := FreedDist(running, t, iv)
		tl.Hours = append(tl.Hours, t/3600)
		tl.Median = append(tl.Median, float64(free+d.Quantile(0.5)))
		tl.Lo = append(tl.Lo, float64(free+d.Quantile(a)))
		tl.Hi = append(tl.Hi, float64(free+d.Quantile(1-a)))
	}
	return tl
}
