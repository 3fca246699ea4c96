package simulator

import (
	"fmt"
	"io"
	"math"
	"text/tabwriter"
	"time"

	"github.com/progress-planner/planner/pkg/forecast"
	"github.com/progress-planner/planner/pkg/report"
)

// The capacity backtest scores the report's capacity forecast
// (report.FreedWithin, the function `planner report` prints) on a
// simulated cluster. The planner policy runs as in `planner simulate`; at
// sampled instants every ClusterQueue's running jobs are forecast as of
// that instant from their own histories (forecast.Fit, as the live report
// re-forecasts each ProgressForecast's stored history as of now), the
// predicted interval of GPUs freed within the horizon is computed, and,
// after the run, compared with the GPUs of those jobs that actually
// completed within the horizon.

// CapacityBacktestOptions configure the backtest.
type CapacityBacktestOptions struct {
	// Horizon of the prediction (seconds; 1 h).
	Horizon float64
	// Every is the sampling interval (seconds; 1 h). A sample is taken at
	// the first simulation event at or after each multiple of Every (the
	// simulation has no other instants at which its state is defined).
	Every float64
}

// CapacitySample is one queue at one instant.
type CapacitySample struct {
	T          float64      `json:"t"`
	Queue      string       `json:"queue"`
	Running    int          `json:"running"`
	UnknownETA int          `json:"unknownETA"`
	Predicted  report.Freed `json:"predicted"`
	Actual     int          `json:"actual"`
	Inside     bool         `json:"inside"`
	ids        []int
}

// CapacityBacktestResult is the outcome.
type CapacityBacktestResult struct {
	Scenario string           `json:"scenario"`
	Horizon  float64          `json:"horizon"`
	Every    float64          `json:"every"`
	Interval float64          `json:"interval"`
	Samples  []CapacitySample `json:"samples"`
	// Coverage over all samples (a queue with at least one running job),
	// and over the non-trivial ones (something freed or predicted).
	N, Inside, Below, Above  int
	Coverage                 float64 `json:"coverage"`
	NonTrivial, NonTrivialIn int
	NonTrivialCoverage       float64 `json:"nonTrivialCoverage"`
	MeanAbsErrMedian         float64 `json:"meanAbsErrMedian"`
	MeanWidth                float64 `json:"meanWidth"`
	Fits                     int     `json:"fits"`
	Wall                     float64 `json:"wallSeconds"`
	// Run is the planner run's summary (the probe must not change it).
	Run Summary `json:"run"`
}

// capacityProbe wraps the planner policy: before every policy call it
// takes the samples that are due.
type capacityProbe struct {
	policy
	o       CapacityBacktestOptions
	next    float64
	samples []CapacitySample
	fits    int
}

func (p *capacityProbe) sample(e *engine) {
	if e.now < p.next {
		return
	}
	iv := e.opt.Forecast.Interval
	for _, q := range e.cl.queues {
		var running []report.RunningJob
		s := CapacitySample{T: e.now, Queue: q.spec.Name}
		for _, j := range q.running {
			e.feedReports(j, e.now)
			var eta forecast.Estimate
			if j.hist != nil {
				eta = forecast.Fit(j.hist, j.Curve.Objective, e.now, e.opt.Forecast).ETA
				p.fits++
			}
			if !eta.Known {
				s.UnknownETA++
			}
			running = append(running, report.RunningJob{GPUs: j.GPUs, ETA: eta})
			s.ids = append(s.ids, j.ID)
		}
		if len(running) == 0 {
			continue
		}
		s.Running = len(running)
		s.Predicted = report.FreedWithin(running, p.o.Horizon, iv)
		p.samples = append(p.samples, s)
	}
	p.next = (math.Floor(e.now/p.o.Every) + 1) * p.o.Every
}

func (p *capacityProbe) admitted(e *engine, j *jobState) float64 {
	p.sample(e)
	return p.policy.admitted(e, j)
}

func (p *capacityProbe) tick(e *engine, j *jobState) float64 {
	p.sample(e)
	return p.policy.tick(e, j)
}

func (p *capacityProbe) evicted(e *engine, j *jobState, byPlanner bool) {
	p.sample(e)
	p.policy.evicted(e, j, byPlanner)
}

// CapacityBacktest runs the planner policy on in with the probe and scores
// the samples. The engine is set up as Run sets it up.
func CapacityBacktest(in *Input, opt Options, o CapacityBacktestOptions) (*CapacityBacktestResult, error) {
	if !(o.Horizon > 0) || !(o.Every > 0) {
		return nil, fmt.Errorf("capacity backtest: horizon %v and sampling interval %v must be positive", o.Horizon, o.Every)
	}
	if err := opt.Validate(); err != nil {
		return nil, err
	}
	inner, err := newPolicy(PolicyPlanner, &opt)
	if err != nil {
		return nil, err
	}
	probe := &capacityProbe{policy: inner, o: o}
	e, err := newEngine(in, opt, probe, PolicyPlanner)
	if err != nil {
		return nil, err
	}
	start := time.Now()
	e.loop()
	r := &CapacityBacktestResult{Scenario: in.Name, Horizon: o.Horizon, Every: o.Every, Interval: opt.Forecast.Interval,
		Fits: probe.fits, Wall: time.Since(start).Seconds()}
	r.Run = e.result(PolicyPlanner, r.Wall).Summary
	for _, s := range probe.samples {
		for _, id := range s.ids {
			j := e.jobs[id]
			if j.endKind == endCompleted && j.end > s.T && j.end <= s.T+o.Horizon {
				s.Actual += j.GPUs
			}
		}
		s.Inside = s.Actual >= s.Predicted.Lo && s.Actual <= s.Predicted.Hi
		r.N++
		switch {
		case s.Inside:
			r.Inside++
		case s.Actual < s.Predicted.Lo:
			r.Below++
		default:
			r.Above++
		}
		if s.Actual > 0 || s.Predicted.Hi > 0 {
			r.NonTrivial++
			if s.Inside {
				r.NonTrivialIn++
			}
		}
		r.MeanAbsErrMedian += math.Abs(float64(s.Actual - s.Predicted.Median))
		r.MeanWidth += float64(s.Predicted.Hi - s.Predicted.Lo)
		s.ids = nil
		r.Samples = append(r.Samples, s)
	}
	if r.N > 0 {
		r.Coverage = float64(r.Inside) / float64(r.N)
		r.MeanAbsErrMedian /= float64(r.N)
		r.MeanWidth /= float64(r.N)
	}
	if r.NonTrivial > 0 {
		r.NonTrivialCoverage = float64(r.NonTrivialIn) / float64(r.NonTrivial)
	}
	return r, nil
}

// WriteTable prints the backtest's summary and per-queue coverage.
func (r *CapacityBacktestResult) WriteTable(w io.Writer) error {
	fmt.Fprintf(w, "capacity backtest: scenario %s, planner policy; GPUs freed by completions within %s, predicted %.0f%% interval (report.FreedWithin), sampled every %s\n\n",
		r.Scenario, Seconds(r.Horizon), r.Interval*100, Seconds(r.Every))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "queue\tsamples\tinside\tcoverage\tbelow lo\tabove hi\tnon-trivial\tcoverage (non-trivial)")
	type agg struct{ n, in, below, above, nt, ntIn int }
	per := map[string]*agg{}
	var order []string
	for _, s := range r.Samples {
		a := per[s.Queue]
		if a == nil {
			a = &agg{}
			per[s.Queue] = a
			order = append(order, s.Queue)
		}
		a.n++
		if s.Inside {
			a.in++
		} else if s.Actual < s.Predicted.Lo {
			a.below++
		} else {
			a.above++
		}
		if s.Actual > 0 || s.Predicted.Hi > 0 {
			a.nt++
			if s.Inside {
				a.ntIn++
			}
		}
	}
	pct := func(a, b int) string {
		if b == 0 {
			return "—"
		}
		return fmt.Sprintf("%.1f%%", 100*float64(a)/float64(b))
	}
	for _, q := range order {
		a := per[q]
		fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%d\t%d\t%d\t%s\n", q, a.n, a.in, pct(a.in, a.n), a.below, a.above, a.nt, pct(a.ntIn, a.nt))
	}
	fmt.Fprintf(tw, "all\t%d\t%d\t%s\t%d\t%d\t%d\t%s\n", r.N, r.Inside, pct(r.Inside, r.N), r.Below, r.Above, r.NonTrivial, pct(r.NonTrivialIn, r.NonTrivial))
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintf(w, "\nmean |actual − predicted median| %.2f GPUs; mean interval width %.2f GPUs; %d forecasts (%.1fs)\n",
		r.MeanAbsErrMedian, r.MeanWidth, r.Fits, r.Wall)
	return err
}
