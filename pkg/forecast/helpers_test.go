package forecast

import "github.com/progress-planner/planner/pkg/progress"

func f64(v float64) *float64 { return &v }

// metrics builds a report's metrics from name, value pairs.
func metrics(kv ...string) []progress.MetricValue {
	var out []progress.MetricValue
	for i := 0; i+1 < len(kv); i += 2 {
		out = append(out, progress.MetricValue{Name: kv[i], Value: kv[i+1]})
	}
	return out
}
