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
	"math"
	"os"
	"path"
	"runtime"
	"slices"
	"sort"
	"strconv"
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
	// load, when set (FilesFromPaths, FilesFromFS), replaces Load and
	// says whether the file was thinned.
	load func() (*progress.HistoryFile, Thinning, error)
}

// Options configure Run. Zero values take the defaults.
type Options struct {
	Cutoffs []float64   // default DefaultCutoffs
	Workers int         // default GOMAXPROCS
	PerJob  bool        // include Report.Jobs (with the forecasts)
	Engine  Engine      // default ForecastEngine{}
	Optimus CurveFitter // default OptimusOnly
	// OnThinned, when set, is told of each file that was thinned (over
	// MaxReports reports or MaxFileBytes; readBounded); calls are
	// serialized.
	OnThinned func(name string, t Thinning)
	// EvalEvery > 1 scores each original run as if it evaluated its
	// objective that many times less often (sparseEvaluations).
	EvalEvery int
	// EvalPause > 0 scores each original run as if training stopped at
	// each evaluation for EvalPause of its median report intervals
	// (pausedEvaluations; at most MaxEvalPause).
	EvalPause float64
	// LossEvery > 0 scores each original run without a fixed total as if
	// it also logged a training loss every LossEvery seconds between its
	// recorded reports (lossReports; at least MinLossEvery).
	LossEvery float64
	// StopAtGain in (0, 1] scores each original run without a target as
	// one that stops at the level where it had made StopAtGain of its
	// whole improvement, with no fixed total (stoppedAtTarget).
	StopAtGain float64
	// DropTotal scores each original run with a target and a fixed total
	// as one that stops at that target with no fixed total (droppedTotal).
	DropTotal bool
	// SeenFrom in (0, MaxSeenFrom] scores each original run as the planner
	// sees a job it first saw at that share of its run: every report
	// before it dropped (firstSeenAt).
	SeenFrom float64
	// Mirror scores every file with its objective mirrored (v → −v, the
	// direction flipped; mirroredObjective).
	Mirror bool
	// TimeScale, when not 1, scores every file with its times multiplied
	// by TimeScale (scaledTime; in [MinTimeScale, MaxTimeScale]; default 1).
	TimeScale float64
}

// FilesFromPaths expands files and directories into inputs
// (progress.HistoryPaths: directories searched recursively for *.jsonl,
// sorted by path like the baseline's find_files).
func FilesFromPaths(paths []string) ([]Input, error) {
	files, err := progress.HistoryPaths(paths)
	if err != nil {
		return nil, err
	}
	out := make([]Input, len(files))
	for i, fp := range files {
		fp := fp
		out[i] = loader(fp, func() (io.ReadCloser, error) { return os.Open(fp) }, fp)
	}
	return out, nil
}

// loader is the Input of a file opened by open; errors name it errName.
func loader(name string, open func() (io.ReadCloser, error), errName string) Input {
	l := func() (*progress.HistoryFile, Thinning, error) { return load(open, errName) }
	return Input{Name: name, load: l, Load: func() (*progress.HistoryFile, error) {
		f, _, err := l()
		return f, err
	}}
}

// load reads one history file (readBounded); errors name it.
func load(open func() (io.ReadCloser, error), name string) (*progress.HistoryFile, Thinning, error) {
	r, err := open()
	if err != nil {
		return nil, Thinning{}, err
	}
	defer r.Close()
	hf, th, err := readBounded(r)
	if err != nil {
		return nil, Thinning{}, fmt.Errorf("%s: %w", name, err)
	}
	return hf, th, nil
}

// MaxReports and MaxFileBytes bound what the backtest holds of one
// history file. Scoring replays a file's cutoffs and baselines over all
// its reports, so it holds them (unlike forecast and report, which stream
// into the bounded History). A file within both limits is held whole and
// scored exactly; a bigger one is thinned as it is read (readBounded).
// With at most MaxWorkers files at a time this bounds the backtest's
// memory (docs/limits.md). The largest corpus file has ~7,000 reports and
// 1.8 MB.
const (
	MaxReports   = 50_000
	MaxFileBytes = 16 << 20
)

// Thinning says how a file over the limits was thinned (zero: it was
// not).
type Thinning struct {
	Read   int `json:"read"`   // reports in the file
	Kept   int `json:"kept"`   // reports kept
	Stride int `json:"stride"` // every Stride-th report kept, besides the pinned ones
	Pinned int `json:"pinned"` // kept reports that were pinned (thinner.stateChange)
}

// Thinned reports whether the file was thinned.
func (t Thinning) Thinned() bool { return t.Stride > 1 }

// readBounded streams a history file (one line of at most 1 MiB at a
// time) and keeps every report of a file of at most MaxReports reports
// and MaxFileBytes bytes; a bigger file is thinned to at most MaxReports
// reports and maxKeptCost bytes (thinner).
func readBounded(r io.Reader) (*progress.HistoryFile, Thinning, error) {
	cr := &countingReader{r: r}
	hr, err := progress.NewHistoryReader(cr)
	if err != nil {
		return nil, Thinning{}, err
	}
	th := newThinner(hr.Header)
	for {
		rep, err := hr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, Thinning{}, err
		}
		th.add(rep, cr.n > MaxFileBytes)
	}
	f, t := th.file(hr.Header)
	return f, t, nil
}

// countingReader counts the bytes read through it.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// Thinning a file over the limits.
//
// Reports are kept on a grid: report i (0-based, in file order) is kept
// when i is a multiple of the stride k. k starts at 1 (every report) and
// doubles whenever the kept reports exceed MaxReports or maxKeptCost,
// dropping every other grid report; so the kept reports stay evenly
// spread over the file whatever its length (between MaxReports/2 and
// MaxReports of them for a long file of small reports), which is what
// the scoring's evenly spaced stream evaluations and the bounded History
// (512 points, itself thinned) see of a long file anyway. Besides the grid
// these are always kept:
//
//   - the first and the last report (the first objective value, the end
//     of the progress axis);
//   - the first report that carries each field the scoring reads (the
//     objective metric, the progress counters, progressPercentage,
//     estimatedRemainingSeconds): which axis and baselines apply depends on
//     whether any report carries them;
//   - around every change of run state, the report before and the report
//     after: a progress counter or progressPercentage going back (a
//     preempted job resuming from a checkpoint), the first "nan" value (a
//     divergence), a reporting gap of more than gapFactor times the mean
//     interval so far (a hang), and the header's instants (the default
//     cutoffs of outcome.endSeconds and an incident's atSeconds and
//     resumeSeconds), so that the last report before each is the file's.
//
// Pinned reports count towards the limits; at most maxPinned of them, and
// maxKeptCost/4 bytes, are pinned (a file whose progress goes back at
// every report pins no more than that); beyond it they are thinned like
// the others. What thinning changes: the cutoffs and the stream see a
// report at most k-1 reports older than the file's last report before
// them, except at the pinned instants; the plateau's ground truth and the
// final-metric baselines see every k-th distinct objective value, so a
// plateau instant is known to within k reports; the median report
// interval (the hang allowance) is k times the file's.
const (
	maxPinned   = 1024
	maxKeptCost = MaxFileBytes
	gapFactor   = 10
)

// scoredKeys are the metrics whose first appearance is pinned (see
// xkey, doneTotal and the counters of baseline.go).
var scoredKeys = []string{"current_step", "total_steps", "current_epoch", "total_epochs", "samples_count", "tokens_count", "epoch"}

type kept struct {
	progress.FileReport
	i      int // index in the file
	cost   int
	pinned bool
}

type thinner struct {
	kept           []kept
	cost, pinCost  int
	pinned, stride int
	over           bool // the file is beyond MaxReports or MaxFileBytes
	n              int  // reports read
	prev           kept // the last report read
	firstT         float64
	counters       []string           // progress counters whose going back is pinned
	watch          map[string]bool    // fields whose first report is pinned, until seen
	instants       []float64          // header instants not yet passed, ascending
	progress       map[string]float64 // the last value of each progress counter
	sawNaN         bool
}

func newThinner(hd progress.FileHeader) *thinner {
	th := &thinner{stride: 1, progress: map[string]float64{}}
	if hd.Outcome != nil {
		for _, c := range DefaultCutoffs {
			th.instants = append(th.instants, c*hd.Outcome.EndSeconds)
		}
	}
	for _, k := range []string{"atSeconds", "resumeSeconds"} {
		if v, ok := hd.IncidentFloat(k); ok {
			th.instants = append(th.instants, v)
		}
	}
	sort.Float64s(th.instants)
	th.watch = map[string]bool{progressField: true, etaField: true}
	for _, k := range scoredKeys {
		th.watch[k] = true
	}
	if hd.Objective != nil && hd.Objective.Metric != "" {
		th.watch[hd.Objective.Metric] = true
	}
	th.counters = []string{"current_step", "current_epoch", "samples_count", "tokens_count", "epoch"}
	if c := hd.RunInfoString("progressCounter"); c != "" {
		th.watch[c] = true
		th.counters = append(th.counters, c)
	}
	return th
}

// progressField and etaField name the TrainerStatus fields among metrics.
const (
	progressField = "progressPercentage"
	etaField      = "estimatedRemainingSeconds"
)

// reportCost estimates a report's heap size as the backtest holds it.
func reportCost(r progress.FileReport) int {
	c := 96
	for _, m := range r.TrainerStatus.Metrics {
		c += 48 + len(m.Name) + len(m.Value)
	}
	return c
}

// add takes the next report of the file; overBytes: more than
// MaxFileBytes of the file have been read.
func (th *thinner) add(rep progress.FileReport, overBytes bool) {
	cur := kept{FileReport: rep, i: th.n, cost: reportCost(rep)}
	if th.n == 0 {
		th.firstT = rep.T
	}
	th.n++
	th.over = th.over || overBytes || th.n > MaxReports
	pinPrev, pinCur := th.stateChange(rep)
	if pinPrev && th.n > 1 {
		if l := len(th.kept) - 1; l >= 0 && th.kept[l].i == th.prev.i {
			if !th.kept[l].pinned && th.pin(&th.prev) {
				th.kept[l].pinned = true
			}
		} else if th.pin(&th.prev) {
			th.keep(th.prev)
		}
	}
	if (pinCur && th.pin(&cur)) || cur.i%th.stride == 0 {
		th.keep(cur)
	}
	th.prev = cur
	// Within the limits every report is kept: the file is scored exactly.
	for th.over && (len(th.kept) > MaxReports || th.cost > maxKeptCost) && th.stride <= th.n {
		th.stride *= 2
		out := th.kept[:0]
		th.cost = 0
		for _, k := range th.kept {
			if k.pinned || k.i%th.stride == 0 {
				out = append(out, k)
				th.cost += k.cost
			}
		}
		clear(th.kept[len(out):]) // drop the references for the collector
		th.kept = out
	}
}

func (th *thinner) keep(k kept) {
	th.kept = append(th.kept, k)
	th.cost += k.cost
}

// pin marks k pinned if the pin budget allows.
func (th *thinner) pin(k *kept) bool {
	if th.pinned >= maxPinned || th.pinCost+k.cost > maxKeptCost/4 {
		return false
	}
	k.pinned = true
	th.pinned++
	th.pinCost += k.cost
	return true
}

// stateChange says whether rep is to be pinned (pinCur) and whether the
// report before it is too (pinPrev); pin applies the budget.
func (th *thinner) stateChange(rep progress.FileReport) (pinPrev, pinCur bool) {
	ts := rep.TrainerStatus
	first := func(name string) {
		if th.watch[name] {
			delete(th.watch, name)
			pinCur = true
		}
	}
	back := func(name string, v float64) {
		if old, ok := th.progress[name]; ok && v < old {
			pinPrev, pinCur = true, true
		}
		th.progress[name] = v
	}
	if ts.ProgressPercentage != nil {
		first(progressField)
		back(progressField, *ts.ProgressPercentage)
	}
	if ts.EstimatedRemainingSeconds != nil {
		first(etaField)
	}
	for _, m := range ts.Metrics {
		first(m.Name)
		if slices.Contains(th.counters, m.Name) {
			if v, err := strconv.ParseFloat(strings.TrimSpace(m.Value), 64); err == nil && !math.IsNaN(v) {
				back(m.Name, v)
			}
		}
		if !th.sawNaN && strings.EqualFold(strings.TrimSpace(m.Value), "nan") {
			th.sawNaN = true
			pinPrev, pinCur = true, true
		}
	}
	if th.n >= 3 { // a mean interval needs two reports before this one
		mean := (th.prev.T - th.firstT) / float64(th.n-2)
		if mean > 0 && rep.T-th.prev.T > gapFactor*mean {
			pinPrev, pinCur = true, true
		}
	}
	for len(th.instants) > 0 && !progress.AtOrBefore(rep.T, th.instants[0]) {
		th.instants = th.instants[1:]
		pinPrev, pinCur = true, true
	}
	return pinPrev, pinCur
}

// file is what was kept, the last report always included.
func (th *thinner) file(hd progress.FileHeader) (*progress.HistoryFile, Thinning) {
	if th.n > 0 {
		if l := len(th.kept) - 1; l < 0 || th.kept[l].i != th.prev.i {
			th.keep(th.prev)
		}
	}
	f := &progress.HistoryFile{Header: hd, Reports: make([]progress.FileReport, len(th.kept))}
	pinned := 0
	for i, k := range th.kept {
		f.Reports[i] = k.FileReport
		if k.pinned {
			pinned++
		}
	}
	th.kept = nil
	var t Thinning
	if th.stride > 1 {
		t = Thinning{Read: th.n, Kept: len(f.Reports), Stride: th.stride, Pinned: pinned}
	}
	return f, t
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
		out[i] = loader(p, func() (io.ReadCloser, error) { return fsys.Open(p) }, path.Base(p))
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
	if opt.TimeScale == 0 {
		opt.TimeScale = 1
	}
	ev := &evaluator{cutoffs: opt.Cutoffs, engine: opt.Engine, optimus: opt.Optimus, perJob: opt.PerJob, evalEvery: opt.EvalEvery, evalPause: opt.EvalPause, lossEvery: opt.LossEvery, stopAtGain: opt.StopAtGain, dropTotal: opt.DropTotal,
		seenFrom: opt.SeenFrom, mirror: opt.Mirror, timeScale: opt.TimeScale}

	type result struct {
		job Job
		err error
	}
	results := make([]result, len(inputs))
	var thinMu sync.Mutex
	onThin := func(name string, t Thinning) {
		if opt.OnThinned != nil {
			thinMu.Lock()
			defer thinMu.Unlock()
			opt.OnThinned(name, t)
		}
	}
	work := make(chan int)
	var wg sync.WaitGroup
	for w := 0; w < opt.Workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				results[i].job, results[i].err = evalInput(ev, inputs[i], onThin)
			}
		}()
	}
	for i := range inputs {
		work <- i
	}
	close(work)
	wg.Wait()

	r := &Report{SchemaVersion: SchemaVersion, Cutoffs: opt.Cutoffs, EvalEvery: max(opt.EvalEvery, 1), EvalPause: opt.EvalPause, LossEvery: opt.LossEvery, StopAtGain: opt.StopAtGain, DropTotal: opt.DropTotal, SeenFrom: opt.SeenFrom,
		Mirror: opt.Mirror, TimeScale: opt.TimeScale, FilesRead: len(inputs)}
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
func evalInput(ev *evaluator, in Input, onThin func(string, Thinning)) (job Job, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("panic while scoring: %v", p)
		}
	}()
	var f *progress.HistoryFile
	var th Thinning
	if in.load != nil {
		f, th, err = in.load()
		if err == nil && th.Thinned() {
			onThin(in.Name, th)
		}
	} else {
		f, err = in.Load()
	}
	if err != nil {
		return Job{}, err
	}
	job, err = ev.evalFile(in.Name, ev.stressed(ev.recast(f)))
	if th.Thinned() {
		job.Thinned = &th
	}
	return job, err
}
