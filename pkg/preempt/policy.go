package preempt

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"strings"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/progress-planner/planner/internal/yamlfields"
)

// Mode says whether decisions are applied.
type Mode string

const (
	// ModeEnforce applies the decided boost and action.
	ModeEnforce Mode = "enforce"
	// ModeAdvise decides and explains, but the boost to apply is always 0
	// and the action is always None; the would-be values are kept in
	// Decision.AdvisedBoost and Decision.AdvisedAction.
	ModeAdvise Mode = "advise"
)

// MaxBoostMagnitude bounds Boosts.Min and Boosts.Max so that base priority
// plus boost cannot overflow an int32 for any sane base priority.
const MaxBoostMagnitude = 1_000_000_000

// ErrInvalidPolicy is wrapped by every error Validate and ParsePolicy return
// for a policy that parses but breaks a rule.
var ErrInvalidPolicy = errors.New("invalid policy")

// Duration is a time.Duration that reads and writes as a Go duration string
// ("90s", "5m", "1h30m") in YAML and JSON.
type Duration struct{ time.Duration }

// Dur wraps a time.Duration.
func Dur(d time.Duration) Duration { return Duration{d} }

// MarshalJSON writes the duration as a string such as "5m0s".
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(d.Duration.String()) }

// UnmarshalJSON reads a duration string such as "5m" or "1h30m".
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("duration %s: want a string such as \"90s\", \"5m\" or \"1h30m\"", string(b))
	}
	v, err := time.ParseDuration(strings.TrimSpace(s))
	if err != nil {
		return fmt.Errorf("duration %q: %w", s, err)
	}
	d.Duration = v
	return nil
}

// Seconds returns the duration in (float) seconds, the policy's time unit.
func (d Duration) Seconds() float64 { return d.Duration.Seconds() }

// Policy turns forecasts into boosts and actions. It is a plain value: start
// from DefaultPolicy, override fields, and call Validate (ParsePolicy does
// both). Its YAML form is the "policy" section of the controller's config
// file; docs/policy.md explains every field and its default.
type Policy struct {
	// Mode is the global mode; Overrides may change it per namespace or
	// ClusterQueue.
	Mode      Mode            `json:"mode"`
	Boosts    Boosts          `json:"boosts"`
	Evidence  EvidencePolicy  `json:"evidence"`
	Plateau   PlateauPolicy   `json:"plateau"`
	NearDone  NearDonePolicy  `json:"nearDone"`
	Integrity IntegrityPolicy `json:"integrity"`
	Stability StabilityPolicy `json:"stability"`
	Stop      StopPolicy      `json:"stop"`
	// Overrides change Mode and the stop opt-in per namespace and/or
	// ClusterQueue. See Effective for how they combine.
	Overrides []Override `json:"overrides,omitempty"`
}

// Boosts are the values written to kueue.x-k8s.io/priority-boost for each
// acting verdict, and the bounds no decision ever leaves.
type Boosts struct {
	Plateaued int32 `json:"plateaued"` // <= 0
	Diverging int32 `json:"diverging"` // <= 0
	Hung      int32 `json:"hung"`      // <= 0
	NearDone  int32 `json:"nearDone"`  // >= 0
	Min       int32 `json:"min"`       // lower bound of every boost, <= 0
	Max       int32 `json:"max"`       // upper bound of every boost, >= 0
}

// EvidencePolicy decides when there is enough evidence to act at all
// (below it the verdict is Warming).
type EvidencePolicy struct {
	// MinReports is the number of accepted reports needed.
	MinReports int `json:"minReports"`
	// MinAge is how long a job must have been admitted (running) before it
	// is judged; every readmission starts the clock again.
	MinAge Duration `json:"minAge"`
	// ConfidenceFloor is the forecast confidence needed to start acting.
	ConfidenceFloor float64 `json:"confidenceFloor"`
	// ConfidenceMargin is the hysteresis: a job already judged keeps being
	// judged until confidence drops below ConfidenceFloor-ConfidenceMargin.
	ConfidenceMargin float64 `json:"confidenceMargin"`
}

// PlateauPolicy holds the enter/exit thresholds of the Plateaued verdict.
// A job enters Plateaued when its forecast calls a plateau (Plateaued, after
// the forecaster's holds), PlateauProbability >= EnterProbability and
// RelativeRemaining <= EnterRelativeRemaining; it stays Plateaued while
// PlateauProbability >= ExitProbability and RelativeRemaining <=
// ExitRelativeRemaining, unless the forecast releases it (PlateauRelease).
type PlateauPolicy struct {
	EnterProbability       float64 `json:"enterProbability"`
	ExitProbability        float64 `json:"exitProbability"`
	EnterRelativeRemaining float64 `json:"enterRelativeRemaining"`
	ExitRelativeRemaining  float64 `json:"exitRelativeRemaining"`
}

// NearDonePolicy holds the thresholds of the NearDone verdict and the
// protection lease.
type NearDonePolicy struct {
	// EnterProgress / ExitProgress: counter-derived progress (step /
	// total steps) needed to enter / stay.
	EnterProgress float64 `json:"enterProgress"`
	ExitProgress  float64 `json:"exitProgress"`
	// EnterMaxETA / ExitMaxETA: the planner's ETA upper bound must be at
	// most this to enter / stay.
	EnterMaxETA Duration `json:"enterMaxETA"`
	ExitMaxETA  Duration `json:"exitMaxETA"`
	// LeaseMargin: the lease granted with protection ends at
	// now + ETA.Hi * (1 + LeaseMargin), capped at MaxLease.
	LeaseMargin float64  `json:"leaseMargin"`
	MaxLease    Duration `json:"maxLease"`
	// LeaseCooldown: after a lease ends without the job finishing (it
	// expired, or was revoked because the verdict left NearDone),
	// protection cannot be earned again for this long.
	LeaseCooldown Duration `json:"leaseCooldown"`
}

// IntegrityPolicy turns the forecast's integrity evidence into the
// Untrusted verdict. The forecast's own findings (Integrity.Issues) always
// count; these thresholds let an admin be stricter.
type IntegrityPolicy struct {
	// MaxJumpRatio: a progress increment faster than this multiple of the
	// job's median rate is implausible.
	MaxJumpRatio float64 `json:"maxJumpRatio"`
	// MaxProgressGap: reported progress ahead of the step counter by more
	// than this fraction is implausible.
	MaxProgressGap float64 `json:"maxProgressGap"`
	// MaxETARatio and MinETAGap: a reported ETA below 1/MaxETARatio of the
	// planner's ETA from the step history, and more than MinETAGap below
	// it, is implausible. Only the optimistic direction counts: a job
	// claiming more time than its steps need gains nothing (protection
	// uses the planner's ETA), and near the end honest jobs often add
	// final evaluation and checkpointing to their own estimate.
	MaxETARatio float64  `json:"maxETARatio"`
	MinETAGap   Duration `json:"minETAGap"`
	// DistrustFor: after any integrity finding, the job cannot earn
	// protection for this long, even if later reports look normal (a
	// one-off jump is only visible in the report that made it).
	DistrustFor Duration `json:"distrustFor"`
}

// StabilityPolicy prevents flapping.
type StabilityPolicy struct {
	// MinDwell: a new verdict must hold this long before the boost moves
	// towards it. Removing protection never waits.
	MinDwell Duration `json:"minDwell"`
	// MaxBoostChangesPerHour caps changes of a job's boost in any sliding
	// hour. Granting protection needs room for two changes (the grant and
	// its eventual removal, which is never blocked), so the cap holds
	// with removals included. At least 2.
	MaxBoostChangesPerHour int `json:"maxBoostChangesPerHour"`
	// EvictionCooldown: after the planner caused an eviction, no negative
	// boost and no stop until the job has run this long after readmission
	// (and for this long after the eviction).
	EvictionCooldown Duration `json:"evictionCooldown"`
}

// StopPolicy configures the opt-in Deactivate action.
type StopPolicy struct {
	// Enabled turns stopping on for every job (overridable per namespace /
	// ClusterQueue). Off by default.
	Enabled bool `json:"enabled"`
	// AllowJobOptIn honours the TrainJob's own opt-in annotation
	// (Facts.StopOptIn) where Enabled is false.
	AllowJobOptIn bool `json:"allowJobOptIn"`
	// GracePeriod: how long a job must have been stalled (Plateaued,
	// Diverging or Hung, continuously) before it is stopped.
	GracePeriod Duration `json:"gracePeriod"`
	// MinConfidence: no stop below this forecast confidence.
	MinConfidence float64 `json:"minConfidence"`
	// Horizon: when the planner's ETA is unknown, GPU-hours saved are
	// counted up to this horizon.
	Horizon Duration `json:"horizon"`
}

// Override changes the mode and the stop opt-in for jobs in a namespace,
// a ClusterQueue, or both (both set: only jobs matching both). Unset fields
// keep the value from the global policy or a less specific override.
type Override struct {
	Namespace     string `json:"namespace,omitempty"`
	ClusterQueue  string `json:"clusterQueue,omitempty"`
	Mode          Mode   `json:"mode,omitempty"`
	Stop          *bool  `json:"stop,omitempty"`
	AllowJobOptIn *bool  `json:"allowJobOptIn,omitempty"`
}

// Effective is the mode and stop opt-in that apply to one job.
type Effective struct {
	Mode          Mode
	Stop          bool // stopping enabled by the policy for this job
	AllowJobOptIn bool // the job's own annotation may enable stopping
	// Scope names what set Mode ("global", "namespace team-a",
	// "clusterQueue gpu", "namespace team-a/clusterQueue gpu"), StopScope
	// what set Stop.
	Scope     string
	StopScope string
}

// DefaultPolicy returns the documented defaults (docs/policy.md).
func DefaultPolicy() Policy {
	return Policy{
		Mode: ModeEnforce,
		Boosts: Boosts{
			Plateaued: -100,
			Diverging: -100,
			Hung:      -100,
			NearDone:  100,
			Min:       -1000,
			Max:       1000,
		},
		Evidence: EvidencePolicy{
			MinReports:       10,
			MinAge:           Dur(10 * time.Minute),
			ConfidenceFloor:  0.5,
			ConfidenceMargin: 0.1,
		},
		Plateau: PlateauPolicy{
			EnterProbability:       0.8,
			ExitProbability:        0.6,
			EnterRelativeRemaining: 0.02,
			ExitRelativeRemaining:  0.05,
		},
		NearDone: NearDonePolicy{
			EnterProgress: 0.9,
			ExitProgress:  0.85,
			EnterMaxETA:   Dur(30 * time.Minute),
			ExitMaxETA:    Dur(45 * time.Minute),
			LeaseMargin:   0.5,
			MaxLease:      Dur(time.Hour),
			LeaseCooldown: Dur(time.Hour),
		},
		Integrity: IntegrityPolicy{
			MaxJumpRatio:   10,
			MaxProgressGap: 0.05,
			MaxETARatio:    4,
			MinETAGap:      Dur(5 * time.Minute),
			DistrustFor:    Dur(24 * time.Hour),
		},
		Stability: StabilityPolicy{
			MinDwell:               Dur(5 * time.Minute),
			MaxBoostChangesPerHour: 4,
			EvictionCooldown:       Dur(30 * time.Minute),
		},
		Stop: StopPolicy{
			Enabled:       false,
			AllowJobOptIn: true,
			GracePeriod:   Dur(2 * time.Hour),
			MinConfidence: 0.7,
			Horizon:       Dur(24 * time.Hour),
		},
	}
}

// ParsePolicy reads the YAML (or JSON) form of a Policy. Fields left out keep
// their DefaultPolicy value; unknown fields and duplicate keys are errors, and
// the result is validated.
func ParsePolicy(data []byte) (Policy, error) {
	if err := yamlfields.Check(data); err != nil {
		return Policy{}, fmt.Errorf("policy: %w", err)
	}
	p := DefaultPolicy()
	if err := yaml.UnmarshalStrict(data, &p); err != nil {
		if paths := unknownFields(data); len(paths) > 0 {
			return Policy{}, fmt.Errorf("policy: unknown field %s: %w", strings.Join(paths, ", "), err)
		}
		return Policy{}, fmt.Errorf("policy: %w", err)
	}
	if err := p.Validate(); err != nil {
		return Policy{}, err
	}
	if len(p.Overrides) == 0 {
		p.Overrides = nil // "overrides: []" and no overrides are the same policy
	}
	return p, nil
}

// YAML renders the policy in the form ParsePolicy reads.
func (p Policy) YAML() ([]byte, error) { return yaml.Marshal(p) }

// Validate reports every rule the policy breaks, each naming the field, its
// value and the rule. The error wraps ErrInvalidPolicy.
//
// The sections are checked in the order of the policy's fields; a rule
// that relates two sections is checked with the later one.
func (p Policy) Validate() error {
	var v validator
	v.mode("mode", p.Mode, false)
	v.boosts(p.Boosts)
	v.evidence(p.Evidence)
	v.plateau(p.Plateau)
	v.nearDone(p.NearDone)
	v.integrity(p.Integrity)
	v.stability(p.Stability)
	v.stop(p.Stop, p.Stability)
	v.overrides(p.Overrides)
	return v.err()
}

// boosts: within ±MaxBoostMagnitude, penalties never positive nor below
// boosts.min, protection never negative nor above boosts.max.
func (v *validator) boosts(b Boosts) {
	if b.Min > 0 || b.Min < -MaxBoostMagnitude {
		v.addf("boosts.min", "%d must be in [-%d, 0]", b.Min, MaxBoostMagnitude)
	}
	if b.Max < 0 || b.Max > MaxBoostMagnitude {
		v.addf("boosts.max", "%d must be in [0, %d]", b.Max, MaxBoostMagnitude)
	}
	for _, c := range []struct {
		name string
		val  int32
	}{{"boosts.plateaued", b.Plateaued}, {"boosts.diverging", b.Diverging}, {"boosts.hung", b.Hung}} {
		if c.val > 0 {
			v.addf(c.name, "%d must not be positive (a stalled job yields, it is never promoted)", c.val)
		} else if c.val < b.Min {
			v.addf(c.name, "%d is below boosts.min %d", c.val, b.Min)
		}
	}
	if b.NearDone < 0 {
		v.addf("boosts.nearDone", "%d must not be negative (protection raises priority)", b.NearDone)
	} else if b.NearDone > b.Max {
		v.addf("boosts.nearDone", "%d is above boosts.max %d", b.NearDone, b.Max)
	}
}

// evidence: at least one report, a confidence floor in [0, 1] and a margin
// below it.
func (v *validator) evidence(e EvidencePolicy) {
	if e.MinReports < 1 {
		v.addf("evidence.minReports", "%d must be at least 1", e.MinReports)
	}
	v.nonNegative("evidence.minAge", e.MinAge)
	v.fraction("evidence.confidenceFloor", e.ConfidenceFloor)
	if !(e.ConfidenceMargin >= 0 && e.ConfidenceMargin <= e.ConfidenceFloor) {
		v.addf("evidence.confidenceMargin", "%g must be in [0, evidence.confidenceFloor %g]", e.ConfidenceMargin, e.ConfidenceFloor)
	}
}

// plateau: probabilities in [0, 1] and remaining shares non-negative, the
// exit thresholds on the far side of the enter thresholds (hysteresis).
func (v *validator) plateau(pl PlateauPolicy) {
	v.fraction("plateau.enterProbability", pl.EnterProbability)
	v.fraction("plateau.exitProbability", pl.ExitProbability)
	if pl.ExitProbability > pl.EnterProbability {
		v.addf("plateau.exitProbability", "%g must not exceed plateau.enterProbability %g (the exit threshold is the lower end of the hysteresis band)", pl.ExitProbability, pl.EnterProbability)
	}
	v.nonNegativeFloat("plateau.enterRelativeRemaining", pl.EnterRelativeRemaining)
	v.nonNegativeFloat("plateau.exitRelativeRemaining", pl.ExitRelativeRemaining)
	if pl.ExitRelativeRemaining < pl.EnterRelativeRemaining {
		v.addf("plateau.exitRelativeRemaining", "%g must not be below plateau.enterRelativeRemaining %g (the exit threshold is the upper end of the hysteresis band)", pl.ExitRelativeRemaining, pl.EnterRelativeRemaining)
	}
}

// nearDone: progress thresholds in (0, 1] with exit below enter, ETA
// bounds with exit above enter, a positive lease.
func (v *validator) nearDone(n NearDonePolicy) {
	if !(n.EnterProgress > 0 && n.EnterProgress <= 1) {
		v.addf("nearDone.enterProgress", "%g must be in (0, 1]", n.EnterProgress)
	}
	if !(n.ExitProgress > 0 && n.ExitProgress <= n.EnterProgress) {
		v.addf("nearDone.exitProgress", "%g must be in (0, nearDone.enterProgress %g]", n.ExitProgress, n.EnterProgress)
	}
	v.positive("nearDone.enterMaxETA", n.EnterMaxETA)
	if n.ExitMaxETA.Duration < n.EnterMaxETA.Duration {
		v.addf("nearDone.exitMaxETA", "%s must not be below nearDone.enterMaxETA %s", n.ExitMaxETA, n.EnterMaxETA)
	}
	v.nonNegativeFloat("nearDone.leaseMargin", n.LeaseMargin)
	v.positive("nearDone.maxLease", n.MaxLease)
	v.nonNegative("nearDone.leaseCooldown", n.LeaseCooldown)
}

// integrity: finite ratios above 1, a progress gap in [0, 1], non-negative
// durations.
func (v *validator) integrity(in IntegrityPolicy) {
	if !(in.MaxJumpRatio > 1) || math.IsInf(in.MaxJumpRatio, 0) {
		v.addf("integrity.maxJumpRatio", "%g must be a finite number above 1", in.MaxJumpRatio)
	}
	v.fraction("integrity.maxProgressGap", in.MaxProgressGap)
	if !(in.MaxETARatio > 1) || math.IsInf(in.MaxETARatio, 0) {
		v.addf("integrity.maxETARatio", "%g must be a finite number above 1", in.MaxETARatio)
	}
	v.nonNegative("integrity.minETAGap", in.MinETAGap)
	v.nonNegative("integrity.distrustFor", in.DistrustFor)
}

// stability: a non-negative dwell and cooldown, room for at least two boost
// changes an hour.
func (v *validator) stability(s StabilityPolicy) {
	v.nonNegative("stability.minDwell", s.MinDwell)
	if s.MaxBoostChangesPerHour < 2 {
		v.addf("stability.maxBoostChangesPerHour", "%d must be at least 2 (a protection grant needs room for its own removal)", s.MaxBoostChangesPerHour)
	}
	v.nonNegative("stability.evictionCooldown", s.EvictionCooldown)
}

// stop: a positive grace period no shorter than the dwell, a confidence in
// [0, 1], a positive horizon.
func (v *validator) stop(st StopPolicy, s StabilityPolicy) {
	v.positive("stop.gracePeriod", st.GracePeriod)
	if st.GracePeriod.Duration < s.MinDwell.Duration {
		v.addf("stop.gracePeriod", "%s must not be shorter than stability.minDwell %s", st.GracePeriod, s.MinDwell)
	}
	v.fraction("stop.minConfidence", st.MinConfidence)
	v.positive("stop.horizon", st.Horizon)
}

// overrides: each names a scope and changes something, with a valid mode,
// and no two name the same scope.
func (v *validator) overrides(overrides []Override) {
	seen := map[[2]string]int{}
	for i, o := range overrides {
		field := fmt.Sprintf("overrides[%d]", i)
		if o.Namespace == "" && o.ClusterQueue == "" {
			v.addf(field, "sets neither namespace nor clusterQueue")
		}
		if o.Mode == "" && o.Stop == nil && o.AllowJobOptIn == nil {
			v.addf(field, "changes nothing (set mode, stop or allowJobOptIn)")
		}
		v.mode(field+".mode", o.Mode, true)
		key := [2]string{o.Namespace, o.ClusterQueue}
		if j, dup := seen[key]; dup {
			v.addf(field, "matches the same namespace %q and clusterQueue %q as overrides[%d]", o.Namespace, o.ClusterQueue, j)
		} else {
			seen[key] = i
		}
	}
}

// Effective resolves the mode and stop opt-in for a job in namespace and
// clusterQueue. Matching overrides apply from least to most specific
// (clusterQueue only, then namespace only, then both), field by field, so
// the most specific override that sets a field wins.
func (p Policy) Effective(namespace, clusterQueue string) Effective {
	e := Effective{Mode: p.Mode, Stop: p.Stop.Enabled, AllowJobOptIn: p.Stop.AllowJobOptIn, Scope: "global", StopScope: "global"}
	for rank := 1; rank <= 3; rank++ {
		for _, o := range p.Overrides {
			if o.specificity() != rank ||
				(o.Namespace != "" && o.Namespace != namespace) ||
				(o.ClusterQueue != "" && o.ClusterQueue != clusterQueue) {
				continue
			}
			if o.Mode != "" {
				e.Mode = o.Mode
				e.Scope = o.scope()
			}
			if o.Stop != nil {
				e.Stop = *o.Stop
				e.StopScope = o.scope()
			}
			if o.AllowJobOptIn != nil {
				e.AllowJobOptIn = *o.AllowJobOptIn
			}
		}
	}
	return e
}

func (o Override) specificity() int {
	switch {
	case o.Namespace != "" && o.ClusterQueue != "":
		return 3
	case o.Namespace != "":
		return 2
	case o.ClusterQueue != "":
		return 1
	}
	return 0 // invalid; never matches
}

func (o Override) scope() string {
	switch o.specificity() {
	case 3:
		return "namespace " + o.Namespace + "/clusterQueue " + o.ClusterQueue
	case 2:
		return "namespace " + o.Namespace
	default:
		return "clusterQueue " + o.ClusterQueue
	}
}

type validator struct{ problems []string }

func (v *validator) addf(field, format string, args ...any) {
	v.problems = append(v.problems, field+": "+fmt.Sprintf(format, args...))
}

func (v *validator) mode(field string, m Mode, allowEmpty bool) {
	if (allowEmpty && m == "") || m == ModeEnforce || m == ModeAdvise {
		return
	}
	v.addf(field, "%q is neither %q nor %q", m, ModeEnforce, ModeAdvise)
}

func (v *validator) fraction(field string, x float64) {
	if !(x >= 0 && x <= 1) {
		v.addf(field, "%g must be in [0, 1]", x)
	}
}

func (v *validator) nonNegativeFloat(field string, x float64) {
	if !(x >= 0) || math.IsInf(x, 0) {
		v.addf(field, "%g must be a finite number >= 0", x)
	}
}

func (v *validator) nonNegative(field string, d Duration) {
	if d.Duration < 0 {
		v.addf(field, "%s must not be negative", d)
	}
}

func (v *validator) positive(field string, d Duration) {
	if d.Duration <= 0 {
		v.addf(field, "%s must be positive", d)
	}
}

func (v *validator) err() error {
	if len(v.problems) == 0 {
		return nil
	}
	return fmt.Errorf("%w: %s", ErrInvalidPolicy, strings.Join(v.problems, "; "))
}

// unknownFields lists the full paths ("plateau.enterProb",
// "overrides[0].stopp") of the keys in data that Policy does not have, with
// the known keys at that level, so that a typo in the config file is easy to
// find.
func unknownFields(data []byte) []string {
	return yamlfields.Unknown(data, reflect.TypeFor[Policy](), reflect.TypeFor[Duration]())
}
