package jobframework

import (
	"encoding/json"
	"testing"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"

	"github.com/progress-planner/planner/pkg/progress"
)

// Issue 15: the TrainJob adapter on Kubeflow Trainer v2.2 and v2.3.
// trainerStatus is the same in both (Go types TrainerStatus and Metric, and
// the CRD's status.trainerStatus schema, are identical in the module cache;
// the status server changed only its bearer-token parsing and TLS options;
// docs/compatibility.md). These are TrainJobs as the API server returns them
// from either version, with the status server's output, and what a newer
// Trainer might add: the adapter must read the same report from each.
func TestTrainerStatusAcrossVersions(t *testing.T) {
	const report = `"trainerStatus":{"progressPercentage":45,"estimatedRemainingSeconds":3600,` +
		`"metrics":[{"name":"loss","value":"0.42"},{"name":"current_step","value":"450"},{"name":"total_steps","value":"1000"}],` +
		`"lastUpdatedTime":"2026-01-02T03:04:05Z"}`
	for _, tc := range []struct {
		name, json string
		want       bool // a report is there
	}{
		{"v2.2.0", `{"apiVersion":"trainer.kubeflow.org/v1alpha1","kind":"TrainJob","metadata":{"name":"a"},"status":{` + report + `}}`, true},
		{"v2.3.0 (conditions and jobsStatus beside it)", `{"apiVersion":"trainer.kubeflow.org/v1alpha1","kind":"TrainJob","metadata":{"name":"a"},"status":{` +
			`"conditions":[{"type":"Suspended","status":"True","reason":"Suspended","message":"","lastTransitionTime":"2026-01-02T03:00:00Z"}],` +
			`"jobsStatus":[{"name":"node","ready":0,"succeeded":0,"failed":0,"active":0,"suspended":1}],` + report + `}}`, true},
		{"a later Trainer with a field this build does not know", `{"apiVersion":"trainer.kubeflow.org/v1alpha1","kind":"TrainJob","metadata":{"name":"a"},"status":{` +
			`"trainerStatus":{"progressPercentage":45,"estimatedRemainingSeconds":3600,"stage":"train",` +
			`"metrics":[{"name":"loss","value":"0.42"},{"name":"current_step","value":"450"},{"name":"total_steps","value":"1000"}],` +
			`"lastUpdatedTime":"2026-01-02T03:04:05Z"}}}`, true},
		{"TrainJobStatus gate off (the default in v2.2 and v2.3): no trainerStatus", `{"apiVersion":"trainer.kubeflow.org/v1alpha1","kind":"TrainJob","metadata":{"name":"a"},"status":{}}`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var tj trainer.TrainJob
			if err := json.Unmarshal([]byte(tc.json), &tj); err != nil {
				t.Fatal(err)
			}
			if (tj.Status.TrainerStatus != nil) != tc.want {
				t.Fatalf("trainerStatus present %v, want %v", tj.Status.TrainerStatus != nil, tc.want)
			}
			if !tc.want {
				if r, ok := (TrainJob{}).Latest(&tj); ok || r.Hash != "" {
					t.Error("a report (or a fingerprint) without a trainerStatus")
				}
				return
			}
			snap, rejs, ok := progress.Parse(0, latest(t, &tj).Status)
			if !ok || len(rejs) != 0 {
				t.Fatalf("Parse: ok %v, rejections %v", ok, rejs)
			}
			if snap.Step != 450 || snap.TotalSteps != 1000 || snap.Progress != 0.45 || snap.ReportedETA != 3600 || snap.Metrics["loss"] != 0.42 {
				t.Errorf("snapshot %+v", snap)
			}
		})
	}
	// The fingerprint that keeps a restart from counting a report twice
	// depends only on the report, not on what else the status holds.
	var a, b trainer.TrainJob
	if err := json.Unmarshal([]byte(`{"status":{`+report+`}}`), &a); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(`{"status":{"jobsStatus":[{"name":"node","suspended":1}],`+report+`}}`), &b); err != nil {
		t.Fatal(err)
	}
	if latest(t, &a).Hash != latest(t, &b).Hash {
		t.Error("the same report fingerprinted differently")
	}
}
