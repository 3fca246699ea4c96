package krew

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/progress-planner/planner/release/internal/testbin"
)

func validator(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "validate-krew-manifest")
	out, err := exec.Command("go", "build", "-o", bin, "sigs.k8s.io/krew/cmd/validate-krew-manifest").CombinedOutput()
	if err != nil {
		t.Fatalf("build krew's validator: %v\n%s", err, out)
	}
	return bin
}

func TestKrewManifest(t *testing.T) {
	v := validator(t)
	manifest := filepath.Join(testbin.Root(), "plugins", "planner.yaml")
	out, err := exec.Command(v, "-manifest", manifest, "-skip-install").CombinedOutput()
	if err != nil {
		t.Fatalf("krew validation of %s: %v\n%s", manifest, err, out)
	}
	t.Logf("%s", strings.TrimSpace(string(out)))

	// The validator is not lenient: a manifest with a bad name fails.
	b, err := os.ReadFile(manifest)
	if err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(t.TempDir(), "planner.yaml")
	if err := os.WriteFile(bad, []byte(strings.Replace(string(b), "version: v0.1.0", "version: 0.1", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(v, "-manifest", bad, "-skip-install").CombinedOutput(); err == nil {
		t.Errorf("a manifest with version 0.1 (not semver with v) passed:\n%s", out)
	}
}
