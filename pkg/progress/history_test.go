package progress

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"fmt"
	"math"
	"strconv"
	"strings"
	"testing"
)

func report(step, total int, loss float64) TrainerStatus {
	return TrainerStatus{
		ProgressPercentage: f64(math.Floor(100 * float64(step) / float64(total))),
		Metrics:            metrics("current_step", fmt.Sprint(step), "total_steps", fmt.Sprint(total), "loss", fmt.Sprint(loss)),
	}
}

func TestHistoryOrderingDuplicatesAndRestarts(t *testing.T) {
	h := NewHistory(DefaultLimits())
	mustAccept := func(tm float64, s TrainerStatus) {
		t.Helper()
		if ok, rejs := h.Observe(tm, s); !ok {
			t.Fatalf("t=%v refused: %v", tm, rejs)
		}
	}
	mustAccept(0, report(0, 100, 3))
	mustAccept(10, report(10, 100, 2))
	mustAccept(20, report(10, 100, 2)) // heartbeat: same values
	if h.Len() != 2 || h.Heartbeats() != 1 || h.LastReport() != 20 {
		t.Fatalf("len=%d heartbeats=%d last=%v", h.Len(), h.Heartbeats(), h.LastReport())
	}
	if ok, _ := h.Observe(15, report(20, 100, 1.5)); ok {
		t.Fatal("out-of-order report accepted")
	}
	mustAccept(30, report(20, 100, 1.5))
	// Resume from checkpoint: 0 % with no metrics, then the global step.
	mustAccept(90, TrainerStatus{ProgressPercentage: f64(0)})
	mustAccept(100, report(22, 100, 1.4))
	pts := h.Points()
	if pts[len(pts)-1].Seg != 1 || pts[len(pts)-2].Seg != 1 || pts[len(pts)-3].Seg != 0 {
		t.Errorf("segments: %+v", pts)
	}
	// A step that goes backwards (lost work) is a new segment too.
	mustAccept(110, report(15, 100, 1.6))
	if got := h.Points()[h.Len()-1].Seg; got != 2 {
		t.Errorf("seg after step reset = %d, want 2", got)
	}
	if h.Rejections()[RejectOutOfOrder] != 1 {
		t.Errorf("rejections %v", h.Rejections())
	}
}

func TestHistoryGarbageNeverCorrupts(t *testing.T) {
	h := NewHistory(DefaultLimits())
	h.Observe(0, report(0, 100, 3))
	h.Observe(10, report(10, 100, 2))
	before := fmt.Sprint(h.Points())
	garbage := []TrainerStatus{
		{ProgressPercentage: f64(250)},
		{ProgressPercentage: f64(math.Inf(1))},
		{Metrics: metrics("current_step", "-5")},
		{Metrics: metrics("current_step", "500", "total_steps", "100")},
		{},
	}
	for i, g := range garbage {
		if ok, rejs := h.Observe(float64(20+i), g); ok || len(rejs) == 0 {
			t.Errorf("garbage %d accepted (ok=%v rejs=%v)", i, ok, rejs)
		}
	}
	if after := fmt.Sprint(h.Points()); after != before {
		t.Errorf("history changed by garbage:\n%s\n%s", before, after)
	}
	if ok, _ := h.Observe(math.NaN(), report(11, 100, 1.9)); ok {
		t.Error("NaN time accepted")
	}
	total := 0
	for _, n := range h.Rejections() {
		total += n
	}
	if total < len(garbage)+1 {
		t.Errorf("rejections counted %d, want >= %d", total, len(garbage)+1)
	}
}

func TestHistoryBoundKeepsEarlyShapeAndDenseTail(t *testing.T) {
	l := DefaultLimits()
	h := NewHistory(l)
	const n = 100000
	for i := 0; i < n; i++ {
		h.Observe(float64(i*5), report(i, n, 3/(1+float64(i)/100)))
		if i == l.MaxPoints-1 && h.IntactFrom() != 0 {
			t.Fatalf("IntactFrom %d before anything was thinned", h.IntactFrom())
		}
	}
	if h.Len() > l.MaxPoints {
		t.Fatalf("len %d exceeds bound %d", h.Len(), l.MaxPoints)
	}
	pts := h.Points()
	if pts[0].T != 0 {
		t.Errorf("first point dropped: %v", pts[0].T)
	}
	// The tail is dense: the last TailPoints points are consecutive reports,
	// and IntactFrom says where they begin.
	if got, want := h.IntactFrom(), len(pts)-l.TailPoints; got != want {
		t.Errorf("IntactFrom %d after thinning, want %d", got, want)
	}
	tail := pts[h.IntactFrom():]
	for i := 1; i < len(tail); i++ {
		if tail[i].T-tail[i-1].T != 5 {
			t.Fatalf("tail not dense at %d: %v -> %v", i, tail[i-1].T, tail[i].T)
		}
	}
	// Early shape: some points remain in the first 1% of the run.
	early := 0
	for _, p := range pts {
		if p.T < n*5/100 {
			early++
		}
	}
	if early < 4 {
		t.Errorf("only %d points kept from the first 1%% of the run", early)
	}
	for i := 1; i < len(pts); i++ {
		if pts[i].T <= pts[i-1].T {
			t.Fatalf("order broken at %d", i)
		}
	}
}

func TestHistoryMetricCap(t *testing.T) {
	h := NewHistory(Limits{MaxMetrics: 3})
	var ms []string
	for i := 0; i < 10; i++ {
		ms = append(ms, fmt.Sprintf("zz_%d", i), "1")
	}
	ms = append(ms, "eval_loss", "2", "loss", "3", "current_step", "1")
	h.Observe(0, TrainerStatus{Metrics: metrics(ms...)})
	names := h.MetricNames()
	if len(names) != 3 || !h.HasMetric("eval_loss") || !h.HasMetric("loss") {
		t.Errorf("kept %v, want the objective-like names first", names)
	}
}

// The longest gap between stored points of the last segment is measured
// as the reports arrive, so it outlives the points thinning drops; a new
// segment starts it again.
func TestHistoryLongestGapSurvivesThinning(t *testing.T) {
	l := DefaultLimits()
	h := NewHistory(l)
	tm := 0.0
	for i := 0; i < 3*l.MaxPoints; i++ {
		if i == 10 {
			tm += 300 // a long evaluation, early on
		}
		h.Observe(tm, report(i, 10*l.MaxPoints, 3/(1+float64(i)/100)))
		tm += 5
	}
	if h.Thinned() == 0 || h.Points()[h.IntactFrom()].T < 400 {
		t.Fatalf("want the pause thinned out of the intact tail: thinned %d", h.Thinned())
	}
	if h.LongestGap() != 305 {
		t.Errorf("longest gap %v, want 305", h.LongestGap())
	}
	h.Resume()
	h.Observe(tm+1000, report(0, 10*l.MaxPoints, 3))
	h.Observe(tm+1010, report(2, 10*l.MaxPoints, 2.9))
	if h.LongestGap() != 10 {
		t.Errorf("longest gap %v after a restart, want the new segment's 10", h.LongestGap())
	}
}

func TestHistoryCodecRoundTrip(t *testing.T) {
	h := NewHistory(DefaultLimits())
	for i := 0; i < 2000; i++ {
		s := report(i, 2000, 3/(1+float64(i)/50))
		if i%10 == 0 {
			s.Metrics = append(s.Metrics, MetricValue{Name: "eval_loss", Value: fmt.Sprint(3.1 / (1 + float64(i)/50))})
		}
		s.EstimatedRemainingSeconds = f64(float64(2000-i) * 5)
		h.Observe(float64(i*5), s)
		if i == 1000 {
			h.Observe(float64(i*5)+1, TrainerStatus{ProgressPercentage: f64(0)})
		}
	}
	h.Observe(1e9, TrainerStatus{ProgressPercentage: f64(500)})
	b, err := h.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	if len(b) > 48*1024 {
		t.Errorf("encoded history is %d bytes, want at most 48 KiB", len(b))
	}
	g, err := UnmarshalHistory(b, DefaultLimits())
	if err != nil {
		t.Fatal(err)
	}
	b2, _ := g.MarshalJSON()
	if string(b) != string(b2) {
		t.Errorf("round trip differs")
	}
	if fmt.Sprint(g.Points()) != fmt.Sprint(h.Points()) {
		t.Errorf("points differ after round trip")
	}
	if g.Rejections()[RejectProgressRange] != 1 || g.Heartbeats() != h.Heartbeats() || g.LongestGap() != h.LongestGap() || h.LongestGap() != 5 {
		t.Errorf("metadata lost: %v, longest gap %v then %v", g.Rejections(), h.LongestGap(), g.LongestGap())
	}
}

// The stored encoding is the columnar one compressed; histories stored
// uncompressed (version 1, before compression) are still read.
func TestHistoryCodecCompressedAndVersion1(t *testing.T) {
	h := NewHistory(DefaultLimits())
	for i := 0; i < 600; i++ {
		h.Observe(float64(i*5), report(i, 600, 3/(1+float64(i)/50)))
	}
	stored, err := h.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	columnar, err := h.marshalColumnar()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(stored, []byte(`{"v":2,"gz":"`)) || 2*len(stored) > len(columnar)+len(columnar)/2 {
		t.Errorf("stored %d bytes (%.40s…) for %d columnar: want version 2, at most 3/4 of the size", len(stored), stored, len(columnar))
	}
	t.Logf("%d points: %d bytes stored, %d columnar", h.Len(), len(stored), len(columnar))
	for name, b := range map[string][]byte{"version 2": stored, "version 1": columnar} {
		g, err := UnmarshalHistory(b, DefaultLimits())
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if fmt.Sprint(g.Points()) != fmt.Sprint(h.Points()) {
			t.Errorf("%s: points differ after decoding", name)
		}
	}
}

// A compressed history is refused, not expanded, past maxColumnarBytes.
func TestUnmarshalHistoryRefusesCompressionBomb(t *testing.T) {
	var z bytes.Buffer
	w := gzip.NewWriter(&z)
	if _, err := w.Write([]byte(`{"v":1,"t":[` + strings.Repeat("0,", maxColumnarBytes) + `0]}`)); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	bomb := `{"v":2,"gz":"` + base64.StdEncoding.EncodeToString(z.Bytes()) + `"}`
	_, err := UnmarshalHistory([]byte(bomb), DefaultLimits())
	if err == nil || !strings.Contains(err.Error(), "exceeds") {
		t.Errorf("%d-byte bomb: err %v, want refused for its size", len(bomb), err)
	}
}

func TestUnmarshalHistoryRejectsForgedStatus(t *testing.T) {
	for _, bad := range []string{
		`{"v":2,"t":[]}`,
		`{"v":2,"gz":"not base64!"}`,
		`{"v":2,"gz":"aGVsbG8="}`,
		`{"v":3,"t":[]}`,
		`{"v":1,"t":[5,3]}`,
		`{"v":1,"t":[1,2],"cols":{"step":{"d":[1]}}}`,
		`{"v":1,"t":[1,2],"cols":{"progress":{"d":[0.5,7]}}}`,
		`{"v":1,"t":[1,2],"cols":{"step":{"c":[5,1]}}}`,
		`{"v":1,"t":[1],"seg":[4]}`,
		`{"v":1,"t":[1,2],"gap":-1}`,
		`{"v":1,"t":[1,2],"gap":5}`,
		`{"v":1,"t":[1,2,9],"seg":[2],"gap":5}`,
		`not json`,
	} {
		if _, err := UnmarshalHistory([]byte(bad), DefaultLimits()); err == nil {
			t.Errorf("accepted %s", bad)
		}
	}
}

func TestHistoryTrainBeginReportWithoutPriorProgressIsARestart(t *testing.T) {
	// MLPerf-style reporter: counters and metrics, no progress percentage;
	// after a preemption the restarted reporter sends 0 % with no metrics.
	h := NewHistory(DefaultLimits())
	h.Observe(0, TrainerStatus{Metrics: metrics("epoch", "1", "auc", "0.7")})
	h.Observe(60, TrainerStatus{Metrics: metrics("epoch", "2", "auc", "0.75")})
	h.Observe(900, TrainerStatus{ProgressPercentage: f64(0)})
	h.Observe(960, TrainerStatus{Metrics: metrics("epoch", "3", "auc", "0.77")})
	pts := h.Points()
	if pts[2].Seg != 1 || pts[3].Seg != 1 {
		t.Errorf("segments %d %d, want the train-begin report to start segment 1", pts[2].Seg, pts[3].Seg)
	}
}

// A job resumed from a checkpoint taken after its last report comes back
// with a higher step: only the silence shows the restart. A long silence
// starts a new segment, so the waiting time is not read as slow training;
// ordinary jitter and a silence shorter than the minimum do not.
func TestHistoryResumeAfterPauseStartsASegment(t *testing.T) {
	report := func(h *History, t0 float64, step int) {
		h.Observe(t0, TrainerStatus{Metrics: metrics("current_step", strconv.Itoa(step), "total_steps", "10000", "loss", "1")})
	}
	tests := []struct {
		name    string
		gap     float64
		wantSeg int
	}{
		{"ten intervals late", 10 * 60, 0},
		{"29 minutes of silence (below the minimum)", 29 * 60, 0},
		{"silence of 6 hours", 6 * 3600, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := NewHistory(DefaultLimits())
			for i := range 10 {
				report(h, float64(60*i), 100*i)
			}
			report(h, 540+tc.gap, 1000)
			report(h, 600+tc.gap, 1100)
			pts := h.Points()
			if got := pts[len(pts)-1].Seg; got != tc.wantSeg {
				t.Errorf("segment %d after the gap, want %d", got, tc.wantSeg)
			}
		})
	}
}

// Resume (a readmission the controller saw) starts a new segment at the
// next report even when the step moved on; before any report it is a no-op.
func TestHistoryResume(t *testing.T) {
	h := NewHistory(DefaultLimits())
	h.Resume()
	for i := range 5 {
		h.Observe(float64(60*i), TrainerStatus{Metrics: metrics("current_step", strconv.Itoa(100*i), "loss", "1")})
	}
	h.Resume()
	h.Observe(600, TrainerStatus{Metrics: metrics("current_step", "450", "loss", "0.9")})
	h.Observe(660, TrainerStatus{Metrics: metrics("current_step", "550", "loss", "0.8")})
	pts := h.Points()
	if pts[0].Seg != 0 || pts[4].Seg != 0 || pts[5].Seg != 1 || pts[6].Seg != 1 {
		t.Errorf("segments %d %d %d %d, want 0 0 1 1", pts[0].Seg, pts[4].Seg, pts[5].Seg, pts[6].Seg)
	}
}
