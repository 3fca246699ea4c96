package main

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/progress-planner/planner/pkg/backtest"
	"github.com/progress-planner/planner/pkg/report"
	"github.com/progress-planner/planner/simulator"
)

// Issue 14: absurd numbers on the command line are usage errors naming the
// flag and its limit, every command exits 2 on a command-line mistake.

func TestAbsurdFlagsAreUsageErrors(t *testing.T) {
	steps := filepath.Join(fixtureDir, "steps.jsonl")
	trace := filepath.Join(t.TempDir(), "ok.csv")
	if err := os.WriteFile(trace, []byte("timestamp,duration,num_gpus,gpu_time,cluster\n2017-10-09 07:01:55,66,1,66,vc1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"backtest", "--workers", "100000000"}, fmt.Sprintf("--workers 100000000: must be in [0, %d]", backtest.MaxWorkers())},
		{[]string{"backtest", "--workers", "-5"}, "--workers -5: must be in [0,"},
		{[]string{"report", "--quota", "-5", steps}, fmt.Sprintf("--quota -5: must be in [0, %d]", report.MaxGPUs)},
		{[]string{"report", "--admit-sizes", "99999999999", steps}, fmt.Sprintf("want integers in [1, %d]", report.MaxGPUs)},
		{[]string{"forecast", steps, "--at", "1e308"}, fmt.Sprintf("--at 1e+308: want seconds in [0, %d]", maxRunSeconds)},
		{[]string{"simulate", "--trace", trace, "--cluster-gpus", "9223372036854775807"}, fmt.Sprintf("--cluster-gpus 9223372036854775807: must be in [0, %d]", simulator.MaxGPUs)},
		{[]string{"simulate", "--trace", trace, "--limit", "-1"}, fmt.Sprintf("--limit -1: must be in [0, %d]", simulator.MaxJobs)},
		{[]string{"simulate", "--reports-per-run", "1000000000"}, "reportsPerRun 1000000000 must be in [1,"},
		{[]string{"simulate", "--cadence-min", "1e308"}, fmt.Sprintf("must be a number of seconds in [0, %d]", simulator.MaxSeconds)},
		{[]string{"replay", steps, "--trainjob", "a/b", "--from", "1e308"}, fmt.Sprintf("--from 1e+308: want seconds in [0, %d]", maxRunSeconds)},
	}
	for _, c := range cases {
		_, _, err := runCLI(nil, c.args...)
		if err == nil || !strings.Contains(err.Error(), c.want) || exitCode(err) != exitUsage {
			t.Errorf("%v: error %v (exit %d), want a usage error containing %q", c.args, err, exitCode(err), c.want)
		}
	}
}

// TestCommandLineMistakesExitTwo: unknown flags, unknown commands and
// wrong argument counts are usage errors in every command.
func TestCommandLineMistakesExitTwo(t *testing.T) {
	root := newRootCmd()
	for _, c := range root.Commands() {
		if c.Name() == "help" || c.Name() == "completion" {
			continue
		}
		_, _, err := runCLI(nil, c.Name(), "--no-such-flag")
		if exitCode(err) != exitUsage {
			t.Errorf("%s --no-such-flag: %v (exit %d), want exit %d", c.Name(), err, exitCode(err), exitUsage)
		}
	}
	for _, args := range [][]string{{"no-such-command"}, {"version", "extra"}, {"simulate", "extra"}, {"explain"}, {"replay"}} {
		_, _, err := runCLI(nil, args...)
		if exitCode(err) != exitUsage {
			t.Errorf("%v: %v (exit %d), want exit %d", args, err, exitCode(err), exitUsage)
		}
	}
}

// TestHugeRunInfoGPUs: a header claiming 999999999 GPUs is an input error
// naming the field and the limit, not an 8 GB capacity array.
func TestHugeRunInfoGPUs(t *testing.T) {
	hf := stepsHistory(50)
	hf.Header = header("huge", hf.Header.Objective, hf.Header.Outcome, map[string]any{"gpus": 999999999})
	p := filepath.Join(t.TempDir(), "huge.jsonl")
	if err := os.WriteFile(p, encodeHistory(t, hf), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, cmd := range []string{"forecast", "report"} {
		_, _, err := runCLI(nil, cmd, p)
		want := fmt.Sprintf("runInfo.gpus 9.99999999e+08: must be in [0, %d]", report.MaxGPUs)
		if err == nil || !strings.Contains(err.Error(), want) || exitCode(err) != exitFailure {
			t.Errorf("%s: error %v (exit %d), want an input error containing %q", cmd, err, exitCode(err), want)
		}
	}
}

// TestReportCapacityMemoryBounded: a job claiming more GPUs than any
// cluster holds (a Workload whose "GPU" resource is memory: 64Gi) is
// clamped; the report's capacity forecast allocates O(report.MaxGPUs).
func TestReportCapacityMemoryBounded(t *testing.T) {
	hf := stepsHistory(50)
	out, err := buildForecastOutput(hf, forecastCut{At: hf.Reports[20].T}, nil)
	if err != nil {
		t.Fatal(err)
	}
	fc := out.Forecast
	in := report.Input{Queues: []report.QueueInput{{Name: "q", QuotaGPUs: 64 << 30}}, AdmitSizes: []int{1, 8}}
	for i := range 3 {
		in.Jobs = append(in.Jobs, report.JobInput{Name: fmt.Sprint("j", i), Queue: "q", GPUs: 64 << 30, State: report.Running, Forecast: &fc})
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	r := report.Build(in)
	runtime.ReadMemStats(&after)
	if got := r.Queues[0].QuotaGPUs; got != report.MaxGPUs {
		t.Errorf("quota %d, want it clamped to %d", got, report.MaxGPUs)
	}
	// ~100 capacity distributions of at most MaxGPUs+1 float64s each
	// (512 KiB); before the clamp one was 512 GiB.
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 256<<20 {
		t.Errorf("Build allocated %d MiB", alloc>>20)
	} else {
		t.Logf("Build allocated %.1f MiB", float64(alloc)/(1<<20))
	}
}

// TestForecastTableHostileNames: a history whose name and objective
// metric carry terminal escapes, bidi overrides and a newline prints them
// escaped (golden file), in the table; JSON keeps them verbatim (it is
// escaped by the encoder and read by programs).
func TestForecastTableHostileNames(t *testing.T) {
	const hostile = "x\x1b]0;PWNED\x07\x1b[2J\x00\u202egpj.exe\nforged"
	hf := stepsHistory(60)
	hf.Header.Name = hostile
	hf.Header.Objective.Metric = hostile
	for i := range hf.Reports {
		for j := range hf.Reports[i].TrainerStatus.Metrics {
			if m := &hf.Reports[i].TrainerStatus.Metrics[j]; m.Name == "eval_loss" {
				m.Name = hostile
			}
		}
	}
	p := filepath.Join(t.TempDir(), "hostile.jsonl")
	if err := os.WriteFile(p, encodeHistory(t, hf), 0o644); err != nil {
		t.Fatal(err)
	}
	out, _, err := runCLI(nil, "forecast", p)
	if err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{"\x1b", "\x07", "\x00", "\u202e", "\nforged"} {
		if strings.Contains(out, bad) {
			t.Errorf("table contains %q", bad)
		}
	}
	checkGolden(t, "hostile.table", out)
}
