// Package htmlpage is the one stylesheet and the cell helpers of the
// self-contained HTML pages: planner report -o html, the live page of
// planner run --ui-addr (the same page) and planner simulate -o html. One
// copy, so a layout fix reaches every page.
//
// The layout fits a 1280-px laptop screen without horizontal scrolling:
// the page is at most 80rem wide, tables take the page's width and wrap
// their text (long tenant names anywhere), numbers are right-aligned in
// tabular figures with their interval on a second line, and charts flow
// in a grid of columns at least 34em wide.
package htmlpage

import (
	"html/template"
	"strings"
	"unicode/utf8"
)

// CSS is the pages' stylesheet (inline: the pages load nothing).
const CSS template.CSS = `
*{box-sizing:border-box}
body{font-family:system-ui,sans-serif;margin:0 auto;padding:1rem 1.5rem;max-width:80rem;color:#222;line-height:1.35}
h1{font-size:1.6em;margin:.4em 0}h2{font-size:1.25em;margin:1.2em 0 .4em}
table{border-collapse:collapse;margin:.6em 0;font-size:.85em;width:100%}
td,th{border:1px solid #ccc;padding:.25em .45em;text-align:left;vertical-align:top;overflow-wrap:break-word}
td.name{overflow-wrap:anywhere;min-width:7em}
th{background:#f4f4f4;font-weight:600}
th.num,td.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap;overflow-wrap:normal}
td .sub{display:block;color:#666;font-size:.9em;white-space:normal}
tr.job td{border-bottom:none}
tr.reason td{border-top:none;color:#333;padding-bottom:.45em}
tr.reason .label{color:#777;font-size:.9em;margin-right:.4em}
.missed{color:#b00;font-weight:bold}.met{color:#070}
.charts{display:grid;grid-template-columns:repeat(auto-fill,minmax(min(100%,34em),1fr));gap:.8em 1.2em}
figure{margin:0;min-width:0}svg.chart{display:block;width:100%;height:auto}
small{color:#666}
`

// Shorten cuts s to at most n runes, keeping both ends (a namespace and
// a run suffix tell jobs apart) around "…". It reports whether s was cut,
// in which case the page shows the full text as the cell's title.
func Shorten(s string, n int) (string, bool) {
	if n < 3 || utf8.RuneCountInString(s) <= n {
		return s, false
	}
	r := []rune(s)
	head := (n - 1) / 2
	tail := n - 1 - head
	return string(r[:head]) + "…" + string(r[len(r)-tail:]), true
}

// Cell is one table cell of a page.
type Cell struct {
	// Text is the cell; Sub, when set, a second line (an interval, a
	// note); Title a tooltip (the full text of a shortened cell).
	Text, Sub, Title string
	// Num right-aligns the cell in tabular figures; Name lets tenant text
	// (which may have no spaces) break anywhere.
	Num, Name bool
}

// NumCell is a numeric cell: text such as "2h10m [1h50m–2h30m]" or
// "94.9% (plateaued)" shows its value, and its bracket or parenthesis on
// a second line, so the column stays narrow and the values align.
func NumCell(s string) Cell {
	c := Cell{Text: s, Num: true}
	if i := strings.IndexAny(s, "[("); i > 0 && s[i-1] == ' ' {
		c.Text, c.Sub = s[:i-1], s[i:]
	}
	return c
}

// NameCell is a cell of tenant-named text (a job, a queue, a metric):
// shortened to n runes, its full text then in the title.
func NameCell(s string, n int) Cell {
	short, cut := Shorten(s, n)
	c := Cell{Text: short, Name: true}
	if cut {
		c.Title = s
	}
	return c
}

// TextCell is a cell whose text wraps where it needs to; a note in
// parentheses after it goes to a second line.
func TextCell(s string) Cell {
	c := Cell{Text: s}
	if i := strings.Index(s, " ("); i > 0 && strings.HasSuffix(s, ")") {
		c.Text, c.Sub = s[:i], s[i+2:len(s)-1]
	}
	return c
}

// cellTemplate renders a Cell as a <td>.
const cellTemplate = `<td{{if .Num}} class="num"{{else if .Name}} class="name"{{end}}{{if .Title}} title="{{.Title}}"{{end}}>{{.Text}}{{if .Sub}}<span class="sub">{{.Sub}}</span>{{end}}</td>`

// WithCell adds the template "cell" (a Cell as a <td>) to t and returns t.
func WithCell(t *template.Template) *template.Template {
	template.Must(t.New("cell").Parse(cellTemplate))
	return t
}
