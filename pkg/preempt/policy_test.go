package preempt

import (
	"errors"
	"math"
	"math/rand/v2"
	"os"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"
)

func TestDefaultPolicyIsValid(t *testing.T) {
	if err := DefaultPolicy().Validate(); err != nil {
		t.Fatal(err)
	}
	p := DefaultPolicy()
	if p.Stop.Enabled {
		t.Error("stopping must be off by default")
	}
	if p.Boosts.Plateaued >= 0 || p.Boosts.Hung >= 0 || p.Boosts.Diverging >= 0 || p.Boosts.NearDone <= 0 {
		t.Errorf("default boosts %+v", p.Boosts)
	}
}

func TestPolicyYAMLRoundTrip(t *testing.T) {
	yes, no := true, false
	p := DefaultPolicy()
	p.Mode = ModeAdvise
	p.Stability.MinDwell = Dur(90 * time.Second)
	p.Overrides = []Override{
		{Namespace: "team-a", Mode: ModeEnforce, Stop: &yes},
		{ClusterQueue: "shared", AllowJobOptIn: &no},
		{Namespace: "team-b", ClusterQueue: "shared", Mode: ModeAdvise},
	}
	policies := []Policy{DefaultPolicy(), p}
	r := rand.New(rand.NewPCG(3, 4))
	for range 50 {
		policies = append(policies, randomPolicy(r))
	}
	for i, want := range policies {
		b, err := want.YAML()
		if err != nil {
			t.Fatalf("policy %d: %v", i, err)
		}
		got, err := ParsePolicy(b)
		if err != nil {
			t.Fatalf("policy %d: %v\n%s", i, err, b)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("policy %d changed through YAML:\n got %+v\nwant %+v\n%s", i, got, want, b)
		}
	}
}

func TestParsePolicyDefaultsMissingFields(t *testing.T) {
	got, err := ParsePolicy([]byte(`
mode: advise
stop:
  enabled: true
  gracePeriod: 90m
overrides:
  - namespace: research
    mode: enforce
`))
	if err != nil {
		t.Fatal(err)
	}
	want := DefaultPolicy()
	want.Mode = ModeAdvise
	want.Stop.Enabled = true
	want.Stop.GracePeriod = Dur(90 * time.Minute)
	want.Overrides = []Override{{Namespace: "research", Mode: ModeEnforce}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v\nwant %+v", got, want)
	}
	for _, empty := range []string{"", "{}", "# nothing\n"} {
		if got, err := ParsePolicy([]byte(empty)); err != nil || !reflect.DeepEqual(got, DefaultPolicy()) {
			t.Errorf("%q: %v %+v", empty, err, got)
		}
	}
	// Explicit zero is not "missing".
	if got, err := ParsePolicy([]byte("boosts: {plateaued: 0}")); err != nil || got.Boosts.Plateaued != 0 {
		t.Errorf("explicit zero: %v %+v", err, got.Boosts)
	}
}

func TestParsePolicyErrors(t *testing.T) {
	tests := []struct {
		name, yaml string
		want       []string
	}{
		{"unknown top-level field", "mode: enforce\nboost: {}\n", []string{`unknown field "boost" (known at this level: mode, boosts, evidence,`}},
		{"unknown nested field", "plateau:\n  enterProb: 0.9\n", []string{`unknown field "plateau.enterProb" (known at this level: enterProbability, exitProbability, enterRelativeRemaining, exitRelativeRemaining)`}},
		{"unknown override field", "overrides:\n  - namespace: a\n    stopp: true\n", []string{`unknown field "overrides[0].stopp"`}},
		{"duplicate key", "mode: enforce\nmode: advise\n", []string{"mode", "already set"}},
		{"duration as number", "stability:\n  minDwell: 300\n", []string{`duration 300: want a string such as "90s", "5m" or "1h30m"`}},
		{"bad duration", "stop:\n  gracePeriod: two hours\n", []string{`duration "two hours"`}},
		{"wrong type", "boosts:\n  plateaued: lots\n", []string{"plateaued"}},
		{"not a mapping", "- a\n- b\n", []string{"policy:"}},
		{"invalid value", "mode: observe\n", []string{`invalid policy: mode: "observe" is neither "enforce" nor "advise"`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParsePolicy([]byte(tc.yaml))
			if err == nil {
				t.Fatal("no error")
			}
			wantContains(t, err.Error(), tc.want...)
		})
	}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name string
		edit func(*Policy)
		want string
	}{
		{"mode", func(p *Policy) { p.Mode = "" }, `mode: "" is neither "enforce" nor "advise"`},
		{"positive stall boost", func(p *Policy) { p.Boosts.Hung = 10 }, "boosts.hung: 10 must not be positive"},
		{"stall boost below min", func(p *Policy) { p.Boosts.Diverging = -2000 }, "boosts.diverging: -2000 is below boosts.min -1000"},
		{"negative protection", func(p *Policy) { p.Boosts.NearDone = -1 }, "boosts.nearDone: -1 must not be negative"},
		{"protection above max", func(p *Policy) { p.Boosts.NearDone = 1001 }, "boosts.nearDone: 1001 is above boosts.max 1000"},
		{"min positive", func(p *Policy) { p.Boosts.Min = 1 }, "boosts.min: 1 must be in [-1000000000, 0]"},
		{"max too large", func(p *Policy) { p.Boosts.Max = math.MaxInt32 }, "boosts.max: 2147483647 must be in [0, 1000000000]"},
		{"min reports", func(p *Policy) { p.Evidence.MinReports = 0 }, "evidence.minReports: 0 must be at least 1"},
		{"negative min age", func(p *Policy) { p.Evidence.MinAge = Dur(-time.Second) }, "evidence.minAge: -1s must not be negative"},
		{"confidence floor", func(p *Policy) { p.Evidence.ConfidenceFloor = 1.5 }, "evidence.confidenceFloor: 1.5 must be in [0, 1]"},
		{"confidence margin", func(p *Policy) { p.Evidence.ConfidenceMargin = 0.6 }, "evidence.confidenceMargin: 0.6 must be in [0, evidence.confidenceFloor 0.5]"},
		{"NaN probability", func(p *Policy) { p.Plateau.EnterProbability = math.NaN() }, "plateau.enterProbability: NaN must be in [0, 1]"},
		{"plateau band inverted", func(p *Policy) { p.Plateau.ExitProbability = 0.9 }, "plateau.exitProbability: 0.9 must not exceed plateau.enterProbability 0.8"},
		{"relative remaining band inverted", func(p *Policy) { p.Plateau.ExitRelativeRemaining = 0.01 }, "plateau.exitRelativeRemaining: 0.01 must not be below plateau.enterRelativeRemaining 0.02"},
		{"enter progress", func(p *Policy) { p.NearDone.EnterProgress = 0 }, "nearDone.enterProgress: 0 must be in (0, 1]"},
		{"exit progress", func(p *Policy) { p.NearDone.ExitProgress = 0.95 }, "nearDone.exitProgress: 0.95 must be in (0, nearDone.enterProgress 0.9]"},
		{"exit ETA", func(p *Policy) { p.NearDone.ExitMaxETA = Dur(10 * time.Minute) }, "nearDone.exitMaxETA: 10m0s must not be below nearDone.enterMaxETA 30m0s"},
		{"lease margin", func(p *Policy) { p.NearDone.LeaseMargin = math.Inf(1) }, "nearDone.leaseMargin: +Inf must be a finite number >= 0"},
		{"max lease", func(p *Policy) { p.NearDone.MaxLease = Dur(0) }, "nearDone.maxLease: 0s must be positive"},
		{"jump ratio", func(p *Policy) { p.Integrity.MaxJumpRatio = 1 }, "integrity.maxJumpRatio: 1 must be a finite number above 1"},
		{"ETA ratio", func(p *Policy) { p.Integrity.MaxETARatio = math.Inf(1) }, "integrity.maxETARatio: +Inf must be a finite number above 1"},
		{"ETA gap", func(p *Policy) { p.Integrity.MinETAGap = Dur(-time.Minute) }, "integrity.minETAGap: -1m0s must not be negative"},
		{"progress gap", func(p *Policy) { p.Integrity.MaxProgressGap = -0.1 }, "integrity.maxProgressGap: -0.1 must be in [0, 1]"},
		{"rate cap", func(p *Policy) { p.Stability.MaxBoostChangesPerHour = 1 }, "stability.maxBoostChangesPerHour: 1 must be at least 2"},
		{"grace shorter than dwell", func(p *Policy) { p.Stop.GracePeriod = Dur(time.Minute) }, "stop.gracePeriod: 1m0s must not be shorter than stability.minDwell 5m0s"},
		{"stop confidence", func(p *Policy) { p.Stop.MinConfidence = 2 }, "stop.minConfidence: 2 must be in [0, 1]"},
		{"horizon", func(p *Policy) { p.Stop.Horizon = Dur(0) }, "stop.horizon: 0s must be positive"},
		{"override without scope", func(p *Policy) { p.Overrides = []Override{{Mode: ModeAdvise}} }, "overrides[0]: sets neither namespace nor clusterQueue"},
		{"override without effect", func(p *Policy) { p.Overrides = []Override{{Namespace: "a"}} }, "overrides[0]: changes nothing"},
		{"override mode", func(p *Policy) { p.Overrides = []Override{{Namespace: "a", Mode: "dry-run"}} }, `overrides[0].mode: "dry-run" is neither`},
		{"duplicate override", func(p *Policy) {
			p.Overrides = []Override{{Namespace: "a", Mode: ModeAdvise}, {Namespace: "b", Mode: ModeAdvise}, {Namespace: "a", Mode: ModeEnforce}}
		}, `overrides[2]: matches the same namespace "a" and clusterQueue "" as overrides[0]`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := DefaultPolicy()
			tc.edit(&p)
			err := p.Validate()
			if err == nil {
				t.Fatal("no error")
			}
			if !errors.Is(err, ErrInvalidPolicy) {
				t.Errorf("%v does not wrap ErrInvalidPolicy", err)
			}
			wantContains(t, err.Error(), tc.want)
			if b, yerr := p.YAML(); yerr == nil { // NaN and Inf have no YAML form here
				if _, perr := ParsePolicy(b); perr == nil || !strings.Contains(perr.Error(), tc.want) {
					t.Errorf("ParsePolicy: %v", perr)
				}
			}
		})
	}
}

func TestValidateReportsEveryProblem(t *testing.T) {
	p := DefaultPolicy()
	p.Boosts.Hung = 5
	p.Stop.Horizon = Dur(0)
	err := p.Validate()
	wantContains(t, err.Error(), "boosts.hung", "stop.horizon")
	if strings.Contains(err.Error(), "\n") {
		t.Errorf("error is not one line: %q", err)
	}
}

func TestEffective(t *testing.T) {
	yes, no := true, false
	p := DefaultPolicy()
	p.Overrides = []Override{
		{Namespace: "team-a", ClusterQueue: "gpu", Mode: ModeEnforce},
		{Namespace: "team-a", Mode: ModeAdvise, Stop: &yes},
		{ClusterQueue: "gpu", Mode: ModeAdvise, Stop: &no, AllowJobOptIn: &no},
		{ClusterQueue: "cpu", Stop: &yes},
	}
	tests := []struct {
		ns, cq string
		want   Effective
	}{
		{"team-b", "other", Effective{Mode: ModeEnforce, Stop: false, AllowJobOptIn: true, Scope: "global", StopScope: "global"}},
		{"team-b", "gpu", Effective{Mode: ModeAdvise, Stop: false, AllowJobOptIn: false, Scope: "clusterQueue gpu", StopScope: "clusterQueue gpu"}},
		{"team-b", "cpu", Effective{Mode: ModeEnforce, Stop: true, AllowJobOptIn: true, Scope: "global", StopScope: "clusterQueue cpu"}},
		{"team-a", "other", Effective{Mode: ModeAdvise, Stop: true, AllowJobOptIn: true, Scope: "namespace team-a", StopScope: "namespace team-a"}},
		// namespace beats queue; both beats either; unset fields fall through.
		{"team-a", "gpu", Effective{Mode: ModeEnforce, Stop: true, AllowJobOptIn: false, Scope: "namespace team-a/clusterQueue gpu", StopScope: "namespace team-a"}},
		{"team-a", "cpu", Effective{Mode: ModeAdvise, Stop: true, AllowJobOptIn: true, Scope: "namespace team-a", StopScope: "namespace team-a"}},
	}
	for _, tc := range tests {
		if got := p.Effective(tc.ns, tc.cq); got != tc.want {
			t.Errorf("Effective(%q, %q) = %+v, want %+v", tc.ns, tc.cq, got, tc.want)
		}
	}
	// Order within the list does not matter.
	q := p
	q.Overrides = []Override{p.Overrides[3], p.Overrides[2], p.Overrides[1], p.Overrides[0]}
	for _, tc := range tests {
		if got := q.Effective(tc.ns, tc.cq); got != tc.want {
			t.Errorf("reversed: Effective(%q, %q) = %+v, want %+v", tc.ns, tc.cq, got, tc.want)
		}
	}
}

// TestDocsDefaults keeps docs/policy.md honest: its defaults block parses to
// DefaultPolicy, and every field is documented.
func TestDocsDefaults(t *testing.T) {
	doc, err := os.ReadFile("../../docs/policy.md")
	if err != nil {
		t.Fatalf("docs/policy.md not readable: %v", err)
	}
	blocks := regexp.MustCompile("(?s)```yaml\n(.*?)```").FindAllSubmatch(doc, -1)
	if len(blocks) == 0 {
		t.Fatal("no yaml block in docs/policy.md")
	}
	for i, b := range blocks[1:] { // the examples parse too
		if _, err := ParsePolicy(b[1]); err != nil {
			t.Errorf("docs yaml block %d: %v", i+2, err)
		}
	}
	m := blocks[0]
	got, err := ParsePolicy(m[1])
	if err != nil {
		t.Fatalf("docs defaults: %v", err)
	}
	if !reflect.DeepEqual(got, DefaultPolicy()) {
		t.Fatalf("docs defaults differ from DefaultPolicy:\n got %+v\nwant %+v", got, DefaultPolicy())
	}
	// Every key of the full form appears in the doc's defaults block.
	full, _ := DefaultPolicy().YAML()
	for _, line := range strings.Split(string(full), "\n") {
		key, _, ok := strings.Cut(strings.TrimSpace(line), ":")
		if ok && !strings.Contains(string(m[1]), key+":") {
			t.Errorf("docs defaults block lacks %q", key)
		}
	}
}

// Issue 14: a second document and non-finite numbers are refused, naming
// where they are.
func TestParsePolicyRefusesSecondDocumentAndNonFinite(t *testing.T) {
	for in, want := range map[string]string{
		"mode: advise\n---\nmode: enforce\n":   "second YAML document at line 2",
		"plateau:\n  enterProbability: .nan\n": "plateau.enterProbability (line 2)",
		"evidence: {confidenceFloor: -.inf}\n": "evidence.confidenceFloor (line 1)",
	} {
		if _, err := ParsePolicy([]byte(in)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParsePolicy(%q): error %v, want one containing %q", in, err, want)
		}
	}
}
