package backtest

import (
	"encoding/json"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/progress-planner/planner/pkg/progress"
)

// Metamorphic relations: every file (originals and incidents alike)
// recast in other units, to check that the planner's verdicts and scored
// errors do not depend on them (docs/backtest.md 7.20). The held-out
// corpus has job kinds the development corpus lacks — a minimized
// objective with a target and no fixed total, runs far longer or shorter
// — and these relations say how far the development figures carry to
// them. Unlike the stress tests they change no label: the truths move
// with the file.

// MinTimeScale and MaxTimeScale bound Options.TimeScale.
const MinTimeScale, MaxTimeScale = 1e-3, 1e3

// recast applies the evaluator's metamorphic relations to f.
func (ev *evaluator) recast(f *progress.HistoryFile) *progress.HistoryFile {
	if ev.mirror {
		f = mirroredObjective(f)
	}
	if ev.timeScale != 1 {
		f = scaledTime(f, ev.timeScale)
	}
	return f
}

// mirroredObjective is f with the objective's every value v (reports,
// outcome.final, target) replaced by −v and its direction flipped
// (Options.Mirror). −v rather than c − v keeps the physical bounds: a loss
// ≥ 0 becomes a maximized value ≤ 0, whose oriented form is the same
// number. A file without a header objective is returned as it is.
func mirroredObjective(f *progress.HistoryFile) *progress.HistoryFile {
	o := f.Header.Objective
	if o == nil {
		return f
	}
	flip := map[string]string{"minimize": "maximize", "maximize": "minimize"}
	if _, ok := flip[o.Direction]; !ok {
		return f
	}
	out := &progress.HistoryFile{Header: f.Header, Reports: make([]progress.FileReport, len(f.Reports))}
	obj := *o
	obj.Direction = flip[o.Direction]
	if o.Target != nil {
		v := -*o.Target
		obj.Target = &v
	}
	out.Header.Objective = &obj
	if oc := f.Header.Outcome; oc != nil {
		end := *oc
		end.Final = maps.Clone(oc.Final)
		if v, ok := oc.FinalValue(o.Metric); ok && !math.IsNaN(v) {
			end.Final[o.Metric] = jsonNumber(-v)
		}
		out.Header.Outcome = &end
	}
	for i, r := range f.Reports {
		ms := slices.Clone(r.TrainerStatus.Metrics)
		for k := range ms {
			if ms[k].Name != o.Metric {
				continue
			}
			if v, err := strconv.ParseFloat(ms[k].Value, 64); err == nil && !math.IsNaN(v) && !math.IsInf(v, 0) {
				ms[k].Value = strconv.FormatFloat(-v, 'g', -1, 64)
			}
		}
		r.TrainerStatus.Metrics = ms
		out.Reports[i] = r
	}
	return out
}

// scaledTime is f with every time multiplied by k (Options.TimeScale):
// report times, reported remaining seconds, the run's end and the
// incident's *Seconds fields.
func scaledTime(f *progress.HistoryFile, k float64) *progress.HistoryFile {
	out := &progress.HistoryFile{Header: f.Header, Reports: make([]progress.FileReport, len(f.Reports))}
	if oc := f.Header.Outcome; oc != nil {
		end := *oc
		end.EndSeconds *= k
		out.Header.Outcome = &end
	}
	if f.Header.Incident != nil {
		out.Header.Incident = maps.Clone(f.Header.Incident)
		for key := range out.Header.Incident {
			if v, ok := f.Header.IncidentFloat(key); ok && strings.HasSuffix(key, "Seconds") {
				out.Header.Incident[key] = jsonNumber(v * k)
			}
		}
	}
	for i, r := range f.Reports {
		r.T *= k
		if e := r.TrainerStatus.EstimatedRemainingSeconds; e != nil {
			v := *e * k
			r.TrainerStatus.EstimatedRemainingSeconds = &v
		}
		out.Reports[i] = r
	}
	return out
}

// jsonNumber is v as a raw JSON number (v finite), the form the
// header's numbers are read back from (Outcome.FinalValue,
// FileHeader.IncidentFloat).
func jsonNumber(v float64) json.RawMessage {
	return json.RawMessage(strconv.FormatFloat(v, 'g', -1, 64))
}
