package kueueext

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/progress-planner/planner/api/v1alpha1"
	"github.com/progress-planner/planner/pkg/plannerconfig"
	"github.com/progress-planner/planner/pkg/progress"
)

// maxObjectiveAnnotation bounds the annotation value the planner parses.
const maxObjectiveAnnotation = 256

// maxObjectiveTarget bounds |target=X|: reported metric values beyond 1e12
// are refused as absurd (pkg/forecast), so a farther target is never met.
const maxObjectiveTarget = 1e12

// counterMetrics are progress counters, never objectives.
var counterMetrics = map[string]bool{
	"current_step": true, "total_steps": true, "max_steps": true, "step": true, "global_step": true,
	"current_epoch": true, "total_epochs": true, "epoch": true,
}

// ObjectiveChoice is the objective the planner forecasts a job with.
type ObjectiveChoice struct {
	// Objective is valid when Known.
	Objective progress.Objective
	// Known is false when the job names no valid objective and reports
	// neither eval_loss nor loss (yet).
	Known bool
	// Source is v1alpha1.ObjectiveFromAnnotation or ObjectiveDefault ("" when
	// not Known).
	Source string
	// Err is set when the annotation is present but invalid; the choice
	// then falls back to the default.
	Err error
	// Annotation is the raw annotation value ("" when absent).
	Annotation string
}

// ParseObjectiveAnnotation validates the planner.progress.io/objective
// annotation: "METRIC[,minimize|maximize][,target=X]". The metric name is
// canonicalized the way reports are ("evalLoss" is "eval_loss"); progress
// counters (current_step, epoch, ...) are not objectives.
func ParseObjectiveAnnotation(value string) (progress.Objective, error) {
	if len(value) > maxObjectiveAnnotation {
		return progress.Objective{}, fmt.Errorf("annotation %s is %d bytes long (limit %d)", AnnotationObjective, len(value), maxObjectiveAnnotation)
	}
	if !printable(value) {
		return progress.Objective{}, fmt.Errorf("annotation %s=%q: only printable characters are allowed (no control or bidirectional characters)", AnnotationObjective, value)
	}
	o, err := progress.ParseObjective(value)
	if err != nil {
		return progress.Objective{}, fmt.Errorf("annotation %s=%q: %w (want METRIC[,minimize|maximize][,target=X], e.g. \"eval_accuracy,maximize,target=0.9\")",
			AnnotationObjective, value, err)
	}
	if len(o.Metric) > 128 || strings.ContainsAny(o.Metric, " \t\n\"'=") {
		return progress.Objective{}, fmt.Errorf("annotation %s=%q: %q is not a metric name", AnnotationObjective, value, o.Metric)
	}
	if o.Target != nil && math.Abs(*o.Target) > maxObjectiveTarget {
		return progress.Objective{}, fmt.Errorf("annotation %s=%q: target %g is outside [-%g, %g]", AnnotationObjective, value, *o.Target, maxObjectiveTarget, maxObjectiveTarget)
	}
	o.Metric = progress.CanonicalMetric(o.Metric)
	if counterMetrics[o.Metric] {
		return progress.Objective{}, fmt.Errorf("annotation %s=%q: %q is a progress counter, not an objective metric", AnnotationObjective, value, o.Metric)
	}
	return o, nil
}

// ResolveObjective picks a job's objective: the annotation when present
// and valid, else the default (eval_loss when the job reports it, else
// loss, minimized; progress.DefaultObjective). h may be nil.
func ResolveObjective(annotations map[string]string, h *progress.History) ObjectiveChoice {
	var c ObjectiveChoice
	if v, ok := annotations[AnnotationObjective]; ok {
		c.Annotation = v
		o, err := ParseObjectiveAnnotation(v)
		if err == nil {
			c.Objective, c.Known, c.Source = o, true, v1alpha1.ObjectiveFromAnnotation
			return c
		}
		c.Err = err
	}
	if h != nil {
		if o, ok := progress.DefaultObjective(h); ok {
			c.Objective, c.Known, c.Source = o, true, v1alpha1.ObjectiveDefault
		}
	}
	return c
}

// KeepMetrics is the metric the history must keep whatever else the job
// reports: the annotation's metric when it is valid.
func KeepMetrics(annotations map[string]string) []string {
	if v, ok := annotations[AnnotationObjective]; ok {
		if o, err := ParseObjectiveAnnotation(v); err == nil {
			return []string{o.Metric}
		}
	}
	return nil
}

// ParseStopOptIn reads the planner.progress.io/stop-when-stalled
// annotation: absent is false; "true"/"false" (any strconv.ParseBool
// spelling); anything else is false with an error.
func ParseStopOptIn(annotations map[string]string) (bool, error) {
	v, ok := annotations[AnnotationStopOptIn]
	if !ok {
		return false, nil
	}
	if !printable(v) {
		return false, fmt.Errorf("annotation %s=%q: only printable characters are allowed; treated as false", AnnotationStopOptIn, truncateString(v, 64))
	}
	b, err := strconv.ParseBool(strings.TrimSpace(v))
	if err != nil {
		return false, fmt.Errorf("annotation %s=%q is not a boolean (want \"true\" or \"false\"); treated as false", AnnotationStopOptIn, truncateString(v, 64))
	}
	return b, nil
}

// ParseMinImprovement validates the planner.progress.io/min-improvement
// annotation: a fraction ("0.005") or a percentage ("0.5%") in
// [0, plannerconfig.MaxMinImprovement].
func ParseMinImprovement(value string) (float64, error) {
	v := strings.TrimSpace(value)
	scale := 1.0
	if strings.HasSuffix(v, "%") {
		v, scale = strings.TrimSpace(strings.TrimSuffix(v, "%")), 0.01
	}
	f, err := strconv.ParseFloat(v, 64)
	if len(value) > 32 || !printable(value) || err != nil || !(f*scale >= 0 && f*scale <= plannerconfig.MaxMinImprovement) {
		return 0, fmt.Errorf("annotation %s=%q: want a fraction or percentage of the metric's value in [0, %g] (e.g. \"0.005\" or \"0.5%%\")",
			AnnotationMinImprovement, truncateString(value, 32), plannerconfig.MaxMinImprovement)
	}
	return f * scale, nil
}
