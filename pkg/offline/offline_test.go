package offline

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// history writes a history file of n reports, 10 s apart, and returns its
// path; tail is appended after them (lines past any cut).
func history(t *testing.T, n int, tail string) string {
	var b bytes.Buffer
	b.WriteString(`{"kind":"ProgressHistory","version":1,"name":"job","objective":{"metric":"eval_loss","direction":"minimize"},"runInfo":{"gpus":4}}` + "\n")
	for i := range n {
		fmt.Fprintf(&b, `{"t":%d,"trainerStatus":{"progressPercentage":%d,"metrics":[{"name":"current_step","value":"%d"},{"name":"total_steps","value":"1000"},{"name":"eval_loss","value":"%g"}]}}`+"\n",
			10*i, i/10, i, 3/(1+0.05*float64(i))+1)
	}
	b.WriteString(tail)
	p := filepath.Join(t.TempDir(), "h.jsonl")
	if err := os.WriteFile(p, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestNothingAfterTheCutCounts: reports after the cut, even malformed
// ones, change nothing; the cut keeps exactly the reports at or before it.
func TestNothingAfterTheCutCounts(t *testing.T) {
	clean := history(t, 60, "")
	dirty := history(t, 60, `{"t":700,"trainerStatus":{"progressPercentage":150}}`+"\nnot json\n")
	spec := CutSpec{At: 400, AtSet: true}
	var outs []*Output
	for _, p := range []string{clean, dirty} {
		c, err := Load(p, nil, spec)
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		if c.Read != 41 || c.Cut.At != 400 || c.Cut.Basis != "at" {
			t.Fatalf("cut read %d reports to %+v, want 41 to t=400 (at)", c.Read, c.Cut)
		}
		out, err := Forecast(c, nil)
		if err != nil {
			t.Fatal(err)
		}
		outs = append(outs, out)
	}
	if !reflect.DeepEqual(outs[0], outs[1]) {
		t.Errorf("the lines after the cut changed the result:\n%+v\n%+v", outs[0], outs[1])
	}
	if o := outs[0]; o.AssumedFacts.GPUs != 4 || o.AssumedFacts.GPUsFrom != "runInfo.gpus" || o.Objective.Source != "header" || o.Forecast.Now != 400 {
		t.Errorf("output %+v", o)
	}
}

// TestLoadFromStandardInput: "-" reads the reader given, spooled when the
// cut is a fraction of the last report.
func TestLoadFromStandardInput(t *testing.T) {
	b, err := os.ReadFile(history(t, 50, ""))
	if err != nil {
		t.Fatal(err)
	}
	c, err := Load("-", io.Reader(bytes.NewReader(b)), CutSpec{Frac: 0.5, FracSet: true})
	if err != nil {
		t.Fatal(err)
	}
	if c.Cut.Basis != "fraction-of-last-report" || c.Cut.At != 245 || c.Read != 25 {
		t.Errorf("cut %+v after %d reports, want fraction-of-last-report at 245 after 25", c.Cut, c.Read)
	}
	if _, err := Load("-", strings.NewReader(""), CutSpec{}); err == nil || !strings.Contains(err.Error(), "stdin") {
		t.Errorf("empty stdin: %v", err)
	}
}

// TestCutReplaysTheReadmission: a preempt_resume file's readmission
// (incident.resumeSeconds) starts a new segment, as in the controller and
// the backtest, although the counter carries on and the silence is short
// of the pause a history alone takes for a restart.
func TestCutReplaysTheReadmission(t *testing.T) {
	var b bytes.Buffer
	b.WriteString(`{"kind":"ProgressHistory","version":1,"name":"job","objective":{"metric":"eval_loss","direction":"minimize"},"incident":{"type":"preempt_resume","atSeconds":300,"resumeSeconds":1200}}` + "\n")
	for i := 1; i <= 50; i++ {
		t := 10 * i
		if i > 30 {
			t += 900
		}
		fmt.Fprintf(&b, `{"t":%d,"trainerStatus":{"metrics":[{"name":"current_step","value":"%d"},{"name":"total_steps","value":"100"},{"name":"eval_loss","value":"%g"}]}}`+"\n",
			t, i, 3/(1+0.05*float64(i))+1)
	}
	for _, tc := range []struct {
		incident string // replaces the header's ("": kept)
		segs     int
	}{{"", 2}, {`,"incident":{"type":"hang"}`, 1}} {
		text := b.String()
		if tc.incident != "" {
			text = strings.Replace(text, `,"incident":{"type":"preempt_resume","atSeconds":300,"resumeSeconds":1200}`, tc.incident, 1)
		}
		c, err := Load("-", strings.NewReader(text), CutSpec{})
		if err != nil {
			t.Fatal(err)
		}
		out, err := Forecast(c, nil)
		if err != nil {
			t.Fatal(err)
		}
		if out.Forecast.Segments != tc.segs {
			t.Errorf("incident %q: %d segments, want %d", tc.incident, out.Forecast.Segments, tc.segs)
		}
	}
}
