package kueueext

import (
	"math"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"

	"github.com/progress-planner/planner/api/v1alpha1"
	"github.com/progress-planner/planner/internal/humanize"
	"github.com/progress-planner/planner/pkg/forecast"
	"github.com/progress-planner/planner/pkg/progress"
)

// FromForecastStatus converts a history file's report into the Trainer
// API shape, as the Trainer status server receives it: progress and ETA
// are integers there (progress floored, ETA rounded), and lastUpdatedTime
// is set to at (the reporter's clock).
func FromForecastStatus(s progress.TrainerStatus, at time.Time) trainer.TrainerStatus {
	out := trainer.TrainerStatus{LastUpdatedTime: metav1.NewTime(at)}
	if p := s.ProgressPercentage; p != nil && !math.IsNaN(*p) {
		v := int32(math.Max(0, math.Min(100, math.Floor(*p))))
		out.ProgressPercentage = &v
	}
	if e := s.EstimatedRemainingSeconds; e != nil && !math.IsNaN(*e) {
		v := int32(math.Max(0, math.Min(math.MaxInt32, math.Round(*e))))
		out.EstimatedRemainingSeconds = &v
	}
	for _, m := range s.Metrics {
		out.Metrics = append(out.Metrics, trainer.Metric{Name: m.Name, Value: m.Value})
	}
	return out
}

// unixSeconds is the forecast and policy time base.
func unixSeconds(t time.Time) float64 { return float64(t.UnixNano()) / 1e9 }

// Summarize renders a forecast for the ProgressForecast status.
func Summarize(f forecast.Forecast) *v1alpha1.ForecastSummary {
	s := &v1alpha1.ForecastSummary{
		Time:            metav1.NewTime(v1alpha1.TimeFromUnix(f.Now).UTC().Truncate(time.Second)),
		Reports:         clampInt32(f.Reports),
		ObjectivePoints: clampInt32(f.ObjectivePts),
		Segments:        clampInt32(f.Segments),
		Diverging:       f.Diverging,
		Hung:            f.Hung,
		Integrity:       append([]string(nil), f.Integrity.Issues...),
	}
	if f.Progress != nil {
		s.Progress = humanize.Percent(*f.Progress)
	}
	if f.Step != nil {
		s.Step = humanize.Number(*f.Step)
		if f.TotalSteps != nil {
			s.Step += "/" + humanize.Number(*f.TotalSteps)
		}
	}
	if f.ETA.Known {
		s.ETA = humanize.Duration(f.ETA.Value)
		s.ETARange = humanize.Duration(f.ETA.Lo) + "–" + humanize.Duration(f.ETA.Hi)
	}
	if f.ReportedETA != nil {
		s.ReportedETA = humanize.Duration(*f.ReportedETA)
	}
	if f.Current != nil {
		s.Current = humanize.Number(*f.Current)
	}
	if f.Best != nil {
		s.Best = humanize.Number(*f.Best)
	}
	if f.PredictedFinal.Known {
		s.Predicted = humanize.Number(f.PredictedFinal.Value)
		s.PredictedRange = humanize.Number(f.PredictedFinal.Lo) + "–" + humanize.Number(f.PredictedFinal.Hi)
	}
	if f.Reports > 0 {
		s.PlateauProbability = humanize.Percent(f.PlateauProbability)
		s.Confidence = humanize.Percent(f.Confidence)
	}
	if f.RelativeRemaining != nil {
		s.RelativeRemaining = humanize.Percent(*f.RelativeRemaining)
	}
	if f.DivergenceReason != "" {
		s.Notes = append(s.Notes, "diverging: "+f.DivergenceReason)
	}
	if f.HangReason != "" {
		s.Notes = append(s.Notes, "hung: "+f.HangReason)
	}
	// The plateau rule that decided, a call or a hold: without it a
	// reader of the ProgressForecast (planner explain) sees a probability
	// of 79 % and not why the job is not Plateaued.
	if f.PlateauReason != "" {
		s.Notes = append(s.Notes, "plateau: "+f.PlateauReason)
	}
	if !f.ETA.Known && f.ETA.Why != "" {
		s.Notes = append(s.Notes, "ETA unknown: "+f.ETA.Why)
	}
	s.Notes = append(s.Notes, f.Notes...)
	if len(s.Notes) > 8 {
		s.Notes = s.Notes[:8]
	}
	return s
}

func clampInt32(n int) int32 { return int32(max(math.MinInt32, min(math.MaxInt32, n))) }
