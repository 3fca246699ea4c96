package backtest

import (
	"cmp"
	"encoding/json"
	"math"
	"slices"
	"strconv"

	"github.com/progress-planner/planner/pkg/progress"
)

// Stress tests: an original run recast as a job kind the corpus lacks, to
// see how the rules fare on it (docs/backtest.md 7.8 and 7.10). They are
// stress tests, not a second corpus: the truths (plateau time, final
// value, end) come from the recast run too. Incident files and files
// without a header objective are returned as they are: their labels are
// tied to their reports.

// MaxEvalPause bounds Options.EvalPause (report intervals).
const MaxEvalPause = 100

// MaxSeenFrom bounds Options.SeenFrom (a share of the run).
const MaxSeenFrom = 0.9

// MinLossEvery and MaxLossEvery bound Options.LossEvery (seconds).
const MinLossEvery, MaxLossEvery = 1, 3600

// stressLoss is the metric lossReports adds: a training loss under the
// name reporters use for it.
const stressLoss = "train_loss"

// stressed applies the evaluator's stress tests to f: the recasts to a
// target-stopped run first (a target where there was none, then no fixed
// total where there was a target), then fewer evaluations, then the
// training-loss reports between the recorded ones, then a pause at each
// evaluation that is left (whose length is counted in the report
// intervals the job then has), and last what the planner did not see of
// a job it first saw mid-run.
func (ev *evaluator) stressed(f *progress.HistoryFile) *progress.HistoryFile {
	f = droppedTotal(stoppedAtTarget(f, ev.stopAtGain), ev.dropTotal)
	f = pausedEvaluations(lossReports(sparseEvaluations(f, ev.evalEvery), ev.lossEvery), ev.evalPause)
	return firstSeenAt(f, ev.seenFrom)
}

// firstSeenAt is an original run as the planner sees a job it first saw
// at share of its run (Options.SeenFrom): every report before share of
// its end dropped. The planner installed on a cluster with jobs already
// running, or a job whose history was lost, has no report of how the job
// began: the steep start, the warm-up and any step of its schedule before
// then are unseen. Runs without an end, runs that would keep fewer than
// two reports and incidents are returned as they are.
func firstSeenAt(f *progress.HistoryFile, share float64) *progress.HistoryFile {
	_, ok := stressable(f)
	o := f.Header.Outcome
	if !(share > 0) || !ok || o == nil || !(o.EndSeconds > 0) {
		return f
	}
	from := share * o.EndSeconds
	i, _ := slices.BinarySearchFunc(f.Reports, from, func(r progress.FileReport, t float64) int {
		return cmp.Compare(r.T, t)
	})
	if len(f.Reports)-i < 2 {
		return f
	}
	out := *f
	out.Reports = f.Reports[i:]
	return &out
}

// stoppedAtTarget is an original run without a target recast as one that
// stops at a quality target, as MLPerf's runs do (Options.StopAtGain = q):
// the target is the level at which the run had made q of its whole
// improvement (from its first value to its best), the run ends at the
// first report whose objective reaches it, and it has no fixed total
// (progress, reported ETA and total counters are dropped; the step or
// epoch counter stays). The target-stop rules were chosen on MLPerf, the
// one dataset with targets: this scores them on the others. Runs with a
// target, incidents and runs that never move are returned as they are.
func stoppedAtTarget(f *progress.HistoryFile, q float64) *progress.HistoryFile {
	obj, ok := stressable(f)
	if !(q > 0 && q <= 1) || !ok || obj.Target != nil {
		return f
	}
	sign, reps := obj.Sign(), toReps(f)
	obs := series(reps, obj.Metric, "") // its finite values
	if len(obs) == 0 {
		return f
	}
	first, best := sign*obs[0].y, math.Inf(1)
	for _, o := range obs {
		best = math.Min(best, sign*o.y)
	}
	if !(first > best) {
		return f
	}
	out, _ := endedAtTarget(f, obj, sign*(first-q*(first-best)))
	return out
}

// droppedTotal is an original run with a target and a fixed total recast
// as one that stops at that target with no fixed total (Options.DropTotal):
// it ends at the first report whose objective reaches the target, and its
// progress, reported ETA and total counters are dropped. A language model
// trained to a quality target (MLPerf's gpt3 and llama2 LoRA) reports no
// total; its learning-rate schedule still has one. modded-nanogpt's runs
// recast this way are such jobs: a warm-down the forecast cannot see
// (docs/backtest.md 7.34). Runs without a target or without a total,
// runs that never reach their target and incidents are returned as they
// are.
func droppedTotal(f *progress.HistoryFile, on bool) *progress.HistoryFile {
	obj, ok := stressable(f)
	if !on || !ok || obj.Target == nil || !hasTotal(f) {
		return f
	}
	if out, ok := endedAtTarget(f, obj, *obj.Target); ok {
		return out
	}
	return f
}

// hasTotal: a report of f carries a fixed total (a progress percentage or
// a total counter).
func hasTotal(f *progress.HistoryFile) bool {
	for _, r := range f.Reports {
		if r.TrainerStatus.ProgressPercentage != nil || slices.ContainsFunc(r.TrainerStatus.Metrics, isTotal) {
			return true
		}
	}
	return false
}

// isTotal: a total counter, which a fixed total reports.
func isTotal(m progress.MetricValue) bool { return progress.IsTotalCounter(m.Name) }

// endedAtTarget is f ending at the first report whose objective reaches
// target (in the metric's own units), with that target in its header, the
// outcome "target_reached" there, and no fixed total in its reports
// (progress, reported ETA and total counters dropped; the step or epoch
// counter stays); ok is false, and f returned, when no report reaches it.
func endedAtTarget(f *progress.HistoryFile, obj progress.Objective, target float64) (*progress.HistoryFile, bool) {
	sign, reps := obj.Sign(), toReps(f)
	end := -1
	for i, r := range reps {
		if v, ok := r.num(obj.Metric); ok && sign*v <= sign*target {
			end = i
			break
		}
	}
	if end < 0 {
		return f, false
	}
	out := &progress.HistoryFile{Header: f.Header, Reports: make([]progress.FileReport, 0, end+1)}
	for _, r := range f.Reports[:end+1] {
		r.TrainerStatus.ProgressPercentage, r.TrainerStatus.EstimatedRemainingSeconds = nil, nil
		r.TrainerStatus.Metrics = slices.DeleteFunc(slices.Clone(r.TrainerStatus.Metrics), isTotal)
		out.Reports = append(out.Reports, r)
	}
	o := *f.Header.Objective
	o.Target = &target
	out.Header.Objective = &o
	reached, _ := reps[end].num(obj.Metric)
	out.Header.Outcome = &progress.Outcome{Status: "target_reached", EndSeconds: reps[end].t,
		Final: map[string]json.RawMessage{obj.Metric: jsonNumber(reached)}}
	return out, true
}

// lossReports is an original run without a fixed total (no reported
// progress percentage: MLPerf-style, whose counter and objective move
// only at evaluations) as if its trainer also logged the training loss
// every `every` seconds between the recorded reports (Options.LossEvery),
// as several MLPerf implementations do: each added report carries that
// loss alone, a value that falls at every report so each one shows the
// job working, and no counter. At most MaxReports reports in all: the
// spacing widens beyond. Runs with a total report progress at every step
// already and are returned as they are.
func lossReports(f *progress.HistoryFile, every float64) *progress.HistoryFile {
	if _, ok := stressable(f); every <= 0 || !ok || len(f.Reports) < 2 {
		return f
	}
	for _, r := range f.Reports {
		if r.TrainerStatus.ProgressPercentage != nil {
			return f
		}
	}
	span := f.Reports[len(f.Reports)-1].T - f.Reports[0].T
	if !(span > 0) {
		return f
	}
	every = math.Max(every, span/float64(max(1, MaxReports-len(f.Reports))))
	out := &progress.HistoryFile{Header: f.Header, Reports: make([]progress.FileReport, 0, len(f.Reports)+int(span/every)+1)}
	k := 0
	for i, r := range f.Reports {
		if i > 0 {
			from := f.Reports[i-1].T
			for n := 1; from+float64(n)*every < r.T; n++ {
				k++
				loss := strconv.FormatFloat(1/(1+float64(k)/1000), 'g', 8, 64)
				out.Reports = append(out.Reports, progress.FileReport{T: from + float64(n)*every,
					TrainerStatus: progress.TrainerStatus{Metrics: []progress.MetricValue{{Name: stressLoss, Value: loss}}}})
			}
		}
		out.Reports = append(out.Reports, r)
	}
	return out
}

// stressable: an original run with a header objective.
func stressable(f *progress.HistoryFile) (progress.Objective, bool) {
	obj, ok := f.Header.ObjectiveSpec()
	return obj, ok && !isIncident(f.Header)
}

// withObjective is r with the objective set to value, or removed when
// !ok; r's metrics are not modified.
func withObjective(r progress.FileReport, metric, value string, ok bool) progress.FileReport {
	is := func(m progress.MetricValue) bool { return m.Name == metric }
	ms := slices.DeleteFunc(slices.Clone(r.TrainerStatus.Metrics), is)
	if ok {
		ms = append(ms, progress.MetricValue{Name: metric, Value: value})
	}
	r.TrainerStatus.Metrics = ms
	return r
}

// sparseEvaluations is an original run as if it evaluated its objective
// n times less often (Options.EvalEvery): only every n-th evaluation is
// kept, and each report carries the latest kept value, as a reporter that
// repeats its cached metrics would (none before the first kept one). The
// last report keeps its own value, so the run ends where it did. Progress
// and the other metrics are kept.
func sparseEvaluations(f *progress.HistoryFile, n int) *progress.HistoryFile {
	obj, ok := stressable(f)
	if n <= 1 || !ok {
		return f
	}
	// The value is read as valueChanges read it, from the same reps.
	reps := toReps(f)
	evals := valueChanges(reps, obj.Metric)
	out := &progress.HistoryFile{Header: f.Header, Reports: make([]progress.FileReport, len(f.Reports))}
	kept, has, next := "", false, 0
	for i, r := range f.Reports {
		if next < len(evals) && evals[next] == i {
			next++
			if next%n == 0 {
				kept, has = reps[i].m[obj.Metric]
			}
		}
		if i == len(f.Reports)-1 {
			out.Reports[i] = r
			continue
		}
		out.Reports[i] = withObjective(r, obj.Metric, kept, has)
	}
	return out
}

// pausedEvaluations is an original run as if training stopped at each
// evaluation for n of its median report intervals (Options.EvalPause), a
// job whose evaluation pass takes minutes while it reports every few
// seconds: after every evaluation but one at the last report, the job
// goes on sending that report as a heartbeat through the pause, and
// everything after comes that much later. Reported ETAs are rescaled by
// new t / old t, as a reporter that estimates from elapsed time would
// rescale them; the end moves by the pauses before it.
func pausedEvaluations(f *progress.HistoryFile, n float64) *progress.HistoryFile {
	obj, ok := stressable(f)
	if n <= 0 || !ok {
		return f
	}
	reps := toReps(f)
	every := medianInterval(reps)
	if every <= 0 {
		return f
	}
	evals := valueChanges(reps, obj.Metric)
	// One heartbeat per report interval, but never more than MaxReports in
	// all: a run with very many evaluations gets fewer, wider-spaced ones.
	pause, beats, beat := n*every, min(int(n), MaxReports/max(len(evals), 1)), every
	if beats < int(n) {
		beat = pause / float64(beats+1)
	}
	out := &progress.HistoryFile{Header: f.Header, Reports: make([]progress.FileReport, 0, len(f.Reports)+len(evals)*beats)}
	shift, next := 0.0, 0
	for i, r := range f.Reports {
		out.Reports = append(out.Reports, shifted(r, shift))
		if next >= len(evals) || evals[next] != i {
			continue
		}
		next++
		if i == len(f.Reports)-1 {
			continue
		}
		for k := 1; k <= beats; k++ {
			out.Reports = append(out.Reports, shifted(r, shift+float64(k)*beat))
		}
		shift += pause
	}
	if o := f.Header.Outcome; o != nil {
		end := *o
		end.EndSeconds += shift
		out.Header.Outcome = &end
	}
	return out
}

// shifted is r moved shift seconds later, its ETA rescaled to match.
func shifted(r progress.FileReport, shift float64) progress.FileReport {
	t := r.T + shift
	r.TrainerStatus.EstimatedRemainingSeconds = rescaled(r.TrainerStatus.EstimatedRemainingSeconds, r.T, t)
	r.T = t
	return r
}

// rescaled is an ETA estimated at elapsed time from as it would be at to.
func rescaled(eta *float64, from, to float64) *float64 {
	if eta == nil || from <= 0 {
		return eta
	}
	v := math.Round(*eta * to / from)
	return &v
}
