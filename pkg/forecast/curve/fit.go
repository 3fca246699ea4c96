package curve

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"slices"
)

// Data is a learning curve oriented so that SMALLER IS BETTER (the
// caller multiplies a maximize metric by -1). X is the progress axis
// (training step, or seconds when there is no step), non-decreasing, >= 0.
type Data struct {
	X, Y []float64
	W    []float64 // optional non-negative per-point weights; nil means equal weights
}

// Settings tunes Fit. Start from DefaultSettings: the zero
// value means no recency weighting and a non-robust fit.
type Settings struct {
	// Families to fit, by name (see curve_families.go); nil or empty means
	// all families.
	Families []string
	// RecencyWeight (>= 0) puts extra weight on recent points:
	// w_i *= 1 + RecencyWeight·(x_i/x_max)². Default 2.
	RecencyWeight float64
	// MaxFitPoints bounds the number of points fitted: longer curves are
	// binned down to at most this many weighted means, recent bins denser.
	// Default 64 (also used when <= 0); at least 8.
	MaxFitPoints int
	// Robust fits with a Huber loss (IRLS on standardised residuals), so a
	// few spikes do not bend the curve.
	Robust bool
}

// DefaultSettings returns the settings the planner uses.
func DefaultSettings() Settings {
	return Settings{RecencyWeight: 2, MaxFitPoints: 64, Robust: true}
}

// Model is one fitted curve family.
type Model struct {
	Family string
	// Params in the family's documented parametrization (curve_families.go),
	// in original x and y units.
	Params []float64
	// Weight of the family in the ensemble (the weights sum to 1).
	Weight float64
	// IC is the AICc the weight was derived from.
	IC float64
	// RSS is the weighted residual sum of squares (Huber-robustified when
	// Settings.Robust) the IC was computed from, in original y units
	// squared, with the fit weights scaled to average 1.
	RSS float64
}

// Ensemble is an ensemble of fitted curve families.
type Ensemble struct {
	Models []Model // sorted by Weight, descending
	// Sigma is the robust noise scale of one observation around the
	// ensemble mean, in original y units.
	Sigma float64
	N     int     // number of (binned) points fitted
	XMax  float64 // largest x in the fitted data
}

// Tuning constants of the fit. They are not settings because changing them
// changes what the IC weights mean, not just how hard the fit tries.
const (
	curveMinDistinctX        = 4
	curveMinFitPoints        = 8
	curveDefaultMaxFitPoints = 64
	// curveRobustMinPoints: below this a MAD scale is meaningless and the
	// fit is plain weighted least squares.
	curveRobustMinPoints = 10
	// curveHuberK is the classic 95 %-efficiency Huber threshold, in robust
	// standard deviations.
	curveHuberK = 1.345
	// curveIRLSRounds reweighting rounds after the initial least-squares
	// solve of (c, w) in the final fit of each shape; the search objective
	// uses one round fewer to save a pass per evaluation (measured: the
	// optimum θ it finds is as good; one round only would not be).
	curveIRLSRounds       = 3
	curveSearchIRLSRounds = 2
	// curveVarFloor is the smallest residual variance (normalised y units,
	// y range = 1) the IC believes: fits whose residuals have a standard
	// deviation below 1e-5 of the y range count as exact, because
	// differences that small come from binning, float32 metrics and
	// optimizer tolerance rather than from the shape of the curve.
	curveVarFloor = 1e-10
	// curveScaleFloor is the smallest robust scale (normalised units): the
	// noise level the IC already ignores. On clean data the MAD is ~0, and
	// a Huber threshold that small would turn the loss into L1, which the
	// search converges on far worse than least squares.
	curveScaleFloor = 1e-5
	// Nelder-Mead budgets (function evaluations after the grid) and
	// patience (major iterations without a relative gain of 1e-6). The
	// refined grid (see grid) already lands near the least-squares optimum,
	// so Nelder-Mead mostly moves it to the robust optimum. Measured against
	// restarted runs with 30x the budget on noisy synthetic curves of 16
	// shapes (every family and a few mixtures) and 4 noise levels, these
	// budgets leave every family's loss within 1.2 % of the optimum (mean
	// 2e-4, i.e. far below one unit of AICc); the budget, not the patience,
	// usually ends the search.
	curveNMBudget1D = 10
	curveNMBudget2D = 30
	curveNMPatience = 12
	// Refinement steps per grid line and along the profile (see grid).
	curveLineSteps    = 3
	curveProfileSteps = 4
	// curveExtrapSlope is the share of the predicted change beyond the data
	// that Predict treats as one standard deviation of extrapolation error.
	curveExtrapSlope = 0.25
)

// Fit fits the requested curve families to d and averages them by
// AICc weight. It returns an error when d has fewer than 4 distinct usable
// x values or when every family fails; it never panics on bad input.
//
// Points with a non-finite or negative x, a non-finite y, or a weight that
// is not finite and positive are ignored. X need not be sorted (points are
// ordered by x, ties kept in input order). More than MaxFitPoints points
// are binned (see curveBinEdges); the fit then models bin averages of the
// curve, not its values at the bin means (see binCorrect).
//
// Each family y = c + w·g(x; θ) is fitted by variable projection on
// normalised data (x/x_max, y mapped to [0, 1]): for a given θ the weighted
// least-squares (c, w) follow in closed form, w >= 0 enforced by falling
// back to the constant model, so only θ (1 or 2 positive parameters,
// searched on a log scale within box bounds) is searched: a coarse grid
// refined along its lines (see grid) finds the least-squares optimum, and
// gonum's Nelder-Mead polishes it. With Settings.Robust, the (c, w) solve
// at every θ is an IRLS with Huber weights on residuals standardised by a
// common robust scale (1.4826·MAD of the best grid fit), and Nelder-Mead
// minimises the Huber loss. Families sharing a shape (janoschek/weibull,
// logpower/mmf) are fitted once. The same input always gives the same,
// bit-identical result.
func Fit(d Data, s Settings) (Ensemble, error) {
	fams, err := curveSelectFamilies(s.Families)
	if err != nil {
		return Ensemble{}, err
	}
	if math.IsNaN(s.RecencyWeight) || math.IsInf(s.RecencyWeight, 0) || s.RecencyWeight < 0 {
		return Ensemble{}, fmt.Errorf("fit curves: recency weight %g is not a finite value >= 0", s.RecencyWeight)
	}
	maxPts := s.MaxFitPoints
	if maxPts <= 0 {
		maxPts = curveDefaultMaxFitPoints
	}
	maxPts = max(maxPts, curveMinFitPoints)

	xs, ys, ws, err := curveCleanData(d)
	if err != nil {
		return Ensemble{}, err
	}
	if nd := curveDistinct(xs, curveMinDistinctX); nd < curveMinDistinctX {
		return Ensemble{}, fmt.Errorf("fit curves: %d distinct usable x values, need %d", nd, curveMinDistinctX)
	}
	work := newCurveWork(xs, ys, ws, s.RecencyWeight, maxPts)
	if work.n < curveMinDistinctX {
		return Ensemble{}, fmt.Errorf("fit curves: only %d points left after binning, need %d", work.n, curveMinDistinctX)
	}
	if !(work.units.ys > 0) || math.IsInf(work.units.ys, 0) || math.IsInf(work.units.xs, 0) {
		if work.units.ys == 0 {
			return work.flatFit(fams), nil
		}
		return Ensemble{}, errors.New("fit curves: x or y range overflows float64")
	}
	work.robust = s.Robust && work.n >= curveRobustMinPoints
	return work.fit(fams)
}

// curveSelectFamilies resolves Settings.Families to family indices in
// canonical order, without duplicates.
func curveSelectFamilies(names []string) ([]int, error) {
	if len(names) == 0 {
		idx := make([]int, len(curveFamilies))
		for i := range idx {
			idx[i] = i
		}
		return idx, nil
	}
	want := make([]bool, len(curveFamilies))
	for _, name := range names {
		found := false
		for i := range curveFamilies {
			if curveFamilies[i].name == name {
				want[i], found = true, true
				break
			}
		}
		if !found {
			return nil, fmt.Errorf("fit curves: unknown curve family %q (known: %v)", name, curveFamilyNames())
		}
	}
	var idx []int
	for i, ok := range want {
		if ok {
			idx = append(idx, i)
		}
	}
	return idx, nil
}

// curveCleanData drops unusable points and returns x-sorted copies (or the
// input slices themselves when they are already clean and sorted, to keep
// the common path allocation-free). The weights returned average 1 so that
// the robust scale is that of one average observation.
func curveCleanData(d Data) (x, y, w []float64, err error) {
	n := len(d.X)
	if len(d.Y) != n {
		return nil, nil, nil, fmt.Errorf("fit curves: %d x values but %d y values", n, len(d.Y))
	}
	if d.W != nil && len(d.W) != n {
		return nil, nil, nil, fmt.Errorf("fit curves: %d x values but %d weights", n, len(d.W))
	}
	usable := func(i int) bool {
		if d.W != nil && !curveUsableWeight(d.W[i]) {
			return false
		}
		return curveUsablePoint(d.X[i], d.Y[i])
	}
	// Fast path: one tight pass that only checks.
	clean, sorted := true, true
	prev := math.Inf(-1)
	for i, xi := range d.X {
		if !curveUsablePoint(xi, d.Y[i]) || (d.W != nil && !curveUsableWeight(d.W[i])) {
			clean = false
			break
		}
		sorted = sorted && xi >= prev
		prev = xi
	}
	if clean && sorted {
		x, y, w = d.X, d.Y, d.W
	} else {
		type pt struct{ x, y, w float64 }
		pts := make([]pt, 0, n)
		for i := 0; i < n; i++ {
			if !usable(i) {
				continue
			}
			wi := 1.0
			if d.W != nil {
				wi = d.W[i]
			}
			pts = append(pts, pt{d.X[i], d.Y[i], wi})
		}
		slices.SortStableFunc(pts, func(a, b pt) int { return cmp.Compare(a.x, b.x) })
		x, y = make([]float64, len(pts)), make([]float64, len(pts))
		if d.W != nil {
			w = make([]float64, len(pts))
		}
		for i, p := range pts {
			x[i], y[i] = p.x, p.y
			if w != nil {
				w[i] = p.w
			}
		}
	}
	if len(w) > 0 {
		// Rescale to mean 1 (in a copy: the caller's slice is read-only).
		sum := 0.0
		for _, v := range w {
			sum += v
		}
		if !(sum > 0) || math.IsInf(sum, 0) {
			return nil, nil, nil, errors.New("fit curves: weights sum to zero or overflow")
		}
		scaled := make([]float64, len(w))
		k := float64(len(w)) / sum
		for i, v := range w {
			scaled[i] = v * k
		}
		w = scaled
	}
	return x, y, w, nil
}

// curveUsablePoint reports whether x is finite and >= 0 and y is finite.
// (v − v is NaN for NaN and ±Inf.)
func curveUsablePoint(x, y float64) bool { return x >= 0 && x-x == 0 && y-y == 0 }

// curveUsableWeight reports whether a weight is finite and positive.
func curveUsableWeight(w float64) bool { return w > 0 && w-w == 0 }

// curveDistinct counts distinct values of the sorted x, stopping at limit.
func curveDistinct(x []float64, limit int) int {
	if len(x) == 0 {
		return 0
	}
	nd := 1
	for i := 1; i < len(x) && nd < limit; i++ {
		if x[i] != x[i-1] {
			nd++
		}
	}
	return nd
}

// curveWork holds the binned, normalised data and every buffer one
// Fit call needs, so the optimizer's inner loop does not allocate.
type curveWork struct {
	n     int
	units curveUnits
	xmax  float64 // original units
	x0n   float64 // pow3/vapor shift, normalised

	x, y      []float64 // normalised: x in [0, 1], y in [0, 1]
	wn        []float64 // precision weight: summed observation weight per point
	wf        []float64 // fit weight: wn with recency, scaled to sum n
	thr       []float64 // Huber threshold per point (normalised y units)
	lnxRel    []float64 // ln(x/xm) (−Inf at 0)
	lnShift   []float64 // ln((x + x0)/x0)
	fracShift []float64 // x/(x + x0)

	g, row, abs []float64 // scratch

	// Within-bin variance of x (original units) and the coefficients of
	// the bin-mean correction (see binCorrect); binned is false when no
	// bin merged distinct x.
	varX, binL, binR []float64
	binned           bool

	syy    float64 // Σ wf·y², for closed-form RSS
	robust bool
}

// newCurveWork bins the clean, sorted data and normalises it.
func newCurveWork(x, y, w []float64, recency float64, maxPts int) *curveWork {
	xmax := x[len(x)-1]
	m := min(len(x), maxPts)
	// One allocation for all per-point arrays.
	const arrays = 14 // x y wn wf thr lnxRel lnShift fracShift g row abs varX binL binR
	buf := make([]float64, arrays*m)
	next := func() []float64 {
		s := buf[:m:m]
		buf = buf[m:]
		return s
	}
	ws := &curveWork{xmax: xmax}
	ws.x, ws.y, ws.wn, ws.wf = next(), next(), next(), next()
	ws.thr, ws.lnxRel, ws.lnShift, ws.fracShift = next(), next(), next(), next()
	ws.g, ws.row, ws.abs = next(), next(), next()
	ws.varX, ws.binL, ws.binR = next(), next(), next()

	invMax := 1 / xmax
	if len(x) <= maxPts {
		for i, xi := range x {
			wi := 1.0
			if w != nil {
				wi = w[i]
			}
			r := xi * invMax
			ws.x[i], ws.y[i], ws.wn[i] = xi, y[i], wi
			ws.wf[i] = wi * (1 + recency*r*r)
		}
		ws.n = len(x)
	} else {
		// Each bin: weighted means of x and y, summed weight, and the summed
		// recency-weighted weight Σ w·(1 + R·(x/xmax)²) = Σw + R·Σw·(x/xmax)².
		edges := curveBinEdges(x[0], xmax, maxPts)
		i := 0
		for e := 1; e < len(edges) && i < len(x); e++ {
			hi := edges[e]
			// x is accumulated relative to the bin's first point, for an
			// accurate within-bin variance.
			var sw, swd, swdd, swy, swr float64
			j := i
			x0 := x[i]
			if w == nil {
				for ; j < len(x) && x[j] < hi; j++ {
					xj := x[j]
					r, dx := xj*invMax, xj-x0
					sw++
					swd += dx
					swdd += dx * dx
					swy += y[j]
					swr += r * r
				}
			} else {
				for ; j < len(x) && x[j] < hi; j++ {
					xj, wj := x[j], w[j]
					r, dx := xj*invMax, xj-x0
					sw += wj
					swd += wj * dx
					swdd += wj * dx * dx
					swy += wj * y[j]
					swr += wj * r * r
				}
			}
			if j == i {
				continue // empty bin
			}
			b := ws.n
			mean := swd / sw
			ws.x[b], ws.y[b] = x0+mean, swy/sw
			ws.varX[b] = max(swdd/sw-mean*mean, 0)
			ws.wn[b], ws.wf[b] = sw, sw+recency*swr
			ws.n++
			i = j
		}
	}
	n := ws.n
	ws.x, ws.y, ws.wn, ws.wf = ws.x[:n], ws.y[:n], ws.wn[:n], ws.wf[:n]
	ws.thr, ws.lnxRel, ws.lnShift, ws.fracShift = ws.thr[:n], ws.lnxRel[:n], ws.lnShift[:n], ws.fracShift[:n]
	ws.g, ws.row, ws.abs = ws.g[:n], ws.row[:n], ws.abs[:n]
	ws.varX, ws.binL, ws.binR = ws.varX[:n], ws.binL[:n], ws.binR[:n]

	// Normalise.
	ylo, yhi := ws.y[0], ws.y[0]
	for _, v := range ws.y {
		ylo, yhi = min(ylo, v), max(yhi, v)
	}
	ws.units = curveUnits{xs: xmax, ylo: ylo, ys: yhi - ylo, x0: curveShift(x, xmax)}
	ws.x0n = ws.units.x0 / xmax
	sumF, sumFX := 0.0, 0.0
	for i, v := range ws.wf {
		sumF += v
		sumFX += v * ws.x[i]
	}
	// Reference point of the decay-parametrized shapes: the fit-weighted
	// mean x, where the data pin the curve down best.
	ws.units.xm = max(sumFX/sumF/xmax, 1e-6)
	for i := range ws.x {
		ws.x[i] /= xmax
		if ws.units.ys > 0 {
			ws.y[i] = (ws.y[i] - ylo) / ws.units.ys
		}
		ws.wf[i] *= float64(n) / sumF
		ws.lnxRel[i] = math.Log(ws.x[i] / ws.units.xm)
		ws.lnShift[i] = math.Log1p(ws.x[i] / ws.x0n)
		ws.fracShift[i] = ws.x[i] / (ws.x[i] + ws.x0n)
		ws.syy += ws.wf[i] * ws.y[i] * ws.y[i]
	}
	// Bin-mean correction coefficients (see binCorrect).
	for b := 1; b < n-1; b++ {
		if v := ws.varX[b] * invMax * invMax; v > 0 {
			k := v / (ws.x[b+1] - ws.x[b-1])
			ws.binL[b] = k / (ws.x[b] - ws.x[b-1])
			ws.binR[b] = k / (ws.x[b+1] - ws.x[b])
			ws.binned = true
		}
	}
	return ws
}

// binCorrect turns g at the bin means into the bin averages of g, which is
// what the binned y are: to second order, mean g = g(x̄) + ½·g”(x̄)·Var(x),
// with g” from the divided differences of the neighbouring bins (no
// extra evaluations of g). Without it the binning bias of a convex curve,
// ½·g”·Var(x), would be fitted as if it were signal, and on clean data it
// would dominate the information criterion. The first and last bins are
// left alone: they are the narrowest.
func (ws *curveWork) binCorrect() {
	if !ws.binned {
		return
	}
	g, kl, kr := ws.g, ws.binL, ws.binR
	kl, kr = kl[:len(g)], kr[:len(g)]
	prev := g[0]
	for b := 1; b < len(g)-1; b++ {
		cur := g[b]
		g[b] = cur + kr[b]*(g[b+1]-cur) - kl[b]*(cur-prev)
		prev = cur
	}
}

// curveShift is the fixed shift x0 of pow3 and vapor: the first positive x,
// but at most 1 % of the x range, so that x = 0 is finite without
// flattening the start of the curve.
func curveShift(x []float64, xmax float64) float64 {
	x0 := 0.01 * xmax
	for _, v := range x {
		if v > 0 {
			return min(v, x0)
		}
	}
	return x0
}

// curveBinEdges returns nb+1 increasing bin edges over [xmin, xmax]. The last
// quarter of the range gets half of the bins, equally wide, so the recent
// tail keeps its resolution; the first three quarters are split evenly in
// ln(1 + (x−xmin)/h) with h = 1/20 of that span: narrow bins at the steep
// start, wide ones in the middle where the curve bends slowly.
func curveBinEdges(xmin, xmax float64, nb int) []float64 {
	nTail := nb / 2
	nHead := nb - nTail
	span := xmax - xmin
	cut := xmin + 0.75*span
	edges := make([]float64, 0, nb+1)
	h := (cut - xmin) / 20
	top := math.Log(21)
	for k := 0; k < nHead; k++ {
		edges = append(edges, xmin+h*math.Expm1(top*float64(k)/float64(nHead)))
	}
	for k := 0; k < nTail; k++ {
		edges = append(edges, cut+(xmax-cut)*float64(k)/float64(nTail))
	}
	return append(edges, math.Inf(1)) // the last bin is closed on the right
}

// project solves the weighted least squares y ≈ c + w·g for (c, w) with
// weights v, enforcing w >= 0 by falling back to the constant model.
func (ws *curveWork) project(v []float64) (c, w float64) {
	s := curveWeightedSums(v, ws.g, ws.y)
	return s.solve()
}

// curveSums are the weighted sums of the 2x2 normal equations. One pass of
// raw sums is accurate enough here: g and y are normalised to [0, 1] and
// every shape's bounds keep g varying by several per cent over the data,
// so the centring loses at most a few digits.
type curveSums struct{ sw, sg, sy, sgg, sgy float64 }

// curveWeightedSums accumulates the normal-equation sums with weights v.
// Locals rather than struct fields keep the accumulators in registers.
func curveWeightedSums(v, g, y []float64) curveSums {
	g, y = g[:len(v)], y[:len(v)]
	var sw, sg, sy, sgg, sgy float64
	for i, vi := range v {
		gi, yi := g[i], y[i]
		vg := vi * gi
		sw += vi
		sg += vg
		sy += vi * yi
		sgg += vg * gi
		sgy += vg * yi
	}
	return curveSums{sw, sg, sy, sgg, sgy}
}

// curveHuberPass evaluates the Huber loss Σ wf·ρ(r) of (c, w), with ρ(r) =
// r² up to the threshold and 2t|r| − t² beyond, and accumulates the sums
// for the next IRLS solve with weights wf·min(1, t/|r|). clipped reports
// whether any point was beyond its threshold.
func curveHuberPass(wf, thr, g, y []float64, c, w float64) (loss float64, s curveSums, clipped bool) {
	thr, g, y = thr[:len(wf)], g[:len(wf)], y[:len(wf)]
	var sw, sg, sy, sgg, sgy float64
	for i, wi := range wf {
		gi, yi, t := g[i], y[i], thr[i]
		a := math.Abs(yi - c - w*gi)
		vi := wi
		if a > t {
			loss += wi * t * (2*a - t)
			vi *= t / a
			clipped = true
		} else {
			loss += wi * a * a
		}
		vg := vi * gi
		sw += vi
		sg += vg
		sy += vi * yi
		sgg += vg * gi
		sgy += vg * yi
	}
	return loss, curveSums{sw, sg, sy, sgg, sgy}, clipped
}

// solve returns the least-squares (c, w), or the constant model (weighted
// mean, w = 0) when the slope is not positive or not determined.
func (s *curveSums) solve() (c, w float64) {
	if !(s.sw > 0) {
		return 0, 0
	}
	mg, my := s.sg/s.sw, s.sy/s.sw
	vgg := s.sgg - s.sg*mg
	vgy := s.sgy - s.sg*my
	if !(vgg > 1e-12*s.sw) || !(vgy > 0) {
		return my, 0
	}
	w = vgy / vgg
	return my - w*mg, w
}

// rss is the residual sum of squares of the solution of s, from the sums
// alone; syy is the weighted Σ y². It is exact up to rounding of order
// 1e-15 of the data's variance, far below the IC's variance floor.
func (s *curveSums) rss(syy float64) float64 {
	c, w := s.solve()
	// Σ v(y − c − w·g)² expanded with the normal equations.
	return max(syy-c*s.sy-w*s.sgy, 0)
}

// solve returns the loss of the current ws.g and the (c, w) attaining it:
// the weighted RSS, or with ws.robust the Huber loss after up to `rounds`
// IRLS reweightings started from the least-squares solution.
func (ws *curveWork) solve(rounds int) (loss, c, w float64) {
	s := curveWeightedSums(ws.wf, ws.g, ws.y)
	c, w = s.solve()
	if !ws.robust {
		return curveFinite(s.rss(ws.syy)), c, w
	}
	for round := 0; round < rounds; round++ {
		l, next, clipped := curveHuberPass(ws.wf, ws.thr, ws.g, ws.y, c, w)
		if !clipped {
			return curveFinite(l), c, w // (c, w) is already the Huber solution
		}
		c, w = next.solve()
	}
	return curveFinite(curveHuberLoss(ws.wf, ws.thr, ws.g, ws.y, c, w)), c, w
}

// curveHuberLoss is the Huber loss Σ wf·ρ(r) of (c, w) (see curveHuberPass).
func curveHuberLoss(wf, thr, g, y []float64, c, w float64) (loss float64) {
	thr, g, y = thr[:len(wf)], g[:len(wf)], y[:len(wf)]
	for i, wi := range wf {
		a, t := math.Abs(y[i]-c-w*g[i]), thr[i]
		if a > t {
			loss += wi * t * (2*a - t)
		} else {
			loss += wi * a * a
		}
	}
	return loss
}

// curveLineRefine minimises f within the bracket lo < mid < hi, where
// f(mid) is the smallest of the three values, in `steps` evaluations of
// safeguarded successive parabolic interpolation (after Brent): a step
// tries the vertex of the parabola through the bracket, and after a
// parabolic step that failed to improve, or when the vertex is unusable,
// a golden-section step into the larger half follows instead. It returns
// the best point and value.
func curveLineRefine(f func(float64) float64, lo, mid, hi, flo, fmid, fhi float64, steps int) (float64, float64) {
	const golden = 0.3819660112501051 // 2 − φ
	parabolic := true
	for range steps {
		u := math.NaN()
		if parabolic {
			den := (mid-lo)*(fmid-fhi) - (mid-hi)*(fmid-flo)
			num := (mid-lo)*(mid-lo)*(fmid-fhi) - (mid-hi)*(mid-hi)*(fmid-flo)
			u = mid - num/(2*den)
			if gap := 1e-3 * (hi - lo); !(u > lo+gap && u < hi-gap) || math.Abs(u-mid) < gap {
				u, parabolic = math.NaN(), false // unusable vertex (NaN when den = 0)
			}
		}
		if math.IsNaN(u) {
			if mid-lo > hi-mid {
				u = mid - golden*(mid-lo)
			} else {
				u = mid + golden*(hi-mid)
			}
		}
		fu := f(u)
		improved := fu < fmid
		switch {
		case improved && u < mid:
			hi, fhi, mid, fmid = mid, fmid, u, fu
		case improved:
			lo, flo, mid, fmid = mid, fmid, u, fu
		case u < mid:
			lo, flo = u, fu
		default:
			hi, fhi = u, fu
		}
		parabolic = !parabolic || improved
	}
	return mid, fmid
}

// curveFinite maps a NaN or infinite loss to +Inf, the worst value.
func curveFinite(loss float64) float64 {
	if math.IsNaN(loss) || math.IsInf(loss, 0) {
		return math.Inf(1)
	}
	return loss
}

// shapeResult is one fitted shape.
type shapeResult struct {
	fit  shapeFit
	loss float64 // normalised units
	ok   bool
}

// shapeSearch is the per-shape state between the grid and the simplex.
type shapeSearch struct {
	shape *curveShape
	lo    [2]float64 // bounds in search coordinates
	hi    [2]float64
	best  [2]float64 // best grid point, search coordinates
	simp  [3][2]float64
	gridF float64
}

// toTheta maps search coordinates t = ln θ to θ (clamped to the box) and
// returns the squared distance by which t was outside the box.
func (sh *shapeSearch) toTheta(t, theta []float64) (out float64) {
	for k := range sh.shape.dims {
		v := t[k]
		if v < sh.lo[k] {
			out += (sh.lo[k] - v) * (sh.lo[k] - v)
			v = sh.lo[k]
		} else if v > sh.hi[k] {
			out += (v - sh.hi[k]) * (v - sh.hi[k])
			v = sh.hi[k]
		}
		theta[k] = math.Exp(v)
	}
	return out
}

// eval is the search objective at t: the loss, increased outside the box
// so that Nelder-Mead is pushed back to the bounds.
func (ws *curveWork) eval(sh *shapeSearch, t []float64) float64 {
	var theta [2]float64
	th := theta[:len(sh.shape.dims)]
	out := sh.toTheta(t, th)
	sh.shape.fillG(ws, th)
	loss, _, _ := ws.solve(curveSearchIRLSRounds)
	if out > 0 {
		loss = loss*(1+10*out) + 1e-12*out
	}
	return loss
}

// grid searches the plain weighted least-squares loss on a coarse grid,
// refines its best point, and builds the initial simplex for Nelder-Mead.
//
// A bare grid is too coarse on clean data, where the valley of good fits
// is narrow: its best point can sit far from the optimum, even in the
// wrong basin. So the grid is refined into a profile: the minimum along
// every grid line (the last axis) is refined by safeguarded parabolic
// interpolation (curveLineRefine), which for two-parameter shapes puts a
// point on the valley floor for every value of the shape parameter; then
// the profile itself is minimised the same way between the best line's
// neighbours. All of this costs plain least-squares evaluations without
// any optimizer overhead. Nelder-Mead then only has to polish the optimum
// under the robust loss, from a small simplex laid along the valley.
func (ws *curveWork) grid(sh *shapeSearch) {
	dims := sh.shape.dims
	last := len(dims) - 1
	var step [2]float64
	for k, d := range dims {
		step[k] = (sh.hi[k] - sh.lo[k]) / float64(d.grid-1)
	}
	coord := func(k, i int) float64 { return sh.lo[k] + step[k]*float64(i) }
	var theta [2]float64
	loss := func(t []float64) float64 {
		for k := range t {
			theta[k] = math.Exp(t[k])
		}
		if len(dims) == 2 {
			sh.shape.fromRow(ws, ws.row, theta[:2]) // ws.row holds t[0]'s row
		} else {
			sh.shape.fill(ws, theta[:1])
		}
		ws.binCorrect()
		s := curveWeightedSums(ws.wf, ws.g, ws.y)
		if f := s.rss(ws.syy); !math.IsNaN(f) {
			return f
		}
		return math.Inf(1)
	}
	// lineMin scans the grid line through t along the last axis and returns
	// its refined minimum.
	lineMin := func(t []float64) (tBest, fBest float64) {
		var vals [16]float64
		n, jb := dims[last].grid, 0
		for j := range n {
			t[last] = coord(last, j)
			vals[j] = loss(t)
			if vals[j] < vals[jb] {
				jb = j
			}
		}
		if jb == 0 || jb == n-1 {
			return coord(last, jb), vals[jb]
		}
		return curveLineRefine(func(u float64) float64 { t[last] = u; return loss(t) },
			coord(last, jb-1), coord(last, jb), coord(last, jb+1), vals[jb-1], vals[jb], vals[jb+1], curveLineSteps)
	}

	if len(dims) == 1 {
		var t [1]float64
		t0, f0 := lineMin(t[:])
		sh.best, sh.gridF = [2]float64{t0, 0}, f0
		sh.simp[0] = sh.best
		sh.simp[1] = [2]float64{t0 + step[0]/8, 0}
		if sh.simp[1][0] > sh.hi[0] {
			sh.simp[1][0] = t0 - step[0]/8
		}
		return
	}

	n0 := dims[0].grid
	var lineT, lineF [16]float64 // refined minimum of each grid line
	bi := 0
	for i := range n0 {
		t := [2]float64{coord(0, i), 0}
		sh.shape.row(ws, math.Exp(t[0]), ws.row)
		lineT[i], lineF[i] = lineMin(t[:])
		if lineF[i] < lineF[bi] {
			bi = i
		}
	}
	best := [2]float64{coord(0, bi), lineT[bi]}
	bestF := lineF[bi]
	ni := bi + 1 // the better neighbouring line
	if bi == n0-1 || (bi > 0 && lineF[bi-1] < lineF[bi+1]) {
		ni = bi - 1
	}
	// Slope of the valley floor, to lay the simplex along it.
	slope := (lineT[ni] - lineT[bi]) / (coord(0, ni) - coord(0, bi))
	if bi > 0 && bi < n0-1 {
		// profile is the minimum over the last axis at t0, searched from the
		// valley floor interpolated between the neighbouring lines.
		profile := func(t0 float64) float64 {
			j := min(int((t0-sh.lo[0])/step[0]), n0-2)
			guess := lineT[j] + (lineT[j+1]-lineT[j])*(t0-coord(0, j))/step[0]
			sh.shape.row(ws, math.Exp(t0), ws.row)
			t := [2]float64{t0, 0}
			t1, f := curveBracketMin(func(u float64) float64 { t[1] = u; return loss(t[:]) },
				guess, step[1]/2, sh.lo[1], sh.hi[1])
			if f < bestF {
				best, bestF = [2]float64{t0, t1}, f
			}
			return f
		}
		curveLineRefine(profile, coord(0, bi-1), coord(0, bi), coord(0, bi+1), lineF[bi-1], lineF[bi], lineF[bi+1], curveProfileSteps)
	}
	sh.best, sh.gridF = best, bestF
	d0 := step[0] / 8
	if ni < bi {
		d0 = -d0
	}
	sh.simp[0] = best
	sh.simp[1] = [2]float64{best[0] + d0, best[1] + slope*d0}
	sh.simp[2] = [2]float64{best[0], best[1] + step[1]/8}
	if sh.simp[2][1] > sh.hi[1] {
		sh.simp[2][1] = best[1] - step[1]/8
	}
}

// curveBracketMin minimises f near guess within [lo, hi]: it brackets the
// minimum by walking downhill from guess with doubling steps starting at h
// (stopping at the bounds) and refines the bracket with curveLineRefine.
// It returns the best point found and its value.
func curveBracketMin(f func(float64) float64, guess, h, lo, hi float64) (float64, float64) {
	b := min(max(guess, lo), hi)
	fb := f(b)
	at := func(u float64) float64 { // no second evaluation of b at a bound
		if u == b {
			return fb
		}
		return f(u)
	}
	a, c := max(b-h, lo), min(b+h, hi)
	fa, fc := at(a), at(c)
	for walk, steps := true, 0; walk && steps < 16; steps++ { // h doubles, so a bound is soon reached
		switch {
		case fa < fb && a > lo:
			c, fc, b, fb = b, fb, a, fa
			h *= 2
			a = max(b-h, lo)
			fa = at(a)
		case fc < fb && c < hi:
			a, fa, b, fb = b, fb, c, fc
			h *= 2
			c = min(b+h, hi)
			fc = at(c)
		default:
			walk = false
		}
	}
	switch {
	case fa < fb: // the minimum is at the lower bound
		return a, fa
	case fc < fb:
		return c, fc
	case a == b || b == c:
		return b, fb
	}
	return curveLineRefine(f, a, b, c, fa, fb, fc, curveLineSteps)
}

// nelderMead refines the grid optimum with gonum's Nelder-Mead (as
// runNelderMead runs it, without Minimize's goroutines), starting from the
// grid simplex, and returns the best search point.
func (ws *curveWork) nelderMead(sh *shapeSearch) []float64 {
	dim := len(sh.shape.dims)
	verts := make([][]float64, dim+1)
	vals := make([]float64, dim+1)
	for k := range verts {
		verts[k] = sh.simp[k][:dim:dim]
		vals[k] = ws.eval(sh, verts[k])
	}
	bestK := 0
	for k := range vals {
		if vals[k] < vals[bestK] {
			bestK = k
		}
	}
	budget := curveNMBudget1D
	if dim == 2 {
		budget = curveNMBudget2D
	}
	x, fx, ok := runNelderMead(nmProblem{f: func(t []float64) float64 { return ws.eval(sh, t) },
		verts: verts, vals: vals, x0: verts[bestK], f0: vals[bestK],
		budget: budget, absolute: 1e-15, relative: 1e-6, patience: curveNMPatience})
	if !ok || !(fx <= vals[bestK]) {
		// Keep the grid simplex's best point: it is a valid (if coarse) fit.
		return slices.Clone(verts[bestK])
	}
	return x
}

// fitShape fits one shape at the common robust scale.
func (ws *curveWork) fitShape(sh *shapeSearch) shapeResult {
	t := ws.nelderMead(sh)
	theta := make([]float64, len(sh.shape.dims))
	sh.toTheta(t, theta)
	sh.shape.fillG(ws, theta)
	loss, c, w := ws.solve(curveIRLSRounds)
	ok := !math.IsInf(loss, 0) && !math.IsNaN(c) && !math.IsNaN(w)
	return shapeResult{fit: shapeFit{theta: theta, c: c, w: w}, loss: loss, ok: ok}
}

// robustScale sets the common Huber scale from the best grid fit over all
// shapes (the one with the least lack of fit in its residuals): 1.4826·MAD
// of its residuals standardised by observation weight. One scale for all
// families keeps their robust losses, and so their ICs, comparable.
func (ws *curveWork) robustScale(searches []*shapeSearch) {
	best := searches[0]
	for _, sh := range searches[1:] {
		if sh.gridF < best.gridF {
			best = sh
		}
	}
	var theta [2]float64
	th := theta[:len(best.shape.dims)]
	best.toTheta(best.best[:len(th)], th)
	best.shape.fillG(ws, th)
	c, w := ws.project(ws.wf)
	for i := range ws.abs {
		ws.abs[i] = math.Abs(ws.y[i]-c-w*ws.g[i]) * math.Sqrt(ws.wn[i])
	}
	scale := max(1.4826*curveMedianInPlace(ws.abs), curveScaleFloor)
	for i, wn := range ws.wn {
		ws.thr[i] = curveHuberK * scale / math.Sqrt(wn)
	}
}

// curveMedianInPlace returns the median of v, reordering v.
func curveMedianInPlace(v []float64) float64 {
	if len(v) == 0 {
		return math.NaN()
	}
	slices.Sort(v)
	m := len(v) / 2
	if len(v)%2 == 1 {
		return v[m]
	}
	return (v[m-1] + v[m]) / 2
}

// fit runs the grid for every distinct shape, fixes the robust scale, refines
// each shape and assembles the ensemble.
func (ws *curveWork) fit(fams []int) (Ensemble, error) {
	// Distinct shapes, in family order.
	var searches []*shapeSearch
	shapeOf := make([]int, len(fams))
	for fi, f := range fams {
		shape := curveFamilies[f].shape
		idx := slices.IndexFunc(searches, func(s *shapeSearch) bool { return s.shape == shape })
		if idx < 0 {
			sh := &shapeSearch{shape: shape}
			for k, d := range shape.dims {
				sh.lo[k], sh.hi[k] = math.Log(d.lo), math.Log(d.hi)
			}
			searches = append(searches, sh)
			idx = len(searches) - 1
		}
		shapeOf[fi] = idx
	}
	for _, sh := range searches {
		ws.grid(sh)
	}
	if ws.robust {
		ws.robustScale(searches)
	}
	results := make([]shapeResult, len(searches))
	fitted := make([][]float64, len(searches)) // fitted normalised y per shape
	for k, sh := range searches {
		results[k] = ws.fitShape(sh)
		if results[k].ok {
			f := results[k].fit
			fitted[k] = make([]float64, ws.n)
			for i, g := range ws.g {
				fitted[k][i] = f.c + f.w*g
			}
		}
	}

	// Information criterion per family.
	n := float64(ws.n)
	ys2 := ws.units.ys * ws.units.ys
	cf := Ensemble{N: ws.n, XMax: ws.xmax}
	var modelShape []int // shape index of each model
	var modelDims []int  // fitted parameters of each model
	for fi, f := range fams {
		fam := &curveFamilies[f]
		r := results[shapeOf[fi]]
		if !r.ok {
			continue
		}
		p := fam.params(r.fit, ws.units)
		if !curveModelFinite(fam, p, ws.xmax) {
			continue
		}
		dims := 2 + len(fam.shape.dims) // c, w and θ
		// AICc with the noise variance as one more parameter. The log of the
		// variance is taken in normalised units plus 2·ln ys so that a tiny
		// y range cannot underflow ys² to 0.
		k := float64(dims + 1)
		ic := n*(math.Log(max(r.loss/n, curveVarFloor))+2*math.Log(ws.units.ys)) + 2*k + 2*k*(k+1)/max(n-k-1, 1)
		cf.Models = append(cf.Models, Model{Family: fam.name, Params: p, IC: ic, RSS: r.loss * ys2, Weight: fam.prior})
		modelShape = append(modelShape, shapeOf[fi])
		modelDims = append(modelDims, dims)
	}
	if len(cf.Models) == 0 {
		return Ensemble{}, errors.New("fit curves: every curve family failed to fit")
	}
	curveAkaikeWeights(cf.Models)

	// Robust noise scale of one observation around the ensemble mean, with
	// a degrees-of-freedom correction for the parameters fitted.
	pEff := 0.0
	for i := range ws.abs {
		ws.abs[i] = 0
	}
	for m, model := range cf.Models {
		yhat := fitted[modelShape[m]]
		for i := range ws.abs {
			ws.abs[i] += model.Weight * yhat[i]
		}
		pEff += model.Weight * float64(modelDims[m])
	}
	for i := range ws.abs {
		ws.abs[i] = math.Abs(ws.y[i]-ws.abs[i]) * math.Sqrt(ws.wn[i])
	}
	dof := math.Sqrt(n / max(n-pEff, 1))
	cf.Sigma = 1.4826 * curveMedianInPlace(ws.abs) * dof * ws.units.ys

	slices.SortStableFunc(cf.Models, func(a, b Model) int { return cmp.Compare(b.Weight, a.Weight) })
	return cf, nil
}

// curveAkaikeWeights turns the IC of each model (whose Weight holds its
// prior on entry) into normalised weights prior·exp(−ΔIC/2).
func curveAkaikeWeights(models []Model) {
	best := math.Inf(1)
	for _, m := range models {
		best = min(best, m.IC)
	}
	sum := 0.0
	for i := range models {
		models[i].Weight *= math.Exp(-(models[i].IC - best) / 2)
		sum += models[i].Weight
	}
	for i := range models {
		models[i].Weight /= sum
	}
}

// curveModelFinite reports whether the params are finite and the curve is
// finite on [0, 4·xmax], where the planner extrapolates.
func curveModelFinite(fam *curveFamily, p []float64, xmax float64) bool {
	for _, v := range p {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return false
		}
	}
	for k := 0; k <= 16; k++ {
		v := fam.curve(p, xmax*float64(k)/4)
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return false
		}
	}
	return true
}

// flatFit is the fit of a constant curve: every family degenerates to its
// constant model (w = 0) at the constant, with θ at the centre of its box.
func (ws *curveWork) flatFit(fams []int) Ensemble {
	n := float64(ws.n)
	cf := Ensemble{N: ws.n, XMax: ws.xmax}
	for _, f := range fams {
		fam := &curveFamilies[f]
		theta := make([]float64, len(fam.shape.dims))
		for k, d := range fam.shape.dims {
			theta[k] = math.Sqrt(d.lo * d.hi)
		}
		p := fam.params(shapeFit{theta: theta}, ws.units)
		k := float64(2 + len(fam.shape.dims) + 1)
		// The variance floor relative to the level, as there is no range.
		ic := n*math.Log(curveVarFloor*max(ws.units.ylo*ws.units.ylo, 1)) + 2*k + 2*k*(k+1)/max(n-k-1, 1)
		cf.Models = append(cf.Models, Model{Family: fam.name, Params: p, IC: ic, Weight: fam.prior})
	}
	curveAkaikeWeights(cf.Models)
	slices.SortStableFunc(cf.Models, func(a, b Model) int { return cmp.Compare(b.Weight, a.Weight) })
	return cf
}

// PredictModel returns model i's prediction at x (clamped to x >= 0; NaN
// is treated as 0), or NaN when i is out of range or the family unknown.
func (f Ensemble) PredictModel(i int, x float64) float64 {
	if i < 0 || i >= len(f.Models) {
		return math.NaN()
	}
	m := f.Models[i]
	fam, ok := lookupCurveFamily(m.Family)
	if !ok || len(m.Params) != fam.nParams {
		return math.NaN()
	}
	if !(x > 0) {
		x = 0 // also NaN
	}
	return fam.curve(m.Params, x)
}

// ensemble returns the weight-averaged prediction at x and the weighted
// variance of the model predictions. Models with a non-finite prediction
// or no positive weight are skipped; ok is false when none is left. The
// mean is accumulated as an offset from the first usable prediction, so
// models that agree (e.g. on a flat curve) give exactly their value.
func (f Ensemble) ensemble(x float64) (mean, variance float64, ok bool) {
	var sw, ref, dm float64
	first := true
	usable := func(i int) (float64, bool) {
		p := f.PredictModel(i, x)
		return p, !math.IsNaN(p) && !math.IsInf(p, 0) && f.Models[i].Weight > 0
	}
	for i, m := range f.Models {
		p, ok := usable(i)
		if !ok {
			continue
		}
		if first {
			ref, first = p, false
		}
		sw += m.Weight
		dm += m.Weight * (p - ref)
	}
	if !(sw > 0) || math.IsInf(sw, 0) {
		return 0, 0, false
	}
	mean = ref + dm/sw
	for i, m := range f.Models {
		if p, ok := usable(i); ok {
			variance += m.Weight * (p - mean) * (p - mean)
		}
	}
	return mean, variance / sw, true
}

// Predict returns the ensemble mean at x and its predictive standard
// deviation, combining the disagreement between the models (weighted
// variance of their predictions), the noise Sigma, and an extrapolation
// term that grows with h = (x − XMax)/XMax: h·Sigma plus a quarter of the
// change the ensemble predicts beyond XMax. Both values are always finite;
// a Ensemble without models predicts (0, 0).
func (f Ensemble) Predict(x float64) (mean, sd float64) {
	mean, variance, ok := f.ensemble(x)
	if !ok || math.IsInf(mean, 0) {
		return 0, 0
	}
	sigma := f.Sigma
	if math.IsNaN(sigma) || math.IsInf(sigma, 0) || sigma < 0 {
		sigma = 0
	}
	sd2 := variance + sigma*sigma
	if f.XMax > 0 && x > f.XMax {
		h := min((x-f.XMax)/f.XMax, 1e6) // x = +Inf would make the term infinite
		sd2 += h * h * sigma * sigma
		if atMax, _, ok := f.ensemble(f.XMax); ok {
			d := curveExtrapSlope * (mean - atMax)
			sd2 += d * d
		}
	}
	sd = math.Sqrt(sd2)
	if math.IsNaN(sd) || math.IsInf(sd, 0) {
		sd = math.MaxFloat64
	}
	return mean, sd
}

// Asymptote returns the weighted asymptote (x → ∞) of the models: the
// ensemble mean at x = +Inf, where every family tends to its c. Models
// without a finite asymptote are left out and the weights renormalised;
// ok is false when no model has one.
func (f Ensemble) Asymptote() (value float64, ok bool) {
	value, _, ok = f.ensemble(math.Inf(1))
	return value, ok
}

// Crossing returns the first x in [xFrom, xMax] where the ensemble mean is
// <= level: a scan of the interval for the first bracket, then bisection
// within it. ok is false when the mean stays above level up to xMax or the
// arguments are invalid.
func (f Ensemble) Crossing(level, xFrom, xMax float64) (x float64, ok bool) {
	if len(f.Models) == 0 || math.IsNaN(level) || math.IsNaN(xFrom) || math.IsNaN(xMax) {
		return 0, false
	}
	xFrom = max(xFrom, 0)
	if xMax < xFrom || math.IsInf(xFrom, 0) {
		return 0, false
	}
	if math.IsInf(xMax, 1) {
		xMax = math.MaxFloat64
	}
	below := func(x float64) bool {
		m, _, ok := f.ensemble(x)
		return ok && m <= level
	}
	if below(xFrom) {
		return xFrom, true
	}
	// Every family is non-increasing, so the mean is too and bisection on
	// [xFrom, xMax] would do; the scan guards against a user-built Ensemble
	// that is not. Points are spaced evenly in ln(1 + (x−xFrom)/step0) so a
	// far xMax does not leave the near range unexamined.
	const scan = 64
	span := xMax - xFrom
	if !(span > 0) {
		return 0, false // the mean at xFrom = xMax is above level
	}
	step0 := span / 1e4
	top := math.Log1p(span / step0)
	lo := xFrom
	hi := math.NaN()
	for k := 1; k <= scan; k++ {
		xk := xFrom + step0*math.Expm1(top*float64(k)/scan)
		if k == scan {
			xk = xMax
		}
		if below(xk) {
			hi = xk
			break
		}
		lo = xk
	}
	if math.IsNaN(hi) {
		return 0, false
	}
	for i := 0; i < 200 && hi-lo > 1e-12*max(hi, 1e-300); i++ {
		mid := lo + (hi-lo)/2
		if mid <= lo || mid >= hi {
			break
		}
		if below(mid) {
			hi = mid
		} else {
			lo = mid
		}
	}
	return hi, true
}
