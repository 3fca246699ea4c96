// Package testbin builds the planner binary once per test process. The
// release module does not import the planner's packages: Helm and the
// Prometheus parser need newer Kubernetes libraries than the planner's
// controller-runtime, so the tests use the planner as a user would, as a
// binary built from the main module.
package testbin

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

var (
	once sync.Once
	dir  string
	path string
	err  error
	out  []byte
)

// Root is the repository's root (the main module).
func Root() string {
	wd, _ := os.Getwd()
	for d := wd; d != filepath.Dir(d); d = filepath.Dir(d) {
		if b, err := os.ReadFile(filepath.Join(d, "go.mod")); err == nil && strings.HasPrefix(string(b), "module github.com/progress-planner/planner\n") {
			return d
		}
	}
	return filepath.Join(wd, "..", "..")
}

// Planner returns the path of the planner binary, built from the main
// module on first use.
func Planner(t testing.TB) string {
	t.Helper()
	once.Do(func() {
		dir, err = os.MkdirTemp("", "planner-bin-")
		if err != nil {
			return
		}
		path = filepath.Join(dir, "planner")
		cmd := exec.Command("go", "build", "-o", path, "./cmd/planner")
		cmd.Dir = Root()
		out, err = cmd.CombinedOutput()
	})
	if err != nil {
		t.Fatalf("go build ./cmd/planner: %v\n%s", err, out)
	}
	return path
}

// Run runs the main module's command (go run PKG ARGS...) in the repository
// root and returns its standard output.
func Run(t testing.TB, pkg string, args ...string) []byte {
	t.Helper()
	cmd := exec.Command("go", append([]string{"run", pkg}, args...)...)
	cmd.Dir = Root()
	cmd.Stderr = os.Stderr
	b, err := cmd.Output()
	if err != nil {
		t.Fatalf("go run %s: %v", pkg, err)
	}
	return b
}
