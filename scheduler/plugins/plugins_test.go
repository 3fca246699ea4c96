package plugins

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/progress-planner/planner/scheduler/plugin"
)

// TestSameSetAsTheDistribution: the list registers as many plugins as the
// pinned module's own kube-scheduler build (its cmd/scheduler/main.go; a
// commented-out sample does not count), under distinct names that do not
// clash with ProgressAware, so that an upgrade that adds or drops one is
// noticed here.
func TestSameSetAsTheDistribution(t *testing.T) {
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "sigs.k8s.io/scheduler-plugins").Output()
	if err != nil {
		t.Fatalf("go list -m sigs.k8s.io/scheduler-plugins: %v", err)
	}
	src, err := os.ReadFile(filepath.Join(strings.TrimSpace(string(out)), "cmd", "scheduler", "main.go"))
	if err != nil {
		t.Fatal(err)
	}
	theirs := regexp.MustCompile(`(?m)^\s*app\.WithPlugin\(`).FindAll(src, -1)
	ours := SchedulerPlugins()
	if len(ours) != len(theirs) {
		t.Errorf("planner-scheduler registers %d scheduler-plugins plugins, the distribution %d", len(ours), len(theirs))
	}
	seen := map[string]bool{plugin.Name: true}
	for _, p := range ours {
		if seen[p.Name] {
			t.Errorf("plugin name %q registered twice (or clashes with %s)", p.Name, plugin.Name)
		}
		seen[p.Name] = true
	}
	for _, want := range []string{"Coscheduling", "CapacityScheduling"} {
		if !seen[want] {
			t.Errorf("%s is not registered", want)
		}
	}
}
