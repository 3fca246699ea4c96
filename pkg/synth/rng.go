package synth

import "math"

// rng is a tiny deterministic generator (splitmix64 + Box–Muller). It is
// defined here rather than taken from math/rand so that the generated
// histories stay byte-identical across Go releases.
type rng struct {
	state uint64
	spare float64
	has   bool
}

func newRNG(seed uint64) *rng { return &rng{state: seed ^ 0x5851f42d4c957f2d} }

func (r *rng) uint64() uint64 {
	r.state += 0x9e3779b97f4a7c15
	z := r.state
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// float64 is uniform in (0,1).
func (r *rng) float64() float64 {
	return (float64(r.uint64()>>11) + 0.5) / (1 << 53)
}

// norm is a standard normal draw.
func (r *rng) norm() float64 {
	if r.has {
		r.has = false
		return r.spare
	}
	u1, u2 := r.float64(), r.float64()
	m := math.Sqrt(-2 * math.Log(u1))
	r.spare = m * math.Sin(2*math.Pi*u2)
	r.has = true
	return m * math.Cos(2*math.Pi*u2)
}
