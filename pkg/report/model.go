// Package report builds the planner's transparency and capacity report
// from plain inputs (per job: forecast, decision, queue, GPUs, admission;
// per ClusterQueue: quota) and renders it as a table, Markdown, JSON or one
// self-contained HTML page with SVG charts. It is pure: `planner report`
// (live or from history files), the live page of `planner run --ui-addr`
// and `planner explain` feed it; nothing here talks to Kubernetes.
package report

import (
	"cmp"
	"math"
	"slices"
	"time"

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
}

// State is a Workload's state as the report shows it.
type State string

// States.
const (
	Running  State = "running"
	Waiting  State = "waiting"
	Finished State = "finished"
	Inactive State = "inactive"
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
	Namespace         string   `json:"namespace,omitempty"`
	Name              string   `json:"name"`
	Queue             string   `json:"queue,omitempty"`
	GPUs              int      `json:"gpus"`
	State             State    `json:"state"`
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

// effective is base + boost, saturating like Kueue's int32 priority.
func effective(base, boost int32) int32 {
	s := int64(base) + int64(boost)
	return int32(max(math.MinInt32, min(math.MaxInt32, s)))
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
	slices.SortStableFunc(jobs, func(a, b JobInput) int {
		return cmp.Or(cmp.Compare(a.Queue, b.Queue), cmp.Compare(stateRank(a.State), stateRank(b.State)),
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
	}
	return 3
}

func jobRow(j *JobInput) (JobRow, *jobChart) {
	row := JobRow{Namespace: j.Namespace, Name: j.Name, Queue: j.Queue, GPUs: j.GPUs, State: j.State,
		BasePriority: j.BasePriority, Boost: j.Boost, EffectivePriority: effective(j.BasePriority, j.Boost),
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
	row.Progress = f.Progress
	if f.ETA.Known {
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
	return row, newJobChart(row, j)
}

func queueRow(name string, quota int, jobs []JobInput, sizes []int, prio int32, iv float64) QueueRow {
	q := QueueRow{Name: name, QuotaGPUs: quota}
	var running []RunningJob
	for _, j := range jobs {
		if j.Queue != name {
			continue
		}
		switch j.State {
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
		if j.Queue == queue && j.State == Waiting && effective(j.BasePriority, j.Boost) >= prio {
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
