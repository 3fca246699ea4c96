package backtest

import "github.com/progress-planner/planner/pkg/forecast"

// SchemaVersion is the version of the JSON report (docs/backtest.md).
const SchemaVersion = 2

// Report is the backtest result; its JSON form is the documented contract
// (docs/backtest.md). Durations are seconds; errors, shares and cutoffs are
// fractions (0.25, not "25%"). Pointer fields are absent when there was
// nothing to compute them from.
type Report struct {
	SchemaVersion int       `json:"schemaVersion"`
	Source        string    `json:"source"`          // "synthetic examples" or "files"
	Paths         []string  `json:"paths,omitempty"` // the PATH arguments
	Cutoffs       []float64 `json:"cutoffs"`
	// EvalEvery: original runs were scored evaluating their objective at
	// every EvalEvery-th evaluation only (1: as recorded; --eval-every).
	EvalEvery int `json:"evalEvery"`
	// EvalPause: original runs were scored as if training stopped at each
	// evaluation for EvalPause of their median report intervals (0: as
	// recorded; --eval-pause).
	EvalPause float64 `json:"evalPause"`
	// LossEvery: original runs without a fixed total were scored as if
	// they also logged a training loss every LossEvery seconds (0: as
	// recorded; --loss-every).
	LossEvery float64 `json:"lossEvery"`
	// StopAtGain: original runs without a target were scored as if they
	// stopped at the level where they had made this share of their whole
	// improvement, with no fixed total (0: as recorded; --stop-at-gain).
	StopAtGain float64 `json:"stopAtGain,omitempty"`
	// DropTotal: original runs with a target and a fixed total were scored
	// as if they stopped at that target with no fixed total (false: as
	// recorded; --drop-total).
	DropTotal bool `json:"dropTotal,omitempty"`
	// SeenFrom: original runs were scored as if the planner first saw them
	// at this share of their run, every report before it dropped (0: as
	// recorded; --seen-from).
	SeenFrom float64 `json:"seenFrom,omitempty"`
	// Mirror: every file was scored with its objective mirrored (v → −v,
	// the direction flipped; --mirror-objective).
	Mirror bool `json:"mirror"`
	// TimeScale: every file was scored with its times multiplied by
	// TimeScale (1: as recorded; --time-scale).
	TimeScale float64   `json:"timeScale"`
	FilesRead int       `json:"filesRead"`
	Skipped   []Skipped `json:"skipped,omitempty"`

	FilesScored []SetCount   `json:"filesScored"`
	ETA         []ETAGroup   `json:"eta"`
	FinalMetric []FinalGroup `json:"finalMetric"`
	// CoverageByEvaluations splits finalMetric's interval coverage by how
	// many evaluations the forecast had seen, all cutoffs together.
	CoverageByEvaluations []CoverageGroup `json:"coverageByEvaluations"`
	TimeToTarget          []TTTGroup      `json:"timeToTarget"`
	Plateau               []PlateauGroup  `json:"plateau"`
	CleanAlarms           []AlarmGroup    `json:"cleanAlarms"`
	// PrematurePlateau: cutoff forecasts called Plateaued while the
	// objective still improved by >= 2 % of its own value (schema 2).
	PrematurePlateau []PrematureGroup `json:"prematurePlateau"`
	Incidents        Incidents        `json:"incidents"`

	// Jobs are the per-file results, in input order (omitted with
	// --per-job=false).
	Jobs []Job `json:"jobs,omitempty"`

	// tttByDataset is timeToTarget grouped by dataset rather than by
	// benchmark: the leave-one-dataset-out figures read it (MLPerf's
	// benchmarks together).
	tttByDataset []TTTGroup
}

// Skipped is an input file that could not be scored.
type Skipped struct {
	File  string `json:"file"`
	Error string `json:"error"`
}

// SetCount counts scored files per dataset (originals) or per
// "incidents/<type>" (derived files), like the baseline's "Files scored".
type SetCount struct {
	Set   string `json:"set"`
	Files int    `json:"files"`
}

// Stat summarises errors: N values, their mean (MAPE) and median (MdAPE).
type Stat struct {
	N      int      `json:"n"`
	Mean   *float64 `json:"mean,omitempty"`
	Median *float64 `json:"median,omitempty"`
}

// Quantiles is a distribution (numpy linear-interpolation percentiles).
type Quantiles struct {
	N      int      `json:"n"`
	Mean   *float64 `json:"mean,omitempty"`
	P10    *float64 `json:"p10,omitempty"`
	P25    *float64 `json:"p25,omitempty"`
	Median *float64 `json:"median,omitempty"`
	P75    *float64 `json:"p75,omitempty"`
	P90    *float64 `json:"p90,omitempty"`
}

// ETAGroup: absolute percentage error of the remaining time, as a fraction
// of the true remaining time, for one dataset ("ALL" = every dataset) and
// cutoff.
type ETAGroup struct {
	Dataset string  `json:"dataset"`
	Cutoff  float64 `json:"cutoff"`
	N       int     `json:"n"` // runs scored (baseline rule)
	Planner Stat    `json:"planner"`
	// PlannerUnknown counts runs where Forecast.ETA.Known was false.
	PlannerUnknown int  `json:"plannerUnknown"`
	Reported       Stat `json:"reported"`
	Linear         Stat `json:"linear"`
}

// FinalGroup: |prediction - final| / |first - final| of the objective.
type FinalGroup struct {
	Dataset string  `json:"dataset"`
	Cutoff  float64 `json:"cutoff"`
	N       int     `json:"n"`
	Planner Stat    `json:"planner"`
	// PlannerFallback counts runs where PredictedFinal was not Known and
	// the last observed value was scored instead.
	PlannerFallback int  `json:"plannerFallback"`
	Last            Stat `json:"last"`
	Optimus         Stat `json:"optimus"`
	// OptimusFallback counts failed Optimus fits (< 4 observations or no
	// fit) scored with the last value, as the baseline does.
	OptimusFallback int      `json:"optimusFallback"`
	Coverage        Coverage `json:"coverage"`
}

// Coverage of the planner's PredictedFinal interval [Lo, Hi] (80 % by
// default) over the runs where PredictedFinal was Known. Better and Worse
// split the misses by the side the run ended on: better than the interval
// (it was too pessimistic, the side on which a job that still improves
// can look finished) or worse (too optimistic).
type Coverage struct {
	N       int      `json:"n"`
	Covered int      `json:"covered"`
	Share   *float64 `json:"share,omitempty"`
	Better  int      `json:"better"`
	Worse   int      `json:"worse"`
}

// CoverageGroup is the interval coverage of one dataset ("ALL" = every
// dataset) over every cutoff, for the forecasts made after a number of
// evaluations in Evaluations ("1-4", "5-8", ...): the dataset's cells
// can hold groups calibrated in opposite directions (docs/backtest.md 7.23).
type CoverageGroup struct {
	Dataset     string   `json:"dataset"`
	Evaluations string   `json:"evaluations"`
	Coverage    Coverage `json:"coverage"`
}

// TTTGroup: time-to-target error, |predicted stop - endSeconds| /
// endSeconds, for runs that reached their target.
type TTTGroup struct {
	Benchmark string  `json:"benchmark"`
	Cutoff    float64 `json:"cutoff"`
	N         int     `json:"n"`
	Planner   Stat    `json:"planner"`
	// PlannerNever counts forecasts without a target-based ETA ("no
	// crossing predicted"); they are not in Planner.
	PlannerNever int `json:"plannerNever"`
	// LinearRuns are the runs with >= 2 observations before the cut.
	LinearRuns  int  `json:"linearRuns"`
	Linear      Stat `json:"linear"`
	LinearNever int  `json:"linearNever"`
	// Paired compares the two on the same runs: those where both
	// predicted a crossing (schema 2).
	Paired PairedStat `json:"paired"`
}

// PairedStat is the planner's and a baseline's error on the same runs.
type PairedStat struct {
	Planner Stat `json:"planner"`
	Linear  Stat `json:"linear"`
}

// PrematureGroup: cutoff forecasts of original runs (those with a best
// value and a true final value) for one dataset and cutoff; Premature of
// them were Plateaued while the objective still improved by >= 2 % of its
// own value by the end of the run.
type PrematureGroup struct {
	Dataset   string   `json:"dataset"`
	Cutoff    float64  `json:"cutoff"`
	Forecasts int      `json:"forecasts"`
	Plateaued int      `json:"plateaued"`
	Premature int      `json:"premature"`
	Share     *float64 `json:"share,omitempty"`
}

// PlateauGroup: plateau detection on original (non-incident) runs.
type PlateauGroup struct {
	Dataset string `json:"dataset"`
	N       int    `json:"n"`
	// Truth is the true plateau time as a fraction of the run's duration.
	Truth    Quantiles `json:"truth"`
	Detected int       `json:"detected"`
	Missed   int       `json:"missed"`
	// Delay is (detection - truth) / duration over the detected runs;
	// negative = flagged before the true plateau.
	Delay             Quantiles `json:"delay"`
	Early             int       `json:"early"`
	FalsePositives    int       `json:"falsePositives"`
	FalsePositiveRate *float64  `json:"falsePositiveRate,omitempty"` // over N
}

// AlarmGroup counts hang and divergence flags in the cutoff forecasts of
// original runs (which neither hung nor diverged).
type AlarmGroup struct {
	Dataset   string `json:"dataset"`
	Forecasts int    `json:"forecasts"`
	Hung      int    `json:"hung"`
	Diverging int    `json:"diverging"`
}

// Incidents summarises the labelled incident files.
type Incidents struct {
	Hang             HangSummary       `json:"hang"`
	Divergence       DivergenceSummary `json:"divergence"`
	PlateauExtension PlateauExtSummary `json:"plateauExtension"`
	PreemptResume    PreemptSummary    `json:"preemptResume"`
}

// HangSummary: Forecast.Hung after incident.atSeconds.
type HangSummary struct {
	N           int              `json:"n"`
	Detected    int              `json:"detected"`
	OnTime      int              `json:"onTime"` // delay <= 3 × median report interval + 60 s
	EarlyAlarms int              `json:"earlyAlarms"`
	Delay       Quantiles        `json:"delaySeconds"`
	Rows        []IncidentResult `json:"rows"`
}

// DivergenceSummary: Forecast.Diverging at or after incident.atSeconds.
type DivergenceSummary struct {
	N           int              `json:"n"`
	Detected    int              `json:"detected"`
	BeforeNaN   int              `json:"beforeNaN"`
	EarlyAlarms int              `json:"earlyAlarms"`
	Delay       Quantiles        `json:"delaySeconds"`
	Rows        []IncidentResult `json:"rows"`
}

// PlateauExtSummary: Forecast.Plateaued within 10 % of the run's duration
// after the true plateau of the whole derived history (earlier flags count
// as detected, and are counted in DetectedBeforeTruth).
type PlateauExtSummary struct {
	N                   int              `json:"n"`
	Detected            int              `json:"detected"`
	DetectedBeforeTruth int              `json:"detectedBeforeTruth"`
	Delay               Quantiles        `json:"delay"` // fraction of duration
	Rows                []IncidentResult `json:"rows"`
}

// PreemptSummary: ETA error after the resume.
type PreemptSummary struct {
	N              int              `json:"n"`
	Planner        Stat             `json:"planner"`
	PlannerUnknown int              `json:"plannerUnknown"`
	Reported       Stat             `json:"reported"`
	Linear         Stat             `json:"linear"`
	Rows           []IncidentResult `json:"rows"`
}

// Job is one input file's results.
type Job struct {
	File       string  `json:"file"`
	Name       string  `json:"name"`
	Dataset    string  `json:"dataset"`
	Benchmark  string  `json:"benchmark,omitempty"`
	Status     string  `json:"status"`
	EndSeconds float64 `json:"endSeconds"`
	Reports    int     `json:"reports"`
	// Thinned says how a file over the whole-file limits was thinned as
	// it was read (docs/limits.md); nil when it was scored whole.
	Thinned *Thinning `json:"thinned,omitempty"`
	// Incident is the incident type of a derived file ("" for originals).
	Incident string `json:"incident,omitempty"`

	Cuts           []CutResult     `json:"cuts,omitempty"`
	Plateau        *PlateauResult  `json:"plateau,omitempty"`
	IncidentResult *IncidentResult `json:"incidentResult,omitempty"`
}

// CutResult is one original run truncated at Cutoff × endSeconds.
type CutResult struct {
	Cutoff       float64      `json:"cutoff"`
	Now          float64      `json:"now"`
	ETA          *ETAResult   `json:"eta,omitempty"`
	Final        *FinalResult `json:"final,omitempty"`
	TimeToTarget *TTTResult   `json:"timeToTarget,omitempty"`
	Hung         bool         `json:"hung"`
	Diverging    bool         `json:"diverging"`
	Plateaued    bool         `json:"plateaued"`
	// GainAhead is the objective's improvement from its best at the cut to
	// its true final value, as a share of that best (schema 2; absent
	// without a final value).
	GainAhead *float64 `json:"gainAhead,omitempty"`
	// Forecast is the forecast.Forecast at Now (DefaultSettings).
	Forecast *forecast.Forecast `json:"forecast,omitempty"`
	// FinalForecast is the forecast with Settings.EndStep set (runs whose
	// status is unknown or aborted).
	FinalForecast *forecast.Forecast `json:"finalForecast,omitempty"`
}

// ETAResult: remaining-time predictions (seconds) and their APE.
type ETAResult struct {
	Truth        float64  `json:"truth"`
	Planner      *float64 `json:"planner,omitempty"`
	PlannerAPE   *float64 `json:"plannerApe,omitempty"`
	PlannerBasis string   `json:"plannerBasis,omitempty"`
	Reported     *float64 `json:"reported,omitempty"`
	ReportedAPE  *float64 `json:"reportedApe,omitempty"`
	Linear       *float64 `json:"linear,omitempty"`
	LinearAPE    *float64 `json:"linearApe,omitempty"`
}

// FinalResult: final-metric predictions (metric units) and their errors
// relative to |First - Truth|.
type FinalResult struct {
	Truth           float64  `json:"truth"`
	First           float64  `json:"first"`
	XEnd            float64  `json:"xEnd"`
	EndStep         *float64 `json:"endStep,omitempty"`
	Observations    int      `json:"observations"`
	Planner         float64  `json:"planner"`
	PlannerError    float64  `json:"plannerError"`
	PlannerFallback bool     `json:"plannerFallback"`
	Lo              *float64 `json:"lo,omitempty"`
	Hi              *float64 `json:"hi,omitempty"`
	Covered         *bool    `json:"covered,omitempty"`
	// Miss is "better" or "worse" when Covered is false: the side of the
	// interval the run ended on, in the objective's direction.
	Miss            string  `json:"miss,omitempty"`
	Last            float64 `json:"last"`
	LastError       float64 `json:"lastError"`
	Optimus         float64 `json:"optimus"`
	OptimusError    float64 `json:"optimusError"`
	OptimusFallback bool    `json:"optimusFallback"`
}

// TTTResult: predicted stop times (seconds since run start) and their APE
// against endSeconds.
type TTTResult struct {
	Truth        float64  `json:"truth"`
	Observations int      `json:"observations"`
	PlannerStop  *float64 `json:"plannerStop,omitempty"` // absent = no crossing predicted
	PlannerAPE   *float64 `json:"plannerApe,omitempty"`
	PlannerBasis string   `json:"plannerBasis,omitempty"`
	LinearRun    bool     `json:"linearRun"` // >= 2 observations
	LinearStop   *float64 `json:"linearStop,omitempty"`
	LinearAPE    *float64 `json:"linearApe,omitempty"`
}

// PlateauResult: streaming plateau detection on one original run.
type PlateauResult struct {
	TruthSeconds    float64  `json:"truthSeconds"`
	TruthFraction   float64  `json:"truthFraction"`
	Evaluations     int      `json:"evaluations"`
	DetectedSeconds *float64 `json:"detectedSeconds,omitempty"`
	DelayFraction   *float64 `json:"delayFraction,omitempty"`
	// GainAfterFlag: best-so-far improvement after the flag, as a fraction
	// of the run's total improvement; FalsePositive when > 0.05.
	GainAfterFlag *float64           `json:"gainAfterFlag,omitempty"`
	FalsePositive bool               `json:"falsePositive"`
	Forecast      *forecast.Forecast `json:"forecast,omitempty"` // at detection
}

// IncidentResult is one incident file's detection (or ETA) result.
type IncidentResult struct {
	Name        string  `json:"name"`
	Dataset     string  `json:"dataset"`
	Type        string  `json:"type"`
	Variant     string  `json:"variant,omitempty"`
	AtSeconds   float64 `json:"atSeconds"`
	EndSeconds  float64 `json:"endSeconds"`
	Evaluations int     `json:"evaluations"`
	// EarlyAlarmSeconds: the first flag before AtSeconds (hang,
	// divergence).
	EarlyAlarmSeconds *float64 `json:"earlyAlarmSeconds,omitempty"`
	Detected          bool     `json:"detected"`
	DetectedSeconds   *float64 `json:"detectedSeconds,omitempty"`
	DelaySeconds      *float64 `json:"delaySeconds,omitempty"`

	// hang
	MedianIntervalSeconds *float64 `json:"medianIntervalSeconds,omitempty"`
	AllowanceSeconds      *float64 `json:"allowanceSeconds,omitempty"`
	OnTime                *bool    `json:"onTime,omitempty"`
	// divergence
	FirstNaNSeconds *float64 `json:"firstNaNSeconds,omitempty"`
	BeforeNaN       *bool    `json:"beforeNaN,omitempty"`
	// plateau_extension
	PlateauSeconds      *float64 `json:"plateauSeconds,omitempty"`
	DelayFraction       *float64 `json:"delayFraction,omitempty"`
	DetectedBeforeTruth *bool    `json:"detectedBeforeTruth,omitempty"`
	// preempt_resume
	ResumeSeconds *float64   `json:"resumeSeconds,omitempty"`
	CutSeconds    *float64   `json:"cutSeconds,omitempty"`
	ETA           *ETAResult `json:"eta,omitempty"`

	// Forecast at detection (or at the cut for preempt_resume).
	Forecast *forecast.Forecast `json:"forecast,omitempty"`
}
