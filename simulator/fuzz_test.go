package simulator

import (
	"bytes"
	"slices"
	"strings"
	"testing"
)

// Fuzz targets for the simulator's parsers of outside data (make fuzz).

func FuzzReadPhillyTrace(f *testing.F) {
	f.Add([]byte(phillyCSV))
	f.Add([]byte(phillyHeader + "2017-10-09 07:01:55,1e308,1e300,66,vc1\n2017-10-09 07:01:55,66,0,0,vc2\n"))
	f.Add([]byte(phillyHeader + "9999-12-31 23:59:59,1,1,1,a\n0000-01-01 00:00:00,1,1,1,b\n"))
	f.Fuzz(func(t *testing.T, b []byte) { checkTrace(t, b, FormatPhilly) })
}

func FuzzReadAlibabaTrace(f *testing.F) {
	f.Add([]byte(alibabaHeader + "openb-pod-0000,12000,16384,1,1000,,LS,Running,100,12537496,100\nopenb-pod-0001,6000,12288,2,1000,,BE,Pending,300,900,\n"))
	f.Add([]byte(alibabaHeader + "p,1,1,1e300,1,,LS,Running,0,1e12,1\n"))
	f.Fuzz(func(t *testing.T, b []byte) { checkTrace(t, b, FormatAlibaba) })
}

// checkTrace: whatever reads is within the limits, in arrival order; a
// limit keeps the first usable rows of the file (the full read's jobs of
// the smallest lines, in arrival order, the first at 0); queues made from
// it add up to the capacity.
func checkTrace(t *testing.T, b []byte, format string) {
	tr, err := ReadTrace(bytes.NewReader(b), format, 0)
	if err != nil {
		return
	}
	for i, j := range tr.Jobs {
		if j.GPUs < 1 || j.GPUs > MaxGPUs || !(j.Duration > 0 && j.Duration <= MaxSeconds) || !(j.Arrival >= 0 && j.Arrival <= MaxSeconds) {
			t.Fatalf("job %d out of range: %+v", i, j)
		}
		if i > 0 && j.Arrival < tr.Jobs[i-1].Arrival {
			t.Fatalf("job %d arrives before job %d", i, i-1)
		}
	}
	const limit = 2
	lim, err := ReadTrace(bytes.NewReader(b), format, limit)
	if err != nil {
		t.Fatalf("limit %d fails where no limit reads: %v", limit, err)
	}
	// The full read's jobs of the first usable lines, by line; the limited
	// read sorts them by submission (compared on the full read's
	// arrivals: re-based floats can tie where submissions differ).
	byLine := slices.Clone(tr.Jobs)
	slices.SortFunc(byLine, func(a, b TraceJob) int { return a.Line - b.Line })
	want := map[int]TraceJob{}
	for _, j := range byLine[:min(limit, len(byLine))] {
		want[j.Line] = j
	}
	if len(lim.Jobs) != len(want) || lim.Jobs[0].Arrival != 0 {
		t.Fatalf("limit %d: jobs %+v, want the first usable lines %+v", limit, lim.Jobs, want)
	}
	for i, j := range lim.Jobs {
		w, ok := want[j.Line]
		if !ok || j.Duration != w.Duration || j.GPUs != w.GPUs || j.Group != w.Group || j.Name != w.Name {
			t.Fatalf("limited job %d %+v, want one of %+v", i, j, want)
		}
		if i > 0 && w.Arrival < want[lim.Jobs[i-1].Line].Arrival {
			t.Fatalf("limited job %d %+v arrives before job %d", i, j, i-1)
		}
	}
	for _, capacity := range []int{1, MaxGPUs} {
		total := 0
		for _, q := range traceQueues(tr, capacity, false) {
			if q.GPUs < 0 {
				t.Fatalf("queue %+v", q)
			}
			total += q.GPUs
		}
		if total != capacity {
			t.Fatalf("queues hold %d GPUs, want %d", total, capacity)
		}
	}
}

func FuzzParseScenario(f *testing.F) {
	f.Add([]byte(smallScenario))
	f.Add(DefaultScenarioYAML())
	f.Add([]byte("name: x\nqueues: [{name: q, gpus: 9223372036854775807}]\njobs: [{queue: q, gpus: 1, duration: 1e308}]\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		sc, err := ParseScenario(b)
		if err != nil {
			return
		}
		if _, err := sc.Options(DefaultOptions()); err != nil {
			return
		}
		// Resolve reads no files here (a trace or curves directory would
		// be read from this machine) and generates few jobs.
		if sc.Trace != nil || sc.Curves != nil || (sc.Generate != nil && sc.Generate.Jobs > 1000) {
			return
		}
		in, err := sc.Resolve()
		if err != nil {
			return
		}
		for _, j := range in.Jobs {
			if err := j.validate(); err != nil && !strings.Contains(err.Error(), "arrival") {
				t.Fatalf("resolved job fails validation: %v", err)
			}
		}
	})
}
