package svgplot

import (
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

func TestFitShortensInTheMiddle(t *testing.T) {
	sty := textStyle(12, draw.XCenter)
	if s, cut := Fit(sty, "short", 200); s != "short" || cut {
		t.Errorf("Fit(short) = %q, %v", s, cut)
	}
	long := "team-a/" + strings.Repeat("x", 200) + "-run-7"
	s, cut := Fit(sty, long, 200)
	if !cut || !strings.HasPrefix(s, "team-a/") || !strings.HasSuffix(s, "-7") || !strings.Contains(s, "…") {
		t.Errorf("Fit(long) = %q, %v", s, cut)
	}
	if w := float64(sty.Width(s)) * slack; w > 200 {
		t.Errorf("Fit(long) is %.0fpt wide, want at most 200", w)
	}
	if utf8.RuneCountInString(s) >= utf8.RuneCountInString(long) {
		t.Errorf("not shortened: %q", s)
	}
}

func line(t *testing.T, pts plotter.XYs) *plotter.Line {
	t.Helper()
	l, err := plotter.NewLine(pts)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

var (
	translateY = regexp.MustCompile(`class="chart-legend" transform="translate\([0-9.]+,([0-9.]+)\)"><svg width="[0-9.]+" height="([0-9.]+)"`)
	frameY     = regexp.MustCompile(`class="chart-frame" x="0" y="([0-9.]+)"`)
)

// TestChartLayout: the title (full text in its tooltip), then the legend,
// then the plot, one below the other; every series in its own layer;
// entries that do not fit one row flow into a second.
func TestChartLayout(t *testing.T) {
	title := "team-a/" + strings.Repeat("long-name-", 20) + "<b>"
	var series []Series
	for i, name := range []string{"observed", "forecast (interval)", "plateau onset", "now", "a fifth entry with a long label", "sixth"} {
		series = append(series, Series{Label: name, Class: "s" + strconv.Itoa(i), Plotter: line(t, plotter.XYs{{X: 0, Y: float64(i)}, {X: 1, Y: float64(i + 1)}})})
	}
	series = append(series, Series{Class: "unlabelled", Plotter: line(t, plotter.XYs{{X: 0, Y: 0}, {X: 2, Y: 2}})})
	c := Chart{Title: title, Plot: plot.New(), Series: series, Width: 6 * vg.Inch, Height: 3 * vg.Inch}
	svg, err := c.SVG()
	if err != nil {
		t.Fatal(err)
	}
	s := string(svg)
	if !strings.Contains(s, "<title>team-a/long-name-long-name-") || !strings.Contains(s, "&lt;b&gt;</title>") {
		t.Errorf("the title's tooltip does not hold the full, escaped title")
	}
	if strings.Contains(s, "<b>") {
		t.Error("unescaped title text")
	}
	m, f := translateY.FindStringSubmatch(s), frameY.FindStringSubmatch(s)
	if m == nil || f == nil {
		t.Fatalf("no legend or frame:\n%s", s[:min(len(s), 2000)])
	}
	ly, _ := strconv.ParseFloat(m[1], 64)
	lh, _ := strconv.ParseFloat(m[2], 64)
	fy, _ := strconv.ParseFloat(f[1], 64)
	if ly < 18 || ly+lh > fy {
		t.Errorf("legend at y %g height %g, frame at y %g: the legend must sit between the title and the plot", ly, lh, fy)
	}
	if lh < 2*14 {
		t.Errorf("legend height %g: six entries should flow into at least two rows", lh)
	}
	if n := strings.Count(s, `class="chart-series"`); n != len(series) {
		t.Errorf("%d series layers, want %d", n, len(series))
	}
	if strings.Contains(s, "<?xml") {
		t.Error("an XML prolog inside the chart")
	}
}

func TestChartTooSmall(t *testing.T) {
	c := Chart{Title: "t", Plot: plot.New(), Series: []Series{{Label: "x", Plotter: line(t, plotter.XYs{{X: 0, Y: 0}, {X: 1, Y: 1}})}},
		Width: 2 * vg.Inch, Height: 40}
	if _, err := c.SVG(); err == nil {
		t.Error("a chart with no room for its plot: no error")
	}
}

// TestChartShortensAxisLabels: a metric's name as long as a tenant likes
// is shortened to the plot's height on the Y axis.
func TestChartShortensAxisLabels(t *testing.T) {
	p := plot.New()
	p.Y.Label.Text = "eval_" + strings.Repeat("x", 300) + "_loss"
	c := Chart{Plot: p, Series: []Series{{Label: "x", Plotter: line(t, plotter.XYs{{X: 0, Y: 0}, {X: 1, Y: 1}})}},
		Width: 6 * vg.Inch, Height: 3 * vg.Inch}
	svg, err := c.SVG()
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(svg), strings.Repeat("x", 300)) || !strings.Contains(string(svg), "eval_x") || !strings.Contains(string(svg), "…") {
		t.Errorf("the Y label is not shortened")
	}
}
