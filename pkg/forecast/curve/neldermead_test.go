package curve

import (
	"math"
	"math/rand/v2"
	"testing"

	"gonum.org/v1/gonum/optimize"
)

// runNelderMead gives gonum's Minimize result bit for bit: random 1-D and
// 2-D problems (smooth bowls, a banana valley, flat steps that make ties,
// +Inf regions), random simplices, budgets and patience.
func TestNelderMeadMatchesGonum(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	funcs := map[string]func(a, b float64) func([]float64) float64{
		"bowl": func(a, b float64) func([]float64) float64 {
			return func(x []float64) float64 {
				s := 0.0
				for i, v := range x {
					s += (v - a*float64(i+1)) * (v - b) * float64(i+1)
				}
				return s
			}
		},
		"banana": func(a, b float64) func([]float64) float64 {
			return func(x []float64) float64 {
				y := 0.0
				if len(x) > 1 {
					y = x[1]
				}
				return (a-x[0])*(a-x[0]) + 100*(y-x[0]*x[0])*(y-x[0]*x[0]) + b
			}
		},
		"steps": func(a, b float64) func([]float64) float64 {
			return func(x []float64) float64 {
				s := 0.0
				for _, v := range x {
					s += math.Floor(math.Abs(v-a) * 4)
				}
				return s + b
			}
		},
		"walls": func(a, b float64) func([]float64) float64 {
			return func(x []float64) float64 {
				if x[0] > a+1 {
					return math.Inf(1)
				}
				s := 0.0
				for _, v := range x {
					s += math.Abs(v - a)
				}
				return s + b
			}
		},
	}
	n := 0
	for name, mk := range funcs {
		for trial := 0; trial < 300; trial++ {
			dim := 1 + trial%2
			f := mk(4*r.Float64()-2, r.Float64())
			verts := make([][]float64, dim+1)
			vals := make([]float64, dim+1)
			for k := range verts {
				verts[k] = make([]float64, dim)
				for i := range verts[k] {
					verts[k][i] = 6*r.Float64() - 3
				}
				vals[k] = f(verts[k])
			}
			best := 0
			for k := range vals {
				if vals[k] < vals[best] {
					best = k
				}
			}
			budget := []int{5, 10, 30, 200}[r.IntN(4)]
			patience := []int{3, 12, 40}[r.IntN(3)]
			rel := []float64{1e-6, 0}[r.IntN(2)]

			res, err := optimize.Minimize(optimize.Problem{Func: f}, verts[best], &optimize.Settings{
				InitValues:      &optimize.Location{F: vals[best]},
				FuncEvaluations: budget,
				Converger:       &optimize.FunctionConverge{Absolute: 1e-15, Relative: rel, Iterations: patience},
			}, &optimize.NelderMead{InitialVertices: cloneAll(verts), InitialValues: append([]float64(nil), vals...)})
			x, fx, ok := runNelderMead(nmProblem{f: f, verts: verts, vals: vals, x0: verts[best], f0: vals[best],
				budget: budget, absolute: 1e-15, relative: rel, patience: patience})
			if ok != (err == nil) {
				t.Fatalf("%s #%d: ok %v, gonum's error %v", name, trial, ok, err)
			}
			if !ok {
				continue
			}
			n++
			if fx != res.F && !(math.IsNaN(fx) && math.IsNaN(res.F)) {
				t.Fatalf("%s #%d (dim %d, budget %d, patience %d): f %v, gonum %v", name, trial, dim, budget, patience, fx, res.F)
			}
			for i := range x {
				if x[i] != res.X[i] {
					t.Fatalf("%s #%d: x %v, gonum %v", name, trial, x, res.X)
				}
			}
		}
	}
	if n < 1000 {
		t.Errorf("only %d problems compared", n)
	}
}

func cloneAll(v [][]float64) [][]float64 {
	out := make([][]float64, len(v))
	for i := range v {
		out[i] = append([]float64(nil), v[i]...)
	}
	return out
}
