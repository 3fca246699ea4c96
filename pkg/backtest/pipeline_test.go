package backtest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/progress-planner/planner/pkg/forecast"
	"github.com/progress-planner/planner/pkg/progress"
)

// fakeEngine answers with known forecasts so the scoring can be checked
// against hand-computed results.
type fakeEngine struct {
	fn func(lastT float64, n int, now float64, endStep *float64) forecast.Forecast
}

type fakeReplay struct {
	e     *fakeEngine
	lastT float64
	n     int
}

func (e *fakeEngine) NewRun(progress.Objective, bool) Replay { return &fakeReplay{e: e} }
func (r *fakeReplay) Observe(t float64, _ progress.TrainerStatus) {
	r.lastT, r.n = t, r.n+1
}
func (r *fakeReplay) Readmitted() {}
func (r *fakeReplay) Forecast(now float64, endStep *float64) forecast.Forecast {
	return r.e.fn(r.lastT, r.n, now, endStep)
}

func memInput(name string, lines ...string) Input {
	return Input{Name: name, Load: func() (*progress.HistoryFile, error) {
		return progress.ReadHistoryFile(strings.NewReader(strings.Join(lines, "\n")))
	}}
}

// cleanRun: 1000 steps in 100 s, eval_loss 10 -> 4, reports every 10 s.
func cleanRun() Input {
	ys := []string{"10", "8", "6", "5", "4.5", "4.2", "4.1", "4.05", "4.02", "4.01", "4"}
	lines := []string{`{"kind":"ProgressHistory","version":1,"name":"clean","source":{"dataset":"toy"},` +
		`"objective":{"metric":"eval_loss","direction":"minimize","target":null},` +
		`"outcome":{"status":"completed","endSeconds":100,"final":{"eval_loss":4}},"derivedFrom":null}`}
	for i, y := range ys {
		ts := 10 * i
		eta := ""
		if i > 0 {
			eta = fmt.Sprintf(`,"estimatedRemainingSeconds":%d`, 100-ts)
		}
		lines = append(lines, fmt.Sprintf(`{"t":%d,"trainerStatus":{"progressPercentage":%d%s,"metrics":[{"name":"eval_loss","value":"%s"},`+
			`{"name":"current_step","value":"%d"},{"name":"total_steps","value":"1000"}]}}`, ts, min(ts, 99), eta, y, 10*ts))
	}
	return memInput("clean.jsonl", lines...)
}

// targetRun: accuracy 0.1 -> 0.9 (target 0.8), no total, stops at 200 s.
func targetRun() Input {
	lines := []string{`{"kind":"ProgressHistory","version":1,"name":"tgt","source":{"dataset":"bench-set"},` +
		`"objective":{"metric":"acc","direction":"maximize","target":0.8},"runInfo":{"benchmark":"toybench","progressCounter":"epoch"},` +
		`"outcome":{"status":"target_reached","endSeconds":200,"final":{"acc":0.81}},"derivedFrom":null}`}
	for i := 0; i <= 10; i++ {
		acc := 0.1 + 0.071*float64(i)
		lines = append(lines, fmt.Sprintf(`{"t":%d,"trainerStatus":{"metrics":[{"name":"acc","value":"%.4g"},{"name":"epoch","value":"%d"}]}}`, 20*i, acc, i))
	}
	return memInput("tgt.jsonl", lines...)
}

// silentHang: reports every 10 s until 50 s, then nothing until 500 s.
func silentHang() Input {
	lines := []string{`{"kind":"ProgressHistory","version":1,"name":"hang","source":{"dataset":"toy"},` +
		`"objective":{"metric":"eval_loss","direction":"minimize","target":null},` +
		`"outcome":{"status":"unknown","endSeconds":500,"final":{"eval_loss":5}},"derivedFrom":"clean",` +
		`"incident":{"type":"hang","atSeconds":50,"variant":"silent","hangSeconds":450}}`}
	for ts := 0; ts <= 50; ts += 10 {
		lines = append(lines, fmt.Sprintf(`{"t":%d,"trainerStatus":{"metrics":[{"name":"eval_loss","value":"%d"},{"name":"current_step","value":"%d"}]}}`, ts, 10-ts/10, ts))
	}
	return memInput("hang.jsonl", lines...)
}

func toyEngine() *fakeEngine {
	return &fakeEngine{fn: func(lastT float64, n int, now float64, endStep *float64) forecast.Forecast {
		f := forecast.Forecast{Now: now, Reports: n}
		// ETA: 10 % too long for the clean run; half the remaining time for
		// the target run (its time to target).
		if now <= 100 {
			f.ETA = forecast.Estimate{Known: true, Value: 1.1 * (100 - now), Basis: "total-steps"}
		}
		if n > 0 && lastT > 100 || now > 100 {
			f.ETA = forecast.Estimate{Known: true, Value: 0.5 * (200 - now), Basis: "target"}
			tt := f.ETA
			f.TimeToTarget = &tt
		}
		f.PredictedFinal = forecast.Estimate{Known: true, Value: 4.3, Lo: 4.1, Hi: 4.5}
		f.Plateaued = now >= 60
		f.Hung = now-lastT > 30
		return f
	}}
}

func TestPipelineKnownAnswers(t *testing.T) {
	r := Run([]Input{cleanRun(), silentHang()}, Options{
		Engine:  toyEngine(),
		Optimus: func(x, z []float64, xEnd float64) (float64, bool) { return 4.6, true },
		PerJob:  true,
	})
	if len(r.Skipped) != 0 {
		t.Fatalf("skipped %+v", r.Skipped)
	}
	// ETA: planner 10 % off at every cut; reported ETA exact.
	if len(r.ETA) != 6 { // toy + ALL, 3 cuts
		t.Fatalf("eta groups %+v", r.ETA)
	}
	for _, g := range r.ETA {
		if g.N != 1 || g.Planner.N != 1 || !near(*g.Planner.Mean, 0.1) || !near(*g.Reported.Median, 0) {
			t.Errorf("eta group %+v planner %v reported %v", g, *g.Planner.Mean, *g.Reported.Median)
		}
	}
	// Final metric: |4.3-4|/6 = 0.05; last value at 50 % (4.2) = 0.2/6;
	// Optimus 0.6/6; truth 4 outside [4.1, 4.5].
	for _, g := range r.FinalMetric {
		if g.Cutoff != 0.5 {
			continue
		}
		if !near(*g.Planner.Mean, 0.05) || !near(*g.Last.Mean, 0.2/6) || !near(*g.Optimus.Mean, 0.1) {
			t.Errorf("final %+v: planner %v last %v optimus %v", g, *g.Planner.Mean, *g.Last.Mean, *g.Optimus.Mean)
		}
		if g.Coverage.N != 1 || g.Coverage.Covered != 0 || g.OptimusFallback != 0 {
			t.Errorf("coverage %+v", g)
		}
	}
	// Plateau: truth at 70 s (4.05 is within 1 % of the 6.0 gain), flagged
	// at 60 s: delay -10 % of the run, gain after flag 0.1/6 < 5 %.
	if len(r.Plateau) != 2 {
		t.Fatalf("plateau %+v", r.Plateau)
	}
	p := r.Plateau[0]
	if p.N != 1 || p.Detected != 1 || !near(*p.Delay.Median, -0.1) || p.Early != 1 || p.FalsePositives != 0 || !near(*p.Truth.Median, 0.7) {
		t.Errorf("plateau %+v delay %v", p, *p.Delay.Median)
	}
	// Hang: grid after the last report (median interval 10 s -> step 5 s)
	// opens at 60 s; the fake flags once 30 s passed: 85 s, delay 35 s,
	// allowance 3·10+60.
	h := r.Incidents.Hang
	if h.N != 1 || h.Detected != 1 || h.OnTime != 1 || !near(*h.Rows[0].DelaySeconds, 35) || !near(*h.Rows[0].AllowanceSeconds, 90) {
		t.Errorf("hang %+v", h)
	}
	if r.FilesScored[0] != (SetCount{"incidents/hang", 1}) || r.FilesScored[1] != (SetCount{"toy", 1}) {
		t.Errorf("files scored %+v", r.FilesScored)
	}
}

func TestTimeToTarget(t *testing.T) {
	r := Run([]Input{targetRun()}, Options{Engine: toyEngine(), Cutoffs: []float64{0.75}})
	if len(r.TimeToTarget) != 2 || r.TimeToTarget[0].Benchmark != "toybench" {
		t.Fatalf("ttt %+v", r.TimeToTarget)
	}
	g := r.TimeToTarget[0]
	// cut 150 s: planner stop 150 + 25 = 175 -> |175-200|/200.
	if g.N != 1 || g.PlannerNever != 0 || !near(*g.Planner.Mean, 0.125) {
		t.Errorf("planner %+v", g)
	}
	// linear: obs in [120,150]: (120, .526) (140, .597): 0.00355/s, reaches
	// 0.8 at 140 + 0.203/0.00355 = 197.18.
	want := math.Abs(140+(0.8-0.597)/((0.597-0.526)/20)-200) / 200
	if g.LinearRuns != 1 || !near(*g.Linear.Mean, want) {
		t.Errorf("linear %v, want %v", *g.Linear.Mean, want)
	}
	// No time to target: counted as never.
	never := &fakeEngine{fn: func(float64, int, float64, *float64) forecast.Forecast {
		return forecast.Forecast{ETA: forecast.Estimate{Known: true, Value: 1, Basis: "total-steps"}}
	}}
	r = Run([]Input{targetRun()}, Options{Engine: never, Cutoffs: []float64{0.75}})
	if g := r.TimeToTarget[0]; g.PlannerNever != 1 || g.Planner.N != 0 {
		t.Errorf("never %+v", g)
	}
}

func TestEndStepForUnknownStatus(t *testing.T) {
	var got []float64
	e := &fakeEngine{fn: func(_ float64, _ int, now float64, endStep *float64) forecast.Forecast {
		if endStep != nil {
			got = append(got, *endStep)
		}
		return forecast.Forecast{}
	}}
	in := cleanRun()
	load := in.Load
	in.Load = func() (*progress.HistoryFile, error) {
		f, err := load()
		if err == nil {
			f.Header.Outcome.Status = "unknown"
		}
		return f, err
	}
	r := Run([]Input{in}, Options{Engine: e, Workers: 1})
	if len(got) != 3 || got[0] != 1000 {
		t.Errorf("EndStep passed %v, want the true final step 1000 at every cut", got)
	}
	for _, g := range r.FinalMetric {
		if g.PlannerFallback != g.N {
			t.Errorf("unknown PredictedFinal not counted as fallback: %+v", g)
		}
	}
}

func TestSkippedAndJSON(t *testing.T) {
	bad := memInput("bad.jsonl", `{"kind":"Nope"}`)
	empty := memInput("empty.jsonl", `{"kind":"ProgressHistory","version":1,"name":"x","outcome":{"status":"completed","endSeconds":1},"derivedFrom":null}`)
	r := Run([]Input{bad, cleanRun(), empty}, Options{Engine: toyEngine(), PerJob: true})
	if len(r.Skipped) != 2 || r.Skipped[0].File != "bad.jsonl" || r.Skipped[1].File != "empty.jsonl" {
		t.Errorf("skipped %+v", r.Skipped)
	}
	var b bytes.Buffer
	if err := r.WriteJSON(&b); err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b.Bytes(), &m); err != nil {
		t.Fatal(err)
	}
	if jobs := m["jobs"].([]any); len(jobs) != 1 {
		t.Errorf("jobs %d", len(jobs))
	}
	var tb bytes.Buffer
	if err := r.WriteTable(&tb); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(tb.String(), "skipped bad.jsonl") {
		t.Errorf("table does not list skipped files")
	}
}

// TestCoverageMissSidesAndEvaluationBins: the toy engine's interval
// [4.1, 4.5] misses the clean run (minimize, final 4) on the better side
// and the target run (maximize, final 0.81) on the worse side; the bins
// count the evaluations each cut had seen (3, 6 and 8 for both runs).
func TestCoverageMissSidesAndEvaluationBins(t *testing.T) {
	r := Run([]Input{cleanRun(), targetRun()}, Options{Engine: toyEngine(), PerJob: true})
	for _, g := range r.FinalMetric {
		want := Coverage{N: 1, Better: 1}
		switch g.Dataset {
		case "bench-set":
			want = Coverage{N: 1, Worse: 1}
		case allGroup:
			want = Coverage{N: 2, Better: 1, Worse: 1}
		}
		if g.Coverage.N != want.N || g.Coverage.Covered != 0 || g.Coverage.Better != want.Better || g.Coverage.Worse != want.Worse {
			t.Errorf("%s at %v: coverage %+v, want %+v", g.Dataset, g.Cutoff, g.Coverage, want)
		}
	}
	var got []string
	for _, g := range r.CoverageByEvaluations {
		c := g.Coverage
		got = append(got, fmt.Sprintf("%s %s %d/%d better %d worse %d share %.1f", g.Dataset, g.Evaluations, c.Covered, c.N, c.Better, c.Worse, *c.Share))
	}
	want := []string{
		"bench-set 1-4 0/1 better 0 worse 1 share 0.0",
		"bench-set 5-8 0/2 better 0 worse 2 share 0.0",
		"toy 1-4 0/1 better 1 worse 0 share 0.0",
		"toy 5-8 0/2 better 2 worse 0 share 0.0",
		"ALL 1-4 0/2 better 1 worse 1 share 0.0",
		"ALL 5-8 0/4 better 2 worse 2 share 0.0",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("coverage by evaluations:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	for _, j := range r.Jobs {
		for _, c := range j.Cuts {
			if f := c.Final; f != nil && (f.Miss == "") == (f.Covered != nil && !*f.Covered) {
				t.Errorf("%s at %v: miss %q with covered %v", j.Name, c.Cutoff, f.Miss, *f.Covered)
			}
		}
	}
}
