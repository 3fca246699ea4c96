package report

import (
	"fmt"
	"html/template"
	"image/color"
	"math"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"

	"github.com/progress-planner/planner/internal/svgplot"
	"github.com/progress-planner/planner/internal/textsafe"
)

// jobChart is what one job's chart draws: the objective's observations
// against hours since the first report, and the forecast from now to the
// planned end (a fan from the current value to the predicted final
// interval), with the plateau onset marked.
type jobChart struct {
	Key, Metric string
	X, Y        []float64 // observations (hours, metric units)
	Now         float64   // hours
	End         float64   // hours (now + ETA); NaN when unknown
	Current     float64
	Predicted   *Range
	Onset       float64 // hours; NaN when none
}

func newJobChart(row JobRow, j *JobInput, ended bool) *jobChart {
	f := j.Forecast
	ch := &jobChart{Key: row.Key(), Metric: f.Objective.Metric, End: math.NaN(), Current: math.NaN(), Onset: math.NaN(),
		Predicted: row.Predicted}
	t0 := f.Now
	if h := j.History; h != nil && h.Len() > 0 {
		t0 = h.Points()[0].T
		for i, p := range h.Points() {
			if v := h.Value(i, ch.Metric); !math.IsNaN(v) && !math.IsInf(v, 0) {
				ch.X = append(ch.X, (p.T-t0)/3600)
				ch.Y = append(ch.Y, v)
			}
		}
	}
	ch.Now = (f.Now - t0) / 3600
	if f.ETA.Known && !ended {
		ch.End = ch.Now + f.ETA.Value/3600
	}
	if f.Current != nil {
		ch.Current = *f.Current
	} else if len(ch.Y) > 0 {
		ch.Current = ch.Y[len(ch.Y)-1]
	}
	if f.PlateauOnset != nil {
		ch.Onset = (*f.PlateauOnset - t0) / 3600
	}
	return ch
}

var (
	colObserved = color.RGBA{31, 119, 180, 255}
	colBand     = color.NRGBA{255, 127, 14, 90} // not premultiplied: RGBA would need R <= A
	colForecast = color.RGBA{255, 127, 14, 255}
	colPlateau  = color.RGBA{214, 39, 40, 255}
	colGray     = color.RGBA{128, 128, 128, 255}
)

func dashed(l *plotter.Line, c color.Color) {
	l.Color = c
	l.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
}

func vline(x, y0, y1 float64) (*plotter.Line, error) {
	return plotter.NewLine(plotter.XYs{{X: x, Y: y0}, {X: x, Y: y1}})
}

// svg renders the job's chart: the legend and title sit above the plot
// (svgplot.Chart), so neither covers the curve.
func (c *jobChart) svg() (template.HTML, error) {
	p := plot.New()
	p.X.Label.Text = "hours since the first report"
	p.Y.Label.Text = textsafe.Line(c.Metric)
	ch := svgplot.Chart{Title: textsafe.Line(c.Key), Plot: p, Width: 6 * vg.Inch, Height: 2.9 * vg.Inch}
	ylo, yhi := math.Inf(1), math.Inf(-1)
	grow := func(v float64) {
		if !math.IsNaN(v) && !math.IsInf(v, 0) {
			ylo, yhi = math.Min(ylo, v), math.Max(yhi, v)
		}
	}
	for _, v := range c.Y {
		grow(v)
	}
	if len(c.X) > 0 {
		pts := make(plotter.XYs, len(c.X))
		for i := range c.X {
			pts[i].X, pts[i].Y = c.X[i], c.Y[i]
		}
		l, err := plotter.NewLine(pts)
		if err != nil {
			return "", fmt.Errorf("chart %s: %w", c.Key, err)
		}
		l.Color = colObserved
		ch.Series = append(ch.Series, svgplot.Series{Label: "observed", Class: "observed", Plotter: l})
	}
	// An ended run has nothing left to forecast (newJobChart leaves End
	// unknown), so no fan is drawn for it.
	if c.Predicted != nil && !math.IsNaN(c.End) && !math.IsNaN(c.Current) {
		grow(c.Predicted.Lo)
		grow(c.Predicted.Hi)
		// The fan starts at the last observation, not at now: when a live
		// job's ETA has run down to now (a silent stretch since its last
		// report), a fan from now would have no width and vanish.
		x0 := c.Now
		if n := len(c.X); n > 0 && c.X[n-1] < x0 {
			x0 = c.X[n-1]
		}
		band, err := plotter.NewPolygon(plotter.XYs{{X: x0, Y: c.Current}, {X: c.End, Y: c.Predicted.Lo}, {X: c.End, Y: c.Predicted.Hi}})
		if err != nil {
			return "", fmt.Errorf("chart %s: %w", c.Key, err)
		}
		band.Color = colBand
		band.LineStyle.Width = 0
		mid, err := plotter.NewLine(plotter.XYs{{X: x0, Y: c.Current}, {X: c.End, Y: c.Predicted.Value}})
		if err != nil {
			return "", fmt.Errorf("chart %s: %w", c.Key, err)
		}
		dashed(mid, colForecast)
		ch.Series = append(ch.Series, svgplot.Series{Label: "forecast (interval)", Class: "forecast-band", Plotter: band},
			svgplot.Series{Class: "forecast", Plotter: mid})
	}
	if math.IsInf(ylo, 1) {
		ylo, yhi = 0, 1
	}
	if yhi <= ylo {
		yhi = ylo + 1
	}
	if !math.IsNaN(c.Onset) {
		l, err := vline(c.Onset, ylo, yhi)
		if err != nil {
			return "", fmt.Errorf("chart %s: %w", c.Key, err)
		}
		dashed(l, colPlateau)
		l.Width = vg.Points(1.5)
		ch.Series = append(ch.Series, svgplot.Series{Label: "plateau onset", Class: "plateau-onset", Plotter: l})
	}
	nl, err := vline(c.Now, ylo, yhi)
	if err != nil {
		return "", fmt.Errorf("chart %s: %w", c.Key, err)
	}
	nl.Color = colGray
	ch.Series = append(ch.Series, svgplot.Series{Label: "now", Class: "now", Plotter: nl})
	return ch.SVG()
}

// queueSVG renders a queue's capacity timeline: free GPUs over the next
// 24 h (median and the central interval), the quota and the waiting demand.
func queueSVG(q *QueueRow, iv float64) (template.HTML, error) {
	tl := q.timeline
	p := plot.New()
	p.X.Label.Text = "hours from now"
	p.Y.Label.Text = "GPUs"
	p.Y.Min = 0
	ch := svgplot.Chart{Title: "ClusterQueue " + textsafe.Line(q.Name) + ": free GPUs forecast", Plot: p,
		Width: 6 * vg.Inch, Height: 2.9 * vg.Inch}
	n := len(tl.Hours)
	poly := make(plotter.XYs, 0, 2*n)
	med := make(plotter.XYs, n)
	for i := 0; i < n; i++ {
		poly = append(poly, plotter.XY{X: tl.Hours[i], Y: tl.Hi[i]})
		med[i] = plotter.XY{X: tl.Hours[i], Y: tl.Median[i]}
	}
	for i := n - 1; i >= 0; i-- {
		poly = append(poly, plotter.XY{X: tl.Hours[i], Y: tl.Lo[i]})
	}
	band, err := plotter.NewPolygon(poly)
	if err != nil {
		return "", fmt.Errorf("queue chart %s: %w", q.Name, err)
	}
	band.Color = color.NRGBA{44, 160, 44, 70}
	band.LineStyle.Width = 0
	ch.Series = append(ch.Series, svgplot.Series{Label: fmt.Sprintf("free GPUs, %.0f%% interval", iv*100), Class: "free-band", Plotter: band})
	ml, err := plotter.NewLine(med)
	if err != nil {
		return "", fmt.Errorf("queue chart %s: %w", q.Name, err)
	}
	ml.Color = color.RGBA{44, 120, 44, 255}
	ml.Width = vg.Points(1.5)
	ch.Series = append(ch.Series, svgplot.Series{Label: "free GPUs, median", Class: "free-median", Plotter: ml})
	last := 24.0
	// Headroom above the highest line keeps it off the plot's top edge.
	top := 0.0
	if tl.Quota > 0 {
		ql, err := plotter.NewLine(plotter.XYs{{X: 0, Y: tl.Quota}, {X: last, Y: tl.Quota}})
		if err != nil {
			return "", fmt.Errorf("queue chart %s: %w", q.Name, err)
		}
		dashed(ql, colGray)
		ch.Series = append(ch.Series, svgplot.Series{Label: "quota", Class: "quota", Plotter: ql})
		top = math.Max(top, tl.Quota*1.1)
	}
	if tl.Waiting > 0 {
		wl, err := plotter.NewLine(plotter.XYs{{X: 0, Y: tl.Waiting}, {X: last, Y: tl.Waiting}})
		if err != nil {
			return "", fmt.Errorf("queue chart %s: %w", q.Name, err)
		}
		dashed(wl, colPlateau)
		ch.Series = append(ch.Series, svgplot.Series{Label: "waiting demand", Class: "waiting", Plotter: wl})
		top = math.Max(top, tl.Waiting*1.1)
	}
	if top > 0 {
		p.Y.Max = top
	}
	return ch.SVG()
}
