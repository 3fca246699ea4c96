package clusterview

import (
	"context"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/progress-planner/planner/pkg/kueueext"
	"github.com/progress-planner/planner/pkg/report"
)

func TestSnapshotConversions(t *testing.T) {
	c := fake.NewClientBuilder().WithScheme(kueueext.NewScheme()).WithObjects(fixture()...).Build()
	snap, err := Read(context.Background(), c, "")
	if err != nil {
		t.Fatal(err)
	}
	o := Options{Now: time.Unix(1_700_000_500, 0)}
	in, notes := snap.ReportInput(o)
	if len(notes) > 0 || len(in.Jobs) != 2 || len(in.Queues) != 1 || in.Queues[0].QuotaGPUs != 8 {
		t.Fatalf("report input: %+v notes %v", in, notes)
	}
	r := report.Build(in)
	if r.Jobs[0].Name != "job-a" || r.Jobs[0].Verdict != "Plateaued" || r.Jobs[0].EffectivePriority != -100 || r.Jobs[1].State != report.Waiting {
		t.Errorf("jobs: %+v", r.Jobs)
	}

	// explain job-b (a TrainJob name): waiting, may preempt the plateaued job-a.
	ein, err := snap.ExplainInput("team", "job-b", "", o)
	if err != nil {
		t.Fatal(err)
	}
	e := report.Explain(ein)
	if e.State != report.Waiting || e.Position != 1 || len(e.CouldPreempt) != 1 || e.ClusterQueue != "cq" || e.PlannerFound {
		t.Errorf("explain job-b: %+v", e)
	}
	// explain job-a: the planner's verdict and evidence.
	ein, err = snap.ExplainInput("team", "job-a", "", o)
	if err != nil {
		t.Fatal(err)
	}
	e = report.Explain(ein)
	if e.Verdict != "Plateaued" || !strings.Contains(e.Reason, "plateau probability") || len(e.PreemptibleBy) != 1 || e.Boost != -100 {
		t.Errorf("explain job-a: %+v", e)
	}
	if _, err := snap.ExplainInput("team", "nope", "", o); err == nil {
		t.Error("no error for an unknown job")
	}
}
