package report

import (
	"bytes"
	"encoding/json"
	"flag"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/html"

	"github.com/progress-planner/planner/examples"
	"github.com/progress-planner/planner/internal/textsafe"
	"github.com/progress-planner/planner/pkg/forecast"
	"github.com/progress-planner/planner/pkg/preempt"
	"github.com/progress-planner/planner/pkg/progress"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// exampleJob forecasts an embedded example history (pkg/synth) as of a
// fraction of its run and decides under the default policy, as the
// offline `planner report` does.
func exampleJob(t *testing.T, name string, frac float64, queue string, gpus int, state State) JobInput {
	t.Helper()
	b, err := fs.ReadFile(examples.FS, examples.Dir+"/"+name+".jsonl")
	if err != nil {
		t.Fatal(err)
	}
	hf, err := progress.ReadHistoryFile(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	at := frac * hf.Header.Outcome.EndSeconds
	h := progress.NewHistory(progress.DefaultLimits())
	for _, r := range hf.Reports {
		if r.T > at {
			break
		}
		h.Observe(r.T, r.TrainerStatus)
	}
	obj, ok := hf.Header.ObjectiveSpec()
	if !ok {
		t.Fatalf("%s: no objective", name)
	}
	fc := forecast.Fit(h, obj, at, forecast.DefaultSettings())
	first := hf.Reports[0].T
	d := preempt.Decide(fc, preempt.Facts{GPUs: gpus, AdmittedAt: &first}, preempt.Decision{}, preempt.DefaultPolicy())
	return JobInput{Namespace: "team", Name: name, Queue: queue, GPUs: gpus, State: state, Boost: d.Boost,
		Forecast: &fc, Decision: &d, History: h}
}

func fixedInput(t *testing.T) Input {
	return Input{
		Title:       "Progress Planner report (test)",
		Source:      "embedded example histories",
		GeneratedAt: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC),
		Interval:    0.8,
		Jobs: []JobInput{
			exampleJob(t, "synth__early-plateau", 0.9, "team-a", 8, Running),
			exampleJob(t, "synth__inverse-power", 0.5, "team-a", 4, Running),
			exampleJob(t, "synth__batch-schedule", 0.3, "team-b", 8, Running),
			{Namespace: "team", Name: "waiting-job", Queue: "team-a", GPUs: 8, State: Waiting, BasePriority: 10, CreatedAt: 5},
		},
		Queues:     []QueueInput{{Name: "team-a", QuotaGPUs: 16}, {Name: "team-b", QuotaGPUs: 8}},
		AdmitSizes: []int{1, 8},
	}
}

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./pkg/report -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the golden file (go test ./pkg/report -update rewrites it):\n--- got\n%s\n--- want\n%s", name, got, want)
	}
}

func TestGolden(t *testing.T) {
	r := Build(fixedInput(t))
	for _, f := range []string{"table", "markdown", "json"} {
		var b bytes.Buffer
		if err := r.Write(&b, f); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		golden(t, "report."+f+".golden", b.Bytes())
	}
}

// TestJSONShape checks the JSON against the model: every job and queue,
// three horizons, intervals ordered.
func TestJSONShape(t *testing.T) {
	r := Build(fixedInput(t))
	var b bytes.Buffer
	if err := r.Write(&b, "json"); err != nil {
		t.Fatal(err)
	}
	var back Report
	if err := json.Unmarshal(b.Bytes(), &back); err != nil {
		t.Fatal(err)
	}
	if len(back.Jobs) != 4 || len(back.Queues) != 2 {
		t.Fatalf("jobs %d queues %d", len(back.Jobs), len(back.Queues))
	}
	for _, q := range back.Queues {
		if len(q.Freed) != len(Horizons) {
			t.Errorf("queue %s: %d horizons", q.Name, len(q.Freed))
		}
		for _, f := range q.Freed {
			if !(f.Lo <= f.Median && f.Median <= f.Hi) || f.Hi > q.UsedGPUs {
				t.Errorf("queue %s: freed %+v (used %d)", q.Name, f, q.UsedGPUs)
			}
		}
	}
	for _, j := range back.Jobs {
		if j.ETA != nil && !(j.ETA.Lo <= j.ETA.Value && j.ETA.Value <= j.ETA.Hi) {
			t.Errorf("job %s: ETA %+v", j.Name, j.ETA)
		}
	}
}

// TestHTML parses the page and counts the charts: one per forecast job,
// one per queue, each an inline <svg>, and one table row per job.
func TestHTML(t *testing.T) {
	r := Build(fixedInput(t))
	var b bytes.Buffer
	if err := r.Write(&b, "html"); err != nil {
		t.Fatal(err)
	}
	doc, err := html.Parse(bytes.NewReader(b.Bytes()))
	if err != nil {
		t.Fatalf("html does not parse: %v", err)
	}
	counts := map[string]int{}
	var walk func(n *html.Node, inFigure string)
	walk = func(n *html.Node, inFigure string) {
		if n.Type == html.ElementNode {
			for _, a := range n.Attr {
				if a.Key == "class" {
					for _, c := range strings.Fields(a.Val) {
						counts["."+c]++
						if c == "job-chart" || c == "queue-chart" {
							inFigure = c
						}
					}
				}
				if (a.Key == "src" || a.Key == "href") && n.Data != "a" {
					t.Errorf("external resource %s=%q: the page must be self-contained", a.Key, a.Val)
				}
			}
			if n.Data == "svg" && inFigure != "" {
				counts["svg in "+inFigure]++
				inFigure = "" // a chart nests its parts' <svg>s: count it once
			}
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c, inFigure)
		}
	}
	walk(doc, "")
	jobs, queues := r.Charts()
	if jobs != 3 || queues != 2 {
		t.Fatalf("charts: %d jobs %d queues", jobs, queues)
	}
	for k, want := range map[string]int{".job": 4, ".queue": 2, ".job-chart": 3, ".queue-chart": 2, "svg in job-chart": 3, "svg in queue-chart": 2} {
		if counts[k] != want {
			t.Errorf("%s: %d, want %d (counts %v)", k, counts[k], want, counts)
		}
	}
	if regexp.MustCompile(`<\?xml`).Match(b.Bytes()) {
		t.Error("an XML prolog inside the HTML")
	}
	if *update {
		_ = os.WriteFile(filepath.Join(t.TempDir(), "report.html"), b.Bytes(), 0o644)
	}
}

// hostileName is tenant text that tries to drive a terminal (an OSC
// title, a screen clear, BEL, NUL, a right-to-left override) and a
// Markdown viewer (script, img onerror, a cell separator, a newline).
const hostileName = "x\x1b]0;PWNED\x07\x1b[2J\x00\u202egpj.exe<script>alert(1)</script><img src=x onerror=alert(1)>|\nforged"

// TestGoldenHostileNames: names, metrics and reasons from tenants are
// escaped in the table and Markdown outputs (golden files show how).
func TestGoldenHostileNames(t *testing.T) {
	in := fixedInput(t)
	in.Jobs = in.Jobs[:1]
	in.Jobs[0].Name = hostileName
	in.Jobs[0].Queue = hostileName
	fc := *in.Jobs[0].Forecast
	fc.Objective.Metric = hostileName
	in.Jobs[0].Forecast = &fc
	in.Jobs[0].Reason = "objective " + hostileName
	in.Queues = nil
	r := Build(in)
	for _, f := range []string{"table", "markdown"} {
		var b bytes.Buffer
		if err := r.Write(&b, f); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		out := b.String()
		for _, bad := range []string{"\x1b", "\x07", "\x00", "\u202e", "\nforged"} {
			if strings.Contains(out, bad) {
				t.Errorf("%s output contains %q", f, bad)
			}
		}
		if f == "markdown" && (strings.Contains(out, "<script") || strings.Contains(out, "<img")) {
			t.Errorf("markdown output passes HTML through:\n%s", out)
		}
		golden(t, "report.hostile."+f+".golden", b.Bytes())
	}
}

// TestHTMLLayout: in the HTML page each job row is followed by a row
// holding its reason in full; a long name is shortened with the full name
// as the cell's title; numeric cells are marked for right alignment;
// tenant text stays escaped (in the table and in the chart's title).
func TestHTMLLayout(t *testing.T) {
	in := fixedInput(t)
	long := strings.Repeat("very-long-name-", 8) + "end"
	in.Jobs[0].Name = long
	in.Jobs[1].Name = hostileName
	r := Build(in)
	var b bytes.Buffer
	if err := r.Write(&b, "html"); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, bad := range []string{"<script>", "<img src=x", "\x1b", "\u202e"} {
		if strings.Contains(out, bad) {
			t.Errorf("the page contains %q unescaped", bad)
		}
	}
	doc, err := html.Parse(bytes.NewReader(b.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	attr := func(n *html.Node, k string) string {
		for _, a := range n.Attr {
			if a.Key == k {
				return a.Val
			}
		}
		return ""
	}
	var text func(n *html.Node) string
	text = func(n *html.Node) string {
		if n.Type == html.TextNode {
			return n.Data
		}
		s := ""
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			s += text(c)
		}
		return s
	}
	nextRow := func(n *html.Node) *html.Node {
		for s := n.NextSibling; s != nil; s = s.NextSibling {
			if s.Type == html.ElementNode {
				return s
			}
		}
		return nil
	}
	var jobRows []*html.Node
	var walk func(n *html.Node)
	walk = func(n *html.Node) {
		if n.Type == html.ElementNode && n.Data == "tr" && attr(n, "class") == "job" {
			jobRows = append(jobRows, n)
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(doc)
	if len(jobRows) != len(r.Jobs) {
		t.Fatalf("%d job rows, want %d", len(jobRows), len(r.Jobs))
	}
	titled := false
	for i, row := range jobRows {
		var tds []*html.Node
		for c := row.FirstChild; c != nil; c = c.NextSibling {
			if c.Type == html.ElementNode && c.Data == "td" {
				tds = append(tds, c)
			}
		}
		if len(tds) != len(jobColumns)-1 {
			t.Fatalf("row %d: %d cells, want %d (every column but REASON)", i, len(tds), len(jobColumns)-1)
		}
		for c := range numericJobCols {
			if attr(tds[c], "class") != "num" {
				t.Errorf("row %d: %s cell not numeric", i, jobColumns[c])
			}
		}
		key := r.Jobs[i].Key()
		if name := text(tds[0]); name != textsafe.Line(key) {
			if !strings.Contains(name, "…") || attr(tds[0], "title") != textsafe.Line(key) {
				t.Errorf("row %d: name %q shortened without the full name as its title (%q)", i, name, attr(tds[0], "title"))
			}
			titled = true
		}
		reason := nextRow(row)
		if reason == nil || attr(reason, "class") != "reason" {
			t.Fatalf("row %d: no reason row beneath it", i)
		}
		want := "REASON" + orDash(textsafe.Line(r.Jobs[i].Reason))
		if got := text(reason); got != want {
			t.Errorf("row %d: reason row %q, want %q", i, got, want)
		}
	}
	if !titled {
		t.Errorf("the %d-character name was not shortened", len(long))
	}
}

// TestGoldenEnded: example histories read to their end, as `planner
// report FILE...` reads them by default (the header's outcome passed on),
// next to one cut mid-run: the goldens show the finished and stopped
// states, their notes, and the verdicts dropped or kept.
func TestGoldenEnded(t *testing.T) {
	ended := func(name string, gpus int) JobInput {
		j := exampleJob(t, name, 1, "offline", gpus, Running)
		b, err := fs.ReadFile(examples.FS, examples.Dir+"/"+name+".jsonl")
		if err != nil {
			t.Fatal(err)
		}
		hf, err := progress.ReadHistoryFile(bytes.NewReader(b))
		if err != nil {
			t.Fatal(err)
		}
		j.Outcome = hf.Header.Outcome.Status
		return j
	}
	in := Input{
		Title:       "Progress Planner report (ended runs)",
		Source:      "embedded example histories",
		GeneratedAt: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC),
		Interval:    0.8,
		Jobs: []JobInput{
			ended("synth__inverse-power", 8),       // completed
			ended("synth__target-stop", 16),        // target_reached, no total
			ended("synth__checkpoint-snapshot", 2), // unknown, short of its total
			exampleJob(t, "synth__early-plateau", 0.6, "offline", 4, Running),
		},
		Queues: []QueueInput{{Name: "offline", QuotaGPUs: 30}},
	}
	r := Build(in)
	for _, f := range []string{"table", "markdown", "json"} {
		var b bytes.Buffer
		if err := r.Write(&b, f); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		golden(t, "report.ended."+f+".golden", b.Bytes())
	}
}
