package kueueext

import (
	"math"
	"strings"
	"testing"
)

// FuzzParseObjectiveAnnotation: the tenant's objective annotation. What is
// accepted is printable, a metric that is not a counter, a target in range,
// and parses to itself again.
func FuzzParseObjectiveAnnotation(f *testing.F) {
	for _, s := range []string{"eval_loss", "eval_accuracy,maximize,target=0.9", "evalLoss,minimize,target=1.5",
		"eval_loss\x1b]0;PWNED\x07", "eval\u202eloss", "loss,target=1e300", "current_step", "", ",,,"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		o, err := ParseObjectiveAnnotation(v)
		if err != nil {
			if !printable(err.Error()) {
				t.Fatalf("error is not printable: %q", err.Error())
			}
			return
		}
		s := o.String()
		if !printable(s) || o.Metric == "" || counterMetrics[o.Metric] || strings.ContainsAny(o.Metric, " ,=") {
			t.Fatalf("accepted %q as %q", v, s)
		}
		if o.Target != nil && (math.IsNaN(*o.Target) || math.Abs(*o.Target) > maxObjectiveTarget) {
			t.Fatalf("accepted target %v", *o.Target)
		}
		o2, err := ParseObjectiveAnnotation(s)
		if err != nil || o2.String() != s {
			t.Fatalf("%q → %q does not parse to itself: %q, %v", v, s, o2.String(), err)
		}
	})
}

// FuzzParseStopOptIn: the tenant's stop opt-in annotation.
func FuzzParseStopOptIn(f *testing.F) {
	for _, s := range []string{"true", "false", "1", " TRUE ", "true\x00", "\u202etrue", "yes"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		b, err := ParseStopOptIn(map[string]string{AnnotationStopOptIn: v})
		if err != nil {
			if b {
				t.Fatalf("%q: opted in despite an error", v)
			}
			if !printable(err.Error()) {
				t.Fatalf("error is not printable: %q", err.Error())
			}
			return
		}
		if !printable(v) {
			t.Fatalf("accepted %q", v)
		}
	})
}
