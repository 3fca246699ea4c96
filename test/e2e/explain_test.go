//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/progress-planner/planner/api/v1alpha1"
	"github.com/progress-planner/planner/pkg/preempt"
	"github.com/progress-planner/planner/pkg/progress"
	"github.com/progress-planner/planner/pkg/report"
	"github.com/progress-planner/planner/test/framework"
)

// explainField returns the value of one "Field:   value" line of planner
// explain's text output.
func explainField(out, field string) string {
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(field) + `:\s+(.*)$`).FindStringSubmatch(out)
	if m == nil {
		return ""
	}
	return m[1]
}

// checkExplain asserts that planner explain names the verdict and the
// controller's reason (the ProgressForecast's, which starts with the
// verdict).
func checkExplain(t *testing.T, out string, pf *v1alpha1.ProgressForecast, verdict preempt.Verdict) {
	t.Helper()
	t.Logf("planner explain %s/%s:\n%s", pf.Namespace, pf.Name, out)
	if got := explainField(out, "Verdict"); got != string(verdict) {
		t.Errorf("Verdict %q, want %q", got, verdict)
	}
	reason := explainField(out, "Reason")
	if !strings.HasPrefix(reason, string(verdict)+":") {
		t.Errorf("Reason %q does not start with the verdict %s", reason, verdict)
	}
	if !strings.Contains(out, "Why:") || !strings.Contains(out, "ClusterQueue:") || !strings.Contains(out, "Evidence:") {
		t.Errorf("explanation lacks Why, ClusterQueue or Evidence")
	}
}

// TestExplainScenarios runs the controller scenarios (plateaued job yields,
// near-done job protected, healthy job left alone, forged progress
// untrusted) on one control plane with one planner, each in its own
// namespace and ClusterQueue, and checks that `planner explain` (the built
// binary, through a kubeconfig; once as kubectl-planner) names the verdict
// and reason of each job and where it stands in its queue.
func TestExplainScenarios(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	bin := plannerBinary(t)
	env := plannerEnv(t)
	kc := writeKubeconfig(t, env.Config)
	for name, v := range map[string]int32{"low": 100, "high": 150} {
		if _, err := env.CreateWorkloadPriorityClass(ctx, name, v); err != nil {
			t.Fatal(err)
		}
	}
	cfg := testConfig()
	cfg.Policy.NearDone.LeaseMargin = 4 // as in TestPlannerNearDoneJobProtected
	c := startPlanner(ctx, t, env, cfg)
	explain := func(target string, extra ...string) string {
		return runCLI(ctx, t, bin, append([]string{"explain", target, "--kubeconfig", kc}, extra...)...)
	}

	t.Run("plateaued", func(t *testing.T) {
		const ns = "exp-plateau"
		a, wlA := runningJob(ctx, t, env, ns, "q-plateau", "job-a", "")
		if _, err := env.CreateTrainJob(ctx, ns, "job-b", "q-plateau", 8, ""); err != nil {
			t.Fatal(err)
		}
		done := replay(ctx, t, c, a, prefix(history(t, "synth__early-plateau").Reports, 0.9))
		pf := waitPF(ctx, t, c, a, plannerBound, "verdict Plateaued", func(pf *v1alpha1.ProgressForecast) bool {
			return pf.Status.Verdict == string(preempt.Plateaued) && pf.Status.Boost == -100
		})
		out := explain(ns + "/job-a")
		checkExplain(t, out, pf, preempt.Plateaued)
		if !strings.Contains(explainField(out, "Priority"), "boost -100") {
			t.Errorf("Priority line %q: want boost -100", explainField(out, "Priority"))
		}
		// The waiting job may now preempt it (or already has).
		if _, err := env.WaitFor(ctx, wlA, bound, func() bool { return framework.WorkloadEvicted(wlA) }); err != nil {
			t.Fatalf("job-a not evicted: %v", err)
		}
		outB := explain("job-b", "-n", ns)
		t.Logf("planner explain %s/job-b:\n%s", ns, outB)
		if st := explainField(outB, "State"); !strings.HasPrefix(st, "running") {
			t.Errorf("job-b state %q after job-a yielded", st)
		}
		if err := <-done; err != nil {
			t.Errorf("replay: %v", err)
		}
	})

	t.Run("near-done", func(t *testing.T) {
		const ns = "exp-neardone"
		a, wlA := runningJob(ctx, t, env, ns, "q-neardone", "job-a", "low")
		reports := prefix(history(t, "synth__inverse-power").Reports, 0.97)
		done := replayAt(ctx, c, a, reports, 15)
		pf := waitPF(ctx, t, c, a, 2*plannerBound, "verdict NearDone", func(pf *v1alpha1.ProgressForecast) bool {
			return pf.Status.Verdict == string(preempt.NearDone) && pf.Status.Boost == 100
		})
		b, err := env.CreateTrainJob(ctx, ns, "job-b", "q-neardone", 8, "high")
		if err != nil {
			t.Fatal(err)
		}
		wlB, err := env.WaitForWorkload(ctx, b, bound)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := env.WaitFor(ctx, wlB, bound, func() bool {
			c := findCondition(wlB, "QuotaReserved")
			return c != nil && c.Status == metav1.ConditionFalse
		}); err != nil {
			t.Fatalf("job-b not pending: %v", err)
		}
		out := explain(ns + "/job-a")
		checkExplain(t, out, pf, preempt.NearDone)
		if got := explainField(out, "Safe from"); !strings.Contains(got, wlB.Name) {
			t.Errorf("job-a: Safe from %q, want job-b's Workload %s", got, wlB.Name)
		}
		// job-b (priority 150) waits: protected job-a's effective priority is 200.
		outB := runCLI(ctx, t, filepath.Join(filepath.Dir(bin), "kubectl-planner"), "explain", "job-b", "-n", ns, "--kubeconfig", kc)
		t.Logf("kubectl-planner explain %s/job-b:\n%s", ns, outB)
		if got := explainField(outB, "Protected from"); !strings.Contains(got, wlA.Name) || !strings.Contains(got, "priority 200") {
			t.Errorf("job-b: Protected from %q, want %s at priority 200", got, wlA.Name)
		}
		if got := explainField(outB, "Position"); got != "1 of 1 waiting" {
			t.Errorf("job-b: Position %q", got)
		}
		// When job-b will be admitted: job-a's protection holds in the
		// simulated futures, so job-b waits for job-a to finish, within
		// job-a's ETA interval.
		if got := explainField(outB, "Admission"); !strings.HasPrefix(got, "expected in ") || !strings.Contains(got, "a running job finished") {
			t.Errorf("job-b: Admission %q, want an estimate after job-a finishes", got)
		}
		var eb report.Explanation
		if err := json.Unmarshal([]byte(explain("job-b", "-n", ns, "-o", "json")), &eb); err != nil {
			t.Fatal(err)
		}
		adm := eb.Admission
		if adm == nil || adm.Median == nil || adm.P10 == nil || adm.P90 == nil || adm.Admitted != adm.Runs || adm.Runs != 20 ||
			!(*adm.P10 <= *adm.Median && *adm.Median <= *adm.P90) || len(adm.Causes) != 1 || adm.Causes[0].Cause != "a running job finished" {
			t.Errorf("job-b: admission estimate %+v, want 20 of 20 runs admitted after job-a finishes, P10 <= median <= P90", adm)
		} else {
			pfA := waitPF(ctx, t, c, a, plannerBound, "a forecast", func(pf *v1alpha1.ProgressForecast) bool { return pf.Status.Forecast != nil })
			t.Logf("job-b admission: median %.0f s (P10 %.0f, P90 %.0f); job-a ETA %s (80 %%: %s)",
				*adm.Median, *adm.P10, *adm.P90, pfA.Status.Forecast.ETA, pfA.Status.Forecast.ETARange)
		}
		// With an estimate the planner published (calibrated on ten
		// outcomes), explain calibrates its own range as the planner does.
		publishCalibration(ctx, t, c, b, 10, "0.5")
		var ec report.Explanation
		if err := json.Unmarshal([]byte(explain("job-b", "-n", ns, "-o", "json")), &ec); err != nil {
			t.Fatal(err)
		}
		if a := ec.Admission; a == nil || a.CalibratedOn != 10 || a.P90 == nil || a.FuturesP90 == nil || !(*a.P90 > *a.FuturesP90) ||
			!strings.Contains(a.Text(), "calibrated on how 10 earlier estimates turned out") {
			t.Errorf("job-b with a published calibration: admission estimate %+v, want its range widened and said calibrated", a)
		} else {
			t.Logf("job-b, calibrated as published: %s", a.Text())
		}
		if err := <-done; err != nil {
			t.Errorf("replay: %v", err)
		}
	})

	t.Run("healthy", func(t *testing.T) {
		const ns = "exp-healthy"
		a, _ := runningJob(ctx, t, env, ns, "q-healthy", "job-a", "")
		reports := prefix(history(t, "synth__inverse-power").Reports, 0.85)
		if err := <-replay(ctx, t, c, a, reports); err != nil {
			t.Fatalf("replay: %v", err)
		}
		pf := waitPF(ctx, t, c, a, plannerBound, "verdict Progressing", func(pf *v1alpha1.ProgressForecast) bool {
			return pf.Status.Verdict == string(preempt.Progressing) && pf.Status.Forecast != nil
		})
		out := explain(ns + "/job-a")
		checkExplain(t, out, pf, preempt.Progressing)
		if !strings.Contains(explainField(out, "Priority"), "boost 0") {
			t.Errorf("Priority line %q: want boost 0", explainField(out, "Priority"))
		}
	})

	t.Run("untrusted", func(t *testing.T) {
		const ns = "exp-forged"
		a, _ := runningJob(ctx, t, env, ns, "q-forged", "job-a", "")
		hf := history(t, "synth__inverse-power")
		honest := prefix(hf.Reports, 0.45)
		const speed = 15 // see TestPlannerForgedProgressEarnsNoProtection
		forged := progress.FileReport{T: honest[len(honest)-1].T + 1.05*speed, TrainerStatus: forge99(hf.Reports[len(honest)].TrainerStatus)}
		if err := <-replayAt(ctx, c, a, append(append([]progress.FileReport{}, honest...), forged), speed); err != nil {
			t.Fatalf("replay: %v", err)
		}
		// At 45 % this job's curve has too few evaluations to be judged;
		// with the finding the verdict is Untrusted (docs/policy.md, rule
		// 5), and the distrust recorded denies protection.
		pf := waitPF(ctx, t, c, a, bound, "integrity finding recorded", func(pf *v1alpha1.ProgressForecast) bool {
			return pf.Status.Forecast != nil && len(pf.Status.Forecast.Integrity) > 0 && pf.Status.Decision != nil &&
				strings.Contains(string(pf.Status.Decision.Raw), `"distrust"`)
		})
		v := preempt.Verdict(pf.Status.Verdict)
		if v != preempt.Untrusted {
			t.Fatalf("verdict %s after forged progress, want Untrusted", v)
		}
		out := explain(ns + "/job-a")
		checkExplain(t, out, pf, v)
		if !strings.Contains(out, "integrity: ") || !strings.Contains(out, "distrusted for another") {
			t.Errorf("no integrity finding or distrust in the explanation")
		}
		if strings.Contains(explainField(out, "Planner boost"), "advised +") {
			t.Errorf("forged progress earned a positive boost: %s", explainField(out, "Planner boost"))
		}
	})

	// planner report from the live cluster: every scenario's jobs, every
	// queue with its quota, and the HTML with a chart per reporting job.
	t.Run("live report", func(t *testing.T) {
		out := runCLI(ctx, t, bin, "report", "-o", "json", "--kubeconfig", kc)
		var r report.Report
		if err := json.Unmarshal([]byte(out), &r); err != nil {
			t.Fatalf("planner report -o json: %v\n%s", err, out)
		}
		jobs := map[string]report.JobRow{}
		for _, j := range r.Jobs {
			jobs[j.Key()] = j
		}
		for _, ns := range []string{"exp-plateau", "exp-neardone", "exp-healthy", "exp-forged"} {
			j, ok := jobs[ns+"/job-a"]
			if !ok || j.Verdict == "" || j.GPUs != 8 || j.Metric != "eval_loss" {
				t.Errorf("%s/job-a in the live report: %+v (present %v)", ns, j, ok)
			}
		}
		queues := map[string]report.QueueRow{}
		for _, q := range r.Queues {
			queues[q.Name] = q
		}
		for _, q := range []string{"q-plateau", "q-neardone", "q-healthy", "q-forged"} {
			if queues[q].QuotaGPUs != 8 || len(queues[q].Freed) != 3 {
				t.Errorf("queue %s: %+v", q, queues[q])
			}
		}
		html := runCLI(ctx, t, bin, "report", "-o", "html", "--kubeconfig", kc)
		if n := strings.Count(html, `class="chart queue-chart"`); n != len(r.Queues) {
			t.Errorf("%d queue charts for %d queues", n, len(r.Queues))
		}
		t.Logf("live report: %d jobs, %d queues; table:\n%s", len(r.Jobs), len(r.Queues), runCLI(ctx, t, bin, "report", "--kubeconfig", kc))
	})
}

// publishCalibration writes on job's ProgressForecast an admission
// estimate as the planner's publisher does (pkg/admissionstatus), made now
// and calibrated on outcomes with shift.
func publishCalibration(ctx context.Context, t *testing.T, c client.Client, job client.Object, outcomes int, shift string) {
	t.Helper()
	pf := waitPF(ctx, t, c, job, plannerBound, "a ProgressForecast", func(*v1alpha1.ProgressForecast) bool { return true })
	patch := fmt.Sprintf(`{"status":{"admissionEstimate":{"time":%q,"calibratedOn":%d,"calibrationShift":%q,"text":"published by the test"}}}`,
		time.Now().UTC().Format(time.RFC3339), outcomes, shift)
	if err := c.Status().Patch(ctx, pf, client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
		t.Fatalf("publish an admission estimate on %s: %v", pf.Name, err)
	}
}
