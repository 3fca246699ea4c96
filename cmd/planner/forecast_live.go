package main

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/progress-planner/planner/api/v1alpha1"
	"github.com/progress-planner/planner/pkg/forecast"
	"github.com/progress-planner/planner/pkg/kueueext"
	"github.com/progress-planner/planner/pkg/offline"
	"github.com/progress-planner/planner/pkg/preempt"
	"github.com/progress-planner/planner/pkg/progress"
)

// liveFactsNote says where a live forecast's decision comes from.
const liveFactsNote = "the decision is the controller's latest (ProgressForecast status); the forecast is recomputed " +
	"as of now from the stored history with default forecast settings"

// liveForecast reads the ProgressForecast of TrainJob ns/name (written by
// planner run) and forecasts it as of now.
func liveForecast(ctx context.Context, rc *rest.Config, ns, name string, now time.Time, objFlag *progress.Objective) (*offline.Output, error) {
	c, err := client.New(rc, client.Options{Scheme: kueueext.NewScheme()})
	if err != nil {
		return nil, fmt.Errorf("client: %w", err)
	}
	var pf v1alpha1.ProgressForecast
	if err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, &pf); err != nil {
		return nil, fmt.Errorf("ProgressForecast %s/%s (the planner's record of TrainJob %s/%s; is planner run watching it?): %w",
			ns, name, ns, name, err)
	}
	return buildLiveForecastOutput(&pf, float64(now.UnixNano())/1e9, objFlag)
}

// buildLiveForecastOutput forecasts a ProgressForecast's stored history as
// of now (Unix seconds, the controller's time base) and reports the
// controller's own latest decision. Pure, for tests.
func buildLiveForecastOutput(pf *v1alpha1.ProgressForecast, now float64, objFlag *progress.Objective) (*offline.Output, error) {
	key := pf.Namespace + "/" + pf.Name
	if pf.Status.History == nil || len(pf.Status.History.Raw) == 0 {
		return nil, fmt.Errorf("ProgressForecast %s holds no history yet (no trainerStatus observed)", key)
	}
	h, err := progress.UnmarshalHistory(pf.Status.History.Raw, progress.DefaultLimits())
	if err != nil {
		return nil, fmt.Errorf("ProgressForecast %s: %w", key, err)
	}
	var obj progress.Objective
	src := ""
	switch {
	case objFlag != nil:
		obj, src = *objFlag, "flag"
	case pf.Status.Objective != "":
		if obj, err = progress.ParseObjective(pf.Status.Objective); err != nil {
			return nil, fmt.Errorf("ProgressForecast %s: objective: %w", key, err)
		}
		src = "controller (" + pf.Status.ObjectiveSource + ")"
	default:
		o, ok := progress.DefaultObjective(h)
		if !ok {
			return nil, fmt.Errorf("ProgressForecast %s: no objective known; pass --objective", key)
		}
		obj, src = o, "default"
	}
	fc := forecast.Fit(h, obj, now, forecast.DefaultSettings())
	var d preempt.Decision
	if pf.Status.Decision != nil && len(pf.Status.Decision.Raw) > 0 {
		if err := json.Unmarshal(pf.Status.Decision.Raw, &d); err != nil {
			return nil, fmt.Errorf("ProgressForecast %s: decision: %w", key, err)
		}
	}
	rej := map[string]int{}
	for k, v := range h.Rejections() {
		rej[string(k)] = v
	}
	return &offline.Output{
		Name:         key,
		At:           now,
		AtBasis:      "now",
		ReportsRead:  h.Len(),
		Objective:    offline.ObjectiveOutput{Objective: obj, Source: src},
		Forecast:     fc,
		Decision:     d,
		AssumedFacts: offline.AssumedFacts{GPUsFrom: "controller", Note: liveFactsNote},
		Rejections:   rej,
	}, nil
}
