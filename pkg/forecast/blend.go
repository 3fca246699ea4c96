package forecast

import (
	"math"

	"github.com/progress-planner/planner/pkg/forecast/curve"
)

// blended is the objective forecast actually used: the curve ensemble
// shrunk toward persistence (the last observed value) by how well each
// predicted the job's own recent past.
//
// Learning curves change regime (learning-rate steps, warm-down, overfit)
// in ways no parametric family sees coming. So Fit refits the curve on the
// first two thirds of the observed axis range (a hindcast), predicts the
// held-out last third with both the curve and persistence, and weighs the
// two by inverse mean squared error. The hindcast error also widens the
// interval, scaled by how much further the real forecast reaches: a
// wrong curve shape is a bias that grows with the distance extrapolated,
// so the error is carried to the horizon as (horizon/hindcast span)^(p/2),
// p = Settings.IntervalHorizonPower (2: in proportion to the distance).
type blended struct {
	cf      curve.Ensemble
	w       float64 // weight of the curve; 1-w goes to persistence
	persist float64 // last observed value (oriented)
	hErr    float64 // RMS hindcast error of the blend (oriented units)
	// lineBetter: on the hindcast, a straight line through the recent
	// observations (linearCrossing's line) predicted the held-out third
	// better than the curve did (under Settings.LineReplaceShare, a half,
	// of its squared error); the time to target then follows the line.
	lineBetter bool
	// levelsOffChecked: the hindcast ran and its curve, refitted on the
	// first two thirds, reached every level the job went on to reach. Only
	// then is the curve trusted to say the job will never reach its target.
	levelsOffChecked bool
	hSpan            float64 // axis length of the hindcast horizon
	inflation        float64 // Settings.IntervalInflation
	hPower           float64 // Settings.IntervalHorizonPower
	xLast            float64
	lo, hi           float64 // physical bounds of the oriented metric (±Inf when none)
}

// checked: the hindcast ran (enough observations on both sides of its
// split).
func (b blended) checked() bool { return b.hSpan > 0 }

// newBlended fits the hindcast and returns the blend around cf.
func newBlended(cf curve.Ensemble, obs []objPoint, s Settings) blended {
	b := blended{cf: cf, w: 1, persist: obs[len(obs)-1].y, xLast: obs[len(obs)-1].x,
		inflation: s.IntervalInflation, hPower: s.IntervalHorizonPower}
	b.lo, b.hi = physicalBounds(obs)
	x0, x1 := obs[0].x, b.xLast
	split := x0 + (x1-x0)*2/3
	k := 0
	for k < len(obs) && obs[k].x <= split {
		k++
	}
	if k < s.MinObjectivePoints || len(obs)-k < 2 {
		return b
	}
	d := curve.Data{X: make([]float64, k), Y: make([]float64, k)}
	for i := 0; i < k; i++ {
		d.X[i], d.Y[i] = obs[i].x, obs[i].y
	}
	// The hindcast checks the ensemble's shape, so it refits only the
	// families that carry the ensemble (at most three), which keeps its cost
	// a fraction of the main fit's.
	hs := s.Curves
	hs.Families = nil
	for _, m := range cf.Models {
		if len(hs.Families) == 3 || m.Weight < 0.05 {
			break
		}
		hs.Families = append(hs.Families, m.Family)
	}
	hf, err := curve.Fit(d, hs)
	if err != nil || len(hf.Models) == 0 {
		return b
	}
	persist := obs[k-1].y
	// At most 48 held-out points, evenly spaced: enough for an error
	// estimate, and the hindcast stays a small share of the forecast's cost.
	held := obs[k:]
	stride := (len(held) + 47) / 48
	var ys, preds []float64
	for i := 0; i < len(held); i += stride {
		m, _ := hf.Predict(held[i].x)
		ys = append(ys, held[i].y)
		preds = append(preds, m)
	}
	var seC, seP, seL float64
	slope, anchor, lineOK := recentLine(obs[:k])
	for i, y := range ys {
		seC += (preds[i] - y) * (preds[i] - y)
		seP += (persist - y) * (persist - y)
		if lineOK {
			l := anchor.y + slope*(held[i*stride].x-anchor.x)
			seL += (l - y) * (l - y)
		}
	}
	b.lineBetter = lineOK && seL < s.LineReplaceShare*seC
	b.levelsOffChecked = !curveFellShort(hf, obs, k)
	n := float64(len(ys))
	mseC, mseP := seC/n, seP/n
	if mseC+mseP > 0 {
		b.w = mseP / (mseC + mseP)
	}
	// Error of the blend on the hindcast, as the interval's floor.
	var seB float64
	for i, y := range ys {
		e := b.w*preds[i] + (1-b.w)*persist - y
		seB += e * e
	}
	b.hErr = math.Sqrt(seB / n)
	b.hSpan = x1 - obs[k-1].x
	return b
}

// curveFellShort: the curve refitted on obs[:k] never reaches, within its
// crossing horizon, the level the job's held-out observations obs[k:]
// actually reached (the median of the last three, so one lucky evaluation
// does not set it). Such a curve has already said "levels off" wrongly once
// on this job's own history.
func curveFellShort(hf curve.Ensemble, obs []objPoint, k int) bool {
	held := obs[k:]
	n := len(held)
	level := held[n-1].y
	if n >= 3 {
		level = median3(held[n-3].y, held[n-2].y, held[n-1].y)
	}
	origin := obs[k-1].x
	_, ok := hf.Crossing(level, origin, crossingReach*origin)
	return !ok
}

// physicalBounds: a maximized metric observed only within [0,1] (accuracy,
// AUC, mAP) stays within [0,1], a minimized one observed only >= 0 (a loss)
// cannot go below 0. Oriented values are -metric for maximize, so the
// bounds are returned in oriented units. Read from the values, not the
// direction, so that a mirrored objective gets the mirrored bounds.
func physicalBounds(obs []objPoint) (lo, hi float64) {
	nonNeg, negUnit := true, true
	for _, o := range obs {
		nonNeg = nonNeg && o.y >= 0
		negUnit = negUnit && o.y <= 0 && o.y >= -1
	}
	switch {
	case nonNeg:
		return 0, math.Inf(1)
	case negUnit:
		return -1, 0
	}
	return math.Inf(-1), math.Inf(1)
}

// predict returns the blended mean and predictive sd at x (oriented).
func (b blended) predict(x float64) (mean, sd float64) {
	m, s := b.cf.Predict(x)
	mean = b.w*m + (1-b.w)*b.persist
	r := 1.0
	if b.hSpan > 0 {
		r = math.Max(1, (x-b.xLast)/b.hSpan)
	}
	sd = math.Sqrt(math.Pow(b.inflation*b.w*s, 2) + b.hErr*b.hErr*math.Pow(r, b.hPower))
	return b.within(mean), sd
}

// within clamps an oriented value to the metric's physical bounds.
func (b blended) within(v float64) float64 {
	return max(b.lo, min(b.hi, v))
}

// crossing finds where the blended mean reaches level.
func (b blended) crossing(level, xFrom, xMax float64) (float64, bool) {
	if b.w <= 1e-9 {
		return 0, false
	}
	return b.cf.Crossing((level-(1-b.w)*b.persist)/b.w, xFrom, xMax)
}

// recentLine is the straight line through the first and the last
// observation of the last fifth of observed time (at least the last two):
// its slope on the axis and the last observation, which it passes
// through; ok is false when it is not improving.
func recentLine(obs []objPoint) (slope float64, last objPoint, ok bool) {
	n := len(obs)
	if n < 2 {
		return 0, objPoint{}, false
	}
	tEnd := obs[n-1].t
	k := n - 2
	for k > 0 && obs[k-1].t >= 0.8*tEnd {
		k--
	}
	a, b := obs[k], obs[n-1]
	if b.x <= a.x || b.y >= a.y {
		return 0, objPoint{}, false
	}
	return (b.y - a.y) / (b.x - a.x), b, true
}
