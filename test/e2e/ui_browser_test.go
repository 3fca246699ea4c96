//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/html"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/progress-planner/planner/api/v1alpha1"
	"github.com/progress-planner/planner/internal/testnet"
	"github.com/progress-planner/planner/pkg/kueueext"
	"github.com/progress-planner/planner/pkg/preempt"
	"github.com/progress-planner/planner/test/framework"
)

// chromiumPath finds headless Chromium: $PLANNER_CHROMIUM, else chromium
// (Debian's package) or chromium-browser on $PATH. Missing Chromium fails
// the test: hack/install-chromium.sh installs it.
func chromiumPath(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("PLANNER_CHROMIUM"); p != "" {
		return p
	}
	for _, n := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(n); err == nil {
			return p
		}
	}
	t.Fatal("headless Chromium not found (chromium on $PATH or $PLANNER_CHROMIUM): run `bash hack/install-chromium.sh` " +
		"(apt-get install chromium) — the browser test never skips")
	return ""
}

// chromium runs headless Chromium with args and returns its standard output.
func chromium(ctx context.Context, t *testing.T, bin, profile string, args ...string) []byte {
	t.Helper()
	cctx, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	// No --virtual-time-budget: virtual time would fire the page's
	// <meta http-equiv="refresh"> again and again and never settle.
	base := []string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
		"--user-data-dir=" + profile}
	cmd := exec.CommandContext(cctx, bin, append(base, args...)...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		t.Fatalf("chromium %v: %v\n%s", args, err, errOut.String())
	}
	return out.Bytes()
}

// domCounts counts what the browser rendered: job and queue table rows,
// and <svg> elements inside job and queue chart figures; rows maps each
// job row's first cell (NAMESPACE/NAME) to its cells.
type domCounts struct {
	jobRows, queueRows, jobSVGs, queueSVGs int
	rows                                   map[string][]string
}

func countDOM(doc *html.Node) domCounts {
	d := domCounts{rows: map[string][]string{}}
	class := func(n *html.Node) string {
		for _, a := range n.Attr {
			if a.Key == "class" {
				return a.Val
			}
		}
		return ""
	}
	text := func(n *html.Node) string {
		var b strings.Builder
		var f func(*html.Node)
		f = func(n *html.Node) {
			if n.Type == html.TextNode {
				b.WriteString(n.Data)
			}
			for c := n.FirstChild; c != nil; c = c.NextSibling {
				f(c)
			}
		}
		f(n)
		return strings.TrimSpace(b.String())
	}
	var walk func(n *html.Node, fig string)
	walk = func(n *html.Node, fig string) {
		if n.Type == html.ElementNode {
			cl := strings.Fields(class(n))
			switch {
			case n.Data == "tr" && len(cl) > 0 && cl[0] == "job":
				d.jobRows++
				var cells []string
				for c := n.FirstChild; c != nil; c = c.NextSibling {
					if c.Type == html.ElementNode && c.Data == "td" {
						cells = append(cells, text(c))
					}
				}
				if len(cells) > 0 {
					d.rows[cells[0]] = cells
				}
			case n.Data == "tr" && len(cl) > 0 && cl[0] == "queue":
				d.queueRows++
			case n.Data == "figure":
				for _, c := range cl {
					if c == "job-chart" || c == "queue-chart" {
						fig = c
					}
				}
			case n.Data == "svg" && fig == "job-chart":
				d.jobSVGs++
				fig = "" // a chart nests its parts' <svg>s: count it once
			case n.Data == "svg" && fig == "queue-chart":
				d.queueSVGs++
				fig = ""
			}
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c, fig)
		}
	}
	walk(doc, "")
	return d
}

// refusedOffLoopback dials port on every non-loopback address of this
// machine and fails if one accepts: `--ui-addr :PORT` is loopback only.
func refusedOffLoopback(t *testing.T, port string) {
	t.Helper()
	tried, accepted, err := testnet.DialOffLoopback(port, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	for _, target := range accepted {
		t.Errorf("the live page accepted a connection on %s, a non-loopback address", target)
	}
	if tried == 0 {
		t.Fatal("this machine has no non-loopback address to check the live page's binding from")
	}
	t.Logf("the live page refused port %s on %d non-loopback address(es)", port, tried)
}

// TestLivePageInBrowser runs `planner run --ui-addr` (the built binary)
// against the control plane with two ClusterQueues and three TrainJobs (two
// reporting progress, one waiting), loads the live page in headless
// Chromium, checks the rendered DOM (one table row per job, one row and
// one SVG chart per queue, one SVG chart per reporting job, the verdict
// shown), then, with job-a reporting again, measures the page's layout at
// 1280×800 (layout_browser_test.go: no horizontal scroll, reasons in full,
// legends off the data, job-a's forecast band) and takes a screenshot
// (live.png) whose path is logged ($PLANNER_SCREENSHOT_DIR keeps it;
// else the test's temporary directory).
func TestLivePageInBrowser(t *testing.T) {
	browser := chromiumPath(t)
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	bin := plannerBinary(t)
	env := plannerEnv(t)
	kc := writeKubeconfig(t, env.Config)
	a, _, _, _ := runningAndPending(ctx, t, env, "")
	cj, _ := runningJob(ctx, t, env, "team-c", "gpus-c", "job-c", "")

	// The planner binary with the test config (fast intervals), the page
	// on a free port, rebuilt every 2 s.
	tmp := t.TempDir()
	cfg := testConfig()
	cfg.AdmissionEstimates.Interval = preempt.Dur(10 * time.Second)
	cfgYAML, err := cfg.YAML()
	if err != nil {
		t.Fatal(err)
	}
	cfgPath := filepath.Join(tmp, "planner.yaml")
	if err := os.WriteFile(cfgPath, cfgYAML, 0o644); err != nil {
		t.Fatal(err)
	}
	addr := freeLoopbackAddr(t)
	logf, err := os.Create(filepath.Join(tmp, "planner.log"))
	if err != nil {
		t.Fatal(err)
	}
	// A host-less address: the page must listen on loopback by default.
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	run := startPlannerProcess(t, bin, []string{"run", "--config", cfgPath, "--kubeconfig", kc, "--ui-addr", ":" + port, "--ui-refresh", "2s", "--log-format", "text"}, logf)
	t.Cleanup(func() {
		run.StopWith(os.Interrupt, 20*time.Second)
		logf.Close()
		if t.Failed() {
			b, _ := os.ReadFile(logf.Name())
			t.Logf("planner run log:\n%s", tail(string(b), 60))
		}
	})

	c, err := client.New(env.Config, client.Options{Scheme: kueueext.NewScheme()})
	if err != nil {
		t.Fatal(err)
	}
	// job-a (a waiting job-b beside it) learns healthily, so it keeps its
	// GPUs while the page is checked; job-c plateaus (its chart shows the
	// onset; flat from about 40 % of its run, it is called from about 70 %,
	// docs/backtest.md 7.37) with nobody waiting, so yielding evicts nothing.
	doneA := replay(ctx, t, c, a, prefix(history(t, "synth__inverse-power").Reports, 0.5))
	doneC := replay(ctx, t, c, cj, prefix(history(t, "synth__early-plateau").Reports, 0.75))
	for _, d := range []<-chan error{doneA, doneC} {
		if err := <-d; err != nil {
			t.Fatalf("replay: %v", err)
		}
	}
	for _, tj := range []string{"job-a", "job-c"} {
		ns := "team-a"
		if tj == "job-c" {
			ns = "team-c"
		}
		pf := &v1alpha1.ProgressForecast{}
		if _, err := framework.Poll(ctx, plannerBound, func(ctx context.Context) (bool, error) {
			if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: tj}, pf); err != nil {
				return false, client.IgnoreNotFound(err)
			}
			return pf.Status.Forecast != nil && pf.Status.Forecast.Reports >= 10, nil
		}); err != nil {
			t.Fatalf("ProgressForecast %s/%s not forecast: %v", ns, tj, err)
		}
	}

	url := "http://" + addr + "/"
	// Writes are refused.
	resp, err := http.Post(url, "text/plain", strings.NewReader("x"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST %s: %d, want 405", url, resp.StatusCode)
	}
	// Every response, refusals included, carries planner run's security
	// headers (docs/report.md).
	if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "frame-ancestors 'none'") ||
		resp.Header.Get("X-Content-Type-Options") != "nosniff" || resp.Header.Get("X-Frame-Options") != "DENY" {
		t.Errorf("POST %s: security headers missing: %v", url, resp.Header)
	}
	// Served on loopback (above), refused from this machine's other
	// addresses.
	refusedOffLoopback(t, port)

	// The page is rebuilt every 2 s: poll the rendered DOM until it shows
	// what the cluster holds.
	profile := filepath.Join(tmp, "chromium-profile")
	var d domCounts
	var dom []byte
	if _, err := framework.Poll(ctx, 90*time.Second, func(ctx context.Context) (bool, error) {
		dom = chromium(ctx, t, browser, profile, "--dump-dom", url)
		doc, err := html.Parse(bytes.NewReader(dom))
		if err != nil {
			return false, fmt.Errorf("the dumped DOM does not parse: %w", err)
		}
		d = countDOM(doc)
		return d.jobRows == 3 && d.queueRows == 2 && d.jobSVGs == 2 && d.queueSVGs == 2, nil
	}); err != nil {
		t.Fatalf("rendered page: %d job rows (want 3), %d queue rows (want 2), %d job charts (want 2), %d queue charts (want 2): %v\n%s",
			d.jobRows, d.queueRows, d.jobSVGs, d.queueSVGs, err, tail(string(dom), 40))
	}
	for _, key := range []string{"team-a/job-a", "team-a/job-b", "team-c/job-c"} {
		if _, ok := d.rows[key]; !ok {
			t.Errorf("no table row for %s (rows %v)", key, d.rows)
		}
	}
	// The state may carry a note beneath it ("last report 1m ago").
	if cells := d.rows["team-a/job-a"]; len(cells) < 11 || !strings.HasPrefix(cells[3], "running") || cells[10] == "—" || cells[5] == "—" {
		t.Errorf("job-a's row lacks state, ETA or verdict: %q", cells)
	}
	// job-b waits behind job-a: its state says when it is expected to
	// start (the admission estimate, docs/report.md).
	if cells := d.rows["team-a/job-b"]; len(cells) < 4 || !strings.HasPrefix(cells[3], "waiting") || !strings.Contains(cells[3], "starts in ") {
		t.Errorf("job-b's row lacks its admission estimate: %q", cells)
	}
	t.Logf("rendered DOM: %d job rows, %d queue rows, %d job charts, %d queue charts; job-a: %q; job-b: %q", d.jobRows, d.queueRows, d.jobSVGs, d.queueSVGs, d.rows["team-a/job-a"], d.rows["team-a/job-b"])
	publishedAdmission(ctx, t, c)

	// The layout at 1280×800 (issue 21), with job-a reporting again so
	// that its chart shows the forecast band of a live job: the rest of
	// its run, slower, while the page is measured and photographed.
	pf := &v1alpha1.ProgressForecast{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(a), pf); err != nil || pf.Status.Forecast == nil {
		t.Fatalf("job-a's ProgressForecast: %v (forecast %v)", err, pf.Status.Forecast)
	}
	before := pf.Status.Forecast.Reports
	rest := history(t, "synth__inverse-power").Reports
	rctx, rcancel := context.WithCancel(ctx)
	resumed := replayAt(rctx, c, a, rest[len(prefix(rest, 0.5)):len(prefix(rest, 0.9))], 5)
	defer func() {
		rcancel()
		<-resumed // context.Canceled when cut short, as intended
	}()
	if _, err := framework.Poll(ctx, plannerBound, func(ctx context.Context) (bool, error) {
		if err := c.Get(ctx, client.ObjectKeyFromObject(a), pf); err != nil {
			return false, err
		}
		return pf.Status.Forecast != nil && pf.Status.Forecast.Reports >= before+5, nil
	}); err != nil {
		t.Fatalf("job-a's resumed reports not forecast: %v", err)
	}
	time.Sleep(3 * time.Second) // one page rebuild (every 2 s) after the new forecast
	page, err := httpGet(url)
	if err != nil {
		t.Fatal(err)
	}
	p := probeLayout(ctx, t, browser, tmp, "live", page)
	checkLayout(t, "live page", p, true, 4, []string{"team-a/job-a"})
	screenshot(ctx, t, browser, profile, url, filepath.Join(screenshotDir(t), "live.png"), p)
}

// httpGet returns the body of a 200 answer.
func httpGet(url string) ([]byte, error) {
	resp, err := http.Get(url)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s: %s", url, resp.Status, b)
	}
	return b, nil
}

func tail(s string, n int) string {
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// publishedAdmission checks the admission estimate `planner run` publishes
// on the ProgressForecast of job-b, waiting behind the running job-a
// (status.admissionEstimate, every admissionEstimates.interval), and that
// job-a's has none.
func publishedAdmission(ctx context.Context, t *testing.T, c client.Client) {
	t.Helper()
	var b, a v1alpha1.ProgressForecast
	took, err := framework.Poll(ctx, 60*time.Second, func(ctx context.Context) (bool, error) {
		if err := c.Get(ctx, client.ObjectKey{Namespace: "team-a", Name: "job-b"}, &b); err != nil {
			return false, client.IgnoreNotFound(err)
		}
		return b.Status.AdmissionEstimate != nil, nil
	})
	if err != nil {
		t.Fatalf("job-b's ProgressForecast has no admission estimate: %v", err)
	}
	est := b.Status.AdmissionEstimate
	if est.Expected == nil || est.Expected.Before(&est.Time) || !strings.HasPrefix(est.Text, "expected in ") || !strings.Contains(est.Text, "a running job finished") {
		t.Errorf("job-b's published estimate %+v, want an expected time after job-a finishes", est)
	}
	if err := c.Get(ctx, client.ObjectKey{Namespace: "team-a", Name: "job-a"}, &a); err != nil {
		t.Fatal(err)
	}
	if a.Status.AdmissionEstimate != nil {
		t.Errorf("the running job-a has an admission estimate: %+v", a.Status.AdmissionEstimate)
	}
	t.Logf("job-b's published admission estimate (after %v): %s", took.Round(time.Second), est.Text)
}
