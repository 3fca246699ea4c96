package backtest

import (
	"math"
	"strconv"
	"strings"
	"testing"

	"github.com/progress-planner/planner/pkg/progress"
)

// mkFile parses a hand-made history (JSON Lines text).
func mkFile(t *testing.T, lines ...string) *progress.HistoryFile {
	t.Helper()
	f, err := progress.ReadHistoryFile(strings.NewReader(strings.Join(lines, "\n")))
	if err != nil {
		t.Fatal(err)
	}
	return f
}

const hdrMin = `{"kind":"ProgressHistory","version":1,"name":"h","source":{"dataset":"d"},` +
	`"objective":{"metric":"eval_loss","direction":"minimize","target":null},` +
	`"outcome":{"status":"completed","endSeconds":100,"final":{"eval_loss":1}},"derivedFrom":null}`

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

func TestSeries(t *testing.T) {
	f := mkFile(t, hdrMin,
		`{"t":0,"trainerStatus":{"metrics":[{"name":"eval_loss","value":"5"},{"name":"current_step","value":"0"}]}}`,
		`{"t":10,"trainerStatus":{"metrics":[{"name":"eval_loss","value":"5"},{"name":"current_step","value":"10"}]}}`,   // cached: not an observation
		`{"t":20,"trainerStatus":{"metrics":[{"name":"eval_loss","value":"4"},{"name":"current_step","value":"20"}]}}`,   // change
		`{"t":30,"trainerStatus":{"metrics":[{"name":"eval_loss","value":"nan"},{"name":"current_step","value":"30"}]}}`, // nan ignored
		`{"t":40,"trainerStatus":{"metrics":[{"name":"current_step","value":"40"}]}}`,                                    // absent: resets the cache
		`{"t":50,"trainerStatus":{"metrics":[{"name":"eval_loss","value":"4"}]}}`,                                        // counts again, x falls back to t
	)
	reps := toReps(f)
	if xk := xkey(f.Header, reps); xk != "current_step" {
		t.Fatalf("xkey %q", xk)
	}
	got := series(reps, "eval_loss", "current_step")
	want := []obsPoint{{0, 0, 5}, {20, 20, 4}, {50, 50, 4}}
	if len(got) != len(want) {
		t.Fatalf("series %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("obs %d = %v, want %v", i, got[i], want[i])
		}
	}
}

func TestXKey(t *testing.T) {
	hdr := `{"kind":"ProgressHistory","version":1,"name":"m","runInfo":{"progressCounter":"epoch"},"derivedFrom":null}`
	f := mkFile(t, hdr, `{"t":1,"trainerStatus":{"metrics":[{"name":"samples_count","value":"5"},{"name":"epoch","value":"1"}]}}`)
	if xk := xkey(f.Header, toReps(f)); xk != "epoch" {
		t.Errorf("progressCounter not preferred: %q", xk)
	}
	f = mkFile(t, hdr, `{"t":1,"trainerStatus":{"metrics":[{"name":"tokens_count","value":"5"}]}}`)
	if xk := xkey(f.Header, toReps(f)); xk != "tokens_count" {
		t.Errorf("counter fallback: %q", xk)
	}
	f = mkFile(t, hdr, `{"t":1,"trainerStatus":{"metrics":[{"name":"acc","value":"5"}]}}`)
	if xk := xkey(f.Header, toReps(f)); xk != "" {
		t.Errorf("no counter: %q", xk)
	}
}

// A job at 2 steps/s with 1000 steps; reports every 10 s.
func etaFile(t *testing.T, progressUnit string) *progress.HistoryFile {
	hdr := `{"kind":"ProgressHistory","version":1,"name":"e","runInfo":{"progressUnit":"` + progressUnit + `"},"derivedFrom":null}`
	lines := []string{hdr}
	for ts := 0; ts <= 100; ts += 10 {
		step := 2 * ts
		eta := 350 // the job's claim at every report
		lines = append(lines, `{"t":`+strconv.Itoa(ts)+`,"trainerStatus":{"progressPercentage":`+strconv.Itoa(step/10)+`,"estimatedRemainingSeconds":`+strconv.Itoa(eta)+
			`,"metrics":[{"name":"current_step","value":"`+strconv.Itoa(step)+`"},{"name":"total_steps","value":"1000"},`+
			`{"name":"current_epoch","value":"`+strconv.FormatFloat(float64(step)/100, 'g', -1, 64)+`"},{"name":"total_epochs","value":"10"}]}}`)
	}
	return mkFile(t, lines...)
}

func TestETABaselines(t *testing.T) {
	cases := []struct {
		name       string
		unit       string
		c          float64
		truth      float64
		wantRep    float64 // APE
		wantLinear float64 // APE
	}{
		// window [80,100]: 160 -> 200 steps in 20 s = 2/s; (1000-200)/2 = 400 s.
		{"steps at 100s", "steps", 100, 400, 50.0 / 400, 0},
		// cut between reports: aged reported ETA 350-5; linear 400-5.
		{"steps at 105s", "steps", 105, 395, 50.0 / 395, 0},
		{"truth differs", "steps", 100, 500, 150.0 / 500, 100.0 / 500},
		// epochs: 1.6 -> 2 epochs in 20 s; (10-2)/0.02 = 400 s.
		{"epochs", "epochs", 100, 400, 50.0 / 400, 0},
	}
	for _, tc := range cases {
		f := etaFile(t, tc.unit)
		reps := toReps(f)
		sn := seen(reps, tc.c)
		rp, ok1 := reportedETA(sn, tc.c)
		ln, ok2 := linearETA(f.Header, sn, tc.c)
		if !ok1 || !ok2 {
			t.Fatalf("%s: missing baseline (%v %v)", tc.name, ok1, ok2)
		}
		if got := *ape(rp, tc.truth); !near(got, tc.wantRep) {
			t.Errorf("%s: reported APE %v, want %v", tc.name, got, tc.wantRep)
		}
		if got := *ape(ln, tc.truth); !near(got, tc.wantLinear) {
			t.Errorf("%s: linear APE %v, want %v", tc.name, got, tc.wantLinear)
		}
	}
	// One report only: no linear rate.
	f := etaFile(t, "steps")
	if _, ok := linearETA(f.Header, seen(toReps(f), 5), 5); ok {
		t.Error("linear ETA from a single report")
	}
}

func TestPlateauTime(t *testing.T) {
	obs := func(ys ...float64) []obsPoint {
		out := make([]obsPoint, len(ys))
		for i, y := range ys {
			out[i] = obsPoint{t: float64(10 * (i + 1)), x: float64(i), y: y}
		}
		return out
	}
	cases := []struct {
		name string
		o    []obsPoint
		sign float64
		want float64
	}{
		// total 8, 1 % = 0.08: best 2.05 is within it -> t of 2.05.
		{"minimize", obs(10, 5, 3, 2.05, 2.01, 2.0), 1, 40},
		// a late worse value does not move the best-so-far.
		{"noise after", obs(10, 5, 2, 2.5, 2.3), 1, 30},
		{"maximize", obs(0.1, 0.5, 0.8, 0.9, 0.9005), -1, 40},
		{"still improving", obs(10, 8, 6, 4, 2), 1, 50},
		{"flat", obs(3, 3, 3), 1, 10},
	}
	for _, tc := range cases {
		got, ok := plateauTime(tc.o, tc.sign)
		if !ok || got != tc.want {
			t.Errorf("%s: plateau %v (%v), want %v", tc.name, got, ok, tc.want)
		}
	}
	if _, ok := plateauTime(obs(1), 1); ok {
		t.Error("plateau from one observation")
	}
}

func TestLinearTimeToTarget(t *testing.T) {
	o := []obsPoint{{t: 10, y: 0.5}, {t: 20, y: 0.6}, {t: 30, y: 0.7}}
	// window [24,30] has one point -> last two: slope 0.01/s, 0.2 to go.
	if got, ok := linearTimeToTarget(o, -1, 0.9, 30); !ok || !near(got, 50) {
		t.Errorf("maximize: %v %v, want 50", got, ok)
	}
	// window [16,30] holds (20, 0.6) and (30, 0.7): same line.
	if got, ok := linearTimeToTarget(o, -1, 0.9, 20/0.8); !ok || !near(got, 50) {
		t.Errorf("window: %v %v, want 50", got, ok)
	}
	// already past the target: clamped to c.
	if got, ok := linearTimeToTarget(o, -1, 0.65, 30); !ok || got != 30 {
		t.Errorf("clamp: %v %v, want 30", got, ok)
	}
	flat := []obsPoint{{t: 10, y: 0.5}, {t: 20, y: 0.5}}
	if _, ok := linearTimeToTarget(flat, -1, 0.9, 20); ok {
		t.Error("flat line reaches the target")
	}
	minimize := []obsPoint{{t: 10, y: 4}, {t: 20, y: 3}}
	if got, ok := linearTimeToTarget(minimize, 1, 2, 20); !ok || !near(got, 30) {
		t.Errorf("minimize: %v %v, want 30", got, ok)
	}
}

func TestNumpyStats(t *testing.T) {
	if s := statOf(nil); s.N != 0 || s.Mean != nil || s.Median != nil {
		t.Errorf("empty stat %+v", s)
	}
	q := quantilesOf([]float64{4, 1, 3, 2})
	// numpy.percentile([1,2,3,4], [10, 25, 50, 90]) = 1.3, 1.75, 2.5, 3.7
	if !near(*q.P10, 1.3) || !near(*q.P25, 1.75) || !near(*q.Median, 2.5) || !near(*q.P90, 3.7) {
		t.Errorf("quantiles %v %v %v %v, want numpy's 1.3 1.75 2.5 3.7", *q.P10, *q.P25, *q.Median, *q.P90)
	}
}

func TestStreamIndices(t *testing.T) {
	if got := streamIndices(3); len(got) != 3 || got[2] != 2 {
		t.Errorf("small: %v", got)
	}
	got := streamIndices(1000)
	if len(got) != maxStreamEvals+1 || got[0] != 0 || got[len(got)-1] != 999 || got[1] != 2 {
		t.Errorf("large: len %d first %v last %v", len(got), got[:2], got[len(got)-1])
	}
}

func TestHangTimes(t *testing.T) {
	reps := []rep{{t: 0}, {t: 10}, {t: 20}, {t: 60}}
	// median interval 10 -> grid step 5; the 20->60 gap opens at 30.
	got := hangTimes(reps, 10, 80)
	want := []float64{0, 10, 20, 30, 35, 40, 45, 50, 55, 60, 70, 75, 80}
	if len(got) != len(want) {
		t.Fatalf("hang times %v, want %v", got, want)
	}
	for i := range want {
		if !near(got[i], want[i]) {
			t.Fatalf("hang times %v, want %v", got, want)
		}
	}
	// A long silent gap is capped at maxGridPerGap points.
	if n := len(hangTimes([]rep{{t: 0}, {t: 1}}, 1, 1e6)); n > maxGridPerGap+3 {
		t.Errorf("%d grid points", n)
	}
}

func TestPreemptCut(t *testing.T) {
	reps := []rep{{t: 0}, {t: 40}, {t: 100}, {t: 104}, {t: 110}, {t: 200}}
	if c, ok := preemptCut(reps, 200, 60); !ok || c != 100 {
		t.Errorf("50%% after resume: %v", c)
	}
	if c, ok := preemptCut(reps, 200, 100); !ok || c != 104 {
		t.Errorf("first report after resume: %v", c)
	}
}
