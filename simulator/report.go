package simulator

import (
	"bytes"
	"encoding/json"
	"fmt"
	"html/template"
	"image/color"
	"io"
	"math"
	"strings"
	"text/tabwriter"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"

	"github.com/progress-planner/planner/internal/htmlpage"
	"github.com/progress-planner/planner/internal/svgplot"
)

// Comparison is the outcome of running several policies on identical
// arrivals and curves.
type Comparison struct {
	Scenario    string   `json:"scenario"`
	Source      string   `json:"source"`
	Jobs        int      `json:"jobs"`
	CapacityGPU int      `json:"capacityGPUs"`
	Queues      []Queue  `json:"queues"`
	Notes       []string `json:"notes,omitempty"`
	// Headline is what the planner changed against kueue, in plain words.
	Headline []string  `json:"headline,omitempty"`
	Settings Settings  `json:"settings"`
	Results  []*Result `json:"results"`
	// VsKueue and VsOracle are each policy's differences from kueue and
	// oracle (when those ran).
	VsKueue  []Delta `json:"vsKueue,omitempty"`
	VsOracle []Delta `json:"vsOracle,omitempty"`
	Checks   []Check `json:"checks,omitempty"`
	// JobChanges lists, per policy, the jobs a what-if stopped or
	// delayed against the same run without it (planner simulate
	// --job-changes).
	JobChanges []PolicyJobChanges `json:"jobChanges,omitempty"`
}

// Settings records what a comparison ran with.
type Settings struct {
	Seed               uint64    `json:"seed"`
	Deactivate         bool      `json:"deactivate"`
	CheckpointInterval Seconds   `json:"checkpointInterval"`
	Reports            string    `json:"reports"`
	Cadence            Cadence   `json:"cadence"`
	LAS                LASConfig `json:"las"`
	HistoryMaxPoints   int       `json:"historyMaxPoints"`
}

// Compare runs each policy on in, one after the other.
func Compare(in *Input, policies []string, seed uint64, opt Options) (*Comparison, error) {
	c := &Comparison{
		Scenario: in.Name, Source: in.Source, Jobs: len(in.Jobs), CapacityGPU: in.Capacity(), Queues: in.Queues, Notes: in.Notes,
		Settings: Settings{
			Seed: seed, Deactivate: opt.Deactivate, CheckpointInterval: Seconds(opt.Checkpoint),
			Reports: fmt.Sprintf("every clamp(duration/%d, %s, %s)", opt.ReportsPerRun, Seconds(opt.ReportMin), Seconds(opt.ReportMax)),
			Cadence: opt.Cadence, LAS: opt.LAS, HistoryMaxPoints: opt.History.MaxPoints,
		},
	}
	byName := map[string]Summary{}
	for _, p := range policies {
		r, err := Run(in, p, opt)
		if err != nil {
			return nil, fmt.Errorf("policy %s: %w", p, err)
		}
		c.Results = append(c.Results, r)
		byName[p] = r.Summary
	}
	for _, ref := range []string{PolicyKueue, PolicyOracle} {
		rs, ok := byName[ref]
		if !ok {
			continue
		}
		for _, r := range c.Results {
			if r.Summary.Policy == ref {
				continue
			}
			d := delta(r.Summary, rs)
			if ref == PolicyKueue {
				c.VsKueue = append(c.VsKueue, d)
			} else {
				c.VsOracle = append(c.VsOracle, d)
			}
		}
	}
	c.Checks = checks(byName)
	c.Headline = c.headline()
	return c, nil
}

// WriteJSON writes the comparison as indented JSON (non-finite numbers as
// null).
func (c *Comparison) WriteJSON(w io.Writer) error { return writeIndentedJSON(w, c) }

// writeIndentedJSON writes v as indented JSON and a newline.
func writeIndentedJSON(w io.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	var out bytes.Buffer
	if err := json.Indent(&out, b, "", "  "); err != nil {
		return err
	}
	out.WriteByte('\n')
	_, err = w.Write(out.Bytes())
	return err
}

// ---- table ----

// WriteTable writes the comparison as aligned text.
func (c *Comparison) WriteTable(w io.Writer) error {
	fmt.Fprintf(w, "Scenario %s: %s\n", c.Scenario, c.Source)
	fmt.Fprintf(w, "%d jobs, %d GPUs in %d ClusterQueues; checkpoint every %s; Deactivate what-if: %v\n",
		c.Jobs, c.CapacityGPU, len(c.Queues), c.Settings.CheckpointInterval, onOff(c.Settings.Deactivate))
	for _, n := range c.Notes {
		fmt.Fprintf(w, "  %s\n", n)
	}
	fmt.Fprintln(w)
	for _, l := range c.Headline {
		fmt.Fprintln(w, l)
	}
	if len(c.Headline) > 0 {
		fmt.Fprintln(w)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	header := "metric\t"
	for _, r := range c.Results {
		header += r.Summary.Policy + "\t"
	}
	fmt.Fprintln(tw, header)
	for _, row := range summaryRows {
		line := row.name + "\t"
		for _, r := range c.Results {
			line += row.f(r.Summary) + "\t"
		}
		fmt.Fprintln(tw, line)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, r := range c.Results {
		if t := triggers(r.Summary); t != "" {
			fmt.Fprintf(w, "%s decisions by trigger: %s\n", r.Summary.Policy, t)
		}
	}
	writeDeltas(w, "Against kueue (policy − kueue)", c.VsKueue)
	writeDeltas(w, "Distance to oracle (policy − oracle)", c.VsOracle)
	if len(c.Checks) > 0 {
		fmt.Fprintln(w, "\nTargets")
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		for _, ch := range c.Checks {
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\n", metOrNot(ch.Met), ch.Name, fmtCheck(ch), ch.Target)
		}
		tw.Flush()
	}
	return nil
}

func onOff(b bool) string {
	if b {
		return "on (every queue opts in)"
	}
	return "off"
}

func metOrNot(b bool) string {
	if b {
		return "met    "
	}
	return "MISSED "
}

func fmtCheck(ch Check) string {
	v := float64(ch.Value)
	if math.IsNaN(v) {
		return "n/a"
	}
	if strings.Contains(ch.Target, "%") {
		return fmt.Sprintf("%.1f%%", v)
	}
	return fmt.Sprintf("%g", v)
}

type row struct {
	name string
	f    func(Summary) string
}

func fh(x float64) string { return fmt.Sprintf("%.1f", x) }
func fi(x int) string     { return fmt.Sprintf("%d", x) }

var summaryRows = []row{
	{"GPU-hours after plateau", func(s Summary) string { return fh(s.PlateauGPUHours) }},
	{"GPU-hours lost to preemption", func(s Summary) string { return fh(s.LostGPUHours) }},
	{"GPU-hours used", func(s Summary) string { return fh(s.UsedGPUHours) }},
	{"GPU-hours saved by Deactivate", func(s Summary) string { return fh(s.SavedGPUHours) }},
	{"Deactivates before the true plateau", func(s Summary) string { return fi(s.EarlyStops) }},
	{"pre-plateau GPU-hours they cut off", func(s Summary) string { return fh(s.EarlyStopGPUHours) }},
	{"preemptions", func(s Summary) string { return fi(s.Preemptions) }},
	{"preemptions past 90% progress", func(s Summary) string { return fi(s.PreemptionsPast90) }},
	{"completed / deactivated / unfinished", func(s Summary) string {
		return fmt.Sprintf("%d/%d/%d", s.Completed, s.Deactivated, s.Unfinished)
	}},
	{"JCT mean (h)", func(s Summary) string { return fmt.Sprintf("%.2f", s.JCT.Mean) }},
	{"JCT median (h)", func(s Summary) string { return fmt.Sprintf("%.2f", s.JCT.Median) }},
	{"JCT p95 (h)", func(s Summary) string { return fmt.Sprintf("%.2f", s.JCT.P95) }},
	{"queueing mean (h)", func(s Summary) string { return fmt.Sprintf("%.2f", s.Queueing.Mean) }},
	{"queueing median (h)", func(s Summary) string { return fmt.Sprintf("%.2f", s.Queueing.Median) }},
	{"queueing p95 (h)", func(s Summary) string { return fmt.Sprintf("%.2f", s.Queueing.P95) }},
	{"utilization", func(s Summary) string { return fmt.Sprintf("%.1f%%", 100*s.Utilization) }},
	{"makespan (h)", func(s Summary) string { return fh(s.Makespan) }},
	{"events", func(s Summary) string { return fi(s.Events) }},
	{"reports observed", func(s Summary) string { return fi(s.Reports) }},
	{"forecasts (forecast.Fit)", func(s Summary) string { return fi(s.Forecasts) }},
	{"decisions (preempt.Decide)", func(s Summary) string { return fi(s.Decisions) }},
	{"wall time (s)", func(s Summary) string { return fmt.Sprintf("%.2f", s.WallSeconds) }},
	{"events/s", func(s Summary) string { return fmt.Sprintf("%.0f", s.EventsPerSecond) }},
	{"forecasts/s", func(s Summary) string { return fmt.Sprintf("%.0f", s.ForecastsPerSecond) }},
}

// triggers lists a run's decisions by what triggered them.
func triggers(s Summary) string {
	var parts []string
	for _, n := range tickReasonNames {
		if s.DecisionsBy[n] > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", n, s.DecisionsBy[n]))
		}
	}
	return strings.Join(parts, ", ")
}

func signed(x float64, prec int) string {
	if math.IsNaN(x) {
		return "n/a"
	}
	return fmt.Sprintf("%+.*f", prec, x)
}

func writeDeltas(w io.Writer, title string, ds []Delta) {
	if len(ds) == 0 {
		return
	}
	fmt.Fprintf(w, "\n%s\n", title)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "policy\tplateau GPU-h\t(%)\tlost GPU-h\tpreemptions\tpast 90%\tmean JCT (h)\t(%)\tp95 JCT (h)\tmean queueing (h)\tutilization\t")
	for _, d := range ds {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%+d\t%+d\t%s\t%s\t%s\t%s\t%s\t\n", d.Policy,
			signed(d.PlateauGPUHours, 1), signed(float64(d.PlateauPct), 1), signed(d.LostGPUHours, 1),
			d.Preemptions, d.PreemptionsPast90, signed(d.MeanJCT, 2), signed(float64(d.MeanJCTPct), 1),
			signed(d.P95JCT, 2), signed(d.MeanQueueing, 2), signed(100*d.Utilization, 1)+"pt")
	}
	tw.Flush()
}

// ---- HTML ----

// Plots are the SVG plots of a comparison: per policy, queue length and
// GPUs in use over time.
func (c *Comparison) Plots() ([]NamedSVG, error) {
	var out []NamedSVG
	for i, r := range c.Results {
		col := palette[i%len(palette)]
		for _, kind := range []struct {
			title, y string
			vals     []float64
			capLine  bool
		}{
			{"queue length", "pending workloads", r.Series.Pending, false},
			{"GPUs in use", "GPUs", r.Series.GPUs, true},
		} {
			svg, err := linePlot(fmt.Sprintf("%s: %s", r.Summary.Policy, kind.title), kind.y, r.Series.Hours, kind.vals, col, kind.capLine, float64(c.CapacityGPU))
			if err != nil {
				return nil, err
			}
			out = append(out, NamedSVG{Title: fmt.Sprintf("%s — %s", r.Summary.Policy, kind.title), SVG: svg})
		}
	}
	return out, nil
}

// NamedSVG is one inline plot.
type NamedSVG struct {
	Title string
	SVG   template.HTML
}

var palette = []color.RGBA{{31, 119, 180, 255}, {214, 39, 40, 255}, {44, 160, 44, 255}, {148, 103, 189, 255}, {255, 127, 14, 255}}

func linePlot(title, ylabel string, xs, ys []float64, col color.RGBA, capLine bool, capacity float64) (template.HTML, error) {
	p := plot.New()
	p.X.Label.Text = "hours since the first arrival"
	p.Y.Label.Text = ylabel
	p.Y.Min = 0
	// The title and the legend sit above the plot (svgplot.Chart): a
	// legend in the plot's corner covered the series.
	ch := svgplot.Chart{Title: title, Plot: p, Width: 6 * vg.Inch, Height: 2.6 * vg.Inch}
	pts := make(plotter.XYs, len(xs))
	for i := range xs {
		pts[i].X, pts[i].Y = xs[i], ys[i]
	}
	if len(pts) == 0 {
		pts = plotter.XYs{{X: 0, Y: 0}}
	}
	l, err := plotter.NewLine(pts)
	if err != nil {
		return "", err
	}
	l.Color = col
	l.Width = vg.Points(1)
	ch.Series = append(ch.Series, svgplot.Series{Label: ylabel, Class: "series", Plotter: l})
	if capLine && capacity > 0 && len(xs) > 0 {
		cl, err := plotter.NewLine(plotter.XYs{{X: xs[0], Y: capacity}, {X: xs[len(xs)-1], Y: capacity}})
		if err != nil {
			return "", err
		}
		cl.Color = color.Gray{Y: 128}
		cl.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
		ch.Series = append(ch.Series, svgplot.Series{Label: "capacity", Class: "capacity", Plotter: cl})
		p.Y.Max = math.Max(p.Y.Max, capacity*1.05)
	}
	return ch.SVG()
}

var htmlTmpl = htmlpage.WithCell(template.Must(template.New("report").Funcs(template.FuncMap{
	"pctf": func(x Float) string { return signed(float64(x), 1) },
}).Parse(`<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>planner simulate: {{.C.Scenario}}</title>
<style>{{.CSS}}</style></head><body>
<h1>planner simulate: {{.C.Scenario}}</h1>
<p>{{.C.Source}}<br>{{.C.Jobs}} jobs, {{.C.CapacityGPU}} GPUs in {{len .C.Queues}} ClusterQueues; checkpoint every {{.C.Settings.CheckpointInterval}}; Deactivate what-if: {{if .C.Settings.Deactivate}}on (every queue opts in){{else}}off{{end}}; seed {{.C.Settings.Seed}}.</p>
{{if .C.Notes}}<ul>{{range .C.Notes}}<li><small>{{.}}</small></li>{{end}}</ul>{{end}}
{{with .C.Headline}}<section id="headline"><h2>{{index . 0}}</h2><ul>{{range slice . 1}}<li>{{.}}</li>{{end}}</ul></section>{{end}}
<h2>Results</h2>
<table id="results"><thead><tr><th>metric</th>{{range .C.Results}}<th class="num">{{.Summary.Policy}}</th>{{end}}</tr></thead><tbody>
{{range .Rows}}<tr><td>{{.Name}}</td>{{range .Cells}}{{template "cell" .}}{{end}}</tr>
{{end}}</tbody></table>
{{if .C.VsKueue}}<h2>Against kueue (policy − kueue)</h2>{{template "deltas" .C.VsKueue}}{{end}}
{{if .C.VsOracle}}<h2>Distance to oracle (policy − oracle)</h2>{{template "deltas" .C.VsOracle}}{{end}}
{{if .Checks}}<h2>Targets</h2><table id="targets"><thead><tr><th>target</th><th class="num">value</th><th>wanted</th><th></th></tr></thead><tbody>
{{range .Checks}}<tr><td>{{.Name}}</td><td class="num">{{.Value}}</td><td>{{.Target}}</td><td class="{{.Class}}">{{.Status}}</td></tr>
{{end}}</tbody></table>{{end}}
<h2>Queue length and GPU use over time</h2>
<div class="charts">{{range .Plots}}<figure class="chart sim-chart">{{.SVG}}</figure>
{{end}}</div>
<p><small>Generated by planner simulate (Progress Planner) at {{.Generated}}.</small></p>
</body></html>
{{define "deltas"}}<table class="deltas"><thead><tr><th>policy</th><th class="num">plateau GPU-h</th><th class="num">(%)</th><th class="num">lost GPU-h</th><th class="num">preemptions</th><th class="num">past 90%</th><th class="num">mean JCT (h)</th><th class="num">(%)</th><th class="num">p95 JCT (h)</th><th class="num">mean queueing (h)</th></tr></thead><tbody>
{{range .}}<tr><td>{{.Policy}}</td><td class="num">{{printf "%+.1f" .PlateauGPUHours}}</td><td class="num">{{pctf .PlateauPct}}</td><td class="num">{{printf "%+.1f" .LostGPUHours}}</td><td class="num">{{printf "%+d" .Preemptions}}</td><td class="num">{{printf "%+d" .PreemptionsPast90}}</td><td class="num">{{printf "%+.2f" .MeanJCT}}</td><td class="num">{{pctf .MeanJCTPct}}</td><td class="num">{{printf "%+.2f" .P95JCT}}</td><td class="num">{{printf "%+.2f" .MeanQueueing}}</td></tr>
{{end}}</tbody></table>{{end}}
`)))

// WriteHTML writes one self-contained HTML page: the tables and the plots
// (inline SVG, no external resources).
func (c *Comparison) WriteHTML(w io.Writer) error {
	plots, err := c.Plots()
	if err != nil {
		return err
	}
	type htmlRow struct {
		Name  string
		Cells []htmlpage.Cell
	}
	type htmlCheck struct {
		Name, Target, Value, Status, Class string
	}
	data := struct {
		C         *Comparison
		Rows      []htmlRow
		Checks    []htmlCheck
		Plots     []NamedSVG
		Generated string
		CSS       template.CSS
	}{C: c, Plots: plots, Generated: time.Now().UTC().Format(time.RFC3339), CSS: htmlpage.CSS}
	for _, r := range summaryRows {
		hr := htmlRow{Name: r.name}
		for _, res := range c.Results {
			hr.Cells = append(hr.Cells, htmlpage.Cell{Text: r.f(res.Summary), Num: true})
		}
		data.Rows = append(data.Rows, hr)
	}
	for _, ch := range c.Checks {
		hc := htmlCheck{Name: ch.Name, Target: ch.Target, Value: fmtCheck(ch), Status: "met", Class: "met"}
		if !ch.Met {
			hc.Status, hc.Class = "missed", "missed"
		}
		data.Checks = append(data.Checks, hc)
	}
	return htmlTmpl.Execute(w, data)
}
