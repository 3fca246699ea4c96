package kueueext

import (
	"math"
	"strings"
	"testing"

	"github.com/progress-planner/planner/api/v1alpha1"
	"github.com/progress-planner/planner/pkg/progress"
)

func TestParseObjectiveAnnotation(t *testing.T) {
	tests := []struct {
		in      string
		want    string // Objective.String(); "" = error
		wantErr string
	}{
		{"eval_loss", "eval_loss,minimize", ""},
		{"eval_accuracy,maximize", "eval_accuracy,maximize", ""},
		{" eval_accuracy , maximize , target=0.9 ", "eval_accuracy,maximize,target=0.9", ""},
		{"evalLoss,minimize,target=1.5", "eval_loss,minimize,target=1.5", ""},
		{"bleu,maximize,target=30", "bleu,maximize,target=30", ""},
		{"", "", "metric name is empty"},
		{"loss,up", "", "unknown part"},
		{"loss,target=abc", "", "target"},
		{"loss,target=NaN", "", "not finite"},
		{"current_step", "", "progress counter"},
		{"currentEpoch,maximize", "", "progress counter"},
		{"eval loss", "", "not a metric name"},
		{strings.Repeat("x", 300), "", "bytes long"},
		// Issue 14: terminal escapes and bidirectional overrides never
		// reach status.objective; numbers are range-checked.
		{"eval_loss\x1b]0;PWNED\x07\x1b[2J", "", "only printable characters"},
		{"eval_loss\x00", "", "only printable characters"},
		{"eval\u202eloss", "", "only printable characters"},
		{"eval_loss\xff", "", "only printable characters"},
		{"loss,target=1e300", "", "outside [-1e+12, 1e+12]"},
		{"loss,target=-2e12", "", "outside"},
		{"accuracy,maximize,target=1e12", "accuracy,maximize,target=1e+12", ""},
		{"précision,maximize", "précision,maximize", ""},
	}
	for _, tt := range tests {
		o, err := ParseObjectiveAnnotation(tt.in)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("%q: err %v, want one mentioning %q", tt.in, err, tt.wantErr)
			}
			if err != nil && !strings.Contains(err.Error(), AnnotationObjective) {
				t.Errorf("%q: error %q does not name the annotation", tt.in, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%q: %v", tt.in, err)
			continue
		}
		if got := o.String(); got != tt.want {
			t.Errorf("%q: got %q, want %q", tt.in, got, tt.want)
		}
	}
}

func historyWith(metrics ...string) *progress.History {
	h := progress.NewHistory(progress.Limits{})
	var ms []progress.MetricValue
	for _, m := range metrics {
		ms = append(ms, progress.MetricValue{Name: m, Value: "1.5"})
	}
	h.Observe(1, progress.TrainerStatus{Metrics: ms})
	return h
}

func TestResolveObjective(t *testing.T) {
	tests := []struct {
		name        string
		annotations map[string]string
		h           *progress.History
		want        string
		source      string
		wantErr     bool
	}{
		{"default eval_loss", nil, historyWith("loss", "eval_loss"), "eval_loss,minimize", v1alpha1.ObjectiveDefault, false},
		{"default loss", nil, historyWith("loss", "grad_norm"), "loss,minimize", v1alpha1.ObjectiveDefault, false},
		{"none yet", nil, historyWith("accuracy"), "", "", false},
		{"nil history", nil, nil, "", "", false},
		{"annotation", map[string]string{AnnotationObjective: "accuracy,maximize"}, historyWith("loss"), "accuracy,maximize", v1alpha1.ObjectiveFromAnnotation, false},
		{"annotation before reports", map[string]string{AnnotationObjective: "accuracy,maximize"}, nil, "accuracy,maximize", v1alpha1.ObjectiveFromAnnotation, false},
		{"invalid annotation falls back", map[string]string{AnnotationObjective: "accuracy,bigger"}, historyWith("loss"), "loss,minimize", v1alpha1.ObjectiveDefault, true},
		{"invalid annotation, nothing to fall back to", map[string]string{AnnotationObjective: ","}, historyWith("accuracy"), "", "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := ResolveObjective(tt.annotations, tt.h)
			got := ""
			if c.Known {
				got = c.Objective.String()
			}
			if got != tt.want || c.Source != tt.source || (c.Err != nil) != tt.wantErr {
				t.Errorf("got %q source %q err %v; want %q source %q err %v", got, c.Source, c.Err, tt.want, tt.source, tt.wantErr)
			}
		})
	}
}

func TestKeepMetrics(t *testing.T) {
	if got := KeepMetrics(map[string]string{AnnotationObjective: "evalBleu,maximize"}); len(got) != 1 || got[0] != "eval_bleu" {
		t.Errorf("got %v", got)
	}
	if got := KeepMetrics(map[string]string{AnnotationObjective: "x,y"}); got != nil {
		t.Errorf("invalid annotation: got %v", got)
	}
}

func TestParseStopOptIn(t *testing.T) {
	tests := []struct {
		ann     map[string]string
		want    bool
		wantErr bool
	}{
		{nil, false, false},
		{map[string]string{AnnotationStopOptIn: "true"}, true, false},
		{map[string]string{AnnotationStopOptIn: " True "}, true, false},
		{map[string]string{AnnotationStopOptIn: "false"}, false, false},
		{map[string]string{AnnotationStopOptIn: "yes please"}, false, true},
	}
	for _, tt := range tests {
		got, err := ParseStopOptIn(tt.ann)
		if got != tt.want || (err != nil) != tt.wantErr {
			t.Errorf("%v: got %v, %v", tt.ann, got, err)
		}
	}
}

func TestParseStopOptInRefusesControlCharacters(t *testing.T) {
	for _, v := range []string{"true\x00", "true\n", "\u202etrue", "true\x1b[2J", "tr\xffue"} {
		b, err := ParseStopOptIn(map[string]string{AnnotationStopOptIn: v})
		if b || err == nil || !strings.Contains(err.Error(), "only printable characters") {
			t.Errorf("%q: opt-in %v, err %v; want false with an error about printable characters", v, b, err)
		}
		if err != nil && !printable(err.Error()) {
			t.Errorf("%q: the error itself is not printable: %q", v, err.Error())
		}
	}
}

func TestTruncateStringKeepsCharacters(t *testing.T) {
	s := strings.Repeat("é", 10) // 2 bytes each
	got := truncateString(s, 5)
	if got != "éé…" {
		t.Errorf("truncateString = %q, want %q", got, "éé…")
	}
}

func TestParseMinImprovement(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want float64
		ok   bool
	}{
		{"0.005", 0.005, true}, {"0.5%", 0.005, true}, {" 2 % ", 0.02, true}, {"0", 0, true}, {"0.5", 0.5, true},
		{"0.6", 0, false}, {"-0.01", 0, false}, {"60%", 0, false}, {"NaN", 0, false}, {"Inf", 0, false},
		{"", 0, false}, {"1e-3x", 0, false}, {"0.01\x1b[2J", 0, false}, {"0.01\n", 0, false}, {"0.000000000000000000000000000000001", 0, false},
	} {
		got, err := ParseMinImprovement(tc.in)
		if (err == nil) != tc.ok || (tc.ok && math.Abs(got-tc.want) > 1e-12) {
			t.Errorf("ParseMinImprovement(%q) = %v, %v; want %v ok=%v", tc.in, got, err, tc.want, tc.ok)
		}
		if err != nil && !strings.Contains(err.Error(), AnnotationMinImprovement) {
			t.Errorf("error %q does not name the annotation", err)
		}
	}
}
