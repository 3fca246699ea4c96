package examples_test

import (
	"bytes"
	"io/fs"
	"path"
	"sort"
	"testing"

	"github.com/progress-planner/planner/examples"
	"github.com/progress-planner/planner/pkg/progress"
	"github.com/progress-planner/planner/pkg/synth"
)

// TestNoDrift fails when the committed example files differ from what
// pkg/synth generates now. Fix: go generate ./examples
func TestNoDrift(t *testing.T) {
	want := map[string][]byte{}
	for _, h := range synth.Examples() {
		b, err := synth.Encode(h)
		if err != nil {
			t.Fatal(err)
		}
		want[h.Header.Name+".jsonl"] = b
	}
	files, err := fs.Glob(examples.FS, path.Join(examples.Dir, "*.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(files)
	if len(files) != len(want) {
		t.Errorf("embedded %d files, generator makes %d (run go generate ./examples)", len(files), len(want))
	}
	for _, f := range files {
		got, err := fs.ReadFile(examples.FS, f)
		if err != nil {
			t.Fatal(err)
		}
		w, ok := want[path.Base(f)]
		if !ok {
			t.Errorf("%s: not produced by the generator (run go generate ./examples)", f)
			continue
		}
		if !bytes.Equal(got, w) {
			t.Errorf("%s: differs from the generator output (run go generate ./examples)", f)
		}
	}
}

func TestRoundTrip(t *testing.T) {
	files, _ := fs.Glob(examples.FS, path.Join(examples.Dir, "*.jsonl"))
	if len(files) == 0 {
		t.Fatal("no embedded histories")
	}
	for _, f := range files {
		b, _ := fs.ReadFile(examples.FS, f)
		h, err := progress.ReadHistoryFile(bytes.NewReader(b))
		if err != nil {
			t.Errorf("%s: %v", f, err)
			continue
		}
		if h.Header.Name+".jsonl" != path.Base(f) {
			t.Errorf("%s: header name %q", f, h.Header.Name)
		}
		var out bytes.Buffer
		if err := progress.WriteHistoryFile(&out, h); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(out.Bytes(), b) {
			t.Errorf("%s: read/write round trip changed the file", f)
		}
	}
}
