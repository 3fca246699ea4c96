package curve

import "math"

// Curve families fitted by Fit.
//
// Every family is an improving learning curve (smaller is better)
//
//	y(x) = c + w·g(x; θ),   w >= 0,   g decreasing toward 0 as x → ∞,
//
// so c is the asymptote and w the improvement still to come from g's
// starting value. Params of a Model are [c, w, θ..., fixed...] in the
// original x and y units:
//
//	family     formula                                        Params            origin
//	optimus    c + w/(1 + r·x)                                [c w r]           Optimus (EuroSys'18): 1/(a·k + b) + c
//	pow3       c + w·(x + x0)^(−α)                            [c w α x0]        power law; x0 fixed (see curveShift)
//	pow4       c + w·(x/s + 1)^(−α)                           [c w s α]         power law with a fitted shift
//	exp3       c + w·exp(−r·x)                                [c w r]           exponential decay
//	janoschek  c + w·exp(−κ·x^δ)                              [c w κ δ]         Janoschek α − (α−β)·exp(−κ·x^δ), = exp4
//	weibull    c + w·exp(−(κ·x)^δ)                            [c w κ δ]         Weibull; reparametrized janoschek
//	logpower   c + w/(1 + (x/s)^k)                            [c w s k]         Domhan log-power a/(1 + (x/e^b)^c) + offset
//	mmf        c + w/(1 + x^δ/β)                              [c w β δ]         Morgan-Mercer-Flodin (αβ + γx^δ)/(β + x^δ)
//	vapor      c + w·exp(b/(x+x0) − b/x0)·((x+x0)/x0)^γ       [c w b γ x0]      vapor pressure exp(a + b/x + γ·ln x), shifted by x0
//	ilog2      c + w/ln(x/s + e)                              [c w s]           inverse logarithm
//
// Constraints: r, s, κ, β, α, δ, k > 0; vapor has b >= 0 and γ < 0 so that
// it decreases monotonically (its original form may rise first); x0 > 0.
//
// janoschek and weibull describe the same set of curves (κ_janoschek =
// κ_weibull^δ), and so do logpower and mmf (β = s^k, δ = k). Fit fits
// each such shape once and reports it under both names, each with half the
// prior weight, so that one shape does not count twice in the ensemble.
var curveFamilies = []curveFamily{
	{name: "optimus", nParams: 3, prior: 1, shape: &shapeOptimus, curve: optimusCurve, params: optimusParams},
	{name: "pow3", nParams: 4, prior: 1, shape: &shapePow3, curve: pow3Curve, params: pow3Params},
	{name: "pow4", nParams: 4, prior: 1, shape: &shapePow4, curve: pow4Curve, params: pow4Params},
	{name: "exp3", nParams: 3, prior: 1, shape: &shapeExp3, curve: exp3Curve, params: exp3Params},
	{name: "janoschek", nParams: 4, prior: 0.5, shape: &shapeStretchedExp, curve: janoschekCurve, params: janoschekParams},
	{name: "weibull", nParams: 4, prior: 0.5, shape: &shapeStretchedExp, curve: weibullCurve, params: weibullParams},
	{name: "logpower", nParams: 4, prior: 0.5, shape: &shapeLogLogistic, curve: logpowerCurve, params: logpowerParams},
	{name: "mmf", nParams: 4, prior: 0.5, shape: &shapeLogLogistic, curve: mmfCurve, params: mmfParams},
	{name: "vapor", nParams: 5, prior: 1, shape: &shapeVapor, curve: vaporCurve, params: vaporParams},
	{name: "ilog2", nParams: 3, prior: 1, shape: &shapeILog2, curve: ilog2Curve, params: ilog2Params},
}

// curveFamilyNames returns the names of all curve families, in the order
// Fit tries them.
func curveFamilyNames() []string {
	names := make([]string, len(curveFamilies))
	for i, f := range curveFamilies {
		names[i] = f.name
	}
	return names
}

// curveFamily is one named family: the shape fitted in normalised units,
// the documented formula in original units, and the mapping between them.
type curveFamily struct {
	name    string
	nParams int     // len(Params)
	prior   float64 // prior weight in the information-criterion averaging
	shape   *curveShape
	// curve evaluates the documented formula with Params p at x >= 0.
	curve func(p []float64, x float64) float64
	// params maps a normalised fit to the documented Params.
	params func(f shapeFit, u curveUnits) []float64
}

// lookupCurveFamily returns the family named name.
func lookupCurveFamily(name string) (*curveFamily, bool) {
	for i := range curveFamilies {
		if curveFamilies[i].name == name {
			return &curveFamilies[i], true
		}
	}
	return nil, false
}

// The documented formulas, in original units. They are what Predict and
// PredictModel evaluate, so they must stay finite for every x >= 0
// (including +Inf, where they return the asymptote c).

func optimusCurve(p []float64, x float64) float64 { return p[0] + p[1]/(1+p[2]*x) }

func pow3Curve(p []float64, x float64) float64 { return p[0] + p[1]*math.Pow(x+p[3], -p[2]) }

func pow4Curve(p []float64, x float64) float64 { return p[0] + p[1]*math.Pow(x/p[2]+1, -p[3]) }

func exp3Curve(p []float64, x float64) float64 { return p[0] + p[1]*math.Exp(-p[2]*x) }

func janoschekCurve(p []float64, x float64) float64 {
	return p[0] + p[1]*math.Exp(-p[2]*math.Pow(x, p[3]))
}

func weibullCurve(p []float64, x float64) float64 {
	return p[0] + p[1]*math.Exp(-math.Pow(p[2]*x, p[3]))
}

func logpowerCurve(p []float64, x float64) float64 {
	return p[0] + p[1]/(1+math.Pow(x/p[2], p[3]))
}

func mmfCurve(p []float64, x float64) float64 { return p[0] + p[1]/(1+math.Pow(x, p[3])/p[2]) }

func vaporCurve(p []float64, x float64) float64 {
	b, gamma, x0 := p[2], p[3], p[4]
	if math.IsInf(x, 1) {
		return p[0] // (x+x0)^γ → 0 with γ < 0; x/(x+x0) would be Inf/Inf
	}
	// b/(x+x0) − b/x0 written without the cancellation.
	return p[0] + p[1]*math.Exp(-(b/x0)*(x/(x+x0))+gamma*math.Log1p(x/x0))
}

func ilog2Curve(p []float64, x float64) float64 { return p[0] + p[1]/math.Log(x/p[2]+math.E) }

// curveUnits carries what is needed to map a normalised fit back to original
// units: x = xn·xs, y = ylo + yn·ys, the fixed shift x0 of pow3/vapor, and
// the reference point xm (normalised) some shapes are parametrized at.
type curveUnits struct {
	xs, ylo, ys, x0, xm float64
}

// shapeFit is one fitted shape in normalised units: yn = c + w·g(xn; theta).
type shapeFit struct {
	theta []float64
	c, w  float64
}

// cw returns c and w in original y units (w multiplies the normalised g).
func (f shapeFit) cw(u curveUnits) (c, w float64) { return u.ylo + u.ys*f.c, u.ys * f.w }

func optimusParams(f shapeFit, u curveUnits) []float64 {
	c, w := f.cw(u)
	return []float64{c, w, f.theta[0] / u.xs}
}

// pow3 is fitted as g = ((xn + x0n)/x0n)^(−α) so that g(0) = 1; the
// documented w absorbs x0^α.
func pow3Params(f shapeFit, u curveUnits) []float64 {
	c, w := f.cw(u)
	alpha := f.theta[0]
	return []float64{c, w * math.Pow(u.x0, alpha), alpha, u.x0}
}

// pow4 is searched over (s, d) with d = −ln g(xm) = α·ln(1 + xm/s), the
// decay at the reference point, rather than (s, α): along the valley of
// good fits g(xm) hardly changes, so this makes the valley axis-aligned.
func pow4Params(f shapeFit, u curveUnits) []float64 {
	c, w := f.cw(u)
	return []float64{c, w, f.theta[0] * u.xs, pow4Alpha(f.theta, u.xm)}
}

// pow4Alpha is α for the search parameters (s, d) at reference point xm.
func pow4Alpha(th []float64, xm float64) float64 { return th[1] / math.Log1p(xm/th[0]) }

func exp3Params(f shapeFit, u curveUnits) []float64 {
	c, w := f.cw(u)
	return []float64{c, w, f.theta[0] / u.xs}
}

// The stretched exponential is searched as exp(−d·(xn/xm)^δ) over (δ, d),
// d the decay at the reference point (see pow4Params): κ = d/(xm·xs)^δ.
func janoschekParams(f shapeFit, u curveUnits) []float64 {
	c, w := f.cw(u)
	delta, d := f.theta[0], f.theta[1]
	return []float64{c, w, d * math.Pow(u.xm*u.xs, -delta), delta}
}

func weibullParams(f shapeFit, u curveUnits) []float64 {
	c, w := f.cw(u)
	delta, d := f.theta[0], f.theta[1]
	return []float64{c, w, math.Pow(d, 1/delta) / (u.xm * u.xs), delta}
}

// The log-logistic shape is searched as 1/(1 + q·(xn/xm)^k) over (k, q), q
// the odds at the reference point: s = xm·xs·q^(−1/k).
func logpowerParams(f shapeFit, u curveUnits) []float64 {
	c, w := f.cw(u)
	k, q := f.theta[0], f.theta[1]
	return []float64{c, w, u.xm * u.xs * math.Pow(q, -1/k), k}
}

func mmfParams(f shapeFit, u curveUnits) []float64 {
	c, w := f.cw(u)
	k, q := f.theta[0], f.theta[1]
	return []float64{c, w, math.Pow(u.xm*u.xs, k) / q, k}
}

// vapor is fitted as ((x+x0)/x0)^(−a)·exp(−β·x/(x+x0)) over (a, β):
// b/(x+x0) − b/x0 = −(b/x0)·x/(x+x0), so b = β·x0 and γ = −a. Searching
// β = b/x0 keeps the early-phase term on the scale of the shift instead of
// letting it blow up to exp(b/x0) when x0 is tiny.
func vaporParams(f shapeFit, u curveUnits) []float64 {
	c, w := f.cw(u)
	return []float64{c, w, f.theta[1] * u.x0, -f.theta[0], u.x0}
}

func ilog2Params(f shapeFit, u curveUnits) []float64 {
	c, w := f.cw(u)
	return []float64{c, w, f.theta[0] * u.xs}
}

// curveShape is what is actually fitted: the nonlinear part g(xn; theta) on
// normalised x in [0, 1], with box bounds on theta. The bounds keep every
// shape decreasing and numerically tame; the lower rate bounds stop a
// nearly straight curve from being explained by an absurdly distant
// asymptote.
//
// g must be finite, in [0, 1] and equal 1 at xn = 0 where the shape
// allows it, so that the 2x2 normal equations stay well conditioned.
type curveShape struct {
	name string
	dims []thetaDim
	// fill writes g(xn_i; theta) for every fitted point into ws.g.
	fill func(ws *curveWork, theta []float64)
	// Two-parameter shapes split g into a per-point row that depends on
	// theta[0] alone and a cheap combination with theta[1], so that the
	// grid computes the expensive part once per grid row. Without fill,
	// row and fromRow also serve single evaluations.
	row     func(ws *curveWork, th0 float64, row []float64)
	fromRow func(ws *curveWork, row []float64, theta []float64)
}

// fillG writes g(xn_i; theta) into ws.g, as bin averages when the data
// were binned (see binCorrect).
func (sh *curveShape) fillG(ws *curveWork, theta []float64) {
	if sh.fill != nil {
		sh.fill(ws, theta)
	} else {
		sh.row(ws, theta[0], ws.row)
		sh.fromRow(ws, ws.row, theta)
	}
	ws.binCorrect()
}

// thetaDim is one nonlinear parameter, positive and searched on a log
// scale within [lo, hi], starting from a grid of `grid` points.
type thetaDim struct {
	lo, hi float64
	grid   int
}

// The two-parameter shapes other than vapor are searched over (shape,
// decay at the reference point xm) rather than their textbook
// parameters: the data pin down g(xm) well, so this turns the long curved
// valley of good fits into one that is nearly aligned with an axis, which
// the grid's refined lines (along the second, finer axis) and Nelder-Mead
// follow far more cheaply.
var (
	shapeOptimus = curveShape{name: "optimus", dims: []thetaDim{{0.05, 1e4, 16}}, fill: fillOptimus}
	shapePow3    = curveShape{name: "pow3", dims: []thetaDim{{0.01, 3, 16}}, fill: fillPow3}
	shapeExp3    = curveShape{name: "exp3", dims: []thetaDim{{0.05, 1e3, 16}}, fill: fillExp3}
	shapeILog2   = curveShape{name: "ilog2", dims: []thetaDim{{1e-4, 10, 16}}, fill: fillILog2}
	// pow4: theta = (s, d), α = d/ln(1 + xm/s).
	shapePow4 = curveShape{name: "pow4", dims: []thetaDim{{1e-3, 100, 6}, {0.01, 10, 10}},
		row: rowPow4, fromRow: fromRowPow4}
	// janoschek/weibull: theta = (δ, d), g = exp(−d·(xn/xm)^δ).
	shapeStretchedExp = curveShape{name: "stretched-exp", dims: []thetaDim{{0.05, 5, 6}, {0.01, 10, 10}},
		row: rowStretchedExp, fromRow: fromRowStretchedExp}
	// logpower/mmf: theta = (k, q), g = 1/(1 + q·(xn/xm)^k).
	shapeLogLogistic = curveShape{name: "log-logistic", dims: []thetaDim{{0.05, 8, 6}, {0.01, 1e3, 10}},
		row: rowLogLogistic, fromRow: fromRowLogLogistic}
	// vapor: theta = (a, β), g = ((xn+x0n)/x0n)^(−a)·exp(−β·xn/(xn+x0n)).
	shapeVapor = curveShape{name: "vapor", dims: []thetaDim{{0.01, 3, 6}, {1e-3, 30, 10}},
		fill: fillVapor, row: rowVapor, fromRow: fromRowVapor}
)

func fillOptimus(ws *curveWork, th []float64) {
	r := th[0]
	for i, x := range ws.x {
		ws.g[i] = 1 / (1 + r*x)
	}
}

func fillPow3(ws *curveWork, th []float64) {
	alpha := th[0]
	for i, l := range ws.lnShift {
		ws.g[i] = math.Exp(-alpha * l)
	}
}

func fillExp3(ws *curveWork, th []float64) {
	r := th[0]
	for i, x := range ws.x {
		ws.g[i] = math.Exp(-r * x)
	}
}

func fillILog2(ws *curveWork, th []float64) {
	inv := 1 / th[0]
	for i, x := range ws.x {
		ws.g[i] = 1 / math.Log(x*inv+math.E)
	}
}

func rowPow4(ws *curveWork, s float64, row []float64) {
	inv := 1 / s
	for i, x := range ws.x {
		// Log rather than Log1p: much faster, and its absolute error of
		// ~1e-16 for tiny x/s is irrelevant to g = exp(−α·row).
		row[i] = math.Log(1 + x*inv)
	}
}

func fromRowPow4(ws *curveWork, row []float64, th []float64) {
	alpha := pow4Alpha(th, ws.units.xm)
	for i, l := range row {
		ws.g[i] = math.Exp(-alpha * l)
	}
}

func rowStretchedExp(ws *curveWork, delta float64, row []float64) {
	for i, l := range ws.lnxRel {
		row[i] = math.Exp(delta * l) // (x/xm)^δ; ln 0 = −Inf gives 0
	}
}

func fromRowStretchedExp(ws *curveWork, row []float64, th []float64) {
	d := th[1]
	for i, p := range row {
		ws.g[i] = math.Exp(-d * p)
	}
}

func rowLogLogistic(ws *curveWork, k float64, row []float64) {
	for i, l := range ws.lnxRel {
		row[i] = math.Exp(k * l) // (x/xm)^k
	}
}

func fromRowLogLogistic(ws *curveWork, row []float64, th []float64) {
	q := th[1]
	for i, p := range row {
		ws.g[i] = 1 / (1 + q*p)
	}
}

func fillVapor(ws *curveWork, th []float64) {
	a, beta := th[0], th[1]
	for i, f := range ws.fracShift {
		ws.g[i] = math.Exp(-beta*f - a*ws.lnShift[i])
	}
}

func rowVapor(ws *curveWork, a float64, row []float64) {
	for i, l := range ws.lnShift {
		row[i] = math.Exp(-a * l)
	}
}

func fromRowVapor(ws *curveWork, row []float64, th []float64) {
	beta := th[1]
	for i, f := range ws.fracShift {
		ws.g[i] = row[i] * math.Exp(-beta*f)
	}
}
