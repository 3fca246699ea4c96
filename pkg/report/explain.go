package report

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/progress-planner/planner/internal/humanize"
	"github.com/progress-planner/planner/internal/queueorder"
	"github.com/progress-planner/planner/internal/textsafe"
)

// WorkloadView is one Kueue Workload as `planner explain` sees it.
type WorkloadView struct {
	Namespace, Name string
	// Job is the owning TrainJob's name ("" for other Workloads).
	Job          string
	ClusterQueue string
	LocalQueue   string
	GPUs         int
	BasePriority int32
	Boost        int32
	State        State
	// CreatedAt is Kueue's queue-order time after priority (the creation
	// timestamp; a preempted Workload keeps it).
	CreatedAt time.Time
}

// Effective is base priority + boost.
func (w WorkloadView) Effective() int32 { return queueorder.EffectivePriority(w.BasePriority, w.Boost) }

// Key is NAMESPACE/NAME.
func (w WorkloadView) Key() string { return w.Namespace + "/" + w.Name }

// PlannerView is the planner's record of the job (its ProgressForecast).
type PlannerView struct {
	Found               bool
	Verdict, Reason     string
	Mode, AdviseOnly    string
	Boost, AdvisedBoost int32
	// Evidence are the forecast's numbers behind the verdict, one line
	// each (progress, ETA, metric, plateau, integrity findings, notes).
	Evidence []string
}

// ExplainInput is what Explain needs: the Workload, every Workload of its
// ClusterQueue, the queue's GPU quota and preemption policy, and the
// planner's record.
type ExplainInput struct {
	Target WorkloadView
	Queue  []WorkloadView
	// QuotaGPUs is the ClusterQueue's nominal GPU quota (-1 unknown).
	QuotaGPUs int
	// WithinClusterQueue is the ClusterQueue's preemption policy
	// ("LowerPriority", "Never", "LowerOrNewerEqualPriority"; "" = Never,
	// Kueue's default).
	WithinClusterQueue string
	Planner            PlannerView
}

// Peer is another Workload named in an explanation.
type Peer struct {
	Name      string `json:"name"`
	GPUs      int    `json:"gpus"`
	Effective int32  `json:"effectivePriority"`
}

// Explanation answers "why is this job where it is".
type Explanation struct {
	Workload          string `json:"workload"`
	TrainJob          string `json:"trainJob,omitempty"`
	ClusterQueue      string `json:"clusterQueue"`
	LocalQueue        string `json:"localQueue,omitempty"`
	State             State  `json:"state"`
	GPUs              int    `json:"gpus"`
	BasePriority      int32  `json:"basePriority"`
	Boost             int32  `json:"boost"`
	EffectivePriority int32  `json:"effectivePriority"`
	// Position is 1-based among the queue's waiting Workloads (0 when not
	// waiting); Ahead names the ones ordered before it.
	Position   int    `json:"position,omitempty"`
	Waiting    int    `json:"waiting"`
	Ahead      []Peer `json:"ahead,omitempty"`
	QuotaGPUs  int    `json:"quotaGPUs"`
	UsedGPUs   int    `json:"usedGPUs"`
	FreeGPUs   int    `json:"freeGPUs"`
	Preemption string `json:"withinClusterQueue"`
	// For a waiting Workload: admitted Workloads it could preempt (lower
	// effective priority, when the queue preempts) and those it cannot.
	CouldPreempt  []Peer `json:"couldPreempt,omitempty"`
	ProtectedFrom []Peer `json:"protectedFrom,omitempty"`
	// For a running Workload: waiting Workloads that could preempt it and
	// those that cannot.
	PreemptibleBy []Peer `json:"preemptibleBy,omitempty"`
	SafeFrom      []Peer `json:"safeFrom,omitempty"`

	PlannerFound bool     `json:"plannerFound"`
	Verdict      string   `json:"verdict,omitempty"`
	Reason       string   `json:"reason,omitempty"`
	Mode         string   `json:"mode,omitempty"`
	AdviseOnly   string   `json:"adviseOnly,omitempty"`
	AdvisedBoost int32    `json:"advisedBoost"`
	Evidence     []string `json:"evidence,omitempty"`
	// Admission is the estimate of when a waiting Workload is admitted
	// (nil when not waiting or not estimated).
	Admission *AdmissionEstimate `json:"admission,omitempty"`
	// Summary is the one-line answer.
	Summary string `json:"summary"`
}

// AdmissionEstimate is when a waiting Workload is expected to be
// admitted, from forward simulations of the cluster (pkg/admission).
// Times are seconds from now; nil: not within the simulated future in
// that share of the runs.
type AdmissionEstimate struct {
	Runs     int      `json:"runs"`
	Admitted int      `json:"admitted"`
	Policy   string   `json:"policy"`
	P10      *float64 `json:"p10Seconds"`
	Median   *float64 `json:"medianSeconds"`
	P90      *float64 `json:"p90Seconds"`
	// FuturesP10 and FuturesP90 are the futures' own 10 %–90 % range;
	// P10 and P90 are that range calibrated on the outcomes of
	// CalibratedOn earlier estimates (pkg/admission; 0: not calibrated,
	// the same range).
	FuturesP10   *float64 `json:"futuresP10Seconds,omitempty"`
	FuturesP90   *float64 `json:"futuresP90Seconds,omitempty"`
	CalibratedOn int      `json:"calibratedOn,omitempty"`
	// Causes: in how many runs each event freed the GPUs it was admitted
	// into, most frequent first.
	Causes []CauseCount `json:"causes,omitempty"`
	// Note says why there is no estimate, when there is none.
	Note string `json:"note,omitempty"`
}

// CauseCount is one cause of an admission and its number of runs.
type CauseCount struct {
	Cause string `json:"cause"`
	Runs  int    `json:"runs"`
}

// Short is the estimate in a few words, for a table cell: "starts in
// 1h05m, 80 %: 40m–2h10m".
func (a *AdmissionEstimate) Short() string {
	switch {
	case a == nil || a.Note != "":
		return ""
	case a.Median == nil:
		return "not expected to start within the simulated future"
	}
	hi := "later"
	if a.P90 != nil {
		hi = humanize.Duration(*a.P90)
	}
	lo := humanize.Duration(*a.Median)
	if a.P10 != nil {
		lo = humanize.Duration(*a.P10)
	}
	return fmt.Sprintf("starts in %s, 80 %%: %s–%s", humanize.Duration(*a.Median), lo, hi)
}

// Text is the estimate in one line, for explain.
func (a *AdmissionEstimate) Text() string {
	if a == nil {
		return ""
	}
	if a.Note != "" {
		return a.Note
	}
	when := func(p *float64) string {
		if p == nil {
			return "not within the simulated future"
		}
		return humanize.Duration(*p)
	}
	var b strings.Builder
	if a.Median == nil {
		fmt.Fprintf(&b, "not expected within the simulated future (admitted in %d of %d runs)", a.Admitted, a.Runs)
	} else {
		fmt.Fprintf(&b, "expected in %s (80 %%: %s to %s)", humanize.Duration(*a.Median), when(a.P10), when(a.P90))
	}
	fmt.Fprintf(&b, "; %d simulated futures under the %s policy", a.Runs, a.Policy)
	if a.CalibratedOn > 0 {
		fmt.Fprintf(&b, ", the range calibrated on how %d earlier estimates turned out", a.CalibratedOn)
	}
	if len(a.Causes) > 0 {
		parts := make([]string, len(a.Causes))
		for i, c := range a.Causes {
			parts[i] = fmt.Sprintf("%s (%d)", c.Cause, c.Runs)
		}
		fmt.Fprintf(&b, "; GPUs freed by: %s", strings.Join(parts, ", "))
	}
	return b.String()
}

// queueOrder is Kueue's order of pending Workloads (queueorder.Compare).
func queueOrder(a, b WorkloadView) int {
	return queueorder.Compare(a.Effective(), b.Effective(), a.CreatedAt.UnixNano(), b.CreatedAt.UnixNano(), a.Key(), b.Key())
}

func peer(w WorkloadView) Peer { return Peer{Name: w.Key(), GPUs: w.GPUs, Effective: w.Effective()} }

// preempts reports whether a Workload of priority p may preempt an
// admitted one of priority q under the queue's policy.
func preempts(policy string, p, q int32) bool {
	switch policy {
	case "LowerPriority", "LowerOrNewerEqualPriority":
		return q < p
	}
	return false
}

// Explain is pure: it answers from its input alone.
func Explain(in ExplainInput) Explanation {
	t := in.Target
	pol := in.WithinClusterQueue
	if pol == "" {
		pol = "Never"
	}
	e := Explanation{Workload: t.Key(), TrainJob: t.Job, ClusterQueue: t.ClusterQueue, LocalQueue: t.LocalQueue, State: t.State,
		GPUs: t.GPUs, BasePriority: t.BasePriority, Boost: t.Boost, EffectivePriority: t.Effective(), QuotaGPUs: in.QuotaGPUs,
		Preemption: pol, PlannerFound: in.Planner.Found, Verdict: in.Planner.Verdict, Reason: in.Planner.Reason,
		Mode: in.Planner.Mode, AdviseOnly: in.Planner.AdviseOnly, AdvisedBoost: in.Planner.AdvisedBoost, Evidence: in.Planner.Evidence}
	var waiting, running []WorkloadView
	for _, w := range in.Queue {
		switch w.State {
		case Waiting:
			waiting = append(waiting, w)
		case Running:
			running = append(running, w)
			e.UsedGPUs += w.GPUs
		}
	}
	e.Waiting = len(waiting)
	if in.QuotaGPUs >= 0 {
		e.FreeGPUs = max(in.QuotaGPUs-e.UsedGPUs, 0)
	}
	slices.SortStableFunc(waiting, queueOrder)
	slices.SortStableFunc(running, func(a, b WorkloadView) int {
		return cmp.Or(cmp.Compare(a.Effective(), b.Effective()), cmp.Compare(a.Key(), b.Key()))
	})
	me := t.Effective()
	switch t.State {
	case Waiting:
		for i, w := range waiting {
			if w.Key() == t.Key() {
				e.Position = i + 1
				break
			}
			e.Ahead = append(e.Ahead, peer(w))
		}
		for _, r := range running {
			if preempts(pol, me, r.Effective()) {
				e.CouldPreempt = append(e.CouldPreempt, peer(r))
			} else {
				e.ProtectedFrom = append(e.ProtectedFrom, peer(r))
			}
		}
	case Running:
		for _, w := range waiting {
			if preempts(pol, w.Effective(), me) {
				e.PreemptibleBy = append(e.PreemptibleBy, peer(w))
			} else {
				e.SafeFrom = append(e.SafeFrom, peer(w))
			}
		}
	}
	e.Summary = summary(&e)
	return e
}

func gpusOf(ps []Peer) int {
	n := 0
	for _, p := range ps {
		n += p.GPUs
	}
	return n
}

func summary(e *Explanation) string {
	var b strings.Builder
	switch e.State {
	case Waiting:
		fmt.Fprintf(&b, "waiting in ClusterQueue %s at position %d of %d (effective priority %d = base %d, boost %s)",
			e.ClusterQueue, e.Position, e.Waiting, e.EffectivePriority, e.BasePriority, humanize.Boost(e.Boost))
		switch {
		case e.QuotaGPUs >= 0 && e.GPUs > e.QuotaGPUs:
			fmt.Fprintf(&b, "; it needs %d GPUs, more than the queue's quota of %d: it can never be admitted there", e.GPUs, e.QuotaGPUs)
		case len(e.Ahead) > 0:
			fmt.Fprintf(&b, "; %d Workload(s) with %d GPUs are ordered before it", len(e.Ahead), gpusOf(e.Ahead))
		case e.QuotaGPUs >= 0 && e.FreeGPUs >= e.GPUs:
			fmt.Fprintf(&b, "; %d GPUs are free, enough for its %d: Kueue should admit it on its next pass", e.FreeGPUs, e.GPUs)
		case e.QuotaGPUs >= 0 && e.FreeGPUs+gpusOf(e.CouldPreempt) >= e.GPUs:
			fmt.Fprintf(&b, "; it needs %d GPUs, %d are free, and it may preempt %d lower-priority Workload(s)", e.GPUs, e.FreeGPUs, len(e.CouldPreempt))
		default:
			fmt.Fprintf(&b, "; it needs %d GPUs, %d are free, and the running Workloads holding the rest have an effective priority it cannot preempt (withinClusterQueue %s)",
				e.GPUs, e.FreeGPUs, e.Preemption)
		}
	case Running:
		fmt.Fprintf(&b, "running in ClusterQueue %s with %d GPUs (effective priority %d = base %d, boost %s)",
			e.ClusterQueue, e.GPUs, e.EffectivePriority, e.BasePriority, humanize.Boost(e.Boost))
		if len(e.PreemptibleBy) > 0 {
			fmt.Fprintf(&b, "; %d waiting Workload(s) have a higher effective priority and may preempt it", len(e.PreemptibleBy))
		} else if len(e.SafeFrom) > 0 {
			fmt.Fprintf(&b, "; none of the %d waiting Workload(s) can preempt it", len(e.SafeFrom))
		}
	case Finished:
		b.WriteString("finished")
	case Inactive:
		b.WriteString("deactivated (spec.active=false): Kueue keeps it out until its owner reactivates it")
	default:
		b.WriteString("state unknown")
	}
	if e.PlannerFound {
		fmt.Fprintf(&b, ". Planner: %s, boost %s", orDash(e.Verdict), humanize.Boost(e.Boost))
		if e.AdvisedBoost != e.Boost {
			fmt.Fprintf(&b, " (advised %s, mode %s)", humanize.Boost(e.AdvisedBoost), e.Mode)
		}
	} else {
		b.WriteString(". The planner has no record of it")
	}
	return b.String()
}

// WriteExplanation prints e as text (format "table"/"text") or JSON.
func WriteExplanation(w io.Writer, e Explanation, format string) error {
	switch format {
	case "json":
		b, err := json.MarshalIndent(e, "", "  ")
		if err != nil {
			return fmt.Errorf("encode explanation: %w", err)
		}
		_, err = fmt.Fprintf(w, "%s\n", b)
		return err
	case "table", "text", "":
	default:
		return fmt.Errorf("unknown format %q: want table or json", format)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Workload:       %s", e.Workload)
	if e.TrainJob != "" {
		fmt.Fprintf(&b, " (TrainJob %s)", e.TrainJob)
	}
	fmt.Fprintf(&b, "\nClusterQueue:   %s", orDash(e.ClusterQueue))
	if e.LocalQueue != "" {
		fmt.Fprintf(&b, " (LocalQueue %s)", e.LocalQueue)
	}
	quota := "unknown"
	if e.QuotaGPUs >= 0 {
		quota = fmt.Sprintf("%d GPUs, %d used, %d free", e.QuotaGPUs, e.UsedGPUs, e.FreeGPUs)
	}
	fmt.Fprintf(&b, "\nQuota:          %s; withinClusterQueue %s\n", quota, e.Preemption)
	fmt.Fprintf(&b, "State:          %s, %d GPUs\n", e.State, e.GPUs)
	fmt.Fprintf(&b, "Priority:       base %d, boost %s, effective %d\n", e.BasePriority, humanize.Boost(e.Boost), e.EffectivePriority)
	if e.State == Waiting {
		fmt.Fprintf(&b, "Position:       %d of %d waiting\n", e.Position, e.Waiting)
		writePeers(&b, "Ahead of it", e.Ahead)
		writePeers(&b, "Could preempt", e.CouldPreempt)
		writePeers(&b, "Protected from", e.ProtectedFrom)
		if e.Admission != nil {
			fmt.Fprintf(&b, "Admission:      %s\n", e.Admission.Text())
		}
	}
	if e.State == Running {
		writePeers(&b, "Preemptible by", e.PreemptibleBy)
		writePeers(&b, "Safe from", e.SafeFrom)
	}
	if e.PlannerFound {
		fmt.Fprintf(&b, "Verdict:        %s\n", orDash(e.Verdict))
		fmt.Fprintf(&b, "Reason:         %s\n", orDash(e.Reason))
		mode := e.Mode
		if e.AdviseOnly != "" {
			mode += " (" + e.AdviseOnly + ")"
		}
		fmt.Fprintf(&b, "Planner boost:  advised %s, mode %s\n", humanize.Boost(e.AdvisedBoost), orDash(mode))
		if len(e.Evidence) > 0 {
			b.WriteString("Evidence:\n")
			for _, l := range e.Evidence {
				fmt.Fprintf(&b, "  - %s\n", l)
			}
		}
	} else {
		b.WriteString("Verdict:        — (no ProgressForecast: the planner does not track this job)\n")
	}
	fmt.Fprintf(&b, "Why:            %s\n", e.Summary)
	_, err := io.WriteString(w, textsafe.Text(b.String())) // reasons quote tenant text
	return err
}

func writePeers(b *strings.Builder, title string, ps []Peer) {
	if len(ps) == 0 {
		fmt.Fprintf(b, "%-15s none\n", title+":")
		return
	}
	fmt.Fprintf(b, "%-15s", title+":")
	for i, p := range ps {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(b, " %s (%d GPUs, priority %d)", p.Name, p.GPUs, p.Effective)
	}
	b.WriteString("\n")
}
