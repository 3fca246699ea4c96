package plannerconfig

import (
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/progress-planner/planner/pkg/preempt"
)

func TestDefaultConfigValid(t *testing.T) {
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatalf("DefaultConfig invalid: %v", err)
	}
}

func TestParseConfigMinimal(t *testing.T) {
	c, err := ParseConfig([]byte("apiVersion: planner.progress.io/v1alpha1\nkind: PlannerConfiguration\n"))
	if err != nil {
		t.Fatal(err)
	}
	d := DefaultConfig()
	if c.Forecast != d.Forecast || c.LeaderElection != d.LeaderElection || c.Workloads != d.Workloads ||
		c.Metrics != d.Metrics || c.Health != d.Health || c.CRDCheckInterval != d.CRDCheckInterval {
		t.Errorf("minimal config does not take the defaults:\n got %+v\nwant %+v", c, d)
	}
	if c.Policy.Mode != preempt.ModeEnforce || c.Policy.Stability.MinDwell.Duration != 5*time.Minute {
		t.Errorf("policy defaults not applied: %+v", c.Policy)
	}
}

func TestParseConfigOverrides(t *testing.T) {
	c, err := ParseConfig([]byte(`
apiVersion: planner.progress.io/v1alpha1
kind: PlannerConfiguration
leaderElection: {enabled: false}
forecast: {minInterval: 10s, idleInterval: 1m}
workloads: {gpuResource: amd.com/gpu}
policy:
  mode: advise
  stability: {minDwell: 1m}
`))
	if err != nil {
		t.Fatal(err)
	}
	if c.LeaderElection.Enabled || c.LeaderElection.LeaseName != "progress-planner" {
		t.Errorf("leaderElection: %+v", c.LeaderElection)
	}
	if c.Forecast.MinInterval.Duration != 10*time.Second || c.Forecast.IdleInterval.Duration != time.Minute ||
		c.Forecast.UrgentMinInterval.Duration != 5*time.Second {
		t.Errorf("forecast: %+v", c.Forecast)
	}
	if c.GPUResourceName() != "amd.com/gpu" {
		t.Errorf("gpuResource %q", c.GPUResourceName())
	}
	if c.Policy.Mode != preempt.ModeAdvise || c.Policy.Stability.MinDwell.Duration != time.Minute ||
		c.Policy.Stability.MaxBoostChangesPerHour != 4 {
		t.Errorf("policy: %+v", c.Policy.Stability)
	}
}

func TestParseConfigErrors(t *testing.T) {
	head := "apiVersion: planner.progress.io/v1alpha1\nkind: PlannerConfiguration\n"
	tests := []struct {
		name, yaml string
		want       []string // substrings of the error
		invalid    bool     // wraps ErrInvalidConfig
	}{
		{"missing apiVersion", "kind: PlannerConfiguration\n", []string{"apiVersion", "planner.progress.io/v1alpha1"}, true},
		{"wrong kind", "apiVersion: planner.progress.io/v1alpha1\nkind: Config\n", []string{"kind", `"Config"`}, true},
		{"unknown top-level", head + "forecasts: {}\n", []string{`"forecasts"`, "known at this level", "forecast"}, false},
		{"unknown nested", head + "forecast: {minIntervall: 3s}\n", []string{`"forecast.minIntervall"`, "minInterval"}, false},
		{"unknown policy field", head + "policy: {plateau: {enterProb: 0.9}}\n", []string{`"plateau.enterProb"`}, false},
		{"bad duration", head + "forecast: {minInterval: soon}\n", []string{"soon"}, false},
		{"zero interval", head + "forecast: {minInterval: 0s}\n", []string{"forecast.minInterval", "positive"}, true},
		{"idle below min", head + "forecast: {minInterval: 1m, idleInterval: 30s}\n", []string{"forecast.idleInterval"}, true},
		{"urgent above min", head + "forecast: {urgentMinInterval: 1m}\n", []string{"forecast.urgentMinInterval"}, true},
		{"checkpoint over an hour", head + "forecast: {checkpointInterval: 2h}\n", []string{"forecast.checkpointInterval"}, true},
		{"negative checkpoint", head + "forecast: {checkpointInterval: -1s}\n", []string{"forecast.checkpointInterval"}, true},
		{"renew >= lease", head + "leaderElection: {leaseDuration: 10s, renewDeadline: 10s}\n", []string{"leaderElection.renewDeadline"}, true},
		{"bad lease name", head + "leaderElection: {leaseName: Bad_Name}\n", []string{"leaderElection.leaseName"}, true},
		{"bad address", head + "metrics: {bindAddress: localhost}\n", []string{"metrics.bindAddress"}, true},
		{"same address", head + "metrics: {bindAddress: ':9000'}\nhealth: {bindAddress: ':9000'}\n", []string{"health.bindAddress"}, true},
		{"pprof on the metrics address", head + "metrics: {bindAddress: ':9000'}\npprof: {bindAddress: ':9000'}\n", []string{"pprof.bindAddress"}, true},
		{"bad pprof address", head + "pprof: {bindAddress: nowhere}\n", []string{"pprof.bindAddress"}, true},
		{"min improvement above range", head + "forecast: {minImprovement: 0.9}\n", []string{"forecast.minImprovement", "[0, 0.5]"}, true},
		{"negative min improvement", head + "forecast: {minImprovement: -0.01}\n", []string{"forecast.minImprovement"}, true},
		{"min improvement floor above range", head + "forecast: {minImprovementFloor: 0.6}\n", []string{"forecast.minImprovementFloor", "[0, 0.5]"}, true},
		{"bad gpu resource", head + "workloads: {gpuResource: 'nvidia com/gpu'}\n", []string{"workloads.gpuResource"}, true},
		{"policy rule", head + "policy: {boosts: {plateaued: 50}}\n", []string{"boosts.plateaued", "must not be positive"}, true},
		{"not yaml", "{", []string{"yaml"}, false},
		// Issue 14: the second document (and its mode) used to be ignored,
		// and .nan gave "json: unsupported value: NaN" without a field.
		{"second document", head + "---\npolicy: {mode: enforce}\n", []string{"second YAML document", "line 3"}, false},
		{"nan in the policy", head + "policy:\n  evidence: {confidenceFloor: .nan}\n", []string{"policy.evidence.confidenceFloor", ".nan", "finite"}, false},
		{"inf for a count", head + "workloads: {maxNudges: .inf}\n", []string{"workloads.maxNudges", "finite"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseConfig([]byte(tt.yaml))
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
			if got := errors.Is(err, ErrInvalidConfig); got != tt.invalid {
				t.Errorf("errors.Is(ErrInvalidConfig) = %v, want %v (%v)", got, tt.invalid, err)
			}
		})
	}
}

func TestConfigPolicyErrorWrapsPolicy(t *testing.T) {
	_, err := ParseConfig([]byte("apiVersion: planner.progress.io/v1alpha1\nkind: PlannerConfiguration\npolicy: {mode: sometimes}\n"))
	if !errors.Is(err, preempt.ErrInvalidPolicy) || !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("err %v: want both ErrInvalidConfig and preempt.ErrInvalidPolicy", err)
	}
}

func TestConfigYAMLRoundTrip(t *testing.T) {
	c := DefaultConfig()
	c.Policy.Mode = preempt.ModeAdvise
	c.Forecast.MinInterval = preempt.Dur(45 * time.Second)
	b, err := c.YAML()
	if err != nil {
		t.Fatal(err)
	}
	back, err := ParseConfig(b)
	if err != nil {
		t.Fatalf("reparse: %v\n%s", err, b)
	}
	if back.Forecast != c.Forecast || back.Policy.Mode != preempt.ModeAdvise {
		t.Errorf("round trip lost values: %+v", back)
	}
}

func TestSampleConfigParses(t *testing.T) {
	c, err := LoadConfig("../../config/samples/planner-config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if c.Policy.Mode != preempt.ModeAdvise || c.Policy.Effective("research", "").Mode != preempt.ModeEnforce {
		t.Errorf("sample policy: %+v", c.Policy)
	}
}

func TestLoadConfigMissingFile(t *testing.T) {
	_, err := LoadConfig("/nonexistent/planner.yaml")
	if err == nil || !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("err %v", err)
	}
}

func TestLeaderElectionNamespace(t *testing.T) {
	c := DefaultConfig()
	t.Setenv("POD_NAMESPACE", "")
	if got := c.LeaderElectionNamespace(); got != DefaultLeaderElectionNamespace {
		t.Errorf("got %q", got)
	}
	t.Setenv("POD_NAMESPACE", "planner")
	if got := c.LeaderElectionNamespace(); got != "planner" {
		t.Errorf("got %q", got)
	}
	c.LeaderElection.Namespace = "explicit"
	if got := c.LeaderElectionNamespace(); got != "explicit" {
		t.Errorf("got %q", got)
	}
}

// The annotation's floor is the configured one, or the cluster's own
// meaningful improvement where that is lower (a config from before the
// floor keeps its meaning and still loads); 0, the rule off, lowers
// nothing.
func TestAnnotationFloor(t *testing.T) {
	for _, tc := range []struct{ def, floor, want float64 }{
		{0.01, 0.005, 0.005}, {0.003, 0.005, 0.003}, {0, 0.005, 0.005}, {0.01, 0, 0},
	} {
		c := DefaultConfig()
		c.Forecast.MinImprovement, c.Forecast.MinImprovementFloor = tc.def, tc.floor
		if err := c.Validate(); err != nil {
			t.Errorf("minImprovement %g, floor %g: %v", tc.def, tc.floor, err)
		}
		if got := c.Forecast.AnnotationFloor(); got != tc.want {
			t.Errorf("minImprovement %g, floor %g: annotation floor %g, want %g", tc.def, tc.floor, got, tc.want)
		}
	}
}
