package progress

import (
	"bytes"
	"testing"
)

// FuzzUnmarshalHistory: the stored history in a ProgressForecast status is
// read back as untrusted input (anyone who can edit the status can forge
// it). Whatever decodes must respect the limits, feed Observe without
// panics, and re-encode to a history that decodes the same (forecast's
// FuzzFitUntrustedHistory feeds it to Fit).
func FuzzUnmarshalHistory(f *testing.F) {
	hf, err := ReadHistoryFile(bytes.NewReader([]byte(sampleHistory)))
	if err != nil {
		f.Fatal(err)
	}
	h := NewHistory(DefaultLimits())
	for _, r := range hf.Reports {
		h.Observe(r.T, r.TrainerStatus)
	}
	seed, err := h.MarshalJSON()
	if err != nil {
		f.Fatal(err)
	}
	f.Add(seed)
	columnar, err := h.marshalColumnar()
	if err != nil {
		f.Fatal(err)
	}
	f.Add(columnar)
	f.Add([]byte(`{"v":1,"t":[1,2,3],"segStarts":[1],"nonFinite":[2],"cols":{}}`))
	f.Add([]byte(`{"v":1,"t":[1e308,-1],"cols":{"m:loss":{}}}`))
	f.Add([]byte(`{}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		l := DefaultLimits()
		h, err := UnmarshalHistory(b, l)
		if err != nil {
			return
		}
		kept := 0
		for _, name := range h.names {
			if !h.alwaysKept(name) {
				kept++
			}
		}
		if kept > l.MaxMetrics {
			t.Fatalf("%d metric series decoded, limit %d", kept, l.MaxMetrics)
		}
		out, err := h.MarshalJSON()
		if err != nil {
			t.Fatalf("re-encode: %v", err)
		}
		h2, err := UnmarshalHistory(out, l)
		if err != nil {
			t.Fatalf("re-encoded history does not decode: %v\n%s", err, out)
		}
		if h2.Len() != h.Len() {
			t.Fatalf("round trip changed the length: %d → %d", h.Len(), h2.Len())
		}
		next := h.LastReport() + 5
		if next != next || next > 1e300 {
			next = 1
		}
		h.Observe(next, TrainerStatus{Metrics: []MetricValue{{Name: "loss", Value: "0.5"}}})
	})
}
