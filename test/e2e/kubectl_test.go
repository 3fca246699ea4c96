//go:build e2e

package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/progress-planner/planner/api/v1alpha1"
	"github.com/progress-planner/planner/pkg/preempt"
	"github.com/progress-planner/planner/test/framework"
)

// TestKubectl runs the real kubectl (v1.36.3, built from the pinned
// k8s.io/kubernetes module) against the control plane: `kubectl get pf`
// shows the CRD's printer columns, and with kubectl-planner on PATH,
// `kubectl planner explain NS/NAME` and `kubectl planner get` work.
func TestKubectl(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	kubectl, err := framework.Kubectl()
	if err != nil {
		t.Fatal(err)
	}
	bin := plannerBinary(t) // kubectl-planner beside it
	env := plannerEnv(t)
	kc := writeKubeconfig(t, env.Config)
	c := startPlanner(ctx, t, env, testConfig())
	const ns = "kubectl-e2e"
	a, _ := runningJob(ctx, t, env, ns, "q-kubectl", "job-a", "")
	done := replay(ctx, t, c, a, prefix(history(t, "synth__early-plateau").Reports, 0.9))
	waitPF(ctx, t, c, a, plannerBound, "verdict Plateaued", func(pf *v1alpha1.ProgressForecast) bool {
		return pf.Status.Verdict == string(preempt.Plateaued) && pf.Status.Forecast != nil
	})
	if err := <-done; err != nil {
		t.Errorf("replay: %v", err)
	}
	// The whole history is in; the status may still move (a later
	// forecast, a new verdict such as Hung after the silence), so each
	// check compares with the status read just before and just after.
	reports := len(prefix(history(t, "synth__early-plateau").Reports, 0.9))
	pf := waitPF(ctx, t, c, a, plannerBound, "every report observed", func(pf *v1alpha1.ProgressForecast) bool {
		return int(pf.Status.Observations) >= reports && pf.Status.Forecast != nil
	})
	snapshot := func() map[string]bool {
		var cur v1alpha1.ProgressForecast
		if err := c.Get(ctx, client.ObjectKeyFromObject(pf), &cur); err != nil {
			t.Fatal(err)
		}
		s := map[string]bool{"verdict " + cur.Status.Verdict: true}
		if cur.Status.Forecast != nil {
			s["progress "+cur.Status.Forecast.Progress] = true
		}
		return s
	}
	matches := func(before, after map[string]bool, key string) bool { return before[key] || after[key] }
	run := func(args ...string) string {
		t.Helper()
		cctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		cmd := exec.CommandContext(cctx, kubectl, args...)
		// The plugin is found on PATH, as a user installs it; both read
		// the cluster from $KUBECONFIG.
		cmd.Env = append(os.Environ(), "PATH="+filepath.Dir(bin)+string(os.PathListSeparator)+os.Getenv("PATH"),
			"KUBECONFIG="+kc, "HOME="+t.TempDir())
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("kubectl %v: %v\n%s", args, err, out)
		}
		return string(out)
	}

	before := snapshot()
	out := run("get", "pf", "-n", ns)
	after := snapshot()
	t.Logf("kubectl get pf -n %s:\n%s", ns, out)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if got := strings.Fields(lines[0]); strings.Join(got, " ") != "NAME KIND PROGRESS ETA VERDICT BOOST METRIC PREDICTED AGE" {
		t.Errorf("kubectl get pf columns %v", got)
	}
	if len(lines) < 2 || !strings.HasPrefix(lines[1], "job-a ") || len(strings.Fields(lines[1])) < 5 || strings.Fields(lines[1])[1] != "TrainJob" ||
		!matches(before, after, "progress "+strings.Fields(lines[1])[2]) || !matches(before, after, "verdict "+strings.Fields(lines[1])[4]) {
		t.Errorf("kubectl get pf: want job-a with the progress and verdict of its status (%v / %v):\n%s", before, after, out)
	}
	wide := run("get", "pf", "-n", ns, "-o", "wide")
	if h := strings.Fields(strings.Split(wide, "\n")[0]); strings.Join(h[len(h)-6:], " ") != "OBJECTIVE ADVISED MODE WORKLOAD REASON ADMISSION" {
		t.Errorf("kubectl get pf -o wide columns %v", h)
	}
	if plugins := run("plugin", "list"); !strings.Contains(plugins, "kubectl-planner") {
		t.Errorf("kubectl plugin list does not find kubectl-planner:\n%s", plugins)
	}
	before = snapshot()
	exp := run("planner", "explain", ns+"/job-a")
	after = snapshot()
	t.Logf("kubectl planner explain %s/job-a:\n%s", ns, exp)
	if v := explainField(exp, "Verdict"); !strings.Contains(exp, "job-a") || !matches(before, after, "verdict "+firstWord(v)) {
		t.Errorf("kubectl planner explain: verdict %q, status says %v/%v:\n%s", v, before, after, exp)
	}
	before = snapshot()
	get := run("planner", "get", "-n", ns)
	after = snapshot()
	t.Logf("kubectl planner get -n %s:\n%s", ns, get)
	if gl := strings.Split(strings.TrimSpace(get), "\n"); !strings.HasPrefix(get, "NAME ") || len(gl) != 2 || !strings.HasPrefix(gl[1], "job-a ") ||
		strings.Fields(gl[1])[1] != "TrainJob" ||
		!matches(before, after, "progress "+strings.Fields(gl[1])[2]) || !matches(before, after, "verdict "+strings.Fields(gl[1])[4]) {
		t.Errorf("kubectl planner get: want job-a with its status' progress and verdict (%v / %v):\n%s", before, after, get)
	}
	if help := run("planner", "--help"); !strings.Contains(help, "kubectl planner") {
		t.Errorf("kubectl planner --help does not name itself kubectl planner:\n%.400s", help)
	}
}

func firstWord(s string) string {
	if f := strings.Fields(s); len(f) > 0 {
		return f[0]
	}
	return ""
}
