package backtest

import (
	"bytes"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/progress-planner/planner/pkg/progress"
)

// historyFile reads a history file with an eval_loss objective from its
// report lines.
func historyFile(t *testing.T, reports ...string) *progress.HistoryFile {
	t.Helper()
	b := strings.Builder{}
	b.WriteString(`{"kind":"ProgressHistory","version":1,"name":"r","objective":{"metric":"eval_loss","direction":"minimize"},"outcome":{"status":"completed","endSeconds":80},"derivedFrom":null}` + "\n")
	for _, r := range reports {
		b.WriteString(r + "\n")
	}
	f, err := progress.ReadHistoryFile(bytes.NewReader([]byte(b.String())))
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// objectiveValue is r's value of metric (the first, as a reader of the
// file sees it).
func objectiveValue(r progress.FileReport, metric string) (string, bool) {
	i := slices.IndexFunc(r.TrainerStatus.Metrics, func(m progress.MetricValue) bool { return m.Name == metric })
	if i < 0 {
		return "", false
	}
	return r.TrainerStatus.Metrics[i].Value, true
}

// reportTimes are the times of f's reports, printed.
func reportTimes(f *progress.HistoryFile) string {
	ts := make([]float64, len(f.Reports))
	for i, r := range f.Reports {
		ts[i] = r.T
	}
	return fmt.Sprint(ts)
}

// objectiveValues are the eval_loss values of f's reports ("-" where a
// report carries none).
func objectiveValues(f *progress.HistoryFile) []string {
	var out []string
	for _, r := range f.Reports {
		v, ok := objectiveValue(r, "eval_loss")
		if !ok {
			v = "-"
		}
		out = append(out, v)
	}
	return out
}

// An original run evaluated three times less often: its eight evaluations
// (each repeated at the report after it, as a reporter caches metrics)
// become the 3rd and the 6th, each repeated until the next kept one, and
// the last report keeps its own value. The training loss is kept; an
// incident file is left as recorded.
func TestSparseEvaluations(t *testing.T) {
	var reps []string
	for i := 1; i <= 16; i++ {
		eval := 10 - (i+1)/2 // a new value at every other report
		reps = append(reps, fmt.Sprintf(`{"t":%d,"trainerStatus":{"metrics":[{"name":"loss","value":"%d"},{"name":"eval_loss","value":"%d"}]}}`, 5*i, 20-i, eval))
	}
	f := historyFile(t, reps...)
	if got := valueChanges(toReps(f), "eval_loss"); fmt.Sprint(got) != "[0 2 4 6 8 10 12 14]" {
		t.Fatalf("evaluations at reports %v", got)
	}
	got := sparseEvaluations(f, 3)
	want := "[- - - - 7 7 7 7 7 7 4 4 4 4 4 2]"
	if fmt.Sprint(objectiveValues(got)) != want {
		t.Errorf("objective %v, want %s", objectiveValues(got), want)
	}
	for i, r := range got.Reports {
		if r.T != f.Reports[i].T || r.TrainerStatus.Metrics[0] != f.Reports[i].TrainerStatus.Metrics[0] {
			t.Fatalf("report %d: time or training loss changed: %+v", i, r)
		}
	}
	if v, _ := objectiveValue(f.Reports[0], "eval_loss"); v != "9" {
		t.Errorf("the input file was modified: %+v", f.Reports[0].TrainerStatus.Metrics)
	}
	derived := "r0"
	f.Header.DerivedFrom = &derived
	if sparseEvaluations(f, 3) != f || pausedEvaluations(f, 3) != f {
		t.Error("an incident file was recast")
	}
}

// Training that stops for two report intervals at each evaluation: the
// evaluation report repeats as a heartbeat through the pause, later
// reports come that much later with their ETAs rescaled as elapsed time,
// and the end moves with the last report, which is not paused.
func TestPausedEvaluations(t *testing.T) {
	rep := func(t, step, eta int, eval string) string {
		return fmt.Sprintf(`{"t":%d,"trainerStatus":{"progressPercentage":%d,"estimatedRemainingSeconds":%d,"metrics":[{"name":"current_step","value":"%d"},{"name":"eval_loss","value":"%s"}]}}`, t, step, eta, step, eval)
	}
	f := historyFile(t,
		rep(0, 0, 80, "5"), rep(10, 10, 70, "5"), rep(20, 20, 60, "4"), // evaluations at t=0, 20, 40 and 80
		rep(30, 30, 50, "4"), rep(40, 40, 40, "3"), rep(80, 99, 1, "2"))
	got := pausedEvaluations(f, 2)
	var ts, etas []float64
	for _, r := range got.Reports {
		ts = append(ts, r.T)
		etas = append(etas, *r.TrainerStatus.EstimatedRemainingSeconds)
	}
	if want := "[0 10 20 30 40 50 60 70 80 90 100 140]"; fmt.Sprint(ts) != want {
		t.Errorf("times %v, want %s", ts, want)
	}
	// An ETA scales as elapsed time (70·30/10 = 210, 50·70/30 ≈ 117); one
	// sent at t=0 cannot be.
	if want := "[80 80 80 210 120 150 180 117 80 90 100 2]"; fmt.Sprint(etas) != want {
		t.Errorf("ETAs %v, want %s", etas, want)
	}
	if want := "[5 5 5 5 4 4 4 4 3 3 3 2]"; fmt.Sprint(objectiveValues(got)) != want {
		t.Errorf("objective %v, want %s", objectiveValues(got), want)
	}
	if got.Header.Outcome.EndSeconds != 140 || f.Header.Outcome.EndSeconds != 80 {
		t.Errorf("end %v (input %v), want 140 (80)", got.Header.Outcome.EndSeconds, f.Header.Outcome.EndSeconds)
	}
	if pausedEvaluations(f, 0) != f {
		t.Error("a zero pause recast the run")
	}
	// With both stress tests, the pause comes at the evaluation that
	// --eval-every kept (the 2nd, at t=20; the 4th is the last report).
	both := (&evaluator{evalEvery: 2, evalPause: 2}).stressed(f)
	if got, want := reportTimes(both), "[0 10 20 30 40 50 60 100]"; got != want {
		t.Errorf("both stress tests: times %v, want %s", got, want)
	}
	if want := "[- - 4 4 4 4 4 2]"; fmt.Sprint(objectiveValues(both)) != want {
		t.Errorf("both stress tests: objective %v, want %s", objectiveValues(both), want)
	}
}

// A run without a fixed total that reports only its evaluations gains a
// training-loss report every 10 s between them, each with the loss alone
// and a lower value than the one before; its own reports stay as they
// were, in order. A run that reports progress is left as recorded, and
// the added reports never pass MaxReports.
func TestLossReports(t *testing.T) {
	f := historyFile(t,
		`{"t":0,"trainerStatus":{"metrics":[{"name":"eval_loss","value":"3"},{"name":"epoch","value":"0"}]}}`,
		`{"t":60,"trainerStatus":{"metrics":[{"name":"eval_loss","value":"2"},{"name":"epoch","value":"1"}]}}`,
		`{"t":120,"trainerStatus":{"metrics":[{"name":"eval_loss","value":"1.5"},{"name":"epoch","value":"2"}]}}`)
	g := lossReports(f, 10)
	if len(g.Reports) != 3+2*5 {
		t.Fatalf("%d reports, want 3 + 2×5", len(g.Reports))
	}
	var times []float64
	prev := 2.0
	for _, r := range g.Reports {
		times = append(times, r.T)
		if r.T == 0 || r.T == 60 || r.T == 120 {
			if _, ok := objectiveValue(r, "eval_loss"); !ok {
				t.Errorf("recorded report at t=%v lost its objective", r.T)
			}
			continue
		}
		ms := r.TrainerStatus.Metrics
		if len(ms) != 1 || ms[0].Name != stressLoss || r.TrainerStatus.ProgressPercentage != nil {
			t.Fatalf("added report at t=%v: %+v, want the training loss alone", r.T, r.TrainerStatus)
		}
		v, err := strconv.ParseFloat(ms[0].Value, 64)
		if err != nil || v >= prev {
			t.Errorf("added report at t=%v: loss %q after %v, want it lower", r.T, ms[0].Value, prev)
		}
		prev = v
	}
	if want := []float64{0, 10, 20, 30, 40, 50, 60, 70, 80, 90, 100, 110, 120}; !slices.Equal(times, want) {
		t.Errorf("times %v, want %v", times, want)
	}

	// With --eval-pause, the pause is counted in the job's new report
	// intervals: 3 × 10 s after each evaluation but the last, sent as
	// heartbeats of the evaluation's report, and the training loss goes on
	// after it.
	paused := (&evaluator{lossEvery: 10, evalPause: 3}).stressed(f)
	if got, want := reportTimes(paused), "[0 10 20 30 40 50 60 70 80 90 100 110 120 130 140 150 160 170 180]"; got != want {
		t.Errorf("with a pause: times %v, want %s", got, want)
	}

	withTotal := historyFile(t,
		`{"t":0,"trainerStatus":{"progressPercentage":0,"metrics":[{"name":"eval_loss","value":"3"}]}}`,
		`{"t":60,"trainerStatus":{"progressPercentage":50,"metrics":[{"name":"eval_loss","value":"2"}]}}`)
	if g := lossReports(withTotal, 10); g != withTotal {
		t.Errorf("a run with a fixed total was changed")
	}

	long := historyFile(t,
		`{"t":0,"trainerStatus":{"metrics":[{"name":"eval_loss","value":"3"}]}}`,
		`{"t":1e7,"trainerStatus":{"metrics":[{"name":"eval_loss","value":"2"}]}}`)
	if n := len(lossReports(long, 1).Reports); n > MaxReports+2 {
		t.Errorf("%d reports, want at most MaxReports + the 2 recorded", n)
	}
}

// noFixedTotal fails t when a report of g carries a progress percentage,
// a reported ETA or a total counter, or lacks its step counter.
func noFixedTotal(t *testing.T, g *progress.HistoryFile) {
	t.Helper()
	for _, r := range g.Reports {
		if r.TrainerStatus.ProgressPercentage != nil || r.TrainerStatus.EstimatedRemainingSeconds != nil {
			t.Fatalf("a fixed total left in %+v", r.TrainerStatus)
		}
		if _, ok := objectiveValue(r, "total_steps"); ok {
			t.Fatalf("total_steps left in %+v", r.TrainerStatus.Metrics)
		}
		if _, ok := objectiveValue(r, "current_step"); !ok {
			t.Fatalf("the step counter dropped from %+v", r.TrainerStatus.Metrics)
		}
	}
}

// A run with a target and a fixed total recast as one that stops at that
// target with no total: it ends at the first report that reaches it, with
// no progress, ETA or total counter left. A run that never reaches its
// target, one without a total and one without a target are left as they
// are, and so is every run when the stress is off.
func TestDroppedTotal(t *testing.T) {
	lines := func(values ...float64) []string {
		var out []string
		for i, v := range values {
			out = append(out, fmt.Sprintf(`{"t":%d,"trainerStatus":{"progressPercentage":%d,"estimatedRemainingSeconds":5,"metrics":[{"name":"eval_loss","value":"%g"},{"name":"current_step","value":"%d"},{"name":"total_steps","value":"6"}]}}`, 10*i, 16*i, v, i))
		}
		return out
	}
	withTarget := func(f *progress.HistoryFile, target float64) *progress.HistoryFile {
		o := *f.Header.Objective
		o.Target = &target
		f.Header.Objective = &o
		return f
	}
	f := withTarget(historyFile(t, lines(4, 3.6, 3.4, 3.3, 3.27, 3.25)...), 3.28)
	g := droppedTotal(f, true)
	if len(g.Reports) != 5 || g.Header.Outcome.EndSeconds != 40 || g.Header.Outcome.Status != "target_reached" {
		t.Fatalf("stopped at %d reports, end %v, %q; want 5 reports ending at the first value <= 3.28 (t=40)",
			len(g.Reports), g.Header.Outcome.EndSeconds, g.Header.Outcome.Status)
	}
	if tg := g.Header.Objective.Target; tg == nil || *tg != 3.28 {
		t.Errorf("target %v, want the run's own 3.28", tg)
	}
	if v, _ := g.Header.Outcome.FinalValue("eval_loss"); v != 3.27 {
		t.Errorf("final %v, want 3.27", v)
	}
	noFixedTotal(t, g)
	if len(f.Reports) != 6 || f.Reports[0].TrainerStatus.ProgressPercentage == nil {
		t.Error("the input was changed")
	}
	short := withTarget(historyFile(t, lines(4, 3.6, 3.4, 3.3)...), 3.28)
	noTarget := historyFile(t, lines(4, 3.6, 3.4, 3.3)...)
	for name, in := range map[string]*progress.HistoryFile{"never reaches its target": short, "no target": noTarget, "no total": g} {
		if out := droppedTotal(in, true); out != in {
			t.Errorf("%s: recast", name)
		}
	}
	if out := droppedTotal(f, false); out != f {
		t.Error("recast with the stress off")
	}
}

// A run without a target recast as one that stops at the level of 90 % of
// its whole improvement: it ends at the first report that reaches it, with
// no progress, ETA or total counter left, and its header names the target
// and the value it stopped at. A run with a target is left as it is.
func TestStoppedAtTarget(t *testing.T) {
	var lines []string
	for i, v := range []float64{2, 1.5, 1.2, 1.1, 1.05, 1.02, 1.0} { // gain 1; 90 % at 1.1
		lines = append(lines, fmt.Sprintf(`{"t":%d,"trainerStatus":{"progressPercentage":%d,"estimatedRemainingSeconds":5,"metrics":[{"name":"eval_loss","value":"%g"},{"name":"current_step","value":"%d"},{"name":"total_steps","value":"7"}]}}`, 10*i, 14*i, v, i))
	}
	f := historyFile(t, lines...)
	g := stoppedAtTarget(f, 0.9)
	if len(g.Reports) != 4 || g.Header.Outcome.EndSeconds != 30 || g.Header.Outcome.Status != "target_reached" {
		t.Fatalf("stopped at %d reports, end %v, %q; want 4 reports ending at the first value <= 1.1 (t=30)",
			len(g.Reports), g.Header.Outcome.EndSeconds, g.Header.Outcome.Status)
	}
	if tg := g.Header.Objective.Target; tg == nil || *tg < 1.0999 || *tg > 1.1001 {
		t.Errorf("target %v, want 1.1", tg)
	}
	if v, _ := g.Header.Outcome.FinalValue("eval_loss"); v != 1.1 {
		t.Errorf("final %v, want 1.1", v)
	}
	noFixedTotal(t, g)
	if f.Header.Objective.Target != nil || len(f.Reports) != 7 || f.Reports[0].TrainerStatus.ProgressPercentage == nil {
		t.Error("the input was changed")
	}
	if h := stoppedAtTarget(g, 0.5); h != g {
		t.Error("a run with a target was recast again")
	}
}

// A run the planner first saw at 30 % of its run (an 80 s run, reports
// every 10 s): the reports before 24 s are gone, the rest and the header
// as recorded. Off, an incident, a run without an end, and a share that
// would leave fewer than two reports change nothing.
func TestFirstSeenAt(t *testing.T) {
	var reps []string
	for i := 0; i <= 8; i++ {
		reps = append(reps, fmt.Sprintf(`{"t":%d,"trainerStatus":{"metrics":[{"name":"eval_loss","value":"%d"}]}}`, 10*i, 20-i))
	}
	f := historyFile(t, reps...)
	g := firstSeenAt(f, 0.3)
	if got := reportTimes(g); got != "[30 40 50 60 70 80]" {
		t.Errorf("reports at %s, want [30 40 50 60 70 80]", got)
	}
	if g.Header.Outcome != f.Header.Outcome || g.Reports[0].TrainerStatus.Metrics[0] != f.Reports[3].TrainerStatus.Metrics[0] {
		t.Error("the header or a kept report changed")
	}
	if len(f.Reports) != 9 {
		t.Error("the input was changed")
	}
	if firstSeenAt(f, 0) != f || firstSeenAt(f, 0.95) != f {
		t.Error("recast with the stress off, or with fewer than two reports left")
	}
	noEnd := historyFile(t, reps...)
	noEnd.Header.Outcome = nil
	derived := "r0"
	incident := historyFile(t, reps...)
	incident.Header.DerivedFrom = &derived
	if firstSeenAt(noEnd, 0.3) != noEnd || firstSeenAt(incident, 0.3) != incident {
		t.Error("a run without an end, or an incident, was recast")
	}
}
