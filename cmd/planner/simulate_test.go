package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/progress-planner/planner/simulator"
)

const simScenario = `
name: fidelity-small
seed: 3
queues:
  - {name: team-a, gpus: 4}
checkpointInterval: 10m
jobs:
  - {name: a, queue: team-a, arrival: 0, gpus: 4, duration: 1h}
  - {name: b, queue: team-a, arrival: 10m, gpus: 2, duration: 30m, priority: 100}
  - {name: c, queue: team-a, arrival: 20m, gpus: 2, duration: 30m}
`

func TestSimulateCommandEventsAndExport(t *testing.T) {
	dir := t.TempDir()
	scen := filepath.Join(dir, "s.yaml")
	if err := os.WriteFile(scen, []byte(simScenario), 0o644); err != nil {
		t.Fatal(err)
	}
	events, export := filepath.Join(dir, "events.json"), filepath.Join(dir, "export.yaml")
	out, _, err := runCLI(nil, "simulate", "--scenario", scen, "--policies", "kueue,las", "-o", "json",
		"--events", events, "--export-scenario", export)
	if err != nil {
		t.Fatal(err)
	}
	var cmp struct {
		Jobs    int
		Results []struct{ Summary simulator.Summary }
	}
	if err := json.Unmarshal([]byte(out), &cmp); err != nil || cmp.Jobs != 3 || len(cmp.Results) != 2 {
		t.Fatalf("json output: %v %+v", err, cmp)
	}
	b, err := os.ReadFile(events)
	if err != nil {
		t.Fatal(err)
	}
	var ev struct {
		Jobs   []map[string]any
		Events map[string][]simulator.Record
	}
	if err := json.Unmarshal(b, &ev); err != nil {
		t.Fatal(err)
	}
	// b (priority 100) preempts a at 10m; c fits beside b; a waits for
	// both.
	var got []string
	for _, r := range ev.Events["kueue"] {
		got = append(got, r.Type+" "+r.Job+" "+r.By)
	}
	want := "admit a |preempt a b|admit b |admit c |finish b |finish c |admit a |finish a "
	if strings.Join(got, "|") != want {
		t.Errorf("kueue event order:\n%s\nwant\n%s", strings.Join(got, "|"), want)
	}
	if len(ev.Jobs) != 3 {
		t.Errorf("events file jobs: %v", ev.Jobs)
	}
	// The exported scenario is itself runnable and gives the same order.
	out2, _, err := runCLI(nil, "simulate", "--scenario", export, "--policies", "kueue", "-o", "json")
	if err != nil {
		t.Fatalf("exported scenario: %v", err)
	}
	if !strings.Contains(out2, `"preemptions": 1`) {
		t.Errorf("exported scenario run differs:\n%s", out2)
	}
}

func TestSimulateCommandUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{"simulate", "-o", "xml"},
		{"simulate", "--policies", "kueue,magic"},
		{"simulate", "--trace-format", "philly"},
		{"simulate", "--limit", "5"},
		{"simulate", "--priorities", "high"},
		{"simulate", "--trace", "x.csv", "--trace-format", "slurm"},
		{"simulate", "extra"},
	} {
		_, _, err := runCLI(nil, args...)
		if err == nil || (exitCode(err) != exitUsage && args[1] != "extra") {
			t.Errorf("%v: err %v (exit %d), want a usage error", args, err, exitCode(err))
		}
	}
	if _, _, err := runCLI(nil, "simulate", "--trace", filepath.Join(t.TempDir(), "missing.csv")); err == nil || exitCode(err) != exitFailure {
		t.Errorf("missing trace: %v", err)
	}
}

func TestSimulatePrintDefault(t *testing.T) {
	out, _, err := runCLI(nil, "simulate", "--print-default")
	if err != nil || !strings.Contains(out, "durationQuantiles") {
		t.Fatalf("%v\n%s", err, out)
	}
	if _, err := simulator.ParseScenario([]byte(out)); err != nil {
		t.Errorf("printed default does not parse: %v", err)
	}
}

// The README's first command: a headline against Kueue alone and no
// target lines unless --targets asks for them.
func TestSimulateDefaultHeadlineNoTargets(t *testing.T) {
	out, _, err := runCLI(nil, "simulate", "--policies", "kueue,planner", "--progress", "off")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "Progress Planner against Kueue alone") || !strings.Contains(out, "waiting for a first admission") {
		t.Errorf("no headline:\n%s", out)
	}
	if strings.Contains(out, "MISSED") || strings.Contains(out, "Targets") {
		t.Errorf("target lines without --targets:\n%s", out)
	}
	js, _, err := runCLI(nil, "simulate", "--policies", "kueue,planner", "--progress", "off", "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct{ Headline []string }
	if err := json.Unmarshal([]byte(js), &doc); err != nil || len(doc.Headline) < 5 {
		t.Errorf("JSON headline: %v %q", err, doc.Headline)
	}
	out, _, err = runCLI(nil, "simulate", "--policies", "kueue,planner", "--progress", "off", "--targets")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "Targets") {
		t.Errorf("--targets: no target lines:\n%s", out)
	}
}
