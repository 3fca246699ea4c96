package simulator

import (
	"math"

	"github.com/progress-planner/planner/internal/queueorder"
	"github.com/progress-planner/planner/pkg/preempt"
	"github.com/progress-planner/planner/pkg/progress"
)

// Job is one training job of a scenario: what the simulator is given, never
// changed by a run. Times are simulated seconds.
type Job struct {
	// ID is the job's index in the scenario (0-based); ties between events
	// at the same instant are broken by it.
	ID    int    `json:"id"`
	Name  string `json:"name"`
	Queue string `json:"queue"`
	// Arrival is the submission time.
	Arrival float64 `json:"arrival"`
	GPUs    int     `json:"gpus"`
	// Priority is the base priority (the Workload's priority class value).
	Priority int32 `json:"priority"`
	// Duration is the running time the job needs to finish its planned
	// budget (its trace duration).
	Duration float64 `json:"duration"`
	// TotalSteps is the planned step total the job reports.
	TotalSteps float64 `json:"totalSteps"`
	// Checkpoint is the running time between two checkpoints; an evicted
	// job loses the work since its last one. 0 takes the scenario's.
	Checkpoint float64 `json:"checkpointInterval"`
	// Done is the running time the job had already run before the
	// simulation (JobSpec.RanFor with a curve): its work starts there.
	Done float64 `json:"done,omitempty"`
	// Curve is the job's learning curve, time-scaled to Duration.
	Curve *Curve `json:"-"`
	// CurveName names the curve (a history file's name or a family).
	CurveName string `json:"curve"`
	// Pinned: the live planner's boost LiveBoost holds for the whole run
	// under the planner and oracle policies (JobSpec.Boost).
	Pinned    bool  `json:"pinned,omitempty"`
	LiveBoost int32 `json:"liveBoost,omitempty"`
}

// PlateauWork is the running time at which the job's plateau begins (ground
// truth from its curve); Duration when the curve never plateaus.
func (j *Job) PlateauWork() float64 {
	if j.Curve == nil {
		return j.Duration
	}
	return math.Min(1, j.Curve.Onset) * j.Duration
}

// firstEvalWork is the running time of the curve's first evaluation
// (+Inf without a curve or evaluations).
func (j *Job) firstEvalWork() float64 {
	if j.Curve == nil || len(j.Curve.X) == 0 {
		return math.Inf(1)
	}
	return j.Curve.X[0] * j.Duration
}

// jobState is a job during one run.
type jobState struct {
	*Job
	state      phase
	work       float64 // running seconds of progress kept (at the start of the current admission)
	admitAt    float64 // start of the current admission
	firstAdmit float64 // NaN until admitted
	end        float64 // NaN until finished or stopped
	endKind    endKind
	gen        int32 // admission generation: stale finish events are ignored
	tickGen    int32 // stale policy ticks are ignored
	tickWhy    tickReason
	queue      *clusterQueue
	runIdx     int // position in queue.running while running (-1 otherwise)

	boost    int32 // the boost applied (kueue.x-k8s.io/priority-boost)
	decision preempt.Decision
	hist     *progress.History
	// totalSteps is TotalSteps as its reports carry it.
	totalSteps string
	// nextReport is when the job sends its next report (running only).
	nextReport     float64
	reportEvery    float64
	lastForecast   float64 // NaN before the first
	lastPlannerEvt *float64
	evictions      int
	lasLevel       int

	// Per-job measurements.
	usedGPUSec     float64 // GPU-seconds while admitted
	postPlateau    float64 // GPU-seconds spent past the plateau onset
	lostGPUSec     float64 // GPU-seconds of work lost to evictions
	savedGPUSec    float64 // GPU-seconds a Deactivate saved (truth: remaining work)
	estSavedHours  float64 // the policy's own estimate (Decision.GPUHoursSaved)
	earlyCutGPUSec float64 // GPU-seconds of work before the plateau a Deactivate cut off
	stopRemaining  float64 // true remaining improvement / gain so far when deactivated
	preempted      int
	preempted90    int
}

type phase uint8

const (
	phaseWaiting phase = iota // not arrived yet
	phasePending
	phaseRunning
	phaseDone
)

type endKind uint8

const (
	endNone endKind = iota
	endCompleted
	endDeactivated
)

func (e endKind) String() string {
	switch e {
	case endCompleted:
		return "completed"
	case endDeactivated:
		return "deactivated"
	}
	return "unfinished"
}

func newJobState(j *Job) *jobState {
	return &jobState{Job: j, work: j.Done, firstAdmit: math.NaN(), end: math.NaN(), lastForecast: math.NaN(), runIdx: -1}
}

// effective is the job's effective priority (queueorder.EffectivePriority).
func (j *jobState) effective() int64 {
	return int64(queueorder.EffectivePriority(j.Priority, j.boost))
}

// workAt is the job's progress (running seconds) at time t.
func (j *jobState) workAt(t float64) float64 {
	if j.state != phaseRunning {
		return j.work
	}
	return math.Min(j.Duration, j.work+(t-j.admitAt))
}

// progress is the job's progress fraction at time t.
func (j *jobState) progress(t float64) float64 { return j.workAt(t) / j.Duration }

// checkpointed is the progress kept if the job were evicted at t: the
// admission's start plus whole checkpoint intervals run since.
func (j *jobState) checkpointed(t float64, every float64) float64 {
	if j.state != phaseRunning {
		return j.work
	}
	ran := t - j.admitAt
	if every <= 0 {
		return j.work
	}
	return math.Min(j.Duration, j.work+math.Floor(ran/every+1e-9)*every)
}

// account adds the GPU time of the running interval [admitAt, t] to the
// job's totals: all of it is used, and the part past the plateau onset is
// post-plateau time (re-running lost work past the onset counts again).
func (j *jobState) account(t float64) {
	g := float64(j.GPUs)
	j.usedGPUSec += g * (t - j.admitAt)
	onset := j.PlateauWork()
	from, to := j.work, j.workAt(t)
	if to > onset {
		j.postPlateau += g * (to - math.Max(from, onset))
	}
}

// tickReason says why a policy tick was scheduled (for the cost report).
type tickReason uint8

const (
	tickFirst       tickReason = iota // first decision after an admission
	tickCadence                       // the idle cadence
	tickDeadline                      // a decision deadline (dwell, grace, lease, cooldown)
	tickTruth                         // oracle: the truth changes (onset, near-done)
	tickEviction                      // decided at an eviction (not a tick)
	tickReadmission                   // readmitted holding a boost: decided at once
	nTickReasons
)

var tickReasonNames = [...]string{"first", "cadence", "deadline", "truth", "eviction", "readmission"}
