//go:build e2e

package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/html"
)

// TestSweepReportInBrowser runs `planner simulate --sweep … -o html` (the
// built binary) on the built-in scenario, loads the page in headless
// Chromium and checks the rendered DOM: one table row per point and
// policy, one SVG chart per metric, the goal's answer. No control plane.
func TestSweepReportInBrowser(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	bin := plannerBinary(t)
	browser := chromiumPath(t)
	dir := t.TempDir()
	page := filepath.Join(dir, "sweep.html")
	cmd := exec.CommandContext(ctx, bin, "simulate", "--sweep", "gpus=24,32,40", "--seeds", "2",
		"--goal", "queueing.p95<=1h", "--set", "deactivate=true", "-o", "html", "--out", page, "--progress", "off")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("planner simulate --sweep: %v\n%s", err, out)
	}
	dom := chromium(ctx, t, browser, filepath.Join(dir, "profile"), "--dump-dom", "file://"+page)
	doc, err := html.Parse(strings.NewReader(string(dom)))
	if err != nil {
		t.Fatal(err)
	}
	var rows, charts, goal int
	var walk func(n *html.Node, in string)
	walk = func(n *html.Node, in string) {
		if n.Type == html.ElementNode {
			switch {
			case n.Data == "table" && attr(n, "id") == "sweep-table":
				in = "table"
			case n.Data == "tbody" && in == "table":
				in = "tbody"
			case n.Data == "tr" && in == "tbody":
				rows++
			case n.Data == "figure" && strings.Contains(attr(n, "class"), "sweep-chart"):
				in = "chart"
			case n.Data == "svg" && in == "chart" && attr(n, "class") == "chart":
				charts++
			case n.Data == "section" && attr(n, "id") == "goal":
				in = "goal"
			case n.Data == "li" && in == "goal":
				goal++
			}
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c, in)
		}
	}
	walk(doc, "")
	if rows != 6 { // 3 points × kueue, planner
		t.Errorf("%d table rows, want 6", rows)
	}
	if charts != 5 { // queueing p50, p95, mean JCT, plateau GPU-hours, early stops
		t.Errorf("%d charts, want 5", charts)
	}
	// One answer per policy, in the command's words (the DOM escapes <).
	if goal != 2 || strings.Count(string(dom), "queueing.p95&lt;=1h in every seed") != 2 {
		t.Errorf("%d goal answers; the page:\n%s", goal, dom)
	}
	// The pages' layout rules (issue 21): no horizontal scroll, nothing
	// covers a chart's data.
	b, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	checkLayout(t, "sweep", probeLayout(ctx, t, browser, dir, "sweep", b), false, 5, nil)
	t.Logf("sweep page: %d rows, %d charts, %d goal answers", rows, charts, goal)
}

func attr(n *html.Node, key string) string {
	for _, a := range n.Attr {
		if a.Key == key {
			return a.Val
		}
	}
	return ""
}
