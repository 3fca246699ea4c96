package curve

import (
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// curveTestData samples f at x = 0, 50, ..., 50·(n−1) with Gaussian noise
// of standard deviation noise from a fixed seed.
func curveTestData(f func(x float64) float64, n int, noise float64, seed uint64) Data {
	rng := rand.New(rand.NewPCG(seed, 42))
	d := Data{X: make([]float64, n), Y: make([]float64, n)}
	for i := range n {
		x := 50 * float64(i)
		d.X[i], d.Y[i] = x, f(x)+noise*rng.NormFloat64()
	}
	return d
}

func mustFit(t *testing.T, d Data, s Settings) Ensemble {
	t.Helper()
	cf, err := Fit(d, s)
	if err != nil {
		t.Fatalf("Fit: %v", err)
	}
	return cf
}

// checkWeights asserts the ensemble invariants: weights in [0, 1] summing
// to 1, sorted descending.
func checkWeights(t *testing.T, cf Ensemble) {
	t.Helper()
	sum := 0.0
	for i, m := range cf.Models {
		if !(m.Weight >= 0 && m.Weight <= 1) {
			t.Errorf("model %s weight %g outside [0, 1]", m.Family, m.Weight)
		}
		if i > 0 && m.Weight > cf.Models[i-1].Weight {
			t.Errorf("models not sorted by weight: %s %g after %s %g", m.Family, m.Weight, cf.Models[i-1].Family, cf.Models[i-1].Weight)
		}
		sum += m.Weight
	}
	if math.Abs(sum-1) > 1e-12 {
		t.Errorf("weights sum to %.15g, want 1", sum)
	}
}

// TestFitCurvesRecoversEachFamily fits every family alone to noisy data
// generated from it (noise 0.2 % of the improvement w = 2, 201 points over
// x in [0, 10000], binned to 64) and checks the asymptote, the
// extrapolation to twice the fitted range, and the noise estimate.
// Tolerances are in units of w; over 20 seeds the worst errors were 3e-3·w
// (asymptote, mmf) and 1.5e-3·w (extrapolation), and Sigma stayed within
// a factor 1.5 of the noise.
func TestFitCurvesRecoversEachFamily(t *testing.T) {
	const c, w, noise = 1.0, 2.0, 0.004
	tests := []struct {
		family   string
		params   []float64
		asymTol  float64 // |fitted − true asymptote| / w
		extraTol float64 // |Predict(2·XMax) − truth| / w
	}{
		{"optimus", []float64{c, w, 2e-3}, 0.01, 0.005},
		{"pow3", []float64{c, w * math.Pow(50, 1.5), 1.5, 50}, 0.01, 0.005},
		{"pow4", []float64{c, w, 800, 2.5}, 0.01, 0.005},
		{"exp3", []float64{c, w, 6e-4}, 0.01, 0.005},
		{"janoschek", []float64{c, w, 0.02, 0.6}, 0.01, 0.005},
		{"weibull", []float64{c, w, 5e-4, 0.8}, 0.01, 0.005},
		{"logpower", []float64{c, w, 1000, 1.5}, 0.01, 0.005},
		{"mmf", []float64{c, w, math.Pow(1500, 1.2), 1.2}, 0.015, 0.005},
		{"vapor", []float64{c, w, 2 * 50, -1.2, 50}, 0.01, 0.005},
		{"ilog2", []float64{c, w, 30}, 0.01, 0.005},
	}
	for _, tc := range tests {
		t.Run(tc.family, func(t *testing.T) {
			fam, ok := lookupCurveFamily(tc.family)
			if !ok {
				t.Fatalf("unknown family %q", tc.family)
			}
			truth := func(x float64) float64 { return fam.curve(tc.params, x) }
			d := curveTestData(truth, 201, noise, 1)
			s := DefaultSettings()
			s.Families = []string{tc.family}
			cf := mustFit(t, d, s)
			if len(cf.Models) != 1 || cf.Models[0].Family != tc.family {
				t.Fatalf("models = %+v, want one %s model", cf.Models, tc.family)
			}
			checkWeights(t, cf)
			asym, ok := cf.Asymptote()
			if !ok {
				t.Fatalf("no asymptote")
			}
			if e := math.Abs(asym-c) / w; e > tc.asymTol {
				t.Errorf("asymptote %.5g, want %.5g (error %.3g·w > %.3g·w); params %.5g", asym, c, e, tc.asymTol, cf.Models[0].Params)
			}
			x2 := 2 * cf.XMax
			mean, sd := cf.Predict(x2)
			if e := math.Abs(mean-truth(x2)) / w; e > tc.extraTol {
				t.Errorf("Predict(%g) = %.5g, want %.5g (error %.3g·w > %.3g·w); params %.5g", x2, mean, truth(x2), e, tc.extraTol, cf.Models[0].Params)
			}
			if !(sd > 0) || math.IsInf(sd, 0) {
				t.Errorf("Predict(%g) sd = %g, want finite and positive", x2, sd)
			}
			if cf.Sigma < noise/1.8 || cf.Sigma > 1.8*noise {
				t.Errorf("Sigma = %.3g, want about the noise %.3g", cf.Sigma, noise)
			}
		})
	}
}

// TestCurveFamilyParamsMatchFit checks every family's mapping from the
// normalised fit to its documented Params: the documented formula must
// reproduce the fitted values exactly, for thetas across the search box.
// (60 points, so nothing is binned and g is evaluated at the data.)
func TestCurveFamilyParamsMatchFit(t *testing.T) {
	d := curveTestData(func(x float64) float64 { return 3 + 1/(1+x/700) }, 60, 0.01, 2)
	xs, ys, w, err := curveCleanData(d)
	if err != nil {
		t.Fatal(err)
	}
	ws := newCurveWork(xs, ys, w, 2, 64)
	if ws.binned {
		t.Fatal("60 points were binned")
	}
	for _, fam := range curveFamilies {
		for _, q := range []float64{0.1, 0.5, 0.9} {
			theta := make([]float64, len(fam.shape.dims))
			for k, dim := range fam.shape.dims {
				theta[k] = dim.lo * math.Pow(dim.hi/dim.lo, q)
			}
			fam.shape.fillG(ws, theta)
			fit := shapeFit{theta: theta, c: 0.2, w: 0.7}
			p := fam.params(fit, ws.units)
			if len(p) != fam.nParams {
				t.Fatalf("%s: %d params, want %d", fam.name, len(p), fam.nParams)
			}
			for i, xn := range ws.x {
				want := ws.units.ylo + ws.units.ys*(fit.c+fit.w*ws.g[i])
				got := fam.curve(p, xn*ws.units.xs)
				if math.Abs(got-want) > 1e-9*math.Max(1, math.Abs(want)) {
					t.Errorf("%s theta %.4g: curve(%g) = %.12g, fitted %.12g", fam.name, theta, xn*ws.units.xs, got, want)
					break
				}
			}
		}
	}
}

// TestFitCurvesEnsembleOnOptimusData fits every family to clean Optimus
// data: the ensemble must extrapolate it closely and the weights must be a
// sorted distribution.
func TestFitCurvesEnsembleOnOptimusData(t *testing.T) {
	truth := func(x float64) float64 { return 0.5 + 3/(1+1e-3*x) }
	cf := mustFit(t, curveTestData(truth, 160, 0, 1), DefaultSettings())
	checkWeights(t, cf)
	if len(cf.Models) != len(curveFamilies) {
		t.Errorf("%d models, want all %d families", len(cf.Models), len(curveFamilies))
	}
	for _, f := range []float64{0.5, 1, 1.5, 2} {
		x := f * cf.XMax
		mean, sd := cf.Predict(x)
		// Observed errors are below 5e-5 (the fit is of the bin means).
		if e := math.Abs(mean - truth(x)); e > 5e-4 {
			t.Errorf("Predict(%g) = %.6g, want %.6g (error %.2g)", x, mean, truth(x), e)
		}
		if math.IsNaN(sd) || math.IsInf(sd, 0) || sd < 0 {
			t.Errorf("Predict(%g) sd = %g", x, sd)
		}
	}
	if asym, ok := cf.Asymptote(); !ok || math.Abs(asym-0.5) > 0.01 {
		t.Errorf("asymptote %g (ok %v), want 0.5", asym, ok)
	}
	if cf.Sigma > 1e-4 {
		t.Errorf("Sigma = %g on noise-free data", cf.Sigma)
	}
	if cf.N > 64 || cf.N < 48 || cf.XMax != 50*159 {
		t.Errorf("N = %d, XMax = %g; want about 64 binned points (at most 64) up to %g", cf.N, cf.XMax, 50.0*159)
	}
}

// TestFitCurvesBadInput feeds malformed data: every case must return an
// error or a sane fit, and never panic.
func TestFitCurvesBadInput(t *testing.T) {
	good := curveTestData(func(x float64) float64 { return 1 + 1/(1+x/300) }, 40, 0.001, 3)
	nan, inf := math.NaN(), math.Inf(1)
	withY := func(i int, v float64) Data {
		d := Data{X: slices.Clone(good.X), Y: slices.Clone(good.Y)}
		d.Y[i] = v
		return d
	}
	tests := []struct {
		name    string
		d       Data
		s       func(*Settings)
		wantErr string // substring; "" means a fit is expected
	}{
		{name: "empty", d: Data{}, wantErr: "distinct"},
		{name: "nil slices with weights", d: Data{W: []float64{}}, wantErr: "distinct"},
		{name: "three points", d: Data{X: []float64{0, 1, 2}, Y: []float64{3, 2, 1}}, wantErr: "distinct"},
		{name: "four equal x", d: Data{X: []float64{5, 5, 5, 5, 5}, Y: []float64{3, 2, 1, 0, 1}}, wantErr: "distinct"},
		{name: "length mismatch", d: Data{X: []float64{0, 1, 2, 3}, Y: []float64{1, 2}}, wantErr: "y values"},
		{name: "weight length mismatch", d: Data{X: good.X, Y: good.Y, W: []float64{1}}, wantErr: "weights"},
		{name: "all NaN", d: Data{X: []float64{nan, nan, nan, nan, nan}, Y: []float64{1, 2, 3, 4, 5}}, wantErr: "distinct"},
		{name: "all y Inf", d: Data{X: []float64{0, 1, 2, 3, 4}, Y: []float64{inf, inf, -inf, inf, inf}}, wantErr: "distinct"},
		{name: "one NaN y", d: withY(7, nan)},
		{name: "one Inf y", d: withY(9, inf)},
		{name: "one -Inf y", d: withY(9, math.Inf(-1))},
		{name: "negative and Inf x", d: Data{X: append([]float64{-5, inf}, good.X...), Y: append([]float64{9, 9}, good.Y...)}},
		{name: "NaN weights", d: Data{X: good.X, Y: good.Y, W: func() []float64 {
			w := make([]float64, len(good.X))
			for i := range w {
				w[i] = 1
			}
			w[3], w[4], w[5] = nan, -1, 0
			return w
		}()}},
		{name: "huge values", d: Data{X: []float64{0, 1e300, 1.5e300, 1.7e308}, Y: []float64{1e308, -1e308, 1e308, -1e308}}},
		{name: "tiny range", d: Data{X: []float64{0, 1, 2, 3, 4}, Y: []float64{1, 1 + 1e-16, 1, 1 + 2e-16, 1}}},
		{name: "unknown family", d: good, s: func(s *Settings) { s.Families = []string{"optimus", "nope"} }, wantErr: "unknown curve family"},
		{name: "negative recency", d: good, s: func(s *Settings) { s.RecencyWeight = -1 }, wantErr: "recency"},
		{name: "NaN recency", d: good, s: func(s *Settings) { s.RecencyWeight = nan }, wantErr: "recency"},
		{name: "tiny MaxFitPoints", d: good, s: func(s *Settings) { s.MaxFitPoints = 1 }},
		{name: "zero settings", d: good, s: func(s *Settings) { *s = Settings{} }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := DefaultSettings()
			if tc.s != nil {
				tc.s(&s)
			}
			cf, err := Fit(tc.d, s)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want one mentioning %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				// Extreme inputs may be refused, but only with an error.
				if tc.name != "huge values" {
					t.Fatalf("Fit: %v", err)
				}
				return
			}
			checkWeights(t, cf)
			for _, x := range []float64{0, cf.XMax, 3 * cf.XMax} {
				if m, sd := cf.Predict(x); math.IsNaN(m) || math.IsInf(m, 0) || math.IsNaN(sd) || math.IsInf(sd, 0) {
					t.Errorf("Predict(%g) = %g ± %g", x, m, sd)
				}
			}
		})
	}
}

// TestFitCurvesUnsortedInput: points in reverse order give the same fit as
// sorted ones.
func TestFitCurvesUnsortedInput(t *testing.T) {
	d := curveTestData(func(x float64) float64 { return 1 + 1/(1+x/300) }, 100, 0.01, 4)
	rev := Data{X: slices.Clone(d.X), Y: slices.Clone(d.Y)}
	slices.Reverse(rev.X)
	slices.Reverse(rev.Y)
	a := mustFit(t, d, DefaultSettings())
	b := mustFit(t, rev, DefaultSettings())
	if !curveFitsIdentical(a, b) {
		t.Errorf("reversed input changed the fit:\n%+v\n%+v", a, b)
	}
}

// TestFitCurvesFlat: a constant curve predicts the constant everywhere,
// with zero spread, and is its own asymptote.
func TestFitCurvesFlat(t *testing.T) {
	const level = 2.75
	d := curveTestData(func(float64) float64 { return level }, 30, 0, 1)
	cf := mustFit(t, d, DefaultSettings())
	checkWeights(t, cf)
	for _, x := range []float64{0, 100, cf.XMax, 10 * cf.XMax, math.Inf(1)} {
		if m, sd := cf.Predict(x); m != level || sd != 0 {
			t.Errorf("Predict(%g) = %g ± %g, want %g ± 0", x, m, sd, level)
		}
	}
	if a, ok := cf.Asymptote(); !ok || a != level {
		t.Errorf("Asymptote = %g, %v; want %g", a, ok, level)
	}
	if _, ok := cf.Crossing(level-1, 0, 1e6); ok {
		t.Errorf("a flat curve crossed a lower level")
	}
}

// TestFitCurvesIncreasingCurve: a worsening curve has no improving fit; the
// families fall back to their constant model instead of failing.
func TestFitCurvesIncreasingCurve(t *testing.T) {
	d := curveTestData(func(x float64) float64 { return 1 + x/5000 }, 50, 0.01, 5)
	cf := mustFit(t, d, DefaultSettings())
	checkWeights(t, cf)
	for _, m := range cf.Models {
		if m.Params[1] != 0 {
			t.Errorf("%s: w = %g on a rising curve, want the constant model", m.Family, m.Params[1])
		}
	}
}

// TestFitCurvesDeterministic: the same input gives a bit-identical fit.
func TestFitCurvesDeterministic(t *testing.T) {
	d := benchCurve(512)
	a := mustFit(t, d, DefaultSettings())
	for range 3 {
		if b := mustFit(t, d, DefaultSettings()); !curveFitsIdentical(a, b) {
			t.Fatalf("fits differ:\n%+v\n%+v", a, b)
		}
	}
}

func curveFitsIdentical(a, b Ensemble) bool {
	same := func(x, y float64) bool { return math.Float64bits(x) == math.Float64bits(y) }
	if len(a.Models) != len(b.Models) || a.N != b.N || !same(a.Sigma, b.Sigma) || !same(a.XMax, b.XMax) {
		return false
	}
	for i := range a.Models {
		ma, mb := a.Models[i], b.Models[i]
		if ma.Family != mb.Family || !same(ma.Weight, mb.Weight) || !same(ma.IC, mb.IC) || !same(ma.RSS, mb.RSS) ||
			!slices.EqualFunc(ma.Params, mb.Params, same) {
			return false
		}
	}
	return true
}

// TestCurveCrossing: on clean Optimus data the crossing of a level matches
// the analytical x = (w/(level − c) − 1)/r; a level below the asymptote is
// never reached.
func TestCurveCrossing(t *testing.T) {
	const c, w, r = 0.5, 3.0, 1e-3
	truth := func(x float64) float64 { return c + w/(1+r*x) }
	cf := mustFit(t, curveTestData(truth, 160, 0, 1), DefaultSettings()) // XMax = 7950
	for _, level := range []float64{1.0, 0.8, 0.7, 0.6} {
		want := (w/(level-c) - 1) / r // 5000 and 9000 within/just past the data, 14000 and 29000 beyond
		x, ok := cf.Crossing(level, 0, 100*cf.XMax)
		if !ok || math.Abs(x-want) > 0.005*want {
			t.Errorf("Crossing(%g) = %g, %v; want %g", level, x, ok, want)
		}
		if m, _ := cf.Predict(x); ok && math.Abs(m-level) > 1e-6 {
			t.Errorf("mean at the crossing %g = %g, want %g", x, m, level)
		}
	}
	if x, ok := cf.Crossing(0.4, 0, 1e12); ok {
		t.Errorf("Crossing below the asymptote = %g, want not reached", x)
	}
	if x, ok := cf.Crossing(0.6, 0, 3*cf.XMax); ok {
		t.Errorf("Crossing of 0.6 within 3·XMax = %g, want not reached (truth %g)", x, (w/(0.6-c)-1)/r)
	}
	if x, ok := cf.Crossing(5, 100, 200); !ok || x != 100 {
		t.Errorf("Crossing of a level above the curve = %g, %v; want the start 100", x, ok)
	}
	for _, bad := range [][3]float64{{math.NaN(), 0, 1}, {1, 5, 1}, {1, math.Inf(1), math.Inf(1)}} {
		if _, ok := cf.Crossing(bad[0], bad[1], bad[2]); ok {
			t.Errorf("Crossing%v = ok, want not", bad)
		}
	}
}

// TestCurvePredictIsFinite: Predict and PredictModel stay finite for any x
// and behave for out-of-range indices and an empty fit.
func TestCurvePredictIsFinite(t *testing.T) {
	cf := mustFit(t, benchCurve(512), DefaultSettings())
	for _, x := range []float64{-1, 0, 1, cf.XMax, 1e3 * cf.XMax, math.MaxFloat64, math.Inf(1), math.NaN()} {
		m, sd := cf.Predict(x)
		if math.IsNaN(m) || math.IsInf(m, 0) || math.IsNaN(sd) || math.IsInf(sd, 0) || sd < 0 {
			t.Errorf("Predict(%g) = %g ± %g", x, m, sd)
		}
		for i := range cf.Models {
			if p := cf.PredictModel(i, x); math.IsNaN(p) || math.IsInf(p, 0) {
				t.Errorf("PredictModel(%d=%s, %g) = %g", i, cf.Models[i].Family, x, p)
			}
		}
	}
	if p := cf.PredictModel(len(cf.Models), 1); !math.IsNaN(p) {
		t.Errorf("PredictModel out of range = %g, want NaN", p)
	}
	if m, sd := (Ensemble{}).Predict(1); m != 0 || sd != 0 {
		t.Errorf("empty fit predicts %g ± %g", m, sd)
	}
	if _, ok := (Ensemble{}).Asymptote(); ok {
		t.Errorf("empty fit has an asymptote")
	}
	// The spread grows with the distance beyond the data.
	_, sd1 := cf.Predict(cf.XMax)
	_, sd2 := cf.Predict(2 * cf.XMax)
	_, sd4 := cf.Predict(4 * cf.XMax)
	if !(sd1 < sd2 && sd2 < sd4) {
		t.Errorf("sd at XMax, 2·XMax, 4·XMax = %g, %g, %g; want increasing", sd1, sd2, sd4)
	}
}

// TestFitCurvesRobustToSpikes: a few large loss spikes bend a least-squares
// fit but hardly move the robust one.
func TestFitCurvesRobustToSpikes(t *testing.T) {
	truth := func(x float64) float64 { return 1 + 2/(1+x/1500) }
	d := curveTestData(truth, 200, 0.005, 6)
	for i := 150; i < 200; i += 9 {
		d.Y[i] += 0.5 // spikes in the recent, heavily weighted part
	}
	robust := mustFit(t, d, DefaultSettings())
	plainSettings := DefaultSettings()
	plainSettings.Robust = false
	plain := mustFit(t, d, plainSettings)
	x2 := 2 * robust.XMax
	mr, _ := robust.Predict(x2)
	mp, _ := plain.Predict(x2)
	er, ep := math.Abs(mr-truth(x2)), math.Abs(mp-truth(x2))
	if er > 0.04 || er > ep/3 {
		t.Errorf("error at 2·XMax: robust %.4f, least squares %.4f; want robust < 0.04 and < a third", er, ep)
	}
}

// TestCurveBinning: long histories are binned to at most MaxFitPoints,
// with the last quarter of the x range keeping at least half of the bins,
// and the bins preserving the weighted means.
func TestCurveBinning(t *testing.T) {
	d := benchCurve(100_000)
	xs, ys, w, err := curveCleanData(d)
	if err != nil {
		t.Fatal(err)
	}
	ws := newCurveWork(xs, ys, w, 0, 64)
	if ws.n > 64 || ws.n < 48 {
		t.Fatalf("%d bins, want at most 64 (and not far fewer on dense data)", ws.n)
	}
	x0, xmax := xs[0], xs[len(xs)-1]
	cut := (x0 + 0.75*(xmax-x0)) / xmax
	tail, total := 0, 0.0
	for i, x := range ws.x {
		if x >= cut {
			tail++
		}
		if i > 0 && x <= ws.x[i-1] {
			t.Errorf("bin x not increasing at %d", i)
		}
		total += ws.wn[i]
	}
	if tail < ws.n/2 {
		t.Errorf("%d of %d bins in the last quarter, want at least half", tail, ws.n)
	}
	if total != float64(len(xs)) {
		t.Errorf("bin weights sum to %g, want %d", total, len(xs))
	}
	// Unbinned when short enough.
	short := newCurveWork(xs[:50], ys[:50], nil, 0, 64)
	if short.n != 50 {
		t.Errorf("50 points became %d", short.n)
	}
}

// TestFitCurvesWeightsMatter: down-weighting a misleading stretch moves the
// fit towards the rest of the data.
func TestFitCurvesWeightsMatter(t *testing.T) {
	truth := func(x float64) float64 { return 1 + 2/(1+x/1500) }
	d := curveTestData(truth, 120, 0.002, 7)
	d.W = make([]float64, len(d.X))
	for i := range d.W {
		d.W[i] = 1
		if i >= 100 {
			d.Y[i] += 0.3 // a shifted stretch (e.g. another eval set)
			d.W[i] = 1e-6
		}
	}
	cf := mustFit(t, d, DefaultSettings())
	if m, _ := cf.Predict(cf.XMax); math.Abs(m-truth(cf.XMax)) > 0.02 {
		t.Errorf("Predict(XMax) = %g, want about %g: the near-zero weights were not honoured", m, truth(cf.XMax))
	}
}

// TestCurveSearchNearOptimum guards the search itself: on noisy curves of
// several shapes, every shape's fitted robust loss must be within 2 % of
// the loss found by a much longer search (Nelder-Mead restarted ten times
// from its own result). Budgets tuned too low, or a grid that lands in the
// wrong basin, show up here first.
func TestCurveSearchNearOptimum(t *testing.T) {
	gens := []func(x float64) float64{
		func(x float64) float64 { return 0.8 + 2/(1+3e-3*x) + 0.5*math.Exp(-x/200) },
		func(x float64) float64 { return 1 + 3*math.Pow(x+50, -0.4) },
		func(x float64) float64 { return 0.3 + 2*math.Exp(-math.Pow(x/2000, 0.6)) },
		func(x float64) float64 { return 2 + 1/(1+math.Pow(x/500, 1.5)) },
		func(x float64) float64 { return 0.5 + 1/math.Log(x/300+math.E) },
		func(x float64) float64 { return 0.2 + 1.5*math.Pow((x+40)/40, -0.7)*math.Exp(-2*x/(x+40)) },
	}
	shapes := []*curveShape{&shapeOptimus, &shapePow3, &shapeExp3, &shapeILog2, &shapePow4, &shapeStretchedExp, &shapeLogLogistic, &shapeVapor}
	for gi, gen := range gens {
		xs, ys, w, err := curveCleanData(curveTestData(gen, 200, 0.005, uint64(gi)))
		if err != nil {
			t.Fatal(err)
		}
		ws := newCurveWork(xs, ys, w, 2, 64)
		ws.robust = true
		searches := make([]*shapeSearch, len(shapes))
		for k, shape := range shapes {
			sh := &shapeSearch{shape: shape}
			for j, d := range shape.dims {
				sh.lo[j], sh.hi[j] = math.Log(d.lo), math.Log(d.hi)
			}
			ws.grid(sh)
			searches[k] = sh
		}
		ws.robustScale(searches)
		for _, sh := range searches {
			got := ws.fitShape(sh)
			best := got
			for range 10 { // restart from the best point with a small simplex
				for v := range len(sh.shape.dims) + 1 {
					for j := range sh.shape.dims {
						sh.simp[v][j] = math.Log(best.fit.theta[j])
					}
					if v > 0 {
						sh.simp[v][v-1] += 0.05
					}
				}
				if r := ws.fitShape(sh); r.loss < best.loss {
					best = r
				}
			}
			if got.loss > 1.02*best.loss {
				t.Errorf("curve %d, shape %s: loss %.5g, a longer search finds %.5g (theta %.4g vs %.4g)",
					gi, sh.shape.name, got.loss, best.loss, got.fit.theta, best.fit.theta)
			}
		}
	}
}
