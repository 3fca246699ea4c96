package progress

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// HistoryPaths is how every command names its history files: each path
// is a file (taken whatever its extension; "-" is standard input) or a
// directory searched recursively for *.jsonl. The result is sorted, each
// file once.
func HistoryPaths(paths []string) ([]string, error) {
	seen := map[string]bool{}
	var files []string
	keep := func(p string) {
		if !seen[p] {
			seen[p] = true
			files = append(files, p)
		}
	}
	for _, p := range paths {
		if p == "-" {
			keep(p)
			continue
		}
		st, err := os.Stat(p)
		if err != nil {
			return nil, err
		}
		if !st.IsDir() {
			keep(p)
			continue
		}
		err = filepath.WalkDir(p, func(fp string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if !d.IsDir() && strings.HasSuffix(d.Name(), ".jsonl") {
				keep(fp)
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("searching %s for *.jsonl: %w", p, err)
		}
	}
	sort.Strings(files)
	return files, nil
}
