package progress

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"
)

const sampleHistory = `{"kind":"ProgressHistory","version":1,"name":"demo","source":{"dataset":"synthetic"},"objective":{"metric":"eval_loss","direction":"minimize","target":null},"timeBasis":"wallclock","outcome":{"status":"completed","endSeconds":20,"final":{"eval_loss":1.5}},"derivedFrom":null,"runInfo":{"gpus":8,"progressUnit":"steps"},"custom":{"kept":true}}
{"t":0,"trainerStatus":{"progressPercentage":0,"metrics":[{"name":"current_step","value":"0"},{"name":"total_steps","value":"100"}]}}
{"t":10,"trainerStatus":{"progressPercentage":50,"estimatedRemainingSeconds":10,"metrics":[{"name":"eval_loss","value":"2"},{"name":"current_step","value":"50"},{"name":"total_steps","value":"100"}]}}
{"t":20,"trainerStatus":{"progressPercentage":100,"estimatedRemainingSeconds":0,"metrics":[{"name":"eval_loss","value":"nan"},{"name":"current_step","value":"100"},{"name":"total_steps","value":"100"}]}}
`

func TestReadWriteHistoryFileRoundTrip(t *testing.T) {
	f, err := ReadHistoryFile(strings.NewReader(sampleHistory))
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Reports) != 3 || f.Header.Name != "demo" || f.Header.Dataset() != "synthetic" {
		t.Fatalf("parsed %+v", f.Header)
	}
	if g, ok := f.Header.RunInfoFloat("gpus"); !ok || g != 8 {
		t.Errorf("gpus %v %v", g, ok)
	}
	if v, ok := f.Header.Outcome.FinalValue("eval_loss"); !ok || v != 1.5 {
		t.Errorf("final %v %v", v, ok)
	}
	o, ok := f.Header.ObjectiveSpec()
	if !ok || o.Metric != "eval_loss" || o.Direction != Minimize {
		t.Errorf("objective %+v", o)
	}
	var buf bytes.Buffer
	if err := WriteHistoryFile(&buf, f); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), `"custom":{"kept":true}`) {
		t.Errorf("unknown header field lost:\n%s", buf.String())
	}
	g, err := ReadHistoryFile(&buf)
	if err != nil {
		t.Fatal(err)
	}
	var b2 bytes.Buffer
	WriteHistoryFile(&b2, g)
	var b1 bytes.Buffer
	WriteHistoryFile(&b1, f)
	if b1.String() != b2.String() {
		t.Errorf("second round trip differs")
	}
}

func TestReadHistoryFileErrorsNameTheLine(t *testing.T) {
	lines := strings.Split(strings.TrimSpace(sampleHistory), "\n")
	cases := []struct {
		name string
		in   string
		line int
	}{
		{"empty", "", 0},
		{"unknown version", strings.Replace(lines[0], `"version":1`, `"version":7`, 1), 1},
		{"wrong kind", strings.Replace(lines[0], `ProgressHistory`, `Other`, 1), 1},
		{"truncated json", lines[0] + "\n" + lines[1][:30], 2},
		{"missing t", lines[0] + "\n" + `{"trainerStatus":{}}`, 2},
		{"non-monotonic t", lines[0] + "\n" + lines[2] + "\n" + lines[1], 3},
		{"negative t", lines[0] + "\n" + `{"t":-1,"trainerStatus":{}}`, 2},
		{"invalid objective", strings.Replace(lines[0], `"direction":"minimize"`, `"direction":"sideways"`, 1), 1},
		{"objective without metric", strings.Replace(lines[0], `"metric":"eval_loss"`, `"metric":""`, 1), 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := ReadHistoryFile(strings.NewReader(c.in))
			if err == nil {
				t.Fatal("want error")
			}
			var le *LineError
			if c.line == 0 {
				if errors.As(err, &le) {
					t.Errorf("empty file error should not name a line: %v", err)
				}
				return
			}
			if !errors.As(err, &le) || le.Line != c.line {
				t.Errorf("error %q does not name line %d", err, c.line)
			}
		})
	}
}

// TestHistoryReaderStreams: the streaming reader yields what
// ReadHistoryFile keeps, one report at a time, then io.EOF.
func TestHistoryReaderStreams(t *testing.T) {
	whole, err := ReadHistoryFile(strings.NewReader(sampleHistory))
	if err != nil {
		t.Fatal(err)
	}
	hr, err := NewHistoryReader(strings.NewReader(sampleHistory))
	if err != nil {
		t.Fatal(err)
	}
	if hr.Header.Name != whole.Header.Name {
		t.Errorf("header %+v", hr.Header)
	}
	for i := 0; ; i++ {
		r, err := hr.Next()
		if err == io.EOF {
			if i != len(whole.Reports) {
				t.Errorf("%d reports streamed, %d read whole", i, len(whole.Reports))
			}
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if r.T != whole.Reports[i].T || hr.Line() != i+2 {
			t.Errorf("report %d: t %v on line %d", i, r.T, hr.Line())
		}
	}
}

func FuzzReadHistoryFile(f *testing.F) {
	f.Add([]byte(sampleHistory))
	f.Add([]byte(`{"kind":"ProgressHistory","version":1}` + "\n" + `{"t":1e308,"trainerStatus":{"progressPercentage":1e400}}`))
	f.Add([]byte("\n\n{}"))
	f.Fuzz(func(t *testing.T, b []byte) {
		hf, err := ReadHistoryFile(bytes.NewReader(b))
		if err != nil {
			return
		}
		// Whatever loads must feed a history without panics (forecast's
		// FuzzFitUntrustedHistory also fits it), and round-trip through the
		// writer.
		h := NewHistory(DefaultLimits())
		for _, r := range hf.Reports {
			h.Observe(r.T, r.TrainerStatus)
		}
		var buf bytes.Buffer
		if err := WriteHistoryFile(&buf, hf); err != nil {
			t.Fatalf("write: %v", err)
		}
		if _, err := ReadHistoryFile(&buf); err != nil {
			t.Fatalf("re-read of written file: %v", err)
		}
	})
}

func FuzzParseSnapshot(f *testing.F) {
	f.Add(`{"progressPercentage":45,"estimatedRemainingSeconds":795,"metrics":[{"name":"loss","value":"0.2347"},{"name":"current_step","value":"450"},{"name":"total_steps","value":"1000"}]}`)
	f.Add(`{"metrics":[{"name":"loss","value":"nan"},{"name":"currentStep","value":"-4"}]}`)
	f.Add(`{"progressPercentage":1e308,"metrics":[{"name":"","value":"x"}]}`)
	f.Fuzz(func(t *testing.T, js string) {
		var s TrainerStatus
		if err := json.Unmarshal([]byte(js), &s); err != nil {
			return
		}
		snap, rejs, ok := Parse(1, s)
		for _, r := range rejs {
			if r.Reason == "" {
				t.Fatal("rejection without a reason")
			}
		}
		if !ok {
			return
		}
		if p := snap.Progress; !(p != p) && (p < 0 || p > 1) {
			t.Fatalf("accepted progress %v", p)
		}
		if s := snap.Step; !(s != s) && s < 0 {
			t.Fatalf("accepted negative step %v", s)
		}
		for k, v := range snap.Metrics {
			if v != v || v > maxMetricAbs || v < -maxMetricAbs {
				t.Fatalf("accepted metric %s=%v", k, v)
			}
		}
		h := NewHistory(DefaultLimits())
		h.Observe(0, s)
		h.Observe(5, s)
		if b, err := h.MarshalJSON(); err != nil {
			t.Fatal(err)
		} else if _, err := UnmarshalHistory(b, DefaultLimits()); err != nil {
			t.Fatalf("history written from accepted input does not decode: %v", err)
		}
	})
}
