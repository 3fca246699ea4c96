package backtest

import (
	"math"

	"github.com/progress-planner/planner/pkg/forecast"
	"github.com/progress-planner/planner/pkg/forecast/curve"
	"github.com/progress-planner/planner/pkg/progress"
)

// Engine is the forecaster under test. The default, ForecastEngine, is the
// planner itself (progress.NewHistory, Observe, Fit); tests substitute
// fakes with known answers.
type Engine interface {
	// NewRun starts one job's history. obj is the header's objective;
	// ok=false when the header names none.
	NewRun(obj progress.Objective, ok bool) Replay
}

// Replay is one job as the engine sees it: reports arrive in time order,
// forecasts are asked for at any instant at or after the latest report.
type Replay interface {
	Observe(t float64, s progress.TrainerStatus)
	// Readmitted: the job's Workload was admitted again after an
	// eviction (the controller calls History.Resume when it sees that).
	Readmitted()
	// Forecast is the forecast as of now; endStep, when not nil, overrides
	// the planned end on the progress axis (Settings.EndStep).
	Forecast(now float64, endStep *float64) forecast.Forecast
}

// CurveFitter fits one curve to (x, z) (z oriented so that smaller is
// better) and returns its value at xEnd; ok=false when the fit fails.
type CurveFitter func(x, z []float64, xEnd float64) (float64, bool)

// ForecastEngine runs the planner: forecast.Fit with DefaultSettings (or
// Settings, when set: the leave-one-dataset-out grid) on a history with
// DefaultLimits.
type ForecastEngine struct {
	Settings *forecast.Settings
}

// NewRun implements Engine.
func (e ForecastEngine) NewRun(obj progress.Objective, ok bool) Replay {
	l := progress.DefaultLimits()
	if ok {
		// The controller does the same with a job's declared objective.
		l.KeepMetrics = []string{obj.Metric}
	}
	s := forecast.DefaultSettings()
	if e.Settings != nil {
		s = *e.Settings
	}
	return &forecastRun{h: progress.NewHistory(l), obj: obj, hasObj: ok, s: s}
}

type forecastRun struct {
	h      *progress.History
	obj    progress.Objective
	hasObj bool
	s      forecast.Settings
}

func (r *forecastRun) Observe(t float64, s progress.TrainerStatus) { r.h.Observe(t, s) }

func (r *forecastRun) Readmitted() { r.h.Resume() }

func (r *forecastRun) Forecast(now float64, endStep *float64) forecast.Forecast {
	obj := r.obj
	if !r.hasObj {
		obj, _ = progress.DefaultObjective(r.h)
	}
	s := r.s
	s.EndStep = endStep
	return forecast.Fit(r.h, obj, now, s)
}

// OptimusOnly is the Optimus baseline of the final-metric section:
// curve.Fit restricted to the "optimus" family (1/(a·x+b)+c).
// Like the baseline it needs at least 4 observations.
func OptimusOnly(x, z []float64, xEnd float64) (float64, bool) {
	if len(x) < 4 {
		return 0, false
	}
	cs := curve.DefaultSettings()
	cs.Families = []string{"optimus"}
	cf, err := curve.Fit(curve.Data{X: x, Y: z}, cs)
	if err != nil {
		return 0, false
	}
	m, _ := cf.Predict(xEnd)
	if math.IsNaN(m) || math.IsInf(m, 0) {
		return 0, false
	}
	return m, true
}
