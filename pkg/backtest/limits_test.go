package backtest

import (
	"fmt"
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/progress-planner/planner/internal/genreader"
	"github.com/progress-planner/planner/pkg/forecast"
	"github.com/progress-planner/planner/pkg/progress"
)

const bigHeader = `{"kind":"ProgressHistory","version":1,"name":"big","objective":{"metric":"eval_loss","direction":"minimize","target":null},"outcome":{"status":"completed","endSeconds":%d,"final":{"eval_loss":2.00002}},"derivedFrom":null}`

// bigRun is a history of n reports every 10 s, generated as it is read: a
// steps run whose eval_loss plateaus from about 40 % of the run, with a
// preemption at report resetAt (current_step and progressPercentage go
// back to a checkpoint) and a "nan" loss at report nanAt.
func bigRun(n, resetAt, nanAt int) *genreader.Reader {
	return genreader.New(10_000, func(dst []byte, i int) ([]byte, bool) {
		switch {
		case i == 0:
			return fmt.Appendf(dst, bigHeader+"\n", 10*(n-1)), true
		case i > n:
			return dst, false
		}
		r := i - 1
		step := r
		if resetAt > 0 && r >= resetAt {
			step = r - 1000 // resumed from a checkpoint 1,000 steps back
		}
		x := float64(step) / float64(n)
		evalLoss := 2 + 3*math.Exp(-12*x)
		loss := fmt.Sprintf("%.6g", evalLoss-0.1)
		if r == nanAt {
			loss = "nan"
		}
		return fmt.Appendf(dst, `{"t":%d,"trainerStatus":{"progressPercentage":%d,"metrics":[{"name":"loss","value":"%s"},{"name":"eval_loss","value":"%.6g"},{"name":"current_step","value":"%d"},{"name":"total_steps","value":"%d"}]}}`+"\n",
			10*r, min(100*step/n, 100), loss, evalLoss, step, n), true
	})
}

// TestReadBoundedKeepsFilesWithinLimits: a file of MaxReports reports is
// held whole, exactly as ReadHistoryFile reads it, and not thinned.
func TestReadBoundedKeepsFilesWithinLimits(t *testing.T) {
	hf, th, err := readBounded(bigRun(MaxReports, MaxReports/2, MaxReports/3))
	if err != nil {
		t.Fatal(err)
	}
	whole, err := progress.ReadHistoryFile(bigRun(MaxReports, MaxReports/2, MaxReports/3))
	if err != nil {
		t.Fatal(err)
	}
	if th.Thinned() || len(hf.Reports) != MaxReports || !reflect.DeepEqual(hf, whole) {
		t.Errorf("a file of MaxReports reports: %d kept, thinning %+v; want all, as read whole", len(hf.Reports), th)
	}
}

// TestReadBoundedThinsHugeFiles: a file over the limits is read streaming
// and thinned, not refused: at most MaxReports reports are kept, spread
// evenly, with the first, the last and the reports around each change of
// run state; the live heap stays bounded: its peak is the MaxReports
// reports held before thinning starts, about 15 MiB here (holding all
// 200,000 reports takes 55 MiB).
func TestReadBoundedThinsHugeFiles(t *testing.T) {
	const n, resetAt, nanAt = 200_000, 150_001, 170_007
	r := bigRun(n, resetAt, nanAt)
	hf, th, err := readBounded(r)
	if err != nil {
		t.Fatal(err)
	}
	if !th.Thinned() || th.Read != n || th.Kept != len(hf.Reports) || th.Kept > MaxReports || th.Kept < MaxReports/2 {
		t.Fatalf("thinning %+v, %d reports kept: want %d read, between %d and %d kept", th, len(hf.Reports), n, MaxReports/2, MaxReports)
	}
	if grew := r.PeakGrowth(); grew > 24 {
		t.Errorf("live heap grew by %.1f MiB reading %d reports", grew, n)
	}
	t.Logf("%d reports: %+v, live heap grew by at most %.1f MiB", n, th, r.PeakGrowth())
	has := map[float64]bool{}
	for i, rep := range hf.Reports {
		has[rep.T] = true
		if i > 0 {
			gap := rep.T - hf.Reports[i-1].T
			if gap < 0 || gap > 10*float64(th.Stride) {
				t.Fatalf("reports %d and %d are %v s apart: want in order, at most the stride (%d reports) apart", i-1, i, gap, th.Stride)
			}
		}
	}
	at := func(r int) float64 { return 10 * float64(r) }
	end := float64(10 * (n - 1))
	for _, want := range []struct {
		what string
		t    float64
	}{
		{"the first report", 0},
		{"the last report", at(n - 1)},
		{"the report before the progress reset", at(resetAt - 1)},
		{"the progress reset", at(resetAt)},
		{"the report before the first nan", at(nanAt - 1)},
		{"the first nan", at(nanAt)},
		// the last report at or before each default cutoff (every report
		// here is on a multiple of 10 s)
		{"the last report before the 25 % cutoff", 10 * math.Floor(0.25*end/10)},
		{"the last report before the 75 % cutoff", 10 * math.Floor(0.75*end/10)},
	} {
		if !has[want.t] {
			t.Errorf("%s (t=%v) was not kept", want.what, want.t)
		}
	}
}

// TestReadBoundedThinsWideFiles: a file of few but large reports (512 KiB
// each, twice MaxFileBytes) is thinned by bytes too.
func TestReadBoundedThinsWideFiles(t *testing.T) {
	const lines = 2 * MaxFileBytes / (512 << 10)
	wide := `{"kind":"ProgressHistory","version":1,"name":"wide","derivedFrom":null}` + "\n"
	for i := range lines {
		wide += fmt.Sprintf(`{"t":%d,"trainerStatus":{"metrics":[{"name":"loss","value":"`+strings.Repeat("1", 512<<10)+`"}]}}`+"\n", i)
	}
	hf, th, err := readBounded(strings.NewReader(wide))
	if err != nil {
		t.Fatal(err)
	}
	cost := 0
	for _, r := range hf.Reports {
		cost += reportCost(r)
	}
	if !th.Thinned() || cost > maxKeptCost+reportCost(hf.Reports[0]) || hf.Reports[len(hf.Reports)-1].T != lines-1 {
		t.Errorf("a %d MiB file: thinning %+v, %d reports of %.1f MiB kept", len(wide)>>20, th, len(hf.Reports), float64(cost)/(1<<20))
	}
}

// TestRunScoresThinnedFiles: a file over the limits is scored, not
// skipped, and the caller is told it was thinned. Scored whole (no limit)
// and thinned, the truths agree: the ETA truths and the final value
// exactly, the plateau instant to within the stride.
func TestRunScoresThinnedFiles(t *testing.T) {
	const n = 120_000
	var told []Thinning
	opt := Options{Cutoffs: []float64{0.25, 0.5}, PerJob: true, Engine: &fakeEngine{fn: func(float64, int, float64, *float64) forecast.Forecast { return forecast.Forecast{} }},
		OnThinned: func(name string, th Thinning) { told = append(told, th) }}
	thin := Input{Name: "big", load: func() (*progress.HistoryFile, Thinning, error) { return readBounded(bigRun(n, 0, -1)) }}
	whole := Input{Name: "big", Load: func() (*progress.HistoryFile, error) { return progress.ReadHistoryFile(bigRun(n, 0, -1)) }}
	rt, rw := Run([]Input{thin}, opt), Run([]Input{whole}, opt)
	if len(rt.Skipped) > 0 || len(rt.Jobs) != 1 || len(told) != 1 || rt.Jobs[0].Reports != told[0].Kept || told[0].Kept > MaxReports {
		t.Fatalf("skipped %+v, %d jobs, told %+v", rt.Skipped, len(rt.Jobs), told)
	}
	jt, jw := rt.Jobs[0], rw.Jobs[0]
	if jt.Thinned == nil || *jt.Thinned != told[0] || jw.Thinned != nil {
		t.Errorf("the JSON's thinned field: %+v (told %+v), whole %+v", jt.Thinned, told[0], jw.Thinned)
	}
	if jw.Reports != n || len(jt.Cuts) != len(jw.Cuts) || jt.Plateau == nil || jw.Plateau == nil {
		t.Fatalf("thinned %+v, whole %+v", jt, jw)
	}
	for k := range jw.Cuts {
		ct, cw := jt.Cuts[k], jw.Cuts[k]
		if ct.Now != cw.Now || ct.ETA == nil || cw.ETA == nil || ct.ETA.Truth != cw.ETA.Truth || ct.Final == nil || cw.Final == nil || ct.Final.Truth != cw.Final.Truth || ct.Final.XEnd != cw.Final.XEnd {
			t.Errorf("cut %v: thinned %+v, whole %+v", cw.Cutoff, ct, cw)
		}
	}
	if d := math.Abs(jt.Plateau.TruthSeconds - jw.Plateau.TruthSeconds); d > 10*float64(told[0].Stride) {
		t.Errorf("plateau truth %v s thinned, %v s whole: want within the stride (%d reports)", jt.Plateau.TruthSeconds, jw.Plateau.TruthSeconds, told[0].Stride)
	}
}

// TestThinnerPinsStateChanges: the first report of a scored field, both
// sides of a reporting gap and both sides of a progress reset are pinned
// (kept whatever the stride).
func TestThinnerPinsStateChanges(t *testing.T) {
	th := newThinner(progress.FileHeader{})
	for _, r := range []struct {
		t    float64
		step string
	}{{0, "0"}, {10, "1"}, {20, "2"}, {1000, "3"}, {1010, "1"}, {1020, "2"}} {
		th.add(progress.FileReport{T: r.t, TrainerStatus: progress.TrainerStatus{Metrics: []progress.MetricValue{{Name: "current_step", Value: r.step}}}}, false)
	}
	var pinned []int
	for _, k := range th.kept {
		if k.pinned {
			pinned = append(pinned, k.i)
		}
	}
	// 0: the first current_step; 2, 3: the gap (980 s against a mean of
	// 10 s); 3, 4: the step going back from 3 to 1.
	if want := []int{0, 2, 3, 4}; !reflect.DeepEqual(pinned, want) || len(th.kept) != 6 {
		t.Errorf("pinned reports %v of %d kept, want %v of 6", pinned, len(th.kept), want)
	}
}
