package backtest

import (
	"slices"

	"github.com/progress-planner/planner/pkg/progress"
)

// sparseEvaluations is an original run as if it evaluated its objective
// n times less often (Options.EvalEvery): the objective metric is kept
// at every n-th report that carries it and at the last report, and
// dropped from the others; progress and the other metrics are kept. A
// stress test of the rules on jobs the corpus lacks (docs/backtest.md
// 7.8). Incident files and files without a header objective are returned
// as they are: their labels are tied to their reports.
func sparseEvaluations(f *progress.HistoryFile, n int) *progress.HistoryFile {
	obj, ok := f.Header.ObjectiveSpec()
	if n <= 1 || !ok || isIncident(f.Header) {
		return f
	}
	out := &progress.HistoryFile{Header: f.Header, Reports: make([]progress.FileReport, len(f.Reports))}
	has := func(m progress.MetricValue) bool { return m.Name == obj.Metric }
	seen := 0
	for i, r := range f.Reports {
		out.Reports[i] = r
		if !slices.ContainsFunc(r.TrainerStatus.Metrics, has) {
			continue
		}
		seen++
		if seen%n == 0 || i == len(f.Reports)-1 {
			continue
		}
		out.Reports[i].TrainerStatus.Metrics = slices.DeleteFunc(slices.Clone(r.TrainerStatus.Metrics), has)
	}
	return out
}
