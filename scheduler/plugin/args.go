package plugin

import (
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
)

// Defaults of Args.
const (
	DefaultGPUResource      = v1.ResourceName("nvidia.com/gpu")
	DefaultProtectionMargin = int32(1000)
	DefaultMaxForecastAge   = 30 * time.Minute
	// The candidate-node limits are those of DefaultPreemption.
	DefaultMinCandidateNodesPercentage = int32(10)
	DefaultMinCandidateNodesAbsolute   = int32(100)
)

// Args configure the plugin (pluginConfig[].args in a
// KubeSchedulerConfiguration; see config/scheduler/).
type Args struct {
	metav1.TypeMeta `json:",inline"`

	// GPUResource is the extended resource whose requests measure a pod's
	// GPUs in the work-lost cost. Default nvidia.com/gpu.
	GPUResource v1.ResourceName `json:"gpuResource,omitempty"`
	// ProtectionMargin is by how much a preemptor's priority must exceed
	// the priority of a job under an active NearDone lease before that job
	// may be evicted at all (and then only when nothing else frees enough).
	// Default 1000; 0 lets any higher-priority pod evict it as a last
	// resort.
	ProtectionMargin *int32 `json:"protectionMargin,omitempty"`
	// MaxForecastAge: a decision older than this no longer counts for its
	// verdict and boost (the job is ranked as if it had no verdict; a lease
	// still lasts until its own end). Default 30m.
	MaxForecastAge *metav1.Duration `json:"maxForecastAge,omitempty"`
	// MinCandidateNodesPercentage and MinCandidateNodesAbsolute bound how
	// many nodes a preemption dry-runs, as in DefaultPreemptionArgs.
	// Defaults 10 and 100.
	MinCandidateNodesPercentage *int32 `json:"minCandidateNodesPercentage,omitempty"`
	MinCandidateNodesAbsolute   *int32 `json:"minCandidateNodesAbsolute,omitempty"`
}

// DeepCopyObject implements runtime.Object, so that Args can be passed as a
// plugin's args in code.
func (a *Args) DeepCopyObject() runtime.Object {
	c := *a
	for _, p := range []**int32{&c.ProtectionMargin, &c.MinCandidateNodesPercentage, &c.MinCandidateNodesAbsolute} {
		if *p != nil {
			v := **p
			*p = &v
		}
	}
	if c.MaxForecastAge != nil {
		d := *c.MaxForecastAge
		c.MaxForecastAge = &d
	}
	return &c
}

// settings are Args with every default applied.
type settings struct {
	gpuResource                 v1.ResourceName
	protectionMargin            int32
	maxForecastAge              time.Duration
	minCandidateNodesPercentage int32
	minCandidateNodesAbsolute   int32
}

// decodeArgs accepts *Args, nil (all defaults) or the raw form the
// scheduler's configuration loader passes (*runtime.Unknown).
func decodeArgs(obj runtime.Object) (settings, error) {
	var a Args
	switch o := obj.(type) {
	case nil:
	case *Args:
		a = *o
	default:
		if err := frameworkruntime.DecodeInto(obj, &a); err != nil {
			return settings{}, fmt.Errorf("decoding %s args: %w", Name, err)
		}
	}
	s := settings{
		gpuResource:                 DefaultGPUResource,
		protectionMargin:            DefaultProtectionMargin,
		maxForecastAge:              DefaultMaxForecastAge,
		minCandidateNodesPercentage: DefaultMinCandidateNodesPercentage,
		minCandidateNodesAbsolute:   DefaultMinCandidateNodesAbsolute,
	}
	if a.GPUResource != "" {
		s.gpuResource = a.GPUResource
	}
	if a.ProtectionMargin != nil {
		s.protectionMargin = *a.ProtectionMargin
	}
	if a.MaxForecastAge != nil {
		s.maxForecastAge = a.MaxForecastAge.Duration
	}
	if a.MinCandidateNodesPercentage != nil {
		s.minCandidateNodesPercentage = *a.MinCandidateNodesPercentage
	}
	if a.MinCandidateNodesAbsolute != nil {
		s.minCandidateNodesAbsolute = *a.MinCandidateNodesAbsolute
	}
	switch {
	case s.protectionMargin < 0:
		return s, fmt.Errorf("%s args: protectionMargin %d is negative", Name, s.protectionMargin)
	case s.maxForecastAge <= 0:
		return s, fmt.Errorf("%s args: maxForecastAge %v must be positive", Name, s.maxForecastAge)
	}
	return s, nil
}
