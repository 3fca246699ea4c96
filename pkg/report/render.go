package report

import (
	"bytes"
	"encoding/json"
	"fmt"
	"html/template"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/progress-planner/planner/internal/htmlpage"
	"github.com/progress-planner/planner/internal/humanize"
	"github.com/progress-planner/planner/internal/textsafe"
)

// Formats are the output formats of Write.
var Formats = []string{"table", "json", "markdown", "html"}

// Write renders the report in format (table, json, markdown or html).
// Nothing is written when rendering fails.
func (r *Report) Write(w io.Writer, format string) error {
	var b bytes.Buffer
	var err error
	switch format {
	case "table":
		r.writeTable(&b)
	case "json":
		err = r.writeJSON(&b)
	case "markdown", "md":
		r.writeMarkdown(&b)
	case "html":
		err = r.writeHTML(&b)
	default:
		return fmt.Errorf("unknown format %q: want one of %s", format, strings.Join(Formats, ", "))
	}
	if err != nil {
		return err
	}
	_, err = w.Write(b.Bytes())
	return err
}

func (r *Report) writeJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(r); err != nil {
		return fmt.Errorf("encode report: %w", err)
	}
	return nil
}

// jobColumns are the per-job columns of the table and Markdown outputs.
var jobColumns = []string{"JOB", "QUEUE", "GPUS", "STATE", "PROGRESS", "ETA [interval]", "METRIC", "NOW",
	"PREDICTED FINAL [interval]", "PLATEAU", "VERDICT", "BOOST", "REASON"}

func (j JobRow) cells() []string {
	plateau := fmtOptPct(j.PlateauProb)
	if j.Plateaued {
		plateau += " (plateaued)"
	}
	verdict := j.Verdict
	if verdict == "" {
		verdict = "—"
	}
	reason := j.Reason
	if reason == "" {
		reason = "—"
	}
	metric := j.Metric
	if metric == "" {
		metric = "—"
	}
	return safeCells(j.Key(), orDash(j.Queue), fmt.Sprint(j.GPUs), j.stateCell(), fmtOptPct(j.Progress), fmtRangeDur(j.ETA),
		metric, fmtOptNum(j.Current), fmtRangeNum(j.Predicted), plateau, verdict, humanize.Boost(j.Boost), reason)
}

// stateCell is the state, with its note when the reason does not already
// say it (an ended run's reason starts with it).
func (j JobRow) stateCell() string {
	if j.StateNote == "" || strings.HasPrefix(j.Reason, j.StateNote) {
		return string(j.State)
	}
	return string(j.State) + " (" + j.StateNote + ")"
}

// safeCells escapes the cells of every format (table, Markdown, HTML):
// names, metrics and reasons are tenant text (textsafe).
func safeCells(cells ...string) []string {
	for i, c := range cells {
		cells[i] = textsafe.Line(c)
	}
	return cells
}

func orDash(s string) string {
	if s == "" {
		return "—"
	}
	return s
}

// queueColumns are the per-queue columns of the table and Markdown outputs.
func (r *Report) queueColumns() []string {
	cols := []string{"CLUSTERQUEUE", "QUOTA", "USED", "FREE", "RUNNING", "WAITING (GPUs)"}
	for _, h := range Horizons {
		cols = append(cols, "FREED ≤"+humanize.Duration(h))
	}
	if len(r.Queues) > 0 {
		for _, a := range r.Queues[0].Admission {
			cols = append(cols, fmt.Sprintf("%d GPUs ADMITTED IN", a.GPUs))
		}
	}
	return cols
}

func (q QueueRow) cells() []string {
	c := []string{q.Name, fmt.Sprint(q.QuotaGPUs), fmt.Sprint(q.UsedGPUs), fmt.Sprint(q.FreeGPUs),
		fmt.Sprint(q.Running), fmt.Sprintf("%d (%d)", q.Waiting, q.WaitingGPUs)}
	for _, f := range q.Freed {
		c = append(c, fmtFreed(f))
	}
	for _, a := range q.Admission {
		c = append(c, fmtAdmission(a))
	}
	return safeCells(c...)
}

func (r *Report) note() string {
	return fmt.Sprintf("Intervals are central %.0f%% intervals. FREED: GPUs the running jobs are forecast to free within the horizon, "+
		"median [interval]; ADMITTED IN: when a job of that size submitted now at priority 0 would likely be admitted, median [interval] "+
		"(docs/report.md).", r.Interval*100)
}

func (r *Report) writeTable(w io.Writer) {
	fmt.Fprintf(w, "%s\n", textsafe.Line(r.Title))
	if r.Source != "" {
		fmt.Fprintf(w, "source: %s\n", textsafe.Line(r.Source))
	}
	fmt.Fprintf(w, "generated: %s\n\n", r.GeneratedAt.UTC().Format("2006-01-02 15:04:05Z"))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, strings.Join(jobColumns, "\t"))
	for _, j := range r.Jobs {
		fmt.Fprintln(tw, strings.Join(j.cells(), "\t"))
	}
	tw.Flush()
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, strings.Join(r.queueColumns(), "\t"))
	for _, q := range r.Queues {
		fmt.Fprintln(tw, strings.Join(q.cells(), "\t"))
	}
	tw.Flush()
	fmt.Fprintf(w, "\n%s\n", r.note())
}

func mdTable(w io.Writer, cols []string, rows [][]string) {
	fmt.Fprintf(w, "| %s |\n", strings.Join(cols, " | "))
	fmt.Fprintf(w, "|%s\n", strings.Repeat("---|", len(cols)))
	for _, row := range rows {
		esc := make([]string, len(row))
		for i, c := range row {
			esc[i] = textsafe.Markdown(c)
		}
		fmt.Fprintf(w, "| %s |\n", strings.Join(esc, " | "))
	}
}

func (r *Report) writeMarkdown(w io.Writer) {
	fmt.Fprintf(w, "# %s\n\n", textsafe.Markdown(r.Title))
	if r.Source != "" {
		fmt.Fprintf(w, "Source: %s. ", textsafe.Markdown(r.Source))
	}
	fmt.Fprintf(w, "Generated %s.\n\n## Jobs\n\n", r.GeneratedAt.UTC().Format("2006-01-02 15:04:05Z"))
	var rows [][]string
	for _, j := range r.Jobs {
		rows = append(rows, j.cells())
	}
	mdTable(w, jobColumns, rows)
	fmt.Fprintf(w, "\n## ClusterQueues: capacity forecast\n\n")
	rows = nil
	for _, q := range r.Queues {
		rows = append(rows, q.cells())
	}
	mdTable(w, r.queueColumns(), rows)
	fmt.Fprintf(w, "\n%s\n", r.note())
}

// Charts counts the job charts and queue charts the HTML page holds.
func (r *Report) Charts() (jobs, queues int) { return len(r.jobCharts), len(r.Queues) }

type namedSVG struct {
	Kind, Key string
	SVG       template.HTML
}

// The HTML jobs table shows every column but REASON in the job's row and
// the reason, in full and wrapped, in a row beneath it: a reason is a
// sentence, and squeezed into a column it was cut off at the page's edge.
const reasonCol = 12

// numericJobCols are the job columns right-aligned in tabular figures.
var numericJobCols = map[int]bool{2: true, 4: true, 5: true, 7: true, 8: true, 9: true, 11: true}

// nameRunes is where the HTML page shortens a name (the full name is the
// cell's title).
const nameRunes = 40

type htmlJob struct {
	Cells  []htmlpage.Cell
	Reason string
}

func htmlJobRow(j JobRow) htmlJob {
	cells := j.cells()
	out := htmlJob{Reason: cells[reasonCol]}
	for i, c := range cells[:reasonCol] {
		switch {
		case numericJobCols[i]:
			out.Cells = append(out.Cells, htmlpage.NumCell(c))
		case i == 0 || i == 1 || i == 6:
			out.Cells = append(out.Cells, htmlpage.NameCell(c, nameRunes))
		default:
			out.Cells = append(out.Cells, htmlpage.TextCell(c))
		}
	}
	return out
}

func htmlQueueRow(q QueueRow) []htmlpage.Cell {
	cells := q.cells()
	out := []htmlpage.Cell{htmlpage.NameCell(cells[0], nameRunes)}
	for _, c := range cells[1:] {
		out = append(out, htmlpage.NumCell(c))
	}
	return out
}

func (r *Report) writeHTML(w io.Writer) error {
	data := struct {
		R           *Report
		CSS         template.CSS
		JobCols     []htmlpage.Cell
		Jobs        []htmlJob
		QueueCols   []htmlpage.Cell
		QueueRows   [][]htmlpage.Cell
		JobCharts   []namedSVG
		QueueCharts []namedSVG
		Generated   string
		Note        string
	}{R: r, CSS: htmlpage.CSS, Generated: r.GeneratedAt.UTC().Format("2006-01-02 15:04:05Z"), Note: r.note()}
	for i, c := range jobColumns[:reasonCol] {
		data.JobCols = append(data.JobCols, htmlpage.Cell{Text: c, Num: numericJobCols[i]})
	}
	for i, c := range r.queueColumns() {
		data.QueueCols = append(data.QueueCols, htmlpage.Cell{Text: c, Num: i > 0})
	}
	for _, j := range r.Jobs {
		data.Jobs = append(data.Jobs, htmlJobRow(j))
	}
	for _, q := range r.Queues {
		data.QueueRows = append(data.QueueRows, htmlQueueRow(q))
	}
	for i := range r.jobCharts {
		s, err := r.jobCharts[i].svg()
		if err != nil {
			return err
		}
		data.JobCharts = append(data.JobCharts, namedSVG{Kind: "job", Key: textsafe.Line(r.jobCharts[i].Key), SVG: s})
	}
	for i := range r.Queues {
		s, err := queueSVG(&r.Queues[i], r.Interval)
		if err != nil {
			return err
		}
		data.QueueCharts = append(data.QueueCharts, namedSVG{Kind: "queue", Key: textsafe.Line(r.Queues[i].Name), SVG: s})
	}
	if err := htmlTmpl.Execute(w, data); err != nil {
		return fmt.Errorf("render html: %w", err)
	}
	return nil
}

var htmlTmpl = htmlpage.WithCell(template.Must(template.New("report").Parse(`<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
{{if gt .R.Refresh 0}}<meta http-equiv="refresh" content="{{.R.Refresh}}">{{end}}
<title>{{.R.Title}}</title>
<style>{{.CSS}}</style></head><body>
<h1>{{.R.Title}}</h1>
<p>{{if .R.Source}}Source: {{.R.Source}}. {{end}}Generated {{.Generated}}.{{if gt .R.Refresh 0}} Refreshes every {{.R.Refresh}}s; read-only.{{end}}</p>
<h2>Jobs</h2>
<table id="jobs"><thead><tr>{{range .JobCols}}<th{{if .Num}} class="num"{{end}}>{{.Text}}</th>{{end}}</tr></thead><tbody>
{{range .Jobs}}<tr class="job">{{range .Cells}}{{template "cell" .}}{{end}}</tr>
<tr class="reason"><td class="reason" colspan="{{len .Cells}}"><span class="label">REASON</span>{{.Reason}}</td></tr>
{{end}}</tbody></table>
<h2>ClusterQueues: capacity forecast</h2>
<table id="queues"><thead><tr>{{range .QueueCols}}<th{{if .Num}} class="num"{{end}}>{{.Text}}</th>{{end}}</tr></thead><tbody>
{{range .QueueRows}}<tr class="queue">{{range .}}{{template "cell" .}}{{end}}</tr>
{{end}}</tbody></table>
<p><small>{{.Note}}</small></p>
<h2>Capacity timelines</h2>
<div id="queue-charts" class="charts">{{range .QueueCharts}}<figure class="chart queue-chart" data-queue="{{.Key}}">{{.SVG}}</figure>
{{end}}</div>
<h2>Job forecasts</h2>
<div id="job-charts" class="charts">{{range .JobCharts}}<figure class="chart job-chart" data-job="{{.Key}}">{{.SVG}}</figure>
{{end}}</div>
<p><small>Generated by Progress Planner. Observed objective (blue), forecast to the planned end with its interval (orange fan; none once a run has ended), plateau onset (red dashed), now (gray).</small></p>
</body></html>
`)))
