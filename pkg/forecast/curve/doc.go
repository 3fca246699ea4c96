// Package curve fits learning curves: ten parametric families of an
// improving curve y = c + w·g(x; θ) (smaller is better), each fitted by
// variable projection with a robust loss, averaged by Akaike weights into
// an Ensemble that predicts a value, its spread, the asymptote and where a
// level is crossed.
//
// It is the forecaster's numerics and nothing else: it knows no job, no
// history and no Kubernetes. Package forecast orients the objective,
// chooses the axis and calls Fit.
package curve
