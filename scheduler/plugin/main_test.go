package plugin

import (
	"os"
	"testing"

	"k8s.io/kubernetes/pkg/scheduler/metrics"
)

// TestMain registers the scheduler's metrics, which the scheduling queue
// and the Evaluator record into.
func TestMain(m *testing.M) {
	metrics.Register()
	os.Exit(m.Run())
}
