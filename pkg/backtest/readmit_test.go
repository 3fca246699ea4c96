package backtest

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/progress-planner/planner/pkg/progress"
)

// resumedRun is a preempt_resume history whose counter does not show the
// restart (the checkpoint was taken at the last report before the
// eviction): 1 % every 10 s to 30 % at t=300, evicted, readmitted at
// t=1200 (a 900 s silence, under the 30-minute pause a history file alone
// would take for a restart), then 1 % every 10 s again.
func resumedRun() []string {
	lines := []string{`{"kind":"ProgressHistory","version":1,"name":"resumed","objective":{"metric":"loss","direction":"minimize"},` +
		`"outcome":{"status":"completed","endSeconds":1900},"incident":{"type":"preempt_resume","atSeconds":300,"resumeSeconds":1200,"lostSteps":0}}`}
	report := func(t, step int) {
		lines = append(lines, fmt.Sprintf(`{"t":%d,"trainerStatus":{"metrics":[{"name":"loss","value":"%.4f"},{"name":"current_step","value":"%d"},{"name":"total_steps","value":"100"}]}}`,
			t, 2+3*math.Exp(-float64(step)/30), step))
	}
	for s := 1; s <= 30; s++ {
		report(10*s, s)
	}
	report(1200, 30) // the restarted reporter's first report
	for s := 31; s <= 100; s++ {
		report(1200+10*(s-30), s)
	}
	return lines
}

type readmitReplay struct {
	fakeReplay
	at []float64 // the report times Readmitted came just before
}

func (r *readmitReplay) Readmitted() { r.at = append(r.at, math.NaN()) }
func (r *readmitReplay) Observe(t float64, s progress.TrainerStatus) {
	if n := len(r.at); n > 0 && math.IsNaN(r.at[n-1]) {
		r.at[n-1] = t
	}
	r.fakeReplay.Observe(t, s)
}

type readmitEngine struct{ runs []*readmitReplay }

func (e *readmitEngine) NewRun(progress.Objective, bool) Replay {
	r := &readmitReplay{}
	e.runs = append(e.runs, r)
	return r
}

// The stream tells the engine of the readmission once, just before the
// first report at resumeSeconds, as the controller sees it before the
// restarted job reports; files without one are never told.
func TestStreamTellsTheReadmission(t *testing.T) {
	f, err := progress.ReadHistoryFile(strings.NewReader(strings.Join(resumedRun(), "\n")))
	if err != nil {
		t.Fatal(err)
	}
	e := &readmitEngine{}
	s := newStream(e, f)
	s.advance(1100)
	if got := e.runs[0].at; len(got) != 0 {
		t.Fatalf("readmitted before resumeSeconds: %v", got)
	}
	s.advance(1900)
	if got := e.runs[0].at; len(got) != 1 || got[0] != 1200 {
		t.Errorf("readmission told before the reports at %v, want once, before t=1200", got)
	}
	f.Header.Incident = nil
	s = newStream(e, f)
	s.advance(1900)
	if got := e.runs[1].at; len(got) != 0 {
		t.Errorf("a file without a readmission: told before %v", got)
	}
}

// With the readmission replayed, the eviction's silence is not a stretch
// of slow training: the ETA at the first report after the restart is the
// running pace's (70 steps at 10 s), where without it the 900 s silence
// made it several times longer.
func TestETAAfterAReadmission(t *testing.T) {
	f, err := progress.ReadHistoryFile(strings.NewReader(strings.Join(resumedRun(), "\n")))
	if err != nil {
		t.Fatal(err)
	}
	eta := func(f *progress.HistoryFile) (float64, int) {
		fc := newStream(ForecastEngine{}, f).at(1210)
		return fc.ETA.Value, fc.Segments
	}
	got, segs := eta(f)
	if segs != 2 || math.Abs(got-690)/690 > 0.05 {
		t.Errorf("ETA %.0f s over %d segments, want 690 s ± 5 %% over 2", got, segs)
	}
	f.Header.Incident = nil
	if blind, segs := eta(f); segs != 1 || !(blind > 2*got) {
		t.Errorf("without the readmission: ETA %.0f s over %d segments; the test expects the silence to count (> %.0f s over 1)", blind, segs, 2*got)
	}
}
