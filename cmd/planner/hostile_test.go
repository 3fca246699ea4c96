package main

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/progress-planner/planner/internal/genreader"
	"github.com/progress-planner/planner/pkg/backtest"
	"github.com/progress-planner/planner/pkg/offline"
	"github.com/progress-planner/planner/pkg/progress"
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
		{[]string{"backtest", "--eval-every", "0"}, "--eval-every 0: must be at least 1"},
		{[]string{"backtest", "--eval-pause", "-1"}, "--eval-pause -1: must be in [0, 100]"},
		{[]string{"backtest", "--eval-pause", "NaN"}, "--eval-pause NaN: must be in [0, 100]"},
		{[]string{"backtest", "--eval-pause", "1e9"}, "--eval-pause 1e+09: must be in [0, 100]"},
		{[]string{"backtest", "--loss-every", "0.5"}, "--loss-every 0.5: must be 0 or in [1, 3600] seconds"},
		{[]string{"backtest", "--loss-every", "NaN"}, "--loss-every NaN: must be 0 or in [1, 3600] seconds"},
		{[]string{"backtest", "--loss-every", "-5"}, "--loss-every -5: must be 0 or in [1, 3600] seconds"},
		{[]string{"backtest", "--time-scale", "0"}, "--time-scale 0: must be in [0.001, 1000]"},
		{[]string{"backtest", "--time-scale", "NaN"}, "--time-scale NaN: must be in [0.001, 1000]"},
		{[]string{"backtest", "--seen-from", "1"}, "--seen-from 1: must be 0 or in (0, 0.9]"},
		{[]string{"backtest", "--seen-from", "NaN"}, "--seen-from NaN: must be 0 or in (0, 0.9]"},
		{[]string{"backtest", "--seen-from", "-0.1"}, "--seen-from -0.1: must be 0 or in (0, 0.9]"},
		{[]string{"backtest", "--stress-battery", "--seen-from", "0.3"}, "--stress-battery runs every stress test itself: drop --seen-from"},
		{[]string{"backtest", "--stress-battery", "--eval-every", "2"}, "--stress-battery runs every stress test itself: drop --eval-every"},
		{[]string{"backtest", "--stress-battery", "--time-scale", "1"}, "--stress-battery runs every stress test itself: drop --time-scale"},
		{[]string{"backtest", "--stress-battery", "--leave-one-dataset-out"}, "--stress-battery runs every stress test itself: drop --leave-one-dataset-out"},
		{[]string{"report", "--quota", "-5", steps}, fmt.Sprintf("--quota -5: must be in [0, %d]", report.MaxGPUs)},
		{[]string{"report", "--admit-sizes", "99999999999", steps}, fmt.Sprintf("want integers in [1, %d]", report.MaxGPUs)},
		{[]string{"forecast", steps, "--at", "1e308"}, fmt.Sprintf("--at 1e+308: want seconds in [0, %d]", maxRunSeconds)},
		{[]string{"simulate", "--trace", trace, "--cluster-gpus", "9223372036854775807"}, fmt.Sprintf("--cluster-gpus 9223372036854775807: must be in [0, %d]", simulator.MaxGPUs)},
		{[]string{"simulate", "--trace", trace, "--limit", "-1"}, fmt.Sprintf("--limit -1: must be in [0, %d]", simulator.MaxJobs)},
		{[]string{"simulate", "--reports-per-run", "1000000000"}, "reportsPerRun 1000000000 must be in [1,"},
		{[]string{"simulate", "--cadence-min", "1e308"}, fmt.Sprintf("must be a number of seconds in [0, %d]", simulator.MaxSeconds)},
		{[]string{"replay", steps, "--trainjob", "a/b", "--from", "1e308"}, fmt.Sprintf("--from 1e+308: want seconds in [0, %d]", maxRunSeconds)},
		{[]string{"run", "--kube-api-qps", "1e9"}, fmt.Sprintf("must be in (0, %d]", maxAPIQPS)},
		{[]string{"run", "--kube-api-burst", "-1"}, fmt.Sprintf("in [1, %d]", maxAPIBurst)},
		{[]string{"run", "--ui-refresh", "1ns"}, "--ui-refresh 1ns must be in [1s, 1h]"},
		{[]string{"run", "-v", "99"}, "-v 99 must be in [0, 10]"},
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

// TestOneOutputFlag: every command that prints takes -o/--output from the
// same printer set, refuses a format it does not print with the same
// words, and exits 2.
func TestOneOutputFlag(t *testing.T) {
	printers := 0
	for _, c := range newRootCmd().Commands() {
		f := c.Flags().Lookup("output")
		if f == nil {
			continue
		}
		printers++
		o, ok := f.Value.(*outputFlag)
		if !ok || f.Shorthand != "o" {
			t.Errorf("%s: --output is a %T (-%s), not the shared outputFlag with -o", c.Name(), f.Value, f.Shorthand)
			continue
		}
		for _, format := range o.allowed {
			if !slices.Contains([]string{formatTable, formatJSON, formatYAML, formatMarkdown, formatHTML}, format) {
				t.Errorf("%s: format %q is not in the printer set", c.Name(), format)
			}
		}
		_, _, err := runCLI(nil, c.Name(), "-o", "xml")
		want := `invalid argument "xml" for "-o, --output" flag: want ` + o.choices()
		if err == nil || !strings.Contains(err.Error(), want) || exitCode(err) != exitUsage {
			t.Errorf("%s -o xml: %v (exit %d), want %q and exit %d", c.Name(), err, exitCode(err), want, exitUsage)
		}
	}
	if printers < 5 {
		t.Errorf("%d commands take --output, want at least 5 (forecast, report, explain, backtest, simulate)", printers)
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
	c := offline.NewHistoryCut(hf.Header, offline.Cut{At: hf.Reports[20].T})
	for _, r := range hf.Reports {
		if !c.Add(r) {
			break
		}
	}
	out, err := offline.Forecast(c, nil)
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

// historyStream is a history file of about size bytes, generated as it is
// read: a steps run reporting loss, eval_loss and the step counter.
func historyStream(size int64) *genreader.Reader {
	var n int64
	return genreader.New(4096, func(dst []byte, i int) ([]byte, bool) {
		if n >= size {
			return dst, false
		}
		start := len(dst)
		if i == 0 {
			dst = append(dst, `{"kind":"ProgressHistory","version":1,"name":"big","objective":{"metric":"eval_loss","direction":"minimize","target":null},"derivedFrom":null}`+"\n"...)
		} else {
			loss := 2 + 3/float64(1+i/100)
			dst = fmt.Appendf(dst, `{"t":%d,"trainerStatus":{"progressPercentage":%d,"metrics":[{"name":"loss","value":"%.6g"},{"name":"eval_loss","value":"%.6g"},{"name":"current_step","value":"%d"},{"name":"total_steps","value":"1000000000"}]}}`+"\n",
				10*i, i/10_000_000, loss, loss+0.01, i)
		}
		n += int64(len(dst) - start)
		return dst, true
	})
}

// TestHistoryReadIsStreamed: a 32 MB history (about 150,000 reports) is read
// into the bounded History; the heap never holds the file. Keeping every
// report took ~6 bytes of heap per byte of file.
func TestHistoryReadIsStreamed(t *testing.T) {
	const size = 32 << 20
	r := historyStream(size)
	c, err := offline.Load("-", r, offline.CutSpec{})
	if err != nil {
		t.Fatal(err)
	}
	if c.Read != r.Lines()-1 || c.H.Len() > progress.DefaultLimits().MaxPoints {
		t.Fatalf("read %d of %d reports, %d points kept", c.Read, r.Lines()-1, c.H.Len())
	}
	grew := r.PeakGrowth()
	if grew > 16 {
		t.Errorf("live heap grew by %.1f MiB reading a %d MiB history", grew, size>>20)
	}
	t.Logf("live heap grew by at most %.1f MiB reading a %d MiB history", grew, size>>20)
}

// TestRejectionsSayWhy: when every report is refused, the error says why
// (the reason, its count, an example), not a downstream symptom.
func TestRejectionsSayWhy(t *testing.T) {
	var b strings.Builder
	b.WriteString(goodHeader + "\n")
	for i := range 20 {
		fmt.Fprintf(&b, `{"t":%d,"trainerStatus":{"progressPercentage":150,"metrics":[{"name":"loss","value":"2"}]}}`+"\n", 10*i)
	}
	_, _, err := runCLI(strings.NewReader(b.String()), "forecast", "-")
	want := "all 20 reports up to t=190s rejected: progress-range 20 (e.g. progressPercentage 150)"
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("error %v, want it to contain %q", err, want)
	}
}

// TestInvalidHeaderObjectiveIsAnError: a header objective that does not
// validate is refused, naming the line, not silently replaced.
func TestInvalidHeaderObjectiveIsAnError(t *testing.T) {
	in := strings.Replace(goodHeader, `"direction":"minimize"`, `"direction":"sideways"`, 1) + "\n" + rep(0, "3") + "\n"
	_, _, err := runCLI(strings.NewReader(in), "forecast", "-")
	want := `stdin: line 1: header: objective "loss": direction "sideways" is neither`
	if err == nil || !strings.Contains(err.Error(), want) || exitCode(err) != exitFailure {
		t.Errorf("error %v (exit %d), want an input error containing %q", err, exitCode(err), want)
	}
}

// BenchmarkForecast1GBHistory: planner forecast's read path (stream,
// bounded History, fit, decide) on a 1 GiB history generated as it is read
// (docs/benchmarks.md). peak-heap-MiB is the sampled heap growth while
// reading.
//
//	go test -run '^$' -bench Forecast1GBHistory -benchtime 1x -benchmem ./cmd/planner
func BenchmarkForecast1GBHistory(b *testing.B) {
	for range b.N {
		r := historyStream(1 << 30)
		c, err := offline.Load("-", r, offline.CutSpec{})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := offline.Forecast(c, nil); err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(r.PeakGrowth(), "peak-heap-MiB")
		b.ReportMetric(float64(c.Read), "reports")
	}
}
