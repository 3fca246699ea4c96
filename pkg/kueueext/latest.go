package kueueext

import (
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/progress-planner/planner/pkg/forecast"
)

// LatestForecast is what the controller's latest forecast of a tracked
// job said: its ETA and plateau call, made at At. Readers in the same
// process (the admission publisher, the live page) take it instead of
// refitting the history stored on the ProgressForecast, which costs a
// forecast per running job per pass and lags the controller's memory by
// up to one checkpoint interval.
type LatestForecast struct {
	// ForecastUID is the ProgressForecast's UID: an entry for an object
	// since deleted and re-created under the same name is not used.
	ForecastUID types.UID
	At          time.Time
	ETA         forecast.Estimate
	Plateaued   bool
}

// LatestForecasts returns the latest forecast of every tracked job this
// replica has forecast, by its ProgressForecast's namespace and name.
// Jobs not forecast since this replica started leading are not in it.
func (p *Planner) LatestForecasts() map[types.NamespacedName]LatestForecast {
	if p == nil || len(p.kinds) == 0 {
		return nil
	}
	return p.kinds[0].rec.table.latest() // the kinds share one table
}

// latestEntry is a job's LatestForecast under its ProgressForecast's key.
type latestEntry struct {
	key types.NamespacedName
	LatestForecast
}

func (t *jobTable) latest() map[types.NamespacedName]LatestForecast {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make(map[types.NamespacedName]LatestForecast, len(t.jobs))
	for _, st := range t.jobs {
		if e := st.latest.Load(); e != nil {
			out[e.key] = e.LatestForecast
		}
	}
	return out
}
