// Package plannerconfig is the controller's component config file
// (PlannerConfiguration, `planner run --config FILE`): its schema,
// documented defaults, strict parsing and validation. It knows nothing of
// the reconciler that reads it.
package plannerconfig

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"reflect"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/yaml"

	"github.com/progress-planner/planner/internal/yamlfields"
	"github.com/progress-planner/planner/pkg/forecast"
	"github.com/progress-planner/planner/pkg/preempt"
)

// The component config file's apiVersion and kind.
const (
	ConfigAPIVersion = "planner.progress.io/v1alpha1"
	ConfigKind       = "PlannerConfiguration"
)

// DefaultLeaderElectionNamespace is used when leaderElection.namespace is
// empty and the POD_NAMESPACE environment variable is not set.
const DefaultLeaderElectionNamespace = "progress-planner-system"

// DefaultMinImprovementFloor is the smallest value of the meaningful
// improvement that the leave-one-dataset-out grid scored (docs/backtest.md
// 7.2, where every split chose it): below it nothing on the corpus shows
// what the rule does.
const DefaultMinImprovementFloor = 0.005

// MaxMinImprovement bounds the meaningful improvement a config or a job
// may ask for: beyond half the metric's value no job would ever plateau.
const MaxMinImprovement = 0.5

// ErrInvalidConfig is wrapped by every error ParseConfig returns for a
// config file that parses but breaks a rule.
var ErrInvalidConfig = errors.New("invalid config")

// Config is the controller's component config (`planner run --config FILE`).
// Start from DefaultConfig; ParseConfig reads the YAML form, in which every
// field is optional and takes its documented default (docs/controller.md).
type Config struct {
	APIVersion     string               `json:"apiVersion"`
	Kind           string               `json:"kind"`
	LeaderElection LeaderElectionConfig `json:"leaderElection"`
	Metrics        EndpointConfig       `json:"metrics"`
	Health         EndpointConfig       `json:"health"`
	// Pprof serves net/http/pprof's profiles (as Kueue's
	// pprofBindAddress does); off ("0") by default.
	Pprof     EndpointConfig `json:"pprof"`
	Forecast  ForecastConfig `json:"forecast"`
	Workloads WorkloadConfig `json:"workloads"`
	// ProgressEndpoint is the HTTPS endpoint for progress reports
	// (progressendpoint.go); off by default.
	ProgressEndpoint ProgressEndpointConfig `json:"progressEndpoint"`
	// CRDCheckInterval is how often the planner checks for missing
	// Trainer, Kueue or ProgressForecast CRDs until they appear.
	CRDCheckInterval preempt.Duration `json:"crdCheckInterval"`
	// AdmissionEstimates configures the admission estimates published on
	// waiting jobs' ProgressForecasts.
	AdmissionEstimates AdmissionEstimatesConfig `json:"admissionEstimates"`
	// Policy is the decision policy (docs/policy.md); its YAML form is the
	// "policy" section.
	Policy preempt.Policy `json:"-"`
}

// LeaderElectionConfig configures leader election (a coordination.k8s.io
// Lease): only the leader reconciles and writes.
type LeaderElectionConfig struct {
	Enabled bool `json:"enabled"`
	// Namespace of the Lease; empty: $POD_NAMESPACE, else
	// progress-planner-system.
	Namespace     string           `json:"namespace"`
	LeaseName     string           `json:"leaseName"`
	LeaseDuration preempt.Duration `json:"leaseDuration"`
	RenewDeadline preempt.Duration `json:"renewDeadline"`
	RetryPeriod   preempt.Duration `json:"retryPeriod"`
}

// EndpointConfig is an HTTP listener; BindAddress "0" disables it.
type EndpointConfig struct {
	BindAddress string `json:"bindAddress"`
}

// ForecastConfig is the per-job forecast rate limit: forecasts cost grows
// with the number of jobs, not with how often they report.
type ForecastConfig struct {
	// MinInterval: at most one forecast per job per MinInterval while
	// reports arrive, unless the verdict could change at once (a
	// non-finite loss, a restart, an admission or eviction, a changed
	// objective, a decision deadline).
	MinInterval preempt.Duration `json:"minInterval"`
	// UrgentMinInterval bounds even those forecasts, so that a job cannot
	// force a forecast per report.
	UrgentMinInterval preempt.Duration `json:"urgentMinInterval"`
	// IdleInterval: a job without new reports is still forecast this
	// often (that is how a hang is noticed).
	IdleInterval preempt.Duration `json:"idleInterval"`
	// MaxConcurrentReconciles is the number of jobs reconciled in parallel.
	// Reconciles mostly wait on the API server (a forecast ends with a
	// status write), so it is well above the number of cores.
	MaxConcurrentReconciles int `json:"maxConcurrentReconciles"`
	// CheckpointInterval: a job's forecast summary and history are
	// written to its ProgressForecast at most once per CheckpointInterval
	// (0: after every forecast). Anything a reader acts on (verdict,
	// boost, mode, protection, Workload, conditions) is written at once.
	// It bounds the planner's API writes (about 1,000/CheckpointInterval
	// per 1,000 jobs); a failover or restart loses at most this much of a
	// job's history.
	CheckpointInterval preempt.Duration `json:"checkpointInterval"`
	// MinImprovement is forecast.Settings.MinImprovement for every job: the
	// smallest gain, as a share of the metric's own value, that keeps a job
	// from being called Plateaued (docs/policy.md, "Plateau rules"). A job
	// may set its own with the annotation planner.progress.io/min-improvement.
	MinImprovement float64 `json:"minImprovement"`
	// MinImprovementFloor is the smallest meaningful improvement a job's
	// annotation may set (other than 0, which turns the rule off and so
	// only lets the job be called sooner): the annotation is tenant-written,
	// and a tiny value would hold a job whose best creeps by a rounding
	// error out of Plateaued for good. A lower value is raised to the floor.
	MinImprovementFloor float64 `json:"minImprovementFloor"`
}

// AnnotationFloor is the least a job's min-improvement annotation may set:
// MinImprovementFloor, or the cluster's own MinImprovement where that is
// lower (and not 0), since what the cluster asks of every job is
// acceptable for one. A config that predates the floor keeps working.
func (fc ForecastConfig) AnnotationFloor() float64 {
	if fc.MinImprovement > 0 && fc.MinImprovement < fc.MinImprovementFloor {
		return fc.MinImprovement
	}
	return fc.MinImprovementFloor
}

// WorkloadConfig configures how Workloads are read and acted on.
type WorkloadConfig struct {
	// GPUResource is the resource name counted as GPUs in the facts the
	// policy sees (GPU-hours saved by a stop).
	GPUResource string `json:"gpuResource"`
	// MaxNudges bounds the waiting Workloads woken after the planner
	// lowers the boost of an admitted Workload in their ClusterQueue.
	MaxNudges int `json:"maxNudges"`
}

// AdmissionEstimatesConfig configures the admission estimates the leader
// publishes on the ProgressForecasts of waiting jobs
// (status.admissionEstimate).
type AdmissionEstimatesConfig struct {
	// Interval between two passes over the cluster (default 5m); 0
	// publishes none. A pass simulates the cluster forward in
	// admission.DefaultRuns futures from the controller's latest forecasts
	// (no refits): about 0.4 s of CPU at 1,000 running jobs
	// (BenchmarkPublish, docs/controller.md).
	Interval preempt.Duration `json:"interval"`
}

// DefaultConfig returns the documented defaults.
func DefaultConfig() Config {
	return Config{
		APIVersion: ConfigAPIVersion,
		Kind:       ConfigKind,
		LeaderElection: LeaderElectionConfig{
			Enabled:       true,
			LeaseName:     "progress-planner",
			LeaseDuration: preempt.Dur(15 * time.Second),
			RenewDeadline: preempt.Dur(10 * time.Second),
			RetryPeriod:   preempt.Dur(2 * time.Second),
		},
		// Loopback: run outside a cluster, nothing is exposed. The shipped
		// Deployment's config listens on the pod's interfaces, where the
		// kubelet probes and Prometheus scrapes (config/manager).
		Metrics: EndpointConfig{BindAddress: "127.0.0.1:8080"},
		Health:  EndpointConfig{BindAddress: "127.0.0.1:8081"},
		Pprof:   EndpointConfig{BindAddress: "0"},
		Forecast: ForecastConfig{
			MinInterval:             preempt.Dur(30 * time.Second),
			UrgentMinInterval:       preempt.Dur(5 * time.Second),
			MinImprovement:          forecast.DefaultSettings().MinImprovement,
			MinImprovementFloor:     DefaultMinImprovementFloor,
			IdleInterval:            preempt.Dur(2 * time.Minute),
			CheckpointInterval:      preempt.Dur(10 * time.Minute),
			MaxConcurrentReconciles: 256,
		},
		Workloads: WorkloadConfig{
			GPUResource: "nvidia.com/gpu",
			MaxNudges:   32,
		},
		AdmissionEstimates: AdmissionEstimatesConfig{Interval: preempt.Dur(5 * time.Minute)},
		CRDCheckInterval:   preempt.Dur(30 * time.Second),
		ProgressEndpoint:   defaultProgressEndpoint(),
		Policy:             preempt.DefaultPolicy(),
	}
}

// configFile is Config with the policy section kept raw, so that it can be
// read by preempt.ParsePolicy (defaults, strictness and validation).
type configFile struct {
	Config `json:",inline"`
	Policy json.RawMessage `json:"policy,omitempty"`
}

// ParseConfig reads a config file. Absent fields take their defaults;
// apiVersion and kind are required; a second YAML document, unknown fields,
// duplicate keys, non-finite numbers and values that break a rule are
// errors naming the field.
func ParseConfig(data []byte) (Config, error) {
	if err := yamlfields.Check(data); err != nil {
		return Config{}, err
	}
	f := configFile{Config: DefaultConfig()}
	f.APIVersion, f.Kind = "", ""
	if err := yaml.UnmarshalStrict(data, &f); err != nil {
		if paths := unknownConfigFields(data); len(paths) > 0 {
			return Config{}, fmt.Errorf("unknown field %s", strings.Join(paths, ", "))
		}
		return Config{}, fmt.Errorf("%w", err)
	}
	c := f.Config
	c.Policy = preempt.DefaultPolicy()
	if len(f.Policy) > 0 && string(f.Policy) != "null" {
		p, err := preempt.ParsePolicy(f.Policy)
		if err != nil {
			if errors.Is(err, preempt.ErrInvalidPolicy) {
				return Config{}, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
			}
			return Config{}, err
		}
		c.Policy = p
	}
	if err := c.Validate(); err != nil {
		return Config{}, err
	}
	return c, nil
}

// LoadConfig reads and parses the config file at path; errors name the file.
func LoadConfig(path string) (Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Config{}, fmt.Errorf("config: %w", err)
	}
	c, err := ParseConfig(data)
	if err != nil {
		return Config{}, fmt.Errorf("config %s: %w", path, err)
	}
	return c, nil
}

// Validate reports every rule the config breaks, each naming the field; the
// error wraps ErrInvalidConfig (and preempt.ErrInvalidPolicy for the policy).
func (c Config) Validate() error {
	var problems []string
	add := func(field, format string, args ...any) {
		problems = append(problems, field+": "+fmt.Sprintf(format, args...))
	}
	if c.APIVersion != ConfigAPIVersion {
		add("apiVersion", "%q must be %q", c.APIVersion, ConfigAPIVersion)
	}
	if c.Kind != ConfigKind {
		add("kind", "%q must be %q", c.Kind, ConfigKind)
	}
	le := c.LeaderElection
	if le.Enabled {
		if le.Namespace != "" {
			for _, msg := range validation.IsDNS1123Label(le.Namespace) {
				add("leaderElection.namespace", "%q: %s", le.Namespace, msg)
			}
		}
		for _, msg := range validation.IsDNS1123Subdomain(le.LeaseName) {
			add("leaderElection.leaseName", "%q: %s", le.LeaseName, msg)
		}
		positive := func(field string, d preempt.Duration) {
			if d.Duration <= 0 {
				add(field, "%s must be positive", d.Duration)
			}
		}
		positive("leaderElection.leaseDuration", le.LeaseDuration)
		positive("leaderElection.renewDeadline", le.RenewDeadline)
		positive("leaderElection.retryPeriod", le.RetryPeriod)
		if le.RenewDeadline.Duration >= le.LeaseDuration.Duration {
			add("leaderElection.renewDeadline", "%s must be shorter than leaderElection.leaseDuration %s", le.RenewDeadline.Duration, le.LeaseDuration.Duration)
		}
		if le.RetryPeriod.Duration >= le.RenewDeadline.Duration {
			add("leaderElection.retryPeriod", "%s must be shorter than leaderElection.renewDeadline %s", le.RetryPeriod.Duration, le.RenewDeadline.Duration)
		}
	}
	for _, ep := range []struct {
		field string
		addr  string
	}{{"metrics.bindAddress", c.Metrics.BindAddress}, {"health.bindAddress", c.Health.BindAddress}, {"pprof.bindAddress", c.Pprof.BindAddress}} {
		if err := checkBindAddress(ep.addr); err != nil {
			add(ep.field, "%q: %v", ep.addr, err)
		}
	}
	if c.Metrics.BindAddress != "0" && c.Metrics.BindAddress == c.Health.BindAddress {
		add("health.bindAddress", "%q is also metrics.bindAddress", c.Health.BindAddress)
	}
	if c.Pprof.BindAddress != "0" && (c.Pprof.BindAddress == c.Metrics.BindAddress || c.Pprof.BindAddress == c.Health.BindAddress) {
		add("pprof.bindAddress", "%q is also another listener's address", c.Pprof.BindAddress)
	}
	fc := c.Forecast
	if fc.MinInterval.Duration <= 0 {
		add("forecast.minInterval", "%s must be positive", fc.MinInterval.Duration)
	}
	if fc.UrgentMinInterval.Duration < 0 || fc.UrgentMinInterval.Duration > fc.MinInterval.Duration {
		add("forecast.urgentMinInterval", "%s must be in [0, forecast.minInterval %s]", fc.UrgentMinInterval.Duration, fc.MinInterval.Duration)
	}
	if fc.IdleInterval.Duration < fc.MinInterval.Duration {
		add("forecast.idleInterval", "%s must not be shorter than forecast.minInterval %s", fc.IdleInterval.Duration, fc.MinInterval.Duration)
	}
	if fc.CheckpointInterval.Duration < 0 || fc.CheckpointInterval.Duration > time.Hour {
		add("forecast.checkpointInterval", "%s must be in [0, 1h]", fc.CheckpointInterval.Duration)
	}
	if fc.MaxConcurrentReconciles < 1 || fc.MaxConcurrentReconciles > 1024 {
		add("forecast.maxConcurrentReconciles", "%d must be in [1, 1024]", fc.MaxConcurrentReconciles)
	}
	if !(fc.MinImprovement >= 0 && fc.MinImprovement <= MaxMinImprovement) {
		add("forecast.minImprovement", "%g must be in [0, %g]", fc.MinImprovement, MaxMinImprovement)
	}
	if !(fc.MinImprovementFloor >= 0 && fc.MinImprovementFloor <= MaxMinImprovement) {
		add("forecast.minImprovementFloor", "%g must be in [0, %g]", fc.MinImprovementFloor, MaxMinImprovement)
	}
	w := c.Workloads
	if w.GPUResource == "" {
		add("workloads.gpuResource", "must not be empty")
	} else {
		for _, msg := range validation.IsQualifiedName(w.GPUResource) {
			add("workloads.gpuResource", "%q: %s", w.GPUResource, msg)
		}
	}
	if w.MaxNudges < 0 || w.MaxNudges > 1000 {
		add("workloads.maxNudges", "%d must be in [0, 1000]", w.MaxNudges)
	}
	if c.CRDCheckInterval.Duration < time.Second {
		add("crdCheckInterval", "%s must be at least 1s", c.CRDCheckInterval.Duration)
	}
	if a := c.AdmissionEstimates.Interval.Duration; a != 0 && (a < 10*time.Second || a > time.Hour) {
		add("admissionEstimates.interval", "%s must be 0 (off) or in [10s, 1h]", a)
	}
	problems = append(problems, c.ProgressEndpoint.validate()...)
	var err error
	if len(problems) > 0 {
		err = fmt.Errorf("%w: %s", ErrInvalidConfig, strings.Join(problems, "; "))
	}
	if perr := c.Policy.Validate(); perr != nil {
		if err == nil {
			return fmt.Errorf("%w: policy: %w", ErrInvalidConfig, perr)
		}
		return fmt.Errorf("%w; policy: %w", err, perr)
	}
	return err
}

// GPUResourceName is Workloads.GPUResource as a resource name.
func (c Config) GPUResourceName() corev1.ResourceName {
	return corev1.ResourceName(c.Workloads.GPUResource)
}

// LeaderElectionNamespace resolves LeaderElection.Namespace.
func (c Config) LeaderElectionNamespace() string {
	if ns := c.LeaderElection.Namespace; ns != "" {
		return ns
	}
	if ns := os.Getenv("POD_NAMESPACE"); ns != "" {
		return ns
	}
	return DefaultLeaderElectionNamespace
}

// YAML renders the config (policy included) in the form ParseConfig reads.
func (c Config) YAML() ([]byte, error) {
	pol, err := json.Marshal(c.Policy)
	if err != nil {
		return nil, err
	}
	return yaml.Marshal(configFile{Config: c, Policy: pol})
}

func checkBindAddress(addr string) error {
	if addr == "0" {
		return nil
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("want HOST:PORT, :PORT or 0 (disabled): %w", err)
	}
	if host != "" && net.ParseIP(host) == nil && len(validation.IsDNS1123Subdomain(host)) > 0 {
		return fmt.Errorf("host %q is neither an IP address nor a host name", host)
	}
	n, err := strconv.Atoi(port)
	if err != nil || n < 0 || n > 65535 {
		return fmt.Errorf("port %q is not a number in [0, 65535]", port)
	}
	return nil
}

// unknownConfigFields lists the full paths of keys in data that Config does
// not have (outside the policy section, which ParsePolicy checks), with the
// known keys at that level.
func unknownConfigFields(data []byte) []string {
	return yamlfields.Unknown(data, reflect.TypeFor[configFile](), reflect.TypeFor[preempt.Duration]())
}
