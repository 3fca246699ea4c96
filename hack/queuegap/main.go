// Command queuegap replays each original run of a corpus twice, as written
// and with one wait in the queue inserted (the controller tells the
// history of the readmission, History.Resume), and counts the forecasts
// after the readmission whose plateau, hang or divergence call differs
// between the two (a diagnostic; docs/backtest.md 7.48). A wait is time
// the job did not run; nothing the forecast calls should change with it.
//
//	go run ./hack/queuegap [--at 0.3,0.5] [--wait 3] [--span 0.2] ../shared/data/curves
package main

import (
	"flag"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/progress-planner/planner/pkg/forecast"
	"github.com/progress-planner/planner/pkg/progress"
)

// calls counts the forecasts of one replay by what they call.
type calls struct{ n, plateaued, hung, diverging int }

func (c *calls) add(d calls) {
	c.n += d.n
	c.plateaued += d.plateaued
	c.hung += d.hung
	c.diverging += d.diverging
}

func main() {
	at := flag.String("at", "0.3,0.5", "run fractions at which the job is evicted (one replay each)")
	wait := flag.Float64("wait", 3, "the wait in the queue, in multiples of the time the job had run")
	span := flag.Float64("span", 0.2, "forecasts are compared at every report within this share of the run after the readmission")
	flag.Parse()
	var fracs []float64
	for _, s := range strings.Split(*at, ",") {
		v, err := strconv.ParseFloat(s, 64)
		if err != nil || !(v > 0 && v < 1) {
			fail(fmt.Errorf("--at %q: want fractions in (0, 1)", *at))
		}
		fracs = append(fracs, v)
	}
	files, err := originals(flag.Args())
	fail(err)
	before, after := map[string]*calls{}, map[string]*calls{}
	for _, p := range files {
		hf, err := progress.ReadHistoryPath(p)
		fail(err)
		obj, ok := hf.Header.ObjectiveSpec()
		if !ok || hf.Header.Outcome == nil {
			continue
		}
		ds := filepath.Base(filepath.Dir(p))
		if before[ds] == nil {
			before[ds], after[ds] = &calls{}, &calls{}
		}
		for _, fr := range fracs {
			b := replay(hf, obj, fr, 0, *span)
			a := replay(hf, obj, fr, *wait, *span)
			before[ds].add(b)
			after[ds].add(a)
			if a != b {
				fmt.Printf("%s evicted at %.0f%%: plateaued %d -> %d, hung %d -> %d, diverging %d -> %d of %d forecasts\n",
					hf.Header.Name, 100*fr, b.plateaued, a.plateaued, b.hung, a.hung, b.diverging, a.diverging, b.n)
			}
		}
	}
	fmt.Printf("\n| dataset | forecasts | plateaued | hung | diverging |\n|---|---|---|---|---|\n")
	for _, k := range slices.Sorted(maps.Keys(before)) {
		b, a := before[k], after[k]
		fmt.Printf("| %s | %d | %d → %d | %d → %d | %d → %d |\n", k, b.n, b.plateaued, a.plateaued, b.hung, a.hung, b.diverging, a.diverging)
	}
}

// replay feeds hf's reports in order. At the first report at or past frac
// of the run the job is readmitted after waiting wait × the time so far
// (no wait: as written), and from the next report on, while within span
// of the run, every report is forecast.
func replay(hf *progress.HistoryFile, obj progress.Objective, frac, wait, span float64) calls {
	h := progress.NewHistory(progress.DefaultLimits())
	end := hf.Header.Outcome.EndSeconds
	var c calls
	shift, readmitted := 0.0, -1
	for i, r := range hf.Reports {
		if readmitted < 0 && r.T >= frac*end {
			readmitted, shift = i, wait*r.T
			if wait > 0 {
				h.Resume()
			}
		}
		h.Observe(r.T+shift, r.TrainerStatus)
		if readmitted < 0 || i == readmitted || r.T > (frac+span)*end {
			continue
		}
		f := forecast.Fit(h, obj, r.T+shift, forecast.DefaultSettings())
		c.n++
		if f.Plateaued {
			c.plateaued++
		}
		if f.Hung {
			c.hung++
		}
		if f.Diverging {
			c.diverging++
		}
	}
	return c
}

// originals are the history files under the paths (progress.HistoryPaths),
// incidents left out.
func originals(paths []string) ([]string, error) {
	files, err := progress.HistoryPaths(paths)
	if err != nil {
		return nil, err
	}
	return slices.DeleteFunc(files, func(p string) bool { return strings.HasPrefix(filepath.Base(p), "incident-") }), nil
}

func fail(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
