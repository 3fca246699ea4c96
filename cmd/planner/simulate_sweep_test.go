package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/progress-planner/planner/simulator"
)

// Four 1-GPU jobs of one hour at 0: the p95 wait is known for each GPU
// count (1: 2.85 h, 2: 1 h, 4: 0), so the answer to <=30m is gpus=4.
const sweepScenario = `
name: four
queues: [{name: q, gpus: 4}]
jobs:
  - {queue: q, gpus: 1, duration: 1h}
  - {queue: q, gpus: 1, duration: 1h}
  - {queue: q, gpus: 1, duration: 1h}
  - {queue: q, gpus: 1, duration: 1h}
`

func TestSimulateSweepCommand(t *testing.T) {
	dir := t.TempDir()
	scen := filepath.Join(dir, "s.yaml")
	if err := os.WriteFile(scen, []byte(sweepScenario), 0o644); err != nil {
		t.Fatal(err)
	}
	out, _, err := runCLI(nil, "simulate", "--scenario", scen, "--sweep", "gpus=1,2,4", "--seeds", "2", "--goal", "queueing.p95<=30m", "--progress", "off")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "planner: gpus=4 is the smallest setting that meets queueing.p95<=30m in every seed") {
		t.Errorf("table:\n%s", out)
	}
	js := filepath.Join(dir, "s.json")
	if _, _, err := runCLI(nil, "simulate", "--scenario", scen, "--sweep", "gpus=1,2", "--sweep", "arrival-rate=1,2", "--policies", "kueue", "-o", "json", "--out", js); err != nil {
		t.Fatal(err)
	}
	var sw simulator.Sweep
	if b, err := os.ReadFile(js); err != nil || json.Unmarshal(b, &sw) != nil || len(sw.Runs) != 4 || len(sw.Points) != 4 {
		t.Fatalf("json: %v %+v", err, sw)
	}
	// gpus=2, arrival-rate=1: two waves, p95 of (0,0,1,1) h.
	if got := sw.Points[2].Metrics["queueing.p95"].Mean; got != 1 {
		t.Errorf("gpus=2 p95 queueing %v, want 1 h", got)
	}
	// --set on a single run: two GPUs, so two jobs wait an hour.
	out, _, err = runCLI(nil, "simulate", "--scenario", scen, "--policies", "kueue", "--set", "gpus=-2", "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	var cmp struct {
		CapacityGPUs int
		Results      []struct{ Summary simulator.Summary }
	}
	if err := json.Unmarshal([]byte(out), &cmp); err != nil || cmp.CapacityGPUs != 2 || cmp.Results[0].Summary.Queueing.Mean != 0.5 {
		t.Errorf("--set gpus=-2: %v %+v", err, cmp)
	}
	for _, bad := range [][]string{
		{"--sweep", "gpus=1", "--goal", "nope<1"},
		{"--sweep", "gpus=1", "--sweep", "gpus=2"},
		{"--sweep", "gpus=1", "--seeds", "0"},
		{"--set", "color=red"},
	} {
		if _, _, err := runCLI(nil, append([]string{"simulate", "--scenario", scen}, bad...)...); err == nil {
			t.Errorf("%v: no error", bad)
		}
	}
}

// --job-changes: the run without the what-if is the baseline; with one GPU
// fewer, the jobs that wait longer are listed.
func TestSimulateJobChanges(t *testing.T) {
	dir := t.TempDir()
	scen := filepath.Join(dir, "s.yaml")
	if err := os.WriteFile(scen, []byte(sweepScenario), 0o644); err != nil {
		t.Fatal(err)
	}
	out, _, err := runCLI(nil, "simulate", "--scenario", scen, "--policies", "kueue", "--set", "gpus=3", "--job-changes", "5", "--progress", "off")
	if err != nil {
		t.Fatal(err)
	}
	// Four one-hour jobs on 3 GPUs instead of 4: the fourth waits an hour,
	// for the first to finish.
	if !strings.Contains(out, "Jobs the what-if changed (kueue): 1") || !strings.Contains(out, "delayed  0s           1h") ||
		!strings.Contains(out, "admitted when a running job finished, 3 other admissions in") {
		t.Errorf("job changes:\n%s", out)
	}
	js, _, err := runCLI(nil, "simulate", "--scenario", scen, "--job-changes", "5", "--set", "gpus=3", "--policies", "kueue", "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	var cmp simulator.Comparison
	if err := json.Unmarshal([]byte(js), &cmp); err != nil {
		t.Fatal(err)
	}
	if len(cmp.JobChanges) != 1 || cmp.JobChanges[0].Total != 1 || len(cmp.JobChanges[0].Jobs) != 1 ||
		!strings.HasPrefix(cmp.JobChanges[0].Jobs[0].Reason, "admitted when a running job finished") {
		t.Errorf("-o json job changes: %+v", cmp.JobChanges)
	}
	if len(cmp.Results) != 1 || len(cmp.Results[0].Records) != 0 {
		t.Errorf("-o json without --events carries the events recorded for --job-changes")
	}
	if _, _, err := runCLI(nil, "simulate", "--scenario", scen, "--job-changes", "5", "--set", "gpus=3", "-o", "html"); err == nil {
		t.Error("--job-changes with -o html: no error")
	}
}
