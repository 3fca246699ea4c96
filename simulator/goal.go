package simulator

import (
	"fmt"
	"strconv"
	"strings"
)

// Goal is a bound on one sweep metric, e.g. "queueing.p95<=1h".
type Goal struct {
	Text   string  `json:"text"`
	Metric string  `json:"metric"`
	Op     string  `json:"op"`
	Value  float64 `json:"value"` // in the metric's unit (hours for times)
}

// ParseGoal reads METRIC OP VALUE with OP one of <=, <, >=, >; a time
// metric takes a duration (90m, 1h, 2d) or hours.
func ParseGoal(s string) (Goal, error) {
	for _, op := range []string{"<=", ">=", "<", ">"} {
		name, v, ok := strings.Cut(s, op)
		if !ok {
			continue
		}
		name, v = strings.TrimSpace(name), strings.TrimSpace(v)
		m, ok := sweepMetric(name)
		if !ok {
			names := make([]string, len(SweepMetrics))
			for i, m := range SweepMetrics {
				names[i] = m.Name
			}
			return Goal{}, fmt.Errorf("goal %q: unknown metric %q (want one of %s)", s, name, strings.Join(names, ", "))
		}
		g := Goal{Text: name + op + v, Metric: name, Op: op}
		x, err := strconv.ParseFloat(v, 64)
		if err != nil && m.Hours {
			var sec float64
			if sec, err = ParseSeconds(v); err == nil {
				x = sec / 3600
			}
		}
		if err != nil {
			return Goal{}, fmt.Errorf("goal %q: value %q is not a number or duration", s, v)
		}
		g.Value = x
		return g, nil
	}
	return Goal{}, fmt.Errorf("goal %q: want METRIC<=VALUE (or <, >=, >), e.g. queueing.p95<=1h", s)
}

func (g Goal) met(v float64) bool {
	switch g.Op {
	case "<=":
		return v <= g.Value
	case "<":
		return v < g.Value
	case ">=":
		return v >= g.Value
	}
	return v > g.Value
}

// GoalResult answers a goal per policy (and per value of a second axis).
type GoalResult struct {
	Goal    Goal         `json:"goal"`
	Answers []GoalAnswer `json:"answers"`
}

// GoalAnswer is the smallest setting of the first axis that meets the goal
// for one policy (and one value of the second axis, Other). A point meets
// it in a seed when the metric meets the bound and, for a time metric,
// every job was admitted (a quota too small for some jobs leaves their
// waits out of the figures). The uncertainty across seeds is the pair:
// Smallest, where every seed meets it, and Optimistic, the first point
// where at least one does; the metric's spread at Smallest.
type GoalAnswer struct {
	Policy string   `json:"policy"`
	Other  *Setting `json:"other,omitempty"`
	// Smallest and Optimistic are axis values ("" when no point meets it).
	Smallest       string `json:"smallest"`
	Optimistic     string `json:"optimistic"`
	OptimisticSeed string `json:"optimisticSeeds,omitempty"` // "k/n" seeds met at Optimistic
	Spread         Spread `json:"spread"`                    // the metric at Smallest
}

// AnswerGoal evaluates g on the sweep (and records it in sw.Goal).
func (sw *Sweep) AnswerGoal(g Goal) *GoalResult {
	m, _ := sweepMetric(g.Metric)
	res := &GoalResult{Goal: g}
	ax := sw.Spec.Axes
	n0, n1 := len(ax[0].Values), 1
	if len(ax) == 2 {
		n1 = len(ax[1].Values)
	}
	ns := len(sw.Spec.Seeds)
	for pi, pol := range sw.Spec.Policies {
		for j := range n1 {
			a := GoalAnswer{Policy: pol}
			if len(ax) == 2 {
				a.Other = &Setting{Knob: ax[1].Knob, Value: ax[1].Values[j]}
			}
			for i := range n0 {
				p := i*n1 + j
				met := 0
				for si := range ns {
					s := sw.Runs[p*ns+si].Summaries[pi]
					if g.met(m.f(s)) && (!m.Hours || s.Unfinished == 0) {
						met++
					}
				}
				if met > 0 && a.Optimistic == "" {
					a.Optimistic, a.OptimisticSeed = ax[0].Values[i], fmt.Sprintf("%d/%d", met, ns)
				}
				if met == ns {
					a.Smallest = ax[0].Values[i]
					a.Spread = sw.Points[p*len(sw.Spec.Policies)+pi].Metrics[g.Metric]
					break
				}
			}
			res.Answers = append(res.Answers, a)
		}
	}
	sw.Goal = res
	return res
}

// Sentence states one answer in plain words.
func (a GoalAnswer) Sentence(g Goal, knob string) string {
	m, _ := sweepMetric(g.Metric)
	who := a.Policy
	if a.Other != nil {
		who += ", " + a.Other.String()
	}
	if a.Smallest == "" {
		if a.Optimistic == "" {
			return fmt.Sprintf("%s: no setting of %s meets %s in any seed", who, knob, g.Text)
		}
		return fmt.Sprintf("%s: no setting of %s meets %s in every seed; %s=%s meets it in %s seeds", who, knob, g.Text, knob, a.Optimistic, a.OptimisticSeed)
	}
	s := fmt.Sprintf("%s: %s=%s is the smallest setting that meets %s in every seed (%s %s, range %s–%s)",
		who, knob, a.Smallest, g.Text, g.Metric, metricValue(m, a.Spread.Mean), metricValue(m, a.Spread.Min), metricValue(m, a.Spread.Max))
	if a.Optimistic != a.Smallest {
		s += fmt.Sprintf("; %s=%s already meets it in %s seeds", knob, a.Optimistic, a.OptimisticSeed)
	}
	return s
}

func metricValue(m SweepMetric, v float64) string {
	if m.Hours {
		return hours(v)
	}
	return fmt.Sprintf("%.4g", v)
}
