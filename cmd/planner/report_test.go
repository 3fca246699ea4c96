package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/progress-planner/planner/pkg/report"
)

func runRoot(t *testing.T, args ...string) (string, error) {
	t.Helper()
	root := newRootCmd()
	var out, errOut bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&errOut)
	root.SetArgs(args)
	err := root.Execute()
	return out.String(), err
}

// TestReportOffline runs planner report on history files: one job per
// file, the JSON model and the HTML page with one chart per job and queue.
func TestReportOffline(t *testing.T) {
	files := []string{"../../examples/histories/synth__early-plateau.jsonl", "../../examples/histories/synth__inverse-power.jsonl"}
	out, err := runRoot(t, append([]string{"report", "-o", "json", "--at-fraction", "0.6", "--queue", "q", "--quota", "16"}, files...)...)
	if err != nil {
		t.Fatal(err)
	}
	var r report.Report
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, out)
	}
	if len(r.Jobs) != 2 || len(r.Queues) != 1 || r.Queues[0].QuotaGPUs != 16 || r.Queues[0].UsedGPUs != 12 {
		t.Fatalf("report: %+v", r)
	}
	for _, j := range r.Jobs {
		if j.ETA == nil || j.Predicted == nil || j.Verdict == "" || j.Queue != "q" {
			t.Errorf("job %s: %+v", j.Name, j)
		}
	}
	html := filepath.Join(t.TempDir(), "r.html")
	if _, err := runRoot(t, append([]string{"report", "-o", "html", "--out", html}, files...)...); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(html)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(b), `class="chart job-chart"`); n != 2 {
		t.Errorf("%d job charts, want 2", n)
	}
	if n := strings.Count(string(b), `class="chart queue-chart"`); n != 1 {
		t.Errorf("%d queue charts, want 1", n)
	}
	// A directory names the *.jsonl files below it, as in backtest.
	dir := t.TempDir()
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, filepath.Base(f)), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	byDir, err := runRoot(t, "report", "-o", "table", "--at-fraction", "0.6", dir)
	if err != nil {
		t.Fatal(err)
	}
	byFiles, err := runRoot(t, append([]string{"report", "-o", "table", "--at-fraction", "0.6"}, files...)...)
	if err != nil {
		t.Fatal(err)
	}
	strip := func(s string) string { // the generation time differs
		var keep []string
		for _, l := range strings.Split(s, "\n") {
			if !strings.HasPrefix(l, "generated:") {
				keep = append(keep, l)
			}
		}
		return strings.Join(keep, "\n")
	}
	if strip(byDir) != strip(byFiles) {
		t.Errorf("report DIR differs from report FILES:\n%s\n---\n%s", byDir, byFiles)
	}
	if _, err := runRoot(t, "report", "-o", "yaml", files[0]); exitCode(err) != exitUsage {
		t.Errorf("-o yaml: %v (exit %d), want a usage error", err, exitCode(err))
	}
}
