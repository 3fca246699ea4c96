package simulator

import (
	"fmt"
	"html/template"
	"image/color"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"

	"github.com/progress-planner/planner/internal/htmlpage"
	"github.com/progress-planner/planner/internal/svgplot"
)

// sweepColumns are the metrics of the sweep's table and charts (the issue's
// list: queueing p50/p95, mean JCT, plateau GPU-hours, stops before the
// true plateau).
var sweepColumns = []string{"queueing.p50", "queueing.p95", "jct.mean", "plateau.gpuh", "early-stops"}

// WriteJSON writes the sweep as indented JSON (the same encoder as a
// comparison's).
func (sw *Sweep) WriteJSON(w io.Writer) error {
	return writeIndentedJSON(w, sw)
}

// GoalSentences states the goal's answers, one line each.
func (sw *Sweep) GoalSentences() []string {
	if sw.Goal == nil {
		return nil
	}
	var out []string
	for _, a := range sw.Goal.Answers {
		out = append(out, a.Sentence(sw.Goal.Goal, sw.Spec.Axes[0].Knob))
	}
	return out
}

func (sw *Sweep) intro() string {
	s := fmt.Sprintf("Sweep of %s: %d jobs; %d points × %d seeds × %d policies = %d runs",
		sw.Scenario, sw.Jobs, sw.Spec.Points(), len(sw.Spec.Seeds), len(sw.Spec.Policies), sw.Spec.Units()*len(sw.Spec.Policies))
	if sw.Workers > 0 {
		s += fmt.Sprintf(" in %.1f s on %d workers", sw.WallSeconds, sw.Workers)
	}
	if len(sw.Spec.Fixed) > 0 {
		s += "; fixed: " + joinSettings(sw.Spec.Fixed)
	}
	return s
}

// cell is a metric across seeds: the mean, and [min–max] with several
// seeds.
func (sw *Sweep) cell(name string, sp Spread) string {
	m, _ := sweepMetric(name)
	prec := 1
	if m.Hours {
		prec = 2
	}
	if name == "early-stops" {
		prec = 0
	}
	f := func(x float64) string { return strconv.FormatFloat(x, 'f', prec, 64) }
	if len(sp.Values) < 2 {
		return f(sp.Mean)
	}
	return fmt.Sprintf("%s [%s–%s]", f(sp.Mean), f(sp.Min), f(sp.Max))
}

// WriteTable writes one row per point and policy: the settings, the
// metrics (mean [min–max] across seeds) and the goal's answer.
func (sw *Sweep) WriteTable(w io.Writer) error {
	fmt.Fprintln(w, sw.intro())
	fmt.Fprintf(w, "seeds %s; times in hours; with several seeds: mean [min–max]\n\n", seedList(sw.Spec.Seeds))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	h := ""
	for _, a := range sw.Spec.Axes {
		h += a.Knob + "\t"
	}
	h += "policy\t"
	for _, c := range sweepColumns {
		m, _ := sweepMetric(c)
		h += m.Label + "\t"
	}
	fmt.Fprintln(tw, h+"unfinished\t")
	for _, ps := range sw.Points {
		line := ""
		for _, s := range ps.Settings[len(sw.Spec.Fixed):] {
			line += s.Value + "\t"
		}
		line += ps.Policy + "\t"
		for _, c := range sweepColumns {
			line += sw.cell(c, ps.Metrics[c]) + "\t"
		}
		fmt.Fprintln(tw, line+strconv.Itoa(ps.Unfinished)+"\t")
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if sw.Goal != nil {
		fmt.Fprintf(w, "\nGoal %s\n", sw.Goal.Goal.Text)
		for _, s := range sw.GoalSentences() {
			fmt.Fprintf(w, "  %s\n", s)
		}
	}
	return nil
}

func seedList(seeds []uint64) string {
	parts := make([]string, len(seeds))
	for i, s := range seeds {
		parts[i] = strconv.FormatUint(s, 10)
	}
	return strings.Join(parts, ",")
}

// Plots are one chart per metric against the first axis: a line per
// policy (and second-axis value), error bars from the seeds' min to max,
// the goal's bound dashed on its metric's chart.
func (sw *Sweep) Plots() ([]NamedSVG, error) {
	ax := sw.Spec.Axes
	xs, numeric := axisX(ax[0])
	n1 := 1
	if len(ax) == 2 {
		n1 = len(ax[1].Values)
	}
	var out []NamedSVG
	for _, name := range sweepColumns {
		m, _ := sweepMetric(name)
		p := plot.New()
		p.X.Label.Text = ax[0].Knob
		if !numeric {
			p.X.Label.Text += " (" + strings.Join(ax[0].Values, ", ") + ")"
		}
		p.Y.Label.Text = m.Label
		p.Y.Min = 0
		ch := svgplot.Chart{Title: m.Label + " against " + ax[0].Knob, Plot: p, Width: 6 * vg.Inch, Height: 2.9 * vg.Inch}
		k := 0
		for pi, pol := range sw.Spec.Policies {
			for j := range n1 {
				pts := make(plotter.XYs, len(xs))
				errs := make(plotter.YErrors, len(xs))
				for i := range xs {
					sp := sw.Points[(i*n1+j)*len(sw.Spec.Policies)+pi].Metrics[name]
					pts[i] = plotter.XY{X: xs[i], Y: sp.Mean}
					errs[i] = struct{ Low, High float64 }{sp.Mean - sp.Min, sp.Max - sp.Mean}
				}
				l, sc, err := plotter.NewLinePoints(pts)
				if err != nil {
					return nil, err
				}
				col := palette[k%len(palette)]
				k++
				l.Color, sc.Color = col, col
				eb, err := plotter.NewYErrorBars(errPoints{pts, errs})
				if err != nil {
					return nil, err
				}
				eb.Color = col
				label := pol
				if len(ax) == 2 {
					label += " " + ax[1].Knob + "=" + ax[1].Values[j]
				}
				ch.Series = append(ch.Series, svgplot.Series{Label: label, Class: "policy", Plotter: l},
					svgplot.Series{Class: "points", Plotter: sc}, svgplot.Series{Class: "seed-range", Plotter: eb})
			}
		}
		if g := sw.Goal; g != nil && g.Goal.Metric == name && len(xs) > 0 {
			gl, err := plotter.NewLine(plotter.XYs{{X: xs[0], Y: g.Goal.Value}, {X: xs[len(xs)-1], Y: g.Goal.Value}})
			if err != nil {
				return nil, err
			}
			gl.Color = color.Gray{Y: 100}
			gl.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
			ch.Series = append(ch.Series, svgplot.Series{Label: "goal " + g.Goal.Text, Class: "goal", Plotter: gl})
		}
		svg, err := ch.SVG()
		if err != nil {
			return nil, err
		}
		out = append(out, NamedSVG{Title: ch.Title, SVG: svg})
	}
	return out, nil
}

// errPoints are points with their error bars (plotter.YErrorBars' input).
type errPoints struct {
	plotter.XYs
	plotter.YErrors
}

func (e errPoints) Len() int { return len(e.XYs) }

// axisX places an axis's values on the x axis: their numbers when every
// value is one (+8 reads as 8), else their positions 0, 1, ...
func axisX(a Axis) ([]float64, bool) {
	xs := make([]float64, len(a.Values))
	for i, v := range a.Values {
		x, err := strconv.ParseFloat(v, 64)
		if err != nil {
			for i := range xs {
				xs[i] = float64(i)
			}
			return xs, false
		}
		xs[i] = x
	}
	return xs, true
}

var sweepTmpl = htmlpage.WithCell(template.Must(template.New("sweep").Parse(`<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>planner simulate --sweep: {{.S.Scenario}}</title>
<style>{{.CSS}}</style></head><body>
<h1>planner simulate --sweep: {{.S.Scenario}}</h1>
<p>{{.S.Source}}<br>{{.Intro}}; seeds {{.Seeds}}.</p>
{{if .Goal}}<section id="goal"><h2>Goal {{.S.Goal.Goal.Text}}</h2><ul>{{range .Goal}}<li>{{.}}</li>{{end}}</ul></section>{{end}}
<h2>Results</h2>
<p><small>Times in hours; with several seeds: mean [min–max] across seeds.</small></p>
<table id="sweep-table"><thead><tr>{{range .Head}}<th>{{.}}</th>{{end}}</tr></thead><tbody>
{{range .Rows}}<tr>{{range .}}{{template "cell" .}}{{end}}</tr>
{{end}}</tbody></table>
<h2>Charts</h2>
<div class="charts">{{range .Plots}}<figure class="chart sweep-chart">{{.SVG}}</figure>
{{end}}</div>
<p><small>Generated by planner simulate (Progress Planner) at {{.Generated}}.</small></p>
</body></html>
`)))

// WriteHTML writes one self-contained page: the goal's answer, the table
// and the charts (inline SVG).
func (sw *Sweep) WriteHTML(w io.Writer) error {
	plots, err := sw.Plots()
	if err != nil {
		return err
	}
	var head []string
	for _, a := range sw.Spec.Axes {
		head = append(head, a.Knob)
	}
	head = append(head, "policy")
	for _, c := range sweepColumns {
		m, _ := sweepMetric(c)
		head = append(head, m.Label)
	}
	head = append(head, "unfinished")
	var rows [][]htmlpage.Cell
	for _, ps := range sw.Points {
		var r []htmlpage.Cell
		for _, s := range ps.Settings[len(sw.Spec.Fixed):] {
			r = append(r, htmlpage.Cell{Text: s.Value})
		}
		r = append(r, htmlpage.Cell{Text: ps.Policy})
		for _, c := range sweepColumns {
			r = append(r, htmlpage.NumCell(sw.cell(c, ps.Metrics[c])))
		}
		rows = append(rows, append(r, htmlpage.Cell{Text: strconv.Itoa(ps.Unfinished), Num: true}))
	}
	return sweepTmpl.Execute(w, struct {
		S            *Sweep
		Intro, Seeds string
		Goal         []string
		Head         []string
		Rows         [][]htmlpage.Cell
		Plots        []NamedSVG
		Generated    string
		CSS          template.CSS
	}{sw, sw.intro(), seedList(sw.Spec.Seeds), sw.GoalSentences(), head, rows, plots, time.Now().UTC().Format(time.RFC3339), htmlpage.CSS})
}
