// Package backtest replays recorded progress histories through the
// planner and scores its forecasts against what actually happened, next to
// the corpus's baselines (shared/eval/baseline.py), with the same
// definitions so that the figures compare one to one. It is pure: files
// in, a Report out; no Kubernetes.
//
// docs/backtest.md documents the method, every definition and the JSON
// schema of Report.
package backtest

import (
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"

	"github.com/progress-planner/planner/pkg/progress"
)

// DefaultCutoffs are the run fractions (of outcome.endSeconds) at which
// histories are truncated and forecast.
var DefaultCutoffs = []float64{0.25, 0.5, 0.75}

// Input is one history file to score.
type Input struct {
	Name string // shown in the report (a path)
	Load func() (*progress.HistoryFile, error)
}

// Options configure Run. Zero values take the defaults.
type Options struct {
	Cutoffs []float64   // default DefaultCutoffs
	Workers int         // default GOMAXPROCS
	PerJob  bool        // include Report.Jobs (with the forecasts)
	Engine  Engine      // default ForecastEngine{}
	Optimus CurveFitter // default OptimusOnly
}

// FilesFromPaths expands files and directories (recursively, *.jsonl)
// into inputs, sorted by path like the baseline's find_files. A file named
// directly is taken whatever its extension.
func FilesFromPaths(paths []string) ([]Input, error) {
	seen := map[string]bool{}
	var files []string
	for _, p := range paths {
		st, err := os.Stat(p)
		if err != nil {
			return nil, err
		}
		if !st.IsDir() {
			if !seen[p] {
				seen[p] = true
				files = append(files, p)
			}
			continue
		}
		err = filepath.WalkDir(p, func(fp string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if !d.IsDir() && strings.HasSuffix(d.Name(), ".jsonl") && !seen[fp] {
				seen[fp] = true
				files = append(files, fp)
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	sort.Strings(files)
	out := make([]Input, len(files))
	for i, fp := range files {
		fp := fp
		out[i] = Input{Name: fp, Load: func() (*progress.HistoryFile, error) {
			return load(func() (io.ReadCloser, error) { return os.Open(fp) }, fp)
		}}
	}
	return out, nil
}

// load reads one history file (readBounded); errors name it.
func load(open func() (io.ReadCloser, error), name string) (*progress.HistoryFile, error) {
	r, err := open()
	if err != nil {
		return nil, err
	}
	defer r.Close()
	hf, err := readBounded(r)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return hf, nil
}

// MaxReports and MaxFileBytes bound one history file the backtest scores.
// Scoring replays a file's cutoffs and baselines over all its reports, so
// it holds the whole file (unlike forecast and report, which stream into
// the bounded History); with at most MaxWorkers files at a time this
// bounds its memory (docs/limits.md). The largest corpus file has ~7,000
// reports and 1.8 MB.
const (
	MaxReports   = 50_000
	MaxFileBytes = 16 << 20
)

// readBounded reads a history file, refusing one of more than MaxReports
// reports or MaxFileBytes bytes as soon as it has read that much.
func readBounded(r io.Reader) (*progress.HistoryFile, error) {
	bc := &byteCap{r: r, left: MaxFileBytes}
	hf, err := progress.ReadHistoryFileMax(bc, MaxReports)
	if err != nil && bc.left <= 0 {
		// The cut may fall inside a line: say why it was cut, not that the
		// line's JSON ends early.
		return nil, errTooBig
	}
	return hf, err
}

var errTooBig = fmt.Errorf("more than %d MiB: the backtest holds a whole file, at most %d MiB", MaxFileBytes>>20, MaxFileBytes>>20)

// byteCap fails a read past left bytes.
type byteCap struct {
	r    io.Reader
	left int64
}

func (b *byteCap) Read(p []byte) (int, error) {
	if b.left <= 0 {
		return 0, errTooBig
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.r.Read(p)
	b.left -= int64(n)
	return n, err
}

// FilesFromFS lists the *.jsonl files under root in fsys (e.g. the
// embedded examples), sorted by path.
func FilesFromFS(fsys fs.FS, root string) ([]Input, error) {
	var files []string
	err := fs.WalkDir(fsys, root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && strings.HasSuffix(d.Name(), ".jsonl") {
			files = append(files, p)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	sort.Strings(files)
	out := make([]Input, len(files))
	for i, p := range files {
		p := p
		out[i] = Input{Name: p, Load: func() (*progress.HistoryFile, error) {
			return load(func() (io.ReadCloser, error) { return fsys.Open(p) }, path.Base(p))
		}}
	}
	return out, nil
}

// MaxWorkers caps Options.Workers: scoring is CPU-bound, so more workers
// than a small multiple of the cores only add memory (each holds a file's
// reports and its forecasts).
func MaxWorkers() int { return 4 * runtime.GOMAXPROCS(0) }

// Run scores every input and aggregates the results. Files are processed
// in parallel (Options.Workers); the report's order is the input order, so
// the output is deterministic.
func Run(inputs []Input, opt Options) *Report {
	if len(opt.Cutoffs) == 0 {
		opt.Cutoffs = DefaultCutoffs
	}
	if opt.Workers <= 0 {
		opt.Workers = runtime.GOMAXPROCS(0)
	}
	opt.Workers = min(opt.Workers, MaxWorkers(), max(len(inputs), 1))
	if opt.Engine == nil {
		opt.Engine = ForecastEngine{}
	}
	if opt.Optimus == nil {
		opt.Optimus = OptimusOnly
	}
	ev := &evaluator{cutoffs: opt.Cutoffs, engine: opt.Engine, optimus: opt.Optimus, perJob: opt.PerJob}

	type result struct {
		job Job
		err error
	}
	results := make([]result, len(inputs))
	work := make(chan int)
	var wg sync.WaitGroup
	for w := 0; w < opt.Workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				results[i].job, results[i].err = evalInput(ev, inputs[i])
			}
		}()
	}
	for i := range inputs {
		work <- i
	}
	close(work)
	wg.Wait()

	r := &Report{SchemaVersion: SchemaVersion, Cutoffs: opt.Cutoffs, FilesRead: len(inputs)}
	var jobs []Job
	for i, res := range results {
		if res.err != nil {
			r.Skipped = append(r.Skipped, Skipped{File: inputs[i].Name, Error: res.err.Error()})
			continue
		}
		jobs = append(jobs, res.job)
	}
	aggregate(r, jobs)
	if opt.PerJob {
		r.Jobs = jobs
		if r.Jobs == nil {
			r.Jobs = []Job{}
		}
	}
	return r
}

// evalInput loads and scores one input; a panic in the engine is reported
// as that file's error instead of killing the whole run.
func evalInput(ev *evaluator, in Input) (job Job, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("panic while scoring: %v", p)
		}
	}()
	f, err := in.Load()
	if err != nil {
		return Job{}, err
	}
	return ev.evalFile(in.Name, f)
}
