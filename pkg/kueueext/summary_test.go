package kueueext

import (
	"math"
	"slices"
	"testing"
	"time"

	"k8s.io/utils/ptr"

	"github.com/progress-planner/planner/api/v1alpha1"
	"github.com/progress-planner/planner/pkg/forecast"
	"github.com/progress-planner/planner/pkg/progress"
)

func TestTrainerStatusConversion(t *testing.T) {
	// History-file values are floats: the status server's API takes integers.
	back := FromForecastStatus(progress.TrainerStatus{
		ProgressPercentage: ptr.To(99.9), EstimatedRemainingSeconds: ptr.To(12.6),
		Metrics: []progress.MetricValue{{Name: "eval_loss", Value: "nan"}},
	}, t0)
	if *back.ProgressPercentage != 99 || *back.EstimatedRemainingSeconds != 13 || back.Metrics[0].Value != "nan" ||
		!back.LastUpdatedTime.Time.Equal(t0) {
		t.Errorf("FromForecastStatus: %+v", back)
	}
	clamped := FromForecastStatus(progress.TrainerStatus{ProgressPercentage: ptr.To(250.0), EstimatedRemainingSeconds: ptr.To(1e12)}, t0)
	if *clamped.ProgressPercentage != 100 || *clamped.EstimatedRemainingSeconds != math.MaxInt32 {
		t.Errorf("clamping: %+v", clamped)
	}
}

func TestUnixRoundTrip(t *testing.T) {
	tm := time.Date(2026, 3, 1, 12, 0, 0, 250_000_000, time.UTC)
	if got := v1alpha1.TimeFromUnix(unixSeconds(tm)); got.Sub(tm).Abs() > time.Microsecond {
		t.Errorf("round trip %v -> %v", tm, got)
	}
	if !v1alpha1.TimeFromUnix(math.NaN()).IsZero() {
		t.Error("NaN is not the zero time")
	}
}

func TestSummarize(t *testing.T) {
	f := forecast.Forecast{
		Now: unixSeconds(t0), Reports: 120, ObjectivePts: 40, Segments: 1,
		Step: ptr.To(4520.0), TotalSteps: ptr.To(10000.0), Progress: ptr.To(0.452),
		ETA:     forecast.Estimate{Known: true, Value: 7800, Lo: 6600, Hi: 9600},
		Current: ptr.To(0.43125), Best: ptr.To(0.43),
		PredictedFinal:     forecast.Estimate{Known: true, Value: 0.41, Lo: 0.40, Hi: 0.425},
		PlateauProbability: 0.934, RelativeRemaining: ptr.To(0.004), Confidence: 0.81,
		Integrity: forecast.Integrity{Issues: []string{"progress jumped"}},
		Hung:      true, HangReason: "no progress for 600s",
		PlateauReason: "learning rate still falling (0.0002→0.0001, peak 0.0003) before the planned end",
	}
	s := Summarize(f)
	if s.Progress != "45%" || s.Step != "4520/10000" || s.ETA != "2h10m" || s.ETARange != "1h50m–2h40m" ||
		s.Current != "0.4313" || s.Predicted != "0.41" || s.PredictedRange != "0.4–0.425" ||
		s.PlateauProbability != "93%" || s.RelativeRemaining != "0.4%" || s.Confidence != "81%" ||
		s.Reports != 120 || !s.Hung || !slices.Equal(s.Integrity, []string{"progress jumped"}) || !s.Time.Time.Equal(t0) {
		t.Errorf("summary %+v", s)
	}
	if len(s.Notes) < 2 || s.Notes[0] != "hung: no progress for 600s" ||
		s.Notes[1] != "plateau: learning rate still falling (0.0002→0.0001, peak 0.0003) before the planned end" {
		t.Errorf("notes %v", s.Notes)
	}
	empty := Summarize(forecast.Forecast{Now: unixSeconds(t0), ETA: forecast.Estimate{Why: "no reports"}})
	if empty.Progress != "" || empty.ETA != "" || empty.PlateauProbability != "" || len(empty.Notes) == 0 {
		t.Errorf("empty summary %+v", empty)
	}
}
