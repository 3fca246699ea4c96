package progressendpoint

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// Prometheus collectors on controller-runtime's registry (the manager's
// metrics endpoint), like pkg/kueueext's. No job names in labels: the
// cardinality is bounded by the outcomes.
var (
	metricRequests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "planner_endpoint_reports_total",
		Help: "Progress reports received on the progress endpoint, by outcome (accepted, unauthenticated, forbidden, rate-limited, too-large, invalid, not-found, error).",
	}, []string{"outcome"})
	metricForbidden = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "planner_endpoint_forbidden_total",
		Help: "Authenticated progress reports refused because the token's pod does not belong to the job in the path (a job reporting for another).",
	})
	registerOnce sync.Once
)

// RegisterMetrics registers the endpoint's collectors once.
func RegisterMetrics() {
	registerOnce.Do(func() {
		ctrlmetrics.Registry.MustRegister(metricRequests, metricForbidden)
	})
}

// Outcome labels of planner_endpoint_reports_total.
const (
	outcomeAccepted        = "accepted"
	outcomeUnauthenticated = "unauthenticated"
	outcomeForbidden       = "forbidden"
	outcomeRateLimited     = "rate-limited"
	outcomeTooLarge        = "too-large"
	outcomeInvalid         = "invalid"
	outcomeNotFound        = "not-found"
	outcomeError           = "error"
)
