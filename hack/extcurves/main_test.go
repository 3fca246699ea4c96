package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/progress-planner/planner/pkg/progress"
)

// A YOLOv8 log with a clock that restarts at a resume: the recast keeps
// time running, drops a report less than 5 s after the previous one, reads
// the weights' learning rate and ends a complete run at 100 %.
func TestRecastYOLOLog(t *testing.T) {
	in, out := t.TempDir(), t.TempDir()
	dir := filepath.Join(in, "yolo", "01")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	csv := "epoch,time,train/box_loss,train/cls_loss,metrics/mAP50-95(B),lr/pg0,lr/pg1\n" +
		"1,10,1.0,2.0,0.10,0.09,0.001\n" +
		"2,12,0.9,1.8,0.15,0.08,0.002\n" + // 2 s after the previous report: dropped
		"3,30,0.8,1.6,0.20,0.07,0.003\n" +
		"4,8,0.7,1.5,0.22,0.06,0.002\n" // the clock restarts: 30 + 8
	write := func(name, s string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("results.csv", csv)
	write("args.yaml", "epochs: 4\n")
	prov := "nn\ttool\trepo\tcommit\tlog_path\tconfig_path\tlicense_spdx\tobjective_metric\tdirection\tplanned_epochs\tcomplete\n" +
		"01\tyolo\towner/repo\tabc\truns/detect/train/results.csv\truns/detect/train/args.yaml\tMIT\tmap50_95\tmaximize\t\tyes\n"
	if err := os.WriteFile(filepath.Join(in, "yolo", "provenance.tsv"), []byte(prov), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := run(in, out); err != nil {
		t.Fatal(err)
	}
	f, err := progress.ReadHistoryPath(filepath.Join(out, "ultralytics-yolo__owner__repo__01.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	var ts []float64
	for _, r := range f.Reports {
		ts = append(ts, r.T)
	}
	if want := []float64{10, 30, 38}; !slices.Equal(ts, want) {
		t.Fatalf("report times %v, want %v", ts, want)
	}
	last := f.Reports[len(f.Reports)-1].TrainerStatus
	if last.ProgressPercentage == nil || *last.ProgressPercentage != 100 || *last.EstimatedRemainingSeconds != 0 {
		t.Errorf("a complete run does not end at 100 %%: %+v", last)
	}
	got := map[string]string{}
	for _, m := range last.Metrics {
		got[m.Name] = m.Value
	}
	if got["learning_rate"] != "0.002" || got["loss"] != "2.2" || got["map50_95"] != "0.22" || got["total_epochs"] != "4" {
		t.Errorf("last report's metrics %v", got)
	}
	if f.Header.Outcome.Status != "completed" || f.Header.Outcome.EndSeconds != 38 || !strings.Contains(string(f.Header.Source), `"license":"MIT"`) {
		t.Errorf("header %+v %s", f.Header.Outcome, f.Header.Source)
	}
}
