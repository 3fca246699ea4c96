package admission

import (
	"math"
	"testing"
)

// at is the wait whose L (log of seconds + 1 min) is base's plus d.
func at(base, d float64) float64 { return (base+calibrationScale)*math.Exp(d) - calibrationScale }

// TestCalibrateWidens: ten past estimates of 40–940 s whose waits were
// 0.1, 0.2, …, 1.0 past P90 in log(time + 1 min): the 80 % interval's
// conformal shift is the 9th smallest score (⌈11 · 0.8⌉), 0.9, applied to
// both ends.
func TestCalibrateWidens(t *testing.T) {
	var past []Outcome
	for i := 1; i <= 10; i++ {
		past = append(past, Outcome{P10: 40, P90: 940, Wait: at(940, float64(i)/10)})
	}
	c := Calibrate(past)
	if c.Outcomes != 10 || math.Abs(c.Shift-0.9) > 1e-9 {
		t.Fatalf("calibration %+v, want 10 outcomes, shift 0.9", c)
	}
	lo, hi := c.Apply(400, 800, 1600)
	if math.Abs(lo-at(400, -0.9)) > 1e-6 || math.Abs(hi-at(1600, 0.9)) > 1e-6 {
		t.Errorf("calibrated 400–1600 s to %v–%v, want %v–%v", lo, hi, at(400, -0.9), at(1600, 0.9))
	}
	if lo, _ := c.Apply(10, 20, 30); lo != 0 {
		t.Errorf("lower end %v, want clipped at 0", lo)
	}
	if _, hi := c.Apply(10, math.Inf(1), math.Inf(1)); !math.IsInf(hi, 1) {
		t.Errorf("an upper end past the simulated future became %v", hi)
	}
}

// TestCalibrateNarrows: past waits well inside their intervals narrow the
// next one, but never past its median.
func TestCalibrateNarrows(t *testing.T) {
	var past []Outcome
	for range 12 {
		past = append(past, Outcome{P10: 100, P90: 10000, Wait: 1000})
	}
	c := Calibrate(past)
	if !(c.Shift < 0) {
		t.Fatalf("shift %v, want negative", c.Shift)
	}
	lo, hi := c.Apply(100, 1000, 10000)
	if !(lo > 100 && lo <= 1000 && hi < 10000 && hi >= 1000) {
		t.Errorf("narrowed to %v–%v, want inside 100–10000 around the median 1000", lo, hi)
	}
	lo, hi = c.Apply(100, 150, 160)
	if lo > 150 || hi < 150 {
		t.Errorf("narrowed past the median: %v–%v", lo, hi)
	}
}

// TestCalibrateOutcomes: which outcomes count. A job still waiting past its
// P90 is a known miss by at least that much; one still waiting inside its
// interval, an unbounded estimate and nonsense are not counted; with fewer
// than MinOutcomes the futures' interval is shown as it is.
func TestCalibrateOutcomes(t *testing.T) {
	past := []Outcome{
		{P10: 0, P90: 100, Wait: 50, Waiting: true},         // not known yet
		{P10: 0, P90: math.Inf(1), Wait: 50},                // unbounded estimate
		{P10: 200, P90: 100, Wait: 50},                      // P10 past P90
		{P10: math.NaN(), P90: 100, Wait: 50},               // NaN
		{P10: 0, P90: 100, Wait: math.NaN()},                // NaN wait
		{P10: 0, P90: 100, Wait: math.Inf(1)},               // never admitted, not known to have passed P90
		{P10: 0, P90: 100, Wait: at(100, 2), Waiting: true}, // a known miss
	}
	if c := Calibrate(past); c.Outcomes != 0 {
		t.Fatalf("calibrated on %d outcomes from one usable", c.Outcomes)
	}
	if lo, hi := (Calibration{}).Apply(5, 10, 20); lo != 5 || hi != 20 {
		t.Errorf("uncalibrated interval changed to %v–%v", lo, hi)
	}
	for range MinOutcomes - 1 {
		past = append(past, Outcome{P10: 0, P90: 100, Wait: 50})
	}
	c := Calibrate(past)
	// Nine scores of -log(160/110)… and one of 2: the 9th smallest
	// (⌈11 · 0.8⌉) is an inside one.
	if c.Outcomes != MinOutcomes || !(c.Shift < 0) {
		t.Errorf("calibration %+v, want %d outcomes and a negative shift", c, MinOutcomes)
	}
	past = append(past, Outcome{P10: 0, P90: 100, Wait: at(100, 2), Waiting: true}, Outcome{P10: 0, P90: 100, Wait: at(100, 2), Waiting: true})
	if c := Calibrate(past); math.Abs(c.Shift-2) > 1e-9 {
		t.Errorf("three known misses by 2 of 12: shift %v, want 2", c.Shift)
	}
}

// TestCalibrateWithin: ten recent outcomes decide alone; with fewer, the
// most recent older ones make up ten.
func TestCalibrateWithin(t *testing.T) {
	var past []Outcome
	for i := range 10 { // recent, inside: score < 0
		past = append(past, Outcome{P10: 100, P90: 10000, Wait: 1000, Age: float64(60 * (i + 1))})
	}
	for i := range 10 { // older than a day, all far above their range
		past = append(past, Outcome{P10: 0, P90: 100, Wait: 10000, Age: float64(25*3600 + i)})
	}
	day := 24 * 3600.0
	if c := CalibrateWithin(past, day); c.Outcomes != 10 || !(c.Shift < 0) {
		t.Errorf("ten recent: %+v, want them alone (narrowed)", c)
	}
	// Only four recent: six older ones join, the newest first.
	c := CalibrateWithin(past[6:], day)
	if c.Outcomes != 10 || !(c.Shift > 0) {
		t.Errorf("four recent: %+v, want ten, widened by the older misses", c)
	}
	if c := CalibrateWithin(past[10:13], day); c.Outcomes != 0 {
		t.Errorf("three in all: %+v, want none", c)
	}
	if a, b := Calibrate(past), CalibrateWithin(past, math.Inf(1)); a != b || a.Outcomes != 20 {
		t.Errorf("Calibrate %+v, want all 20 as CalibrateWithin(+Inf) %+v", a, b)
	}
}
