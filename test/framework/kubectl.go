//go:build e2e

package framework

import (
	"fmt"
	"os"
	"path/filepath"
)

// Kubectl returns the real kubectl v1.36.3, built from the pinned
// k8s.io/kubernetes module by hack/build-testbins.sh (make testbins) into
// BinaryDir. A missing binary is an error (never a skip).
func Kubectl() (string, error) {
	p := filepath.Join(BinaryDir(), "kubectl")
	if fi, err := os.Stat(p); err != nil || fi.IsDir() || fi.Mode()&0o111 == 0 {
		return "", fmt.Errorf("kubectl missing at %s: build it with `make testbins` (hack/build-testbins.sh)", p)
	}
	return p, nil
}
