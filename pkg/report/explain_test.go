package report

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

func wv(name string, state State, gpus int, prio, boost int32, created int) WorkloadView {
	return WorkloadView{Namespace: "ns", Name: name, ClusterQueue: "cq", GPUs: gpus, BasePriority: prio, Boost: boost, State: state,
		CreatedAt: time.Unix(int64(created), 0)}
}

func names(ps []Peer) string {
	var s []string
	for _, p := range ps {
		s = append(s, strings.TrimPrefix(p.Name, "ns/"))
	}
	return strings.Join(s, ",")
}

func TestExplain(t *testing.T) {
	plateaued := wv("a", Running, 8, 0, -100, 1)
	protected := wv("near", Running, 8, 100, 100, 1)
	for _, tc := range []struct {
		name               string
		in                 ExplainInput
		pos                int
		ahead, could, prot string
		preemptible, safe  string
		summary            string
	}{
		{
			name: "waiting behind a healthy job it cannot preempt",
			in: ExplainInput{Target: wv("b", Waiting, 8, 0, 0, 2), QuotaGPUs: 8, WithinClusterQueue: "LowerPriority",
				Queue: []WorkloadView{wv("a", Running, 8, 0, 0, 1), wv("b", Waiting, 8, 0, 0, 2)}},
			pos: 1, prot: "a", summary: "cannot preempt (withinClusterQueue LowerPriority)",
		},
		{
			name: "waiting job may preempt a plateaued job with a negative boost",
			in: ExplainInput{Target: wv("b", Waiting, 8, 0, 0, 2), QuotaGPUs: 8, WithinClusterQueue: "LowerPriority",
				Queue: []WorkloadView{plateaued, wv("b", Waiting, 8, 0, 0, 2)}},
			pos: 1, could: "a", summary: "may preempt 1 lower-priority",
		},
		{
			name: "queue order: effective priority, then creation time",
			in: ExplainInput{Target: wv("c", Waiting, 4, 0, 0, 3), QuotaGPUs: 8, WithinClusterQueue: "Never",
				Queue: []WorkloadView{wv("a", Running, 8, 0, 0, 1), wv("late-high", Waiting, 4, 0, 50, 9), wv("old", Waiting, 4, 0, 0, 2),
					wv("c", Waiting, 4, 0, 0, 3), wv("young", Waiting, 4, 0, 0, 4)}},
			pos: 3, ahead: "late-high,old", prot: "a", summary: "2 Workload(s) with 8 GPUs are ordered before it",
		},
		{
			name: "protected near-done job: the higher base priority waits",
			in: ExplainInput{Target: protected, QuotaGPUs: 8, WithinClusterQueue: "LowerPriority",
				Queue: []WorkloadView{protected, wv("b", Waiting, 8, 150, 0, 2)}, Planner: PlannerView{Found: true, Verdict: "NearDone", Boost: 100, AdvisedBoost: 100}},
			safe: "b", summary: "none of the 1 waiting Workload(s) can preempt it. Planner: NearDone, boost +100",
		},
		{
			name: "running job preemptible by a higher priority",
			in: ExplainInput{Target: wv("a", Running, 8, 0, 0, 1), QuotaGPUs: 8, WithinClusterQueue: "LowerPriority",
				Queue: []WorkloadView{wv("a", Running, 8, 0, 0, 1), wv("b", Waiting, 8, 10, 0, 2)}},
			preemptible: "b", summary: "may preempt it. The planner has no record",
		},
		{
			name: "too large for the quota",
			in:   ExplainInput{Target: wv("big", Waiting, 16, 0, 0, 1), QuotaGPUs: 8, Queue: []WorkloadView{wv("big", Waiting, 16, 0, 0, 1)}},
			pos:  1, summary: "can never be admitted",
		},
		{
			name: "fits now",
			in:   ExplainInput{Target: wv("x", Waiting, 2, 0, 0, 1), QuotaGPUs: 8, Queue: []WorkloadView{wv("x", Waiting, 2, 0, 0, 1)}},
			pos:  1, summary: "8 GPUs are free",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := Explain(tc.in)
			if e.Position != tc.pos || names(e.Ahead) != tc.ahead || names(e.CouldPreempt) != tc.could || names(e.ProtectedFrom) != tc.prot ||
				names(e.PreemptibleBy) != tc.preemptible || names(e.SafeFrom) != tc.safe {
				t.Errorf("position %d ahead %q could %q protected %q preemptible %q safe %q", e.Position, names(e.Ahead), names(e.CouldPreempt),
					names(e.ProtectedFrom), names(e.PreemptibleBy), names(e.SafeFrom))
			}
			if !strings.Contains(e.Summary, tc.summary) {
				t.Errorf("summary %q does not contain %q", e.Summary, tc.summary)
			}
			var b bytes.Buffer
			if err := WriteExplanation(&b, e, "table"); err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(b.String(), "Why:") {
				t.Errorf("text output:\n%s", b.String())
			}
			b.Reset()
			if err := WriteExplanation(&b, e, "json"); err != nil || !strings.HasPrefix(b.String(), "{") {
				t.Errorf("json output %v:\n%s", err, b.String())
			}
		})
	}
}
