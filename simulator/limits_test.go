package simulator

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/progress-planner/planner/internal/genreader"
)

// The issue-14 probes: each absurd number is an error naming the field and
// the limit, found before any loop or allocation it would size.

func writeTrace(t *testing.T, csv string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "trace.csv")
	if err := os.WriteFile(p, []byte(csv), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

const phillyHeader = "timestamp,duration,num_gpus,gpu_time,cluster\n"

func TestTraceProbesAreErrors(t *testing.T) {
	ok := phillyHeader + "2017-10-09 07:01:55,66,1,66,vc1\n2017-10-09 08:01:55,600,2,1200,vc2\n"
	cases := []struct {
		name  string
		csv   string
		trace TraceSource
		want  string
	}{
		{"cluster GPUs beyond int", ok, TraceSource{ClusterGPUs: math.MaxInt}, fmt.Sprintf("trace.clusterGPUs %d: must be in [0, %d]", math.MaxInt, MaxGPUs)},
		{"duration 1e308", phillyHeader + "2017-10-09 07:01:55,1e308,1,66,vc1\n", TraceSource{}, fmt.Sprintf(":2: duration 1e+308: must be a number of seconds in [0, %d]", MaxSeconds)},
		{"GPUs 1e300", phillyHeader + "2017-10-09 07:01:55,5,1e300,66,vc1\n", TraceSource{}, fmt.Sprintf("num_gpus 1e+300: must be in [0, %d]", MaxGPUs)},
		{"one group of 0-GPU jobs", phillyHeader + "2017-10-09 07:01:55,66,0,0,vc1\n2017-10-09 07:02:55,66,0,0,vc1\n", TraceSource{}, "trace has no usable job (2 rows read; skipped: 2 no GPU)"},
		{"two groups of 0-GPU jobs", phillyHeader + "2017-10-09 07:01:55,66,0,0,vc1\n2017-10-09 07:02:55,66,0,0,vc2\n", TraceSource{}, "trace has no usable job (2 rows read; skipped: 2 no GPU)"},
		{"alibaba span 1e300", alibabaHeader + "p0,1,1,1,1,,LS,Running,0,10,5\np1,1,1,1,1,,LS,Running,1e12,1.00000001e12,1e12\n", TraceSource{Format: FormatAlibaba},
			fmt.Sprintf(":3: arrival (seconds after the first submission) 1e+12: must be a number of seconds in [0, %d]", MaxSeconds)},
		{"endless line", phillyHeader + strings.Repeat("x", MaxTraceLineBytes+1), TraceSource{}, fmt.Sprintf("a line longer than %d bytes", MaxTraceLineBytes)},
		{"limit beyond MaxJobs", ok, TraceSource{Limit: MaxJobs + 1}, fmt.Sprintf("trace.limit %d: must be in [0, %d]", MaxJobs+1, MaxJobs)},
	}
	for _, c := range cases {
		ts := c.trace
		ts.Path = writeTrace(t, c.csv)
		if ts.Format == "" {
			ts.Format = FormatPhilly
		}
		sc := &Scenario{Name: "probe", Trace: &ts}
		_, err := sc.Resolve()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want it to contain %q", c.name, err, c.want)
		}
	}
}

func TestTraceQueuesWithoutGPUHoursShareEqually(t *testing.T) {
	tr := &Trace{Jobs: []TraceJob{{Group: "a"}, {Group: "b"}}}
	qs := traceQueues(tr, 10, false)
	if len(qs) != 2 || qs[0].GPUs+qs[1].GPUs != 10 || qs[0].GPUs < 0 || qs[1].GPUs < 0 {
		t.Errorf("queues %+v", qs)
	}
}

func TestScenarioNumbersAreRangeChecked(t *testing.T) {
	head := "name: x\nqueues: [{name: q, gpus: 8}]\n"
	cases := []struct{ yaml, want string }{
		{head + "jobs: [{queue: q, gpus: 9223372036854775807, duration: 60}]", fmt.Sprintf("jobs[0].gpus 9223372036854775807: must be in [1, %d]", MaxGPUs)},
		{head + "jobs: [{queue: q, gpus: 1, duration: 1e308}]", fmt.Sprintf("duration 1e+308: must be a number of seconds in [0, %d]", MaxSeconds)},
		{head + "jobs: [{queue: q, gpus: 1, duration: \"100000d\"}]", fmt.Sprintf("must be a number of seconds in [0, %d]", MaxSeconds)},
		{head + "jobs: [{queue: q, gpus: 1, duration: 60, totalSteps: 1e300}]", "jobs[0].totalSteps 1e+300: must be in [0, 1e+12]"},
		{fmt.Sprintf("name: x\nqueues: [{name: q, gpus: %d}, {name: r, gpus: 1}]\njobs: [{queue: q, gpus: 1, duration: 60}]", MaxGPUs), fmt.Sprintf("at most %d", MaxGPUs)},
		{head + "generate: {jobs: 100000000, load: 1, durationQuantiles: [[0, 1], [1, 2]], gpus: [{gpus: 1, share: 1}]}", fmt.Sprintf("generate.jobs 100000000 must be in [1, %d]", MaxJobs)},
		{head + "generate: {jobs: 10, load: 1, durationQuantiles: [[0, 1], [1, 2]], gpus: [{gpus: 1, share: 0}]}", "generate.gpus: the shares add up to 0"},
	}
	for _, c := range cases {
		_, err := ParseScenario([]byte(c.yaml))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: error %v, want it to contain %q", c.yaml, err, c.want)
		}
	}
	sc, err := ParseScenario([]byte(head + "reports: {perRun: 100, min: 1s, max: 1s}\njobs: [{queue: q, gpus: 1, duration: 3650d}]"))
	if err != nil {
		t.Fatal(err)
	}
	o, err := sc.Options(DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	in, err := sc.Resolve()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Run(in, PolicyKueue, o); err == nil || !strings.Contains(err.Error(), "reports and forecasts (at most 1e+08)") {
		t.Errorf("a ten-year job reporting every second: %v", err)
	}
	opt := DefaultOptions()
	opt.ReportMin = 1e-300
	opt.Cadence.Min = 1e-300
	if err := opt.Validate(); err == nil {
		t.Error("a report interval of 1e-300 s is accepted")
	}
}

// phillyRows is a synthetic Philly trace of n rows, generated as it is
// read: submissions go backwards in time, so that the first rows of the
// file are the latest submissions (as in an unsorted trace).
func phillyRows(n int) *genreader.Reader {
	return genreader.New(10_000, func(dst []byte, i int) ([]byte, bool) {
		switch {
		case i == 0:
			return append(dst, phillyHeader...), true
		case i > n:
			return dst, false
		}
		s := time.Unix(int64(1_500_000_000-i), 0).UTC().Format(time.DateTime)
		return fmt.Appendf(dst, "%s,%d,%d,0,vc%d\n", s, 60+i%600, 1+i%8, i%4), true
	})
}

// TestTraceLimitStopsReading: a limit keeps the first usable rows of the
// file and reads no further. The 10^7-row input is generated as it is
// read, so the lines generated are the lines read (encoding/csv reads
// ahead 4 KiB, about 100 of these rows); reading the whole input took
// 3.1 GB and 36 s before the limit kept a heap, 4 s with the heap.
func TestTraceLimitStopsReading(t *testing.T) {
	const rows, limit = 10_000_000, 10
	r := phillyRows(rows)
	tr, err := ReadTrace(r, FormatPhilly, limit)
	if err != nil {
		t.Fatal(err)
	}
	if n := r.Lines(); n > limit+1000 {
		t.Errorf("%d lines read for --limit %d: the reader did not stop", n, limit)
	}
	// Lines 2..limit+1, sorted by submission: the last line came first.
	if len(tr.Jobs) != limit || tr.Jobs[0].Line != limit+1 || tr.Jobs[limit-1].Line != 2 || tr.Jobs[0].Arrival != 0 || tr.Jobs[limit-1].Arrival != limit-1 {
		t.Fatalf("kept %d jobs, first line %d (arrival %v), last line %d (arrival %v): want lines %d..2", len(tr.Jobs),
			tr.Jobs[0].Line, tr.Jobs[0].Arrival, tr.Jobs[len(tr.Jobs)-1].Line, tr.Jobs[len(tr.Jobs)-1].Arrival, limit+1)
	}
}

// TestTraceLimitCountsUsableRows: skipped rows do not count towards the
// limit, and rows after the limit are neither read nor checked (a
// malformed row there is no error; without the limit it is).
func TestTraceLimitCountsUsableRows(t *testing.T) {
	csv := phillyHeader +
		"2017-10-09 08:00:00,0,1,0,vc1\n" + // zero duration: skipped
		"2017-10-09 07:00:00,60,0,0,vc1\n" + // no GPU: skipped
		"2017-10-09 06:00:00,60,1,60,vc1\n" +
		"2017-10-09 05:00:00,60,2,120,vc2\n" +
		"2017-10-09 04:00:00,60,4,240,vc2\n" +
		"2017-10-09 03:00:00,1e308,1,0,vc1\n"
	tr, err := ReadTraceFile(writeTrace(t, csv), FormatPhilly, 2)
	if err != nil {
		t.Fatal(err)
	}
	if len(tr.Jobs) != 2 || tr.Jobs[0].Line != 5 || tr.Jobs[1].Line != 4 || tr.Jobs[1].Arrival != 3600 ||
		tr.Skipped["zero duration"] != 1 || tr.Skipped["no GPU"] != 1 {
		t.Errorf("limit 2: jobs %+v, skipped %v: want lines 5 and 4 (the first two usable rows)", tr.Jobs, tr.Skipped)
	}
	if _, err := ReadTraceFile(writeTrace(t, csv), FormatPhilly, 0); err == nil || !strings.Contains(err.Error(), ":7: duration 1e+308") {
		t.Errorf("no limit: error %v, want line 7's duration", err)
	}
}

// BenchmarkTraceLimit10Of1e7Rows: --limit 10 on a 10^7-row Philly trace
// generated as it is read (docs/benchmarks.md). The reader stops after the
// 10th row, so lines-read is what it read of the 10^7; peak-heap-MiB is
// the sampled heap growth while reading (0: fewer lines than one sample).
//
//	go test -run '^$' -bench TraceLimit10 -benchtime 1x -benchmem ./simulator
func BenchmarkTraceLimit10Of1e7Rows(b *testing.B) {
	for range b.N {
		r := phillyRows(10_000_000)
		tr, err := ReadTrace(r, FormatPhilly, 10)
		if err != nil {
			b.Fatal(err)
		}
		if len(tr.Jobs) != 10 {
			b.Fatalf("%d jobs", len(tr.Jobs))
		}
		b.ReportMetric(r.PeakGrowth(), "peak-heap-MiB")
		b.ReportMetric(float64(r.Lines()), "lines-read")
	}
}
