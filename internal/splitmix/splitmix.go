// Package splitmix is a tiny deterministic random source (splitmix64 with a
// Box–Muller normal). The synthetic histories and the simulator use it
// rather than math/rand so that a seed gives the same draws, and the shipped
// example files the same bytes, on every Go release.
package splitmix

import "math"

// Source is a splitmix64 generator. The zero value is usable; New seeds one.
type Source struct {
	state uint64
	spare float64
	has   bool
}

// New returns a Source whose state is seed.
func New(seed uint64) *Source { return &Source{state: seed} }

// Uint64 is the next 64 random bits.
func (r *Source) Uint64() uint64 {
	r.state += 0x9e3779b97f4a7c15
	z := r.state
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// Float64 is uniform in (0,1).
func (r *Source) Float64() float64 { return (float64(r.Uint64()>>11) + 0.5) / (1 << 53) }

// Norm is a standard normal draw.
func (r *Source) Norm() float64 {
	if r.has {
		r.has = false
		return r.spare
	}
	u1, u2 := r.Float64(), r.Float64()
	m := math.Sqrt(-2 * math.Log(u1))
	r.spare, r.has = m*math.Sin(2*math.Pi*u2), true
	return m * math.Cos(2*math.Pi*u2)
}
