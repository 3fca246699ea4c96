package plugin

import (
	"testing"
	"time"
)

// TestVictimRules checks that each rule decides the pair it is about, and
// that the rules before it tie there: a is the better victim.
func TestVictimRules(t *testing.T) {
	base := group{key: "ml/x", priority: 100, workLost: 1000, gangPods: 1, start: now.Add(-time.Hour)}
	with := func(f func(g *group)) *group { g := base; f(&g); return &g }
	tests := []struct {
		rule string
		a, b *group
	}{
		{"protectedLast", with(func(g *group) { g.priority = 900 }), with(func(g *group) { g.protected = true })},
		{"pdbLast", with(func(g *group) { g.stalled = false }), with(func(g *group) { g.pdbViolating, g.stalled = true, true })},
		{"stalledFirst", with(func(g *group) { g.stalled, g.priority = true, 900 }), with(func(g *group) {})},
		{"lowerPriorityFirst", with(func(g *group) { g.workLost = 9000 }), with(func(g *group) { g.priority = 101 })},
		{"lessWorkLostFirst", with(func(g *group) { g.gangPods = 8 }), with(func(g *group) { g.workLost = 1001 })},
		{"smallerGangFirst", with(func(g *group) { g.start = now.Add(-10 * time.Hour) }), with(func(g *group) { g.gangPods = 2 })},
		{"newerFirst", with(func(g *group) { g.key = "ml/z" }), with(func(g *group) { g.start = now.Add(-2 * time.Hour) })},
		{"key", with(func(g *group) { g.key = "ml/a" }), with(func(g *group) { g.key = "ml/b" })},
	}
	for _, tt := range tests {
		t.Run(tt.rule, func(t *testing.T) {
			if got := decidingRule(tt.a, tt.b); got != tt.rule {
				t.Errorf("deciding rule %q, want %q", got, tt.rule)
			}
			if c := compareVictims(tt.a, tt.b); c >= 0 {
				t.Errorf("compareVictims(a, b) = %d, want a first", c)
			}
			if c := compareVictims(tt.b, tt.a); c <= 0 {
				t.Errorf("compareVictims(b, a) = %d, want a first", c)
			}
		})
	}
}

func TestWorkLost(t *testing.T) {
	start := now.Add(-time.Hour)
	tests := []struct {
		name   string
		report time.Time
		want   float64
	}{
		{"since the last report", now.Add(-10 * time.Minute), 8 * 600},
		{"no report: since the start", time.Time{}, 8 * 3600},
		{"report before a restart: since the start", now.Add(-2 * time.Hour), 8 * 3600},
		{"report from the future: nothing", now.Add(time.Hour), 0},
	}
	for _, tt := range tests {
		if got := workLost(now, 8, start, tt.report); got != tt.want {
			t.Errorf("%s: workLost = %v, want %v", tt.name, got, tt.want)
		}
	}
}
