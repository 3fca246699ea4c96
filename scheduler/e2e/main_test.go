//go:build e2e

package e2e

import (
	"flag"
	"os"
	"testing"

	"k8s.io/klog/v2"
)

// TestMain registers klog's flags (-args -v=4 shows the scheduler's and the
// plugin's decisions).
func TestMain(m *testing.M) {
	klog.InitFlags(nil)
	flag.Parse()
	os.Exit(m.Run())
}
