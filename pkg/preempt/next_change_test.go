package preempt

import (
	"math"
	"testing"
)

func TestNextChange(t *testing.T) {
	p := DefaultPolicy()
	at := 1000.0
	f := func(v float64) *float64 { return &v }
	tests := []struct {
		name  string
		d     Decision
		facts Facts
		want  float64
	}{
		{"zero decision", Decision{}, Facts{}, math.NaN()},
		{"nothing pending", Decision{At: at, Verdict: Progressing}, Facts{}, math.NaN()},
		{"lease end", Decision{At: at, Verdict: NearDone, ProtectedUntil: f(at + 900)}, Facts{}, at + 900},
		{"dwell end", Decision{At: at, Verdict: Plateaued, VerdictSince: at - 60, HeldBy: HoldDwell}, Facts{}, at - 60 + 300},
		{"rate cap end", Decision{At: at, Verdict: Plateaued, HeldBy: HoldRateCap, BoostChanges: []float64{at - 3000, at - 100}}, Facts{}, at + 600},
		{"min age", Decision{At: at, Verdict: Warming}, Facts{AdmittedAt: f(at - 60)}, at - 60 + 600},
		{"min age passed is ignored", Decision{At: at, Verdict: Progressing}, Facts{AdmittedAt: f(at - 6000)}, math.NaN()},
		{"stop grace", Decision{At: at, Verdict: Hung, StalledSince: f(at - 3600)}, Facts{}, at + 3600},
		{"earliest wins", Decision{At: at, Verdict: Hung, StalledSince: f(at - 3600), HeldBy: HoldDwell, VerdictSince: at - 10}, Facts{}, at + 290},
		{"eviction cooldown", Decision{At: at, Verdict: Plateaued}, Facts{LastPlannerEvictionAt: f(at - 100)}, at - 100 + 1800},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.d.NextChange(tt.facts, p)
			if !(got == tt.want || (math.IsNaN(got) && math.IsNaN(tt.want))) {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
}
