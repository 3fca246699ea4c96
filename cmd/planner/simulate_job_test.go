package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/progress-planner/planner/simulator"
)

// Long jobs that plateau early, so the planner forecasts, boosts and
// (with deactivate) stops: the options that travel in sweep.json matter.
const jobScenario = `
name: job-roundtrip
seed: 5
queues: [{name: a, gpus: 4, cohort: c}, {name: b, gpus: 4, cohort: c}]
checkpointInterval: 20m
jobs:
  - {name: p1, queue: a, arrival: 0, gpus: 2, duration: 10h, plateauAt: 0.3}
  - {name: p2, queue: a, arrival: 10m, gpus: 2, duration: 8h, plateauAt: 0.4}
  - {name: l1, queue: b, arrival: 20m, gpus: 4, duration: 6h}
  - {name: p3, queue: b, arrival: 1h, gpus: 2, duration: 12h, plateauAt: 0.25, priority: 100}
  - {name: l2, queue: a, arrival: 2h, gpus: 2, duration: 5h}
  - {name: l3, queue: b, arrival: 3h, gpus: 1, duration: 4h}
`

// The Indexed Job path gives the in-process sweep's results: the manifests
// written by --as-job, the ConfigMap's files on disk, the unit command run
// once per JOB_COMPLETION_INDEX, then collect.
func TestSweepAsJobRoundTrip(t *testing.T) {
	dir := t.TempDir()
	scen := filepath.Join(dir, "s.yaml")
	if err := os.WriteFile(scen, []byte(jobScenario), 0o644); err != nil {
		t.Fatal(err)
	}
	sweepArgs := []string{"simulate", "--scenario", scen, "--sweep", "gpus.a=+0,+4", "--sweep", "arrival-rate=1,2", "--seeds", "2",
		"--set", "deactivate=true", "--set", "policy.stop.gracePeriod=30m", "--min-improvement", "0", "--checkpoint", "15m", "--progress", "off"}
	inProc, _, err := runCLI(nil, append(sweepArgs, "-o", "json")...)
	if err != nil {
		t.Fatal(err)
	}
	manifest := filepath.Join(dir, "job.yaml")
	if _, _, err := runCLI(nil, append(sweepArgs, "--as-job", "--job-name", "rt", "--image", "registry.example/planner:v9.9.9", "--out", manifest)...); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(manifest)
	if err != nil {
		t.Fatal(err)
	}
	docs := strings.Split(string(b), "\n---\n")
	var cm corev1.ConfigMap
	var job batchv1.Job
	if len(docs) != 2 || yaml.UnmarshalStrict([]byte(docs[0]), &cm) != nil || yaml.UnmarshalStrict([]byte(docs[1]), &job) != nil {
		t.Fatalf("manifests:\n%s", b)
	}
	units := 4 * 2
	if *job.Spec.Completions != int32(units) || *job.Spec.CompletionMode != batchv1.IndexedCompletion || job.Spec.Template.Spec.Volumes[0].ConfigMap.Name != cm.Name {
		t.Errorf("job spec: %+v", job.Spec)
	}
	cfg := filepath.Join(dir, "config")
	if err := os.Mkdir(cfg, 0o755); err != nil {
		t.Fatal(err)
	}
	for k, v := range cm.Data {
		if err := os.WriteFile(filepath.Join(cfg, k), []byte(v), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// Pods print their result to their log; one file of concatenated logs
	// plus a results directory for half of them (both ways collect reads).
	var logs strings.Builder
	results := filepath.Join(dir, "results")
	if err := os.Mkdir(results, 0o755); err != nil {
		t.Fatal(err)
	}
	for i := range units {
		t.Setenv("JOB_COMPLETION_INDEX", strconv.Itoa(i))
		args := []string{"simulate", "unit", "--config", cfg}
		if i%2 == 1 {
			args = append(args, "--out-dir", results)
		}
		out, _, err := runCLI(nil, args...)
		if err != nil {
			t.Fatalf("unit %d: %v", i, err)
		}
		if i%2 == 0 {
			logs.WriteString(out)
		}
	}
	logFile := filepath.Join(dir, "units.jsonl")
	if err := os.WriteFile(logFile, []byte(logs.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	collected, _, err := runCLI(nil, "simulate", "collect", logFile, results, "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	var a, c simulator.Sweep
	if err := json.Unmarshal([]byte(inProc), &a); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(collected), &c); err != nil {
		t.Fatal(err)
	}
	forecasts := 0
	for _, s := range [2]*simulator.Sweep{&a, &c} {
		s.Workers, s.WallSeconds = 0, 0
		for i := range s.Runs {
			for j := range s.Runs[i].Summaries {
				x := &s.Runs[i].Summaries[j]
				x.WallSeconds, x.EventsPerSecond, x.ForecastsPerSecond = 0, 0, 0
				forecasts += x.Forecasts
			}
		}
	}
	if !reflect.DeepEqual(a, c) {
		t.Errorf("collected results differ from the in-process sweep")
	}
	if forecasts == 0 || len(c.Runs) != units {
		t.Errorf("%d runs, %d forecasts: the planner did not run", len(c.Runs), forecasts)
	}
	// A missing unit is named.
	if _, _, err := runCLI(nil, "simulate", "collect", logFile); err == nil || !strings.Contains(err.Error(), "no result") {
		t.Errorf("collect with half the units: %v", err)
	}
}

func TestSweepAsJobNeedsDataForFiles(t *testing.T) {
	_, _, err := runCLI(nil, "simulate", "--trace", "x.csv", "--sweep", "gpus=1,2", "--as-job", "--image", "registry.example/planner:v9.9.9")
	if err == nil || !strings.Contains(err.Error(), "--data-pvc") {
		t.Errorf("trace without --data-pvc: %v", err)
	}
	if _, _, err := runCLI(nil, "simulate", "--as-job"); err == nil || !strings.Contains(err.Error(), "--as-job needs --sweep") {
		t.Errorf("--as-job alone: %v", err)
	}
}

// A development build names no floating image: the pods must run the
// simulator that wrote their Job.
func TestSweepAsJobImage(t *testing.T) {
	_, _, err := runCLI(nil, "simulate", "--sweep", "gpus=1,2", "--as-job")
	if err == nil || !strings.Contains(err.Error(), "pass --image") {
		t.Errorf("development build without --image: %v", err)
	}
	for v, want := range map[string]string{
		"v1.2.3":                  "ghcr.io/progress-planner/planner:v1.2.3",
		"v0.2.0-rc.1":             "ghcr.io/progress-planner/planner:v0.2.0-rc.1",
		"v1.2.3-4-gabcdef0-dirty": "",
		"v1.2.3-dirty":            "",
		"abcdef0":                 "",
		"dev":                     "",
		"":                        "",
		"v1.2":                    "",
	} {
		if got := releasedImage(v); got != want {
			t.Errorf("releasedImage(%q) = %q, want %q", v, got, want)
		}
	}
}
