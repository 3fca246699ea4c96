// Package svgplot renders gonum/plot plots as inline SVG for self-contained
// HTML pages (the simulator's report and planner report): no files, no
// external resources, so a page can be mailed or served as one document.
//
// Chart lays a plot out so that nothing covers the data: the title is a
// band at the top (shortened to its width, the full text in a <title>
// tooltip), the legend a band below it (entries flowed into rows), and the
// plot underneath. Each part is its own SVG group with a class
// (chart-title, chart-legend, chart-frame, chart-series), so a browser test
// can measure them.
package svgplot

import (
	"bytes"
	"fmt"
	"html/template"
	"math"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/text"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgsvg"
)

// Series is one plotted layer of a Chart.
type Series struct {
	// Label is the legend text; "" keeps the series out of the legend.
	Label string
	// Class names the layer (data-series attribute), for tests and CSS.
	Class   string
	Plotter plot.Plotter
}

// Chart is a plot whose title and legend are laid out beside the data,
// never on it.
type Chart struct {
	Title string
	// Plot holds the axes (labels, ranges, ticks); its own title, legend
	// and plotters are not drawn: the chart draws Title and Series.
	Plot          *plot.Plot
	Series        []Series
	Width, Height vg.Length
}

const (
	pad        = vg.Length(4)
	swatchW    = vg.Length(18)
	swatchGap  = vg.Length(4)
	entryGap   = vg.Length(12)
	legendSize = vg.Length(10)
	// slack covers a browser rendering the text in a wider fallback font
	// than the metrics gonum measures with (Liberation): widths are
	// planned this much larger.
	slack = 1.2
)

func textStyle(size vg.Length, xa text.XAlignment) text.Style {
	return text.Style{Font: font.From(plot.DefaultFont, size), XAlign: xa, YAlign: draw.YCenter,
		Handler: plot.DefaultTextHandler}
}

// Fit shortens s to at most w wide in sty (planned with slack), cutting
// the middle — both ends of a name (its namespace, its run suffix) tell
// jobs apart — and marking the cut with "…". It reports whether s was cut.
func Fit(sty text.Style, s string, w vg.Length) (string, bool) {
	width := func(t string) vg.Length { return vg.Length(float64(sty.Width(t)) * slack) }
	if width(s) <= w {
		return s, false
	}
	r := []rune(s)
	for keep := len(r) - 1; keep > 0; keep-- {
		head := (keep + 1) / 2
		t := string(r[:head]) + "…" + string(r[len(r)-(keep-head):])
		if width(t) <= w {
			return t, true
		}
	}
	return "…", true
}

type legendEntry struct {
	label string
	th    plot.Thumbnailer
	x     vg.Length
	row   int
}

// layoutLegend flows the labelled series into rows of width w.
func layoutLegend(series []Series, sty text.Style, w vg.Length) ([]legendEntry, int) {
	var out []legendEntry
	x, row := vg.Length(0), 0
	for _, s := range series {
		th, ok := s.Plotter.(plot.Thumbnailer)
		if s.Label == "" || !ok {
			continue
		}
		ew := swatchW + swatchGap + vg.Length(float64(sty.Width(s.Label))*slack)
		if x > 0 && x+ew > w {
			x, row = 0, row+1
		}
		out = append(out, legendEntry{label: s.Label, th: th, x: x, row: row})
		x += ew + entryGap
	}
	if len(out) == 0 {
		return nil, 0
	}
	return out, row + 1
}

// SVG renders the chart as one <svg> element. It sets Plot's axis ranges
// from the series and shortens its axis labels to fit.
func (c *Chart) SVG() (template.HTML, error) {
	w, h := c.Width, c.Height
	titleSty := textStyle(12, draw.XCenter)
	legendSty := textStyle(legendSize, draw.XLeft)
	var b strings.Builder
	fmt.Fprintf(&b, `<svg class="chart" xmlns="http://www.w3.org/2000/svg" width="%gpt" height="%gpt" viewBox="0 0 %g %g">`+"\n",
		w.Points(), h.Points(), w.Points(), h.Points())
	top := pad
	if c.Title != "" {
		th := vg.Length(18)
		title, _ := Fit(titleSty, c.Title, w-2*pad)
		cv := vgsvg.New(w, th)
		dc := draw.New(cv)
		dc.FillText(titleSty, vg.Point{X: w / 2, Y: th / 2}, title)
		inner, err := innerSVG(cv)
		if err != nil {
			return "", err
		}
		// The tooltip holds the full title, shortened or not.
		fmt.Fprintf(&b, `<g class="chart-title" transform="translate(0,%g)"><title>%s</title><svg width="%g" height="%g" viewBox="0 0 %g %g">%s</svg></g>`+"\n",
			top.Points(), template.HTMLEscapeString(c.Title), w.Points(), th.Points(), w.Points(), th.Points(), inner)
		top += th
	}
	entries, rows := layoutLegend(c.Series, legendSty, w-2*pad)
	if rows > 0 {
		rowH := vg.Length(14)
		lh := rowH * vg.Length(rows)
		cv := vgsvg.New(w-2*pad, lh)
		dc := draw.New(cv)
		for _, e := range entries {
			yc := lh - rowH*vg.Length(e.row) - rowH/2 // canvas y grows upwards
			sc := dc
			sc.Rectangle = vg.Rectangle{Min: vg.Point{X: e.x, Y: yc - 4}, Max: vg.Point{X: e.x + swatchW, Y: yc + 4}}
			e.th.Thumbnail(&sc)
			dc.FillText(legendSty, vg.Point{X: e.x + swatchW + swatchGap, Y: yc}, e.label)
		}
		inner, err := innerSVG(cv)
		if err != nil {
			return "", err
		}
		fmt.Fprintf(&b, `<g class="chart-legend" transform="translate(%g,%g)"><svg width="%g" height="%g" viewBox="0 0 %g %g">%s</svg></g>`+"\n",
			pad.Points(), top.Points(), (w - 2*pad).Points(), lh.Points(), (w - 2*pad).Points(), lh.Points(), inner)
		top += lh
	}
	top += pad
	ph := h - top
	if ph < 40 {
		return "", fmt.Errorf("chart %q: %gpt left for the plot under its title and legend", c.Title, ph.Points())
	}
	// The axes take their ranges from the data, as plot.Add would, but
	// the data is drawn in its own layers over them.
	p := c.Plot
	for _, s := range c.Series {
		if r, ok := s.Plotter.(plot.DataRanger); ok {
			xmin, xmax, ymin, ymax := r.DataRange()
			p.X.Min, p.X.Max = math.Min(p.X.Min, xmin), math.Max(p.X.Max, xmax)
			p.Y.Min, p.Y.Max = math.Min(p.Y.Min, ymin), math.Max(p.Y.Max, ymax)
		}
	}
	// Axis labels are tenant text too (a metric's name): shortened to
	// the plot's width and height so they never run off the chart.
	p.X.Label.Text, _ = Fit(p.X.Label.TextStyle, p.X.Label.Text, w*3/4)
	p.Y.Label.Text, _ = Fit(p.Y.Label.TextStyle, p.Y.Label.Text, ph*3/4)
	frame := vgsvg.New(w, ph)
	p.Draw(draw.New(frame))
	inner, err := innerSVG(frame)
	if err != nil {
		return "", err
	}
	fmt.Fprintf(&b, `<svg class="chart-frame" x="0" y="%g" width="%g" height="%g" viewBox="0 0 %g %g">%s</svg>`+"\n",
		top.Points(), w.Points(), ph.Points(), w.Points(), ph.Points(), inner)
	for _, s := range c.Series {
		cv := vgsvg.New(w, ph)
		s.Plotter.Plot(p.DataCanvas(draw.New(cv)), p)
		inner, err := innerSVG(cv)
		if err != nil {
			return "", err
		}
		fmt.Fprintf(&b, `<svg class="chart-series" data-series="%s" x="0" y="%g" width="%g" height="%g" viewBox="0 0 %g %g">%s</svg>`+"\n",
			template.HTMLEscapeString(s.Class), top.Points(), w.Points(), ph.Points(), w.Points(), ph.Points(), inner)
	}
	b.WriteString("</svg>")
	// Everything inside comes from gonum/plot (numbers, and labels vgsvg
	// escapes) or is escaped above, so it is safe to embed as HTML.
	return template.HTML(b.String()), nil
}

// innerSVG is what vgsvg drew, without its prolog and root element, to
// nest in the chart's own elements.
func innerSVG(cv *vgsvg.Canvas) (string, error) {
	var b bytes.Buffer
	if _, err := cv.WriteTo(&b); err != nil {
		return "", fmt.Errorf("render svg: %w", err)
	}
	s := b.String()
	i := strings.Index(s, "<svg")
	if i < 0 {
		return "", fmt.Errorf("render svg: no <svg> element")
	}
	j := strings.Index(s[i:], ">")
	k := strings.LastIndex(s, "</svg>")
	if j < 0 || k < i+j {
		return "", fmt.Errorf("render svg: malformed <svg> element")
	}
	return strings.TrimSpace(s[i+j+1 : k]), nil
}
