// Command extcurves recasts public training logs of job kinds the shared
// corpus lacks (Ultralytics YOLO results.csv, PyTorch Lightning CSVLogger
// metrics.csv) as progress-history files, the format
// `planner backtest` reads (the shared data's README, section 1), so the
// forecaster can be scored on runs no constant was chosen on
// (docs/backtest.md 7.25).
//
//	go run ./hack/extcurves -in test/external-curves -out /tmp/extcurves
//
// -in holds one directory per log kind (yolo, lightning), each with a
// provenance.tsv naming every run's tool, repository, commit, paths,
// licence, objective and planned epochs, and the raw files under
// <kind>/<nn>/ (test/external-curves/README.md). The recast follows the
// shared corpus's rules: one candidate report per log point, reports less
// than 5 s after the previous one dropped (their values still cached), every
// metric's latest value repeated, progressPercentage and
// estimatedRemainingSeconds from the planned total where one is known, and
// a final 100 % report for a run that logged its whole budget. The logs
// have no clock: time is a nominal 60 s per epoch (timeBasis
// "synthesized-uniform-epochs"), or the log's own cumulative "time" column
// where it has one.
package main

import (
	"encoding/csv"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/progress-planner/planner/pkg/progress"
	"github.com/progress-planner/planner/pkg/synth"
)

// secondsPerEpoch is the nominal epoch time of a log without a clock; only
// ratios of times matter to the forecasts scored on these files.
const secondsPerEpoch = 60

func main() {
	in := flag.String("in", "test/external-curves", "directory with <kind>/provenance.tsv and the raw logs")
	out := flag.String("out", "", "directory to write the progress-history files to (created)")
	flag.Parse()
	if err := run(*in, *out); err != nil {
		fmt.Fprintln(os.Stderr, "extcurves:", err)
		os.Exit(1)
	}
}

func run(in, out string) error {
	if out == "" {
		return errors.New("-out is required")
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	kinds, err := os.ReadDir(in)
	if err != nil {
		return err
	}
	n := 0
	for _, k := range kinds {
		if !k.IsDir() {
			continue
		}
		dir := filepath.Join(in, k.Name())
		rows, err := readTSV(filepath.Join(dir, "provenance.tsv"))
		if err != nil {
			return err
		}
		for _, p := range rows {
			r, err := parseRun(dir, p)
			if err != nil {
				return fmt.Errorf("%s/%s: %w", k.Name(), p["nn"], err)
			}
			if err := write(out, r); err != nil {
				return fmt.Errorf("%s/%s: %w", k.Name(), p["nn"], err)
			}
			n++
		}
	}
	fmt.Printf("wrote %d files to %s\n", n, out)
	return nil
}

// point is one log point: how much of the run was done (epochs), the time
// if the log has a clock (NaN if not), and the metrics logged there.
type point struct {
	done float64
	t    float64
	vals map[string]float64
}

// runLog is one run, parsed: what the header needs and its log points.
type runLog struct {
	dataset, name string
	prov          map[string]string
	metric, dir   string
	total         float64 // planned epochs; 0 when unknown
	complete      bool
	points        []point
}

func parseRun(dir string, p map[string]string) (*runLog, error) {
	r := &runLog{prov: p, complete: p["complete"] == "yes", metric: p["objective_metric"], dir: p["direction"]}
	owner, repo, _ := strings.Cut(p["repo"], "/")
	var err error
	switch p["tool"] {
	case "yolo":
		r.dataset = "ultralytics-yolo"
		err = parseYOLO(filepath.Join(dir, p["nn"]), p, r)
	case "lightning":
		r.dataset = "lightning-csvlogger"
		err = parseLightning(filepath.Join(dir, p["nn"]), p, r)
	default:
		err = fmt.Errorf("unknown tool %q", p["tool"])
	}
	r.name = strings.Join([]string{r.dataset, owner, repo, p["nn"]}, "__")
	return r, err
}

// yoloColumns maps a results.csv column (YOLOv5's, then YOLOv8/11's) to the
// metric name reported. Mask and pose columns, the other learning-rate
// groups and per-class extras are left out. learning_rate is the weights'
// group (x/lr1, lr/pg1): the bias group's rate (x/lr0, lr/pg0) starts at
// the warm-up bias rate and falls while the weights' rate warms up.
var yoloColumns = map[string]string{
	"metrics/mAP_0.5:0.95": "map50_95", "metrics/mAP50-95(B)": "map50_95",
	"metrics/mAP_0.5": "map50", "metrics/mAP50(B)": "map50",
	"metrics/precision": "precision", "metrics/precision(B)": "precision",
	"metrics/recall": "recall", "metrics/recall(B)": "recall",
	"train/box_loss": "train_box_loss", "train/obj_loss": "train_obj_loss",
	"train/cls_loss": "train_cls_loss", "train/dfl_loss": "train_dfl_loss",
	"val/box_loss": "val_box_loss", "val/obj_loss": "val_obj_loss",
	"val/cls_loss": "val_cls_loss", "val/dfl_loss": "val_dfl_loss",
	"x/lr1": "learning_rate", "lr/pg1": "learning_rate",
}

func parseYOLO(dir string, p map[string]string, r *runLog) error {
	head, rows, err := readLog(dir, "results.csv", p, r)
	if err != nil {
		return err
	}
	epochCol, timeCol := index(head, "epoch"), index(head, "time")
	var timed resumedClock
	if epochCol < 0 {
		return errors.New("results.csv has no epoch column")
	}
	for i, row := range rows {
		e, err := cell(row, epochCol)
		if err != nil {
			return fmt.Errorf("row %d: %w", i+2, err)
		}
		if i == 0 && e != 0 && e != 1 {
			return fmt.Errorf("first epoch %g: a resumed fragment", e)
		}
		pt := point{done: e, t: math.NaN(), vals: map[string]float64{}}
		if rows0, _ := cell(rows[0], epochCol); rows0 == 0 {
			pt.done = e + 1 // YOLOv5 counts epochs from 0, v8 from 1
		}
		if timeCol >= 0 {
			if pt.t, err = timed.at(row, timeCol); err != nil {
				return fmt.Errorf("row %d: %w", i+2, err)
			}
		}
		loss := 0.0
		for c, h := range head {
			name, ok := yoloColumns[h]
			if !ok {
				continue
			}
			v, err := cell(row, c)
			if err != nil {
				return fmt.Errorf("row %d: %w", i+2, err)
			}
			pt.vals[name] = v
			if strings.HasPrefix(name, "train_") {
				loss += v
			}
		}
		pt.vals["loss"] = loss // the training loss YOLO prints: the sum of its parts
		r.points = append(r.points, pt)
	}
	return nil
}

// write recasts r's log points as status reports and writes the history.
func write(out string, r *runLog) error {
	if len(r.points) == 0 {
		return errors.New("no log points")
	}
	timeBasis := "wallclock-from-log"
	last := r.points[len(r.points)-1]
	if math.IsNaN(last.t) {
		timeBasis = "synthesized-uniform-epochs"
	}
	f := &progress.HistoryFile{Header: header(r, timeBasis)}
	cache := map[string]float64{}
	sent := math.Inf(-1)
	for i, pt := range r.points {
		for k, v := range pt.vals {
			cache[k] = v
		}
		t := pt.t
		if math.IsNaN(t) {
			t = pt.done * secondsPerEpoch
		}
		final := i == len(r.points)-1
		if !synth.Sends(t, sent, synth.DefaultMinReportInterval, i == 0, final) {
			continue
		}
		sent = t
		f.Reports = append(f.Reports, progress.FileReport{T: t, TrainerStatus: status(r, pt.done, t, cache, final && r.complete)})
	}
	f.Header.Outcome.EndSeconds = sent
	if v, ok := cache[r.metric]; ok {
		f.Header.Outcome.Final = map[string]json.RawMessage{r.metric: json.RawMessage(synth.FormatValue(v))}
	}
	w, err := os.Create(filepath.Join(out, r.name+".jsonl"))
	if err != nil {
		return err
	}
	if err := progress.WriteHistoryFile(w, f); err != nil {
		w.Close()
		return err
	}
	return w.Close()
}

// status is one report: every metric's latest value (the objective first),
// the epoch counters, and progress and ETA where the planned total is known
// (synth.ProgressETA, the corpus reporter's rule, as is synth.Sends for
// which points are sent).
func status(r *runLog, done, t float64, cache map[string]float64, ended bool) progress.TrainerStatus {
	names := make([]string, 0, len(cache))
	for k := range cache {
		if k != r.metric {
			names = append(names, k)
		}
	}
	sort.Strings(names)
	if _, ok := cache[r.metric]; ok {
		names = append([]string{r.metric}, names...)
	}
	var s progress.TrainerStatus
	for _, k := range names {
		s.Metrics = append(s.Metrics, progress.MetricValue{Name: k, Value: synth.FormatValue(cache[k])})
	}
	s.Metrics = append(s.Metrics, progress.MetricValue{Name: "current_epoch", Value: synth.FormatValue(done)})
	if r.total <= 0 {
		return s
	}
	s.Metrics = append(s.Metrics, progress.MetricValue{Name: "total_epochs", Value: synth.FormatValue(r.total)})
	pct, eta := synth.ProgressETA(t, 0, done, r.total, ended)
	s.ProgressPercentage, s.EstimatedRemainingSeconds = &pct, eta
	return s
}

func header(r *runLog, timeBasis string) progress.FileHeader {
	p := r.prov
	src, _ := json.Marshal(map[string]string{"dataset": r.dataset, "repo": p["repo"], "commit": p["commit"],
		"path": p["log_path"], "license": p["license_spdx"]})
	raw := func(v any) json.RawMessage { b, _ := json.Marshal(v); return b }
	status := "unknown" // the log stops before its budget: early stopping or an interruption
	if r.complete {
		status = "completed"
	}
	info := map[string]json.RawMessage{"gpus": raw(nil), "progressUnit": raw("epochs"),
		"configPath": raw(p["config_path"]), "licenseFile": raw(p["license_path"]),
		"licenseCommit": raw(p["license_commit"]), "logPoints": raw(len(r.points))}
	if r.total > 0 {
		info["totalEpochs"] = raw(r.total)
	}
	return progress.FileHeader{
		Kind: progress.HistoryFileKind, Version: progress.HistoryFileVersion, Name: r.name,
		Source:    src,
		Objective: &progress.FileObjective{Metric: r.metric, Direction: r.dir},
		TimeBasis: timeBasis,
		Outcome:   &progress.Outcome{Status: status},
		RunInfo:   info,
	}
}

// configEpochs is the planned number of epochs: the provenance's, else the
// run's own config file's (epochs:, max_epochs:); 0 when neither says.
func configEpochs(dir string, p map[string]string) (float64, error) {
	if v, err := strconv.ParseFloat(p["planned_epochs"], 64); err == nil && v > 0 {
		return v, nil
	}
	if p["config_path"] == "" {
		return 0, nil
	}
	b, err := os.ReadFile(filepath.Join(dir, filepath.Base(p["config_path"])))
	if err != nil {
		return 0, err
	}
	var m map[string]any
	if err := yaml.Unmarshal(b, &m); err != nil {
		return 0, fmt.Errorf("%s: %w", p["config_path"], err)
	}
	for _, k := range []string{"epochs", "max_epochs"} {
		if v, ok := m[k].(int); ok && v > 0 {
			return float64(v), nil
		}
	}
	return 0, nil
}

// readLog reads a run's CSV log and sets its planned epochs.
func readLog(dir, name string, p map[string]string, r *runLog) (head []string, rows [][]string, err error) {
	if head, rows, err = readCSV(filepath.Join(dir, name)); err != nil {
		return nil, nil, err
	}
	r.total, err = configEpochs(dir, p)
	return head, rows, err
}

func readTSV(path string) ([]map[string]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	head := strings.Split(lines[0], "\t")
	var out []map[string]string
	for _, l := range lines[1:] {
		m := map[string]string{}
		for i, v := range strings.Split(l, "\t") {
			if i < len(head) {
				m[head[i]] = strings.TrimSpace(v)
			}
		}
		out = append(out, m)
	}
	return out, nil
}

// readCSV reads a CSV log with its header's names and every cell trimmed
// (YOLOv5 pads them with spaces).
func readCSV(path string) (head []string, rows [][]string, err error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	cr := csv.NewReader(f)
	cr.FieldsPerRecord = -1
	all, err := cr.ReadAll()
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(all) < 2 {
		return nil, nil, fmt.Errorf("%s: no rows", path)
	}
	for _, row := range all {
		for i := range row {
			row[i] = strings.TrimSpace(row[i])
		}
	}
	return all[0], all[1:], nil
}

func index(head []string, name string) int {
	for i, h := range head {
		if h == name {
			return i
		}
	}
	return -1
}

func cell(row []string, c int) (float64, error) {
	if c >= len(row) {
		return 0, fmt.Errorf("column %d missing", c+1)
	}
	return strconv.ParseFloat(row[c], 64)
}

// parseLightning reads a CSVLogger metrics.csv: rows at training steps
// (the training loss, the learning-rate monitor's lr-<optimizer>) and at
// validation ends (the objective, with its epoch). Rows of one step are one
// log point; progress is the step over the steps an epoch takes (from the
// validation rows), so a point mid-epoch has a fractional epoch.
func parseLightning(dir string, p map[string]string, r *runLog) error {
	head, rows, err := readLog(dir, "metrics.csv", p, r)
	if err != nil {
		return err
	}
	stepCol, epochCol, objCol := index(head, "step"), index(head, "epoch"), index(head, r.metric)
	if stepCol < 0 || epochCol < 0 || objCol < 0 {
		return fmt.Errorf("metrics.csv lacks step, epoch or %s", r.metric)
	}
	lossCol, lrCol := -1, -1
	for c, h := range head {
		switch {
		case lossCol < 0 && strings.Contains(h, "train_loss"):
			lossCol = c
		case lrCol < 0 && strings.HasPrefix(h, "lr"):
			lrCol = c
		}
	}
	// Steps per epoch: the validation rows end epochs.
	spe := 0.0
	for _, row := range rows {
		st, e1 := cell(row, stepCol)
		ep, e2 := cell(row, epochCol)
		if _, e3 := cell(row, objCol); e1 == nil && e2 == nil && e3 == nil {
			spe = (st + 1) / (ep + 1)
		}
	}
	if spe <= 0 {
		return errors.New("no validation row with a step and an epoch")
	}
	for _, row := range rows {
		st, err := cell(row, stepCol)
		if err != nil {
			continue // a row without a step carries nothing to place
		}
		done := (st + 1) / spe
		if n := len(r.points); n == 0 || r.points[n-1].done != done {
			r.points = append(r.points, point{done: done, t: math.NaN(), vals: map[string]float64{}})
		}
		pt := &r.points[len(r.points)-1]
		for c, name := range map[int]string{objCol: r.metric, lossCol: "loss", lrCol: "learning_rate"} {
			if c < 0 {
				continue
			}
			if v, err := cell(row, c); err == nil {
				pt.vals[name] = v
			}
		}
	}
	return nil
}

// resumedClock reads a log's cumulative time column. A resumed YOLO run
// starts its clock again from zero; its time then continues from where the
// log before the resume ended.
type resumedClock struct{ offset, last float64 }

func (c *resumedClock) at(row []string, col int) (float64, error) {
	v, err := cell(row, col)
	if err != nil {
		return 0, err
	}
	if v+c.offset < c.last {
		c.offset = c.last
	}
	c.last = v + c.offset
	return c.last, nil
}
