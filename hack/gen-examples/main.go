// Command gen-examples writes the synthetic example histories of
// pkg/synth (synth.Examples) to examples/histories/<name>.jsonl, removing
// stale *.jsonl files there. Run it from the repository root, or through
// `go generate ./examples` (examples/embed.go carries the directive):
//
//	go run ./hack/gen-examples [-out examples/histories]
//
// The examples package embeds the files; its test fails when the
// committed files differ from what the generator produces now.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/progress-planner/planner/pkg/synth"
)

func main() {
	out := flag.String("out", filepath.Join("examples", "histories"), "output directory")
	flag.Parse()
	if err := run(*out); err != nil {
		fmt.Fprintln(os.Stderr, "gen-examples:", err)
		os.Exit(1)
	}
}

func run(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	keep := map[string]bool{}
	for _, h := range synth.Examples() {
		b, err := synth.Encode(h)
		if err != nil {
			return err
		}
		name := h.Header.Name + ".jsonl"
		keep[name] = true
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			return err
		}
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if !e.IsDir() && strings.HasSuffix(e.Name(), ".jsonl") && !keep[e.Name()] {
			if err := os.Remove(filepath.Join(dir, e.Name())); err != nil {
				return err
			}
		}
	}
	fmt.Printf("wrote %d histories to %s\n", len(keep), dir)
	return nil
}
