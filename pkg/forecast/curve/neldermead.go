package curve

import (
	"math"
	"sort"
)

// nmProblem is one Nelder-Mead refinement: gonum's optimize.Minimize with
// optimize.NelderMead given an initial simplex and its values, InitX the
// best vertex with InitValues its value, a FuncEvaluations budget and a
// FunctionConverge{Absolute, Relative, Iterations} converger.
type nmProblem struct {
	f        func([]float64) float64
	verts    [][]float64
	vals     []float64
	x0       []float64
	f0       float64
	budget   int
	absolute float64
	relative float64
	patience int
}

// runNelderMead runs p as gonum v0.17's Minimize would, step for step: the
// same simplex moves, evaluation budget and convergence test, so the same
// result. What it leaves out is Minimize's machinery: a method goroutine
// and a worker goroutine handing every evaluation over channels, a fifth
// of a one-core Philly simulation's CPU (docs/benchmarks.md).
// TestNelderMeadMatchesGonum checks the two agree, bit for bit, on random
// problems. ok is false where Minimize returns an error (a starting value
// that is +Inf or NaN); x and fx are then meaningless.
func runNelderMead(p nmProblem) (x []float64, fx float64, ok bool) {
	if math.IsInf(p.f0, 1) || math.IsNaN(p.f0) {
		return nil, 0, false
	}
	dim := len(p.x0)
	s := newNMState(p, dim)
	// The first major iteration is the starting location; the converger
	// takes its value as the best so far.
	s.optX, s.optF = append([]float64(nil), p.x0...), p.f0
	s.best = p.f0
	// The simplex, sorted, is the second.
	sort.Sort(nmVertexSorter{s.vertices, s.values})
	s.computeCentroid()
	if s.major() {
		return s.optX, s.optF, true
	}
	for s.step() {
	}
	return s.optX, s.optF, true
}

// nmState is the simplex and the bookkeeping of Minimize around it.
type nmState struct {
	p                                        nmProblem
	dim                                      int
	reflection, expansion, contraction, shrk float64
	vertices                                 [][]float64 // ascending value
	values                                   []float64
	centroid                                 []float64 // of all but the worst
	reflected, trial, scratch                []float64
	evals                                    int
	optX                                     []float64 // the last major iteration's location
	optF                                     float64
	best                                     float64 // the converger's
	stale                                    int
}

func newNMState(p nmProblem, dim int) *nmState {
	s := &nmState{p: p, dim: dim, reflection: 1, expansion: 1 + 2/float64(dim), contraction: 0.75 - 1/(2*float64(dim)), shrk: 1 - 1/float64(dim)}
	if dim == 1 {
		s.expansion, s.contraction, s.shrk = 2, 0.5, 0.5
	}
	s.vertices = make([][]float64, dim+1)
	for i := range s.vertices {
		s.vertices[i] = append([]float64(nil), p.verts[i]...)
	}
	s.values = append([]float64(nil), p.vals...)
	s.centroid = make([]float64, dim)
	s.reflected, s.trial, s.scratch = make([]float64, dim), make([]float64, dim), make([]float64, dim)
	return s
}

// eval evaluates f at x (on a copy, as Minimize does); false when the
// budget is spent: Minimize then stops without handing the value back.
func (s *nmState) eval(x []float64) (float64, bool) {
	copy(s.scratch, x)
	v := s.p.f(s.scratch)
	s.evals++
	return v, !(s.p.budget > 0 && s.evals >= s.p.budget)
}

// major records a major iteration at the best vertex and reports whether
// the converger stops there (FunctionConverge.Converged).
func (s *nmState) major() bool {
	copy(s.optX, s.vertices[0])
	s.optF = s.values[0]
	f := s.optF
	if s.p.patience == 0 {
		return false
	}
	maxAbs := math.Max(math.Abs(f), math.Abs(s.best))
	if f < s.best && s.best-f > s.p.relative*maxAbs+s.p.absolute {
		s.best, s.stale = f, 0
		return false
	}
	s.stale++
	return s.stale >= s.p.patience
}

// step runs one Nelder-Mead iteration (reflect, then expand, contract or
// shrink) and its major iteration; false once Minimize would stop.
func (s *nmState) step() bool {
	dim := s.dim
	s.move(s.reflected, s.reflection)
	fr, more := s.eval(s.reflected)
	if !more {
		return false
	}
	switch {
	case fr >= s.values[0] && fr < s.values[dim-1]:
		s.replaceWorst(s.reflected, fr)
	case fr < s.values[0]:
		s.move(s.trial, s.reflection*s.expansion)
		fe, more := s.eval(s.trial)
		if !more {
			return false
		}
		if fe < fr {
			s.replaceWorst(s.trial, fe)
		} else {
			s.replaceWorst(s.reflected, fr)
		}
	default:
		outside := fr < s.values[dim]
		scale := -s.contraction
		if outside {
			scale = s.reflection * s.contraction
		}
		s.move(s.trial, scale)
		fc, more := s.eval(s.trial)
		if !more {
			return false
		}
		switch {
		case outside && fc <= fr, !outside && fc < s.values[dim]:
			s.replaceWorst(s.trial, fc)
		default:
			if !s.shrink() {
				return false
			}
		}
	}
	return !s.major()
}

// move sets x to the centroid plus scale times (centroid − worst).
func (s *nmState) move(x []float64, scale float64) {
	affine(x, s.centroid, s.vertices[s.dim], scale, s.centroid)
}

// affine sets x to scale·(a − b) + base in gonum's NelderMead order of
// operations (floats.SubTo, Scale, Add), so that the rounding is the same.
func affine(x, a, b []float64, scale float64, base []float64) {
	for i := range x {
		x[i] = a[i] - b[i]
	}
	for i := range x {
		x[i] *= scale
	}
	for i := range x {
		x[i] += base[i]
	}
}

// shrink moves every vertex but the best towards it; false when the
// budget runs out on the way.
func (s *nmState) shrink() bool {
	for k := 1; k <= s.dim; k++ {
		x := s.trial
		affine(x, s.vertices[k], s.vertices[0], s.shrk, s.vertices[0])
		f, more := s.eval(x)
		if !more {
			return false
		}
		copy(s.vertices[k], x)
		s.values[k] = f
	}
	sort.Sort(nmVertexSorter{s.vertices, s.values})
	s.computeCentroid()
	return true
}

// replaceWorst puts x in the worst vertex's place, moves it up to its
// rank, and updates the centroid (NelderMead.replaceWorst).
func (s *nmState) replaceWorst(x []float64, f float64) {
	dim := s.dim
	copy(s.vertices[dim], x)
	s.values[dim] = f
	for i := dim - 1; i >= 0; i-- {
		if s.values[i] < f {
			break
		}
		s.vertices[i], s.vertices[i+1] = s.vertices[i+1], s.vertices[i]
		s.values[i], s.values[i+1] = s.values[i+1], s.values[i]
	}
	out, in := -1/float64(dim), 1/float64(dim)
	for i, v := range s.vertices[dim] {
		s.centroid[i] += out * v
	}
	for i, v := range x {
		s.centroid[i] += in * v
	}
}

func (s *nmState) computeCentroid() {
	for i := range s.centroid {
		s.centroid[i] = 0
	}
	for k := 0; k < s.dim; k++ {
		for j, v := range s.vertices[k] {
			s.centroid[j] += v
		}
	}
	for i := range s.centroid {
		s.centroid[i] /= float64(s.dim)
	}
}

// nmVertexSorter sorts the simplex by value with sort.Sort, as gonum
// does (the order of ties is sort.Sort's).
type nmVertexSorter struct {
	vertices [][]float64
	values   []float64
}

func (n nmVertexSorter) Len() int           { return len(n.values) }
func (n nmVertexSorter) Less(i, j int) bool { return n.values[i] < n.values[j] }
func (n nmVertexSorter) Swap(i, j int) {
	n.values[i], n.values[j] = n.values[j], n.values[i]
	n.vertices[i], n.vertices[j] = n.vertices[j], n.vertices[i]
}
