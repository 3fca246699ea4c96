package progress

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func TestHistoryPaths(t *testing.T) {
	d := t.TempDir()
	for _, f := range []string{"b.jsonl", "sub/a.jsonl", "sub/notes.txt", "sub/deeper/c.jsonl"} {
		p := filepath.Join(d, f)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	named := filepath.Join(d, "sub/notes.txt") // a file named directly is taken as it is
	got, err := HistoryPaths([]string{filepath.Join(d, "sub"), named, filepath.Join(d, "b.jsonl"), filepath.Join(d, "sub/a.jsonl"), "-"})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"-", filepath.Join(d, "b.jsonl"), filepath.Join(d, "sub/a.jsonl"), filepath.Join(d, "sub/deeper/c.jsonl"), named}
	if !slices.Equal(got, want) {
		t.Errorf("HistoryPaths = %v, want %v", got, want)
	}
	if _, err := HistoryPaths([]string{filepath.Join(d, "missing")}); err == nil {
		t.Error("a missing path is not an error")
	}
}
