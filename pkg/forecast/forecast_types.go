package forecast

import "github.com/progress-planner/planner/pkg/progress"

// Forecast is the planner's view of one job at one instant. It is the JSON
// contract other tools build on (docs/forecast-json.md): every duration is
// in seconds, every share is a fraction in [0,1], and a pointer field is
// absent (nil) when the planner does not know the value.
type Forecast struct {
	// Now is the instant the forecast is made for, in the history's time
	// base. A job that stopped reporting is judged at Now, not at its last
	// report.
	Now       float64            `json:"now"`
	Objective progress.Objective `json:"objective"`

	// Evidence volume.
	Reports      int `json:"reports"`      // accepted reports in the history
	Segments     int `json:"segments"`     // 1 + number of restarts seen
	ObjectivePts int `json:"objectivePts"` // distinct objective observations used by the fit

	// Progress as the planner measures it from the step/epoch counters.
	Step       *float64 `json:"step,omitempty"`       // latest step (progress counter) reported
	TotalSteps *float64 `json:"totalSteps,omitempty"` // planned total, when the job reports one
	Progress   *float64 `json:"progress,omitempty"`   // Step/TotalSteps (fraction), else reported percentage/100
	StepRate   *float64 `json:"stepRate,omitempty"`   // steps per second in the current segment, recent
	// SinceProgress is Now minus the last time the job showed activity:
	// its step counter moved or a metric value changed.
	SinceProgress float64 `json:"sinceProgress"`
	// LastReport is the time of the latest accepted report (heartbeats
	// included), in the history's time base.
	LastReport *float64 `json:"lastReport,omitempty"`
	// ReportInterval is the job's median interval between reports.
	ReportInterval *float64 `json:"reportInterval,omitempty"`

	// ETA is the planner's own estimate of the remaining run time from Now.
	ETA Estimate `json:"eta"`
	// TimeToTarget is the planner's estimate of the time from Now until
	// the objective reaches Objective.Target (nil without a target). For a
	// job with no total it is also its ETA.
	TimeToTarget *Estimate `json:"timeToTarget,omitempty"`
	// ReportedETA is what the job itself claimed (estimatedRemainingSeconds
	// of its latest report, aged to Now). Untrusted: shown for comparison.
	ReportedETA *float64 `json:"reportedEta,omitempty"`

	// Objective metric.
	Current        *float64 `json:"current,omitempty"` // latest finite value
	Best           *float64 `json:"best,omitempty"`    // best value so far
	PredictedFinal Estimate `json:"predictedFinal"`    // at the planned end
	// RemainingImprovement is the expected further gain (in metric units,
	// >= 0, in the objective's direction) from Best to the planned end.
	RemainingImprovement *float64 `json:"remainingImprovement,omitempty"`
	// RelativeRemaining is RemainingImprovement over the improvement the
	// job has made so far (|first - best|).
	RelativeRemaining *float64 `json:"relativeRemaining,omitempty"`

	// Plateau: the probability that the job will not improve by more than
	// Settings.PlateauEpsilon of its improvement so far before its planned
	// end, and when the plateau began (time, history base).
	PlateauProbability float64  `json:"plateauProbability"`
	PlateauOnset       *float64 `json:"plateauOnset,omitempty"`
	// Plateaued is the forecast's own call: PlateauProbability at or above
	// Settings.PlateauThreshold with enough evidence. The policy adds
	// hysteresis on top.
	Plateaued bool `json:"plateaued"`
	// PlateauReason names the plateau rule that decided and its evidence
	// (pkg/forecast/plateau.go), whether it called a plateau or held one
	// back. PlateauProbability is the curve's probability, raised to
	// Settings.PlateauThreshold by the stall rule and to 1 by overfitting,
	// and kept under the threshold when a hold rule holds the call back.
	PlateauReason string `json:"plateauReason,omitempty"`
	// PlateauRelease, when set, names a change in the run itself (its
	// learning rate leaving its peak after standing there, a step-schedule
	// jump within the stall window; pkg/forecast/plateau.go, "The release
	// of a judged job") and its evidence: the flat stretch an earlier
	// plateau call was made on has ended, and a policy ends a Plateaued
	// verdict on it rather than keep it by hysteresis. Never set with
	// Plateaued.
	PlateauRelease string `json:"plateauRelease,omitempty"`

	Diverging        bool   `json:"diverging"`
	DivergenceReason string `json:"divergenceReason,omitempty"`
	// NonFinite: the divergence is a NaN/Inf in a loss-like metric or the
	// objective (not a judgement on noise): acting on it needs no dwell.
	NonFinite  bool   `json:"nonFinite,omitempty"`
	Hung       bool   `json:"hung"`
	HangReason string `json:"hangReason,omitempty"`
	// HangAfter is the hang threshold in seconds of silence (absent with
	// too few reports to know the job's rhythm). The policy measures the
	// silence from a readmission, not from before the job was evicted.
	HangAfter *float64 `json:"hangAfter,omitempty"`

	// Integrity holds the plausibility evidence about tenant-reported
	// progress; the policy turns it into the Untrusted verdict.
	Integrity Integrity `json:"integrity"`

	// Confidence in [0,1]: how much evidence backs the curve forecast. The
	// policy refuses to act below its confidence floor.
	Confidence float64 `json:"confidence"`
	// Models are the fitted curve families and their information-criterion
	// weights (sum 1), highest first. Empty when no fit was possible.
	Models []ModelWeight `json:"models,omitempty"`
	// Notes explain unknowns ("no total steps and no target: ETA unknown").
	Notes []string `json:"notes,omitempty"`
}

// Estimate is a point value with a prediction interval (Settings.Interval,
// 80 % by default). Known is false when the planner cannot say; Why says
// why.
type Estimate struct {
	Known bool `json:"known"`
	// Value, Lo and Hi are meaningful only when Known (and then always
	// present, 0 included).
	Value float64 `json:"value"`
	Lo    float64 `json:"lo"`
	Hi    float64 `json:"hi"`
	// Basis names how the estimate was obtained, e.g. "total-steps",
	// "target", "curve", "target-stop".
	Basis string `json:"basis,omitempty"`
	Why   string `json:"why,omitempty"`
}

// ModelWeight is one fitted curve family and its weight in the ensemble.
type ModelWeight struct {
	Family string  `json:"family"`
	Weight float64 `json:"weight"`
}

// Integrity is the evidence about whether the job's own progress claims are
// consistent with its step history. All ratios are planner-computed.
type Integrity struct {
	// Issues lists human-readable findings; empty means nothing implausible.
	Issues []string `json:"issues,omitempty"`
	// ProgressWithoutSteps: reported progress moved while the step counter
	// did not (or the job reports no counter at all).
	ProgressWithoutSteps bool `json:"progressWithoutSteps,omitempty"`
	// JumpRatio: the latest progress increment's rate over the job's median
	// historical rate (1 = normal; 100 = a hundred times faster).
	JumpRatio *float64 `json:"jumpRatio,omitempty"`
	// ReportedProgressGap: reported percentage/100 minus the counter-derived
	// progress, when both exist.
	ReportedProgressGap *float64 `json:"reportedProgressGap,omitempty"`
	// ETARatio: the job's reported ETA over the planner's ETA.
	ETARatio *float64 `json:"etaRatio,omitempty"`
	// ETANotShrinking: over the recent window the reported ETA did not
	// decrease although time passed.
	ETANotShrinking bool `json:"etaNotShrinking,omitempty"`
}

// Suspicious reports whether any integrity finding was made.
func (i Integrity) Suspicious() bool { return len(i.Issues) > 0 }
