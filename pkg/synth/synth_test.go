package synth

import (
	"bytes"
	"math"
	"strconv"
	"strings"
	"testing"

	"github.com/progress-planner/planner/pkg/progress"
)

func metric(r progress.FileReport, name string) (string, bool) {
	for _, m := range r.TrainerStatus.Metrics {
		if m.Name == name {
			return m.Value, true
		}
	}
	return "", false
}

func num(t *testing.T, s string) float64 {
	t.Helper()
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		t.Fatalf("not a number: %q", s)
	}
	return v
}

func TestDeterministic(t *testing.T) {
	for _, s := range ExampleSpecs() {
		a, err := Encode(Generate(s))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := Encode(Generate(s))
		if !bytes.Equal(a, b) {
			t.Errorf("%s: two generations differ", s.Name)
		}
		s2 := s
		s2.Seed++
		c, _ := Encode(Generate(s2))
		if bytes.Equal(a, c) {
			t.Errorf("%s: seed has no effect", s.Name)
		}
	}
}

func TestRoundTrip(t *testing.T) {
	for _, h := range Examples() {
		a, err := Encode(h)
		if err != nil {
			t.Fatal(err)
		}
		back, err := progress.ReadHistoryFile(bytes.NewReader(a))
		if err != nil {
			t.Fatalf("%s: %v", h.Header.Name, err)
		}
		b, _ := Encode(back)
		if !bytes.Equal(a, b) {
			t.Errorf("%s: round trip changed the file", h.Header.Name)
		}
	}
}

// TestReporterRules checks the corpus README rules (section 1.2) on every
// example: labels, throttle, progress and ETA formulas, metric caching.
func TestReporterRules(t *testing.T) {
	specs := ExampleSpecs()
	for i, h := range Examples() {
		s := specs[i]
		hd := h.Header
		t.Run(hd.Name, func(t *testing.T) {
			if hd.Dataset() != Dataset || string(hd.Extra["synthetic"]) != "true" || len(hd.Extra["timeNote"]) == 0 {
				t.Errorf("not labelled synthetic: dataset %q extra %v", hd.Dataset(), hd.Extra)
			}
			if !strings.Contains(string(hd.Source), `"synthetic":true`) {
				t.Errorf("source lacks synthetic:true: %s", hd.Source)
			}
			if o, ok := hd.ObjectiveSpec(); !ok || o.Metric != "eval_loss" || o.Direction != progress.Minimize {
				t.Errorf("objective %+v", hd.Objective)
			}
			n := len(h.Reports)
			if n < 10 || n >= 300 {
				t.Errorf("%d reports, want 10..299", n)
			}
			if (s.Incident != nil) != (hd.DerivedFrom != nil) || (s.Incident != nil) != (hd.IncidentType() != "") {
				t.Errorf("incident labelling: derivedFrom %v type %q", hd.DerivedFrom, hd.IncidentType())
			}
			resume, hasResume := hd.IncidentFloat("resumeSeconds")
			last := h.Reports[n-1]
			if hd.IncidentType() != IncidentHang && last.T != hd.Outcome.EndSeconds {
				t.Errorf("last report at %v, endSeconds %v", last.T, hd.Outcome.EndSeconds)
			}
			if hd.Outcome.Status == "completed" {
				if p := last.TrainerStatus.ProgressPercentage; p == nil || *p != 100 || *last.TrainerStatus.EstimatedRemainingSeconds != 0 {
					t.Errorf("completed run does not end with a 100%% report")
				}
			}
			prevEval := ""
			for k, r := range h.Reports {
				st := r.TrainerStatus
				if k > 0 && k < n-1 && r.T-h.Reports[k-1].T < 5 {
					t.Errorf("report %d at %v is %.3fs after the previous one", k, r.T, r.T-h.Reports[k-1].T)
				}
				if hasResume && r.T == resume {
					if len(st.Metrics) != 0 || st.ProgressPercentage == nil || *st.ProgressPercentage != 0 {
						t.Errorf("resume report %+v", st)
					}
					prevEval = ""
					continue
				}
				sv, ok := metric(r, "current_step")
				if !ok {
					t.Fatalf("report %d has no current_step", k)
				}
				step := num(t, sv)
				if ev, ok := metric(r, "eval_loss"); ok && ev != prevEval {
					if int(step)%s.EvalEvery != 0 && k != n-1 {
						t.Errorf("eval_loss changed at step %v, not an eval step", step)
					}
					prevEval = ev
				}
				if s.NoTotal {
					if st.ProgressPercentage != nil || st.EstimatedRemainingSeconds != nil {
						t.Errorf("no-total run reports progress")
					}
					continue
				}
				total := num(t, mustMetric(t, r, "total_steps"))
				if k == n-1 && hd.Outcome.Status == "completed" {
					continue
				}
				wantPct := math.Min(math.Floor(step/total*100), 99)
				if st.ProgressPercentage == nil || *st.ProgressPercentage != wantPct {
					t.Errorf("report %d: progress %v, want %v", k, st.ProgressPercentage, wantPct)
				}
				origin := 0.0
				if hasResume && r.T > resume {
					origin = resume
				}
				if step == 0 {
					if st.EstimatedRemainingSeconds != nil {
						t.Errorf("ETA at step 0")
					}
				} else if e := st.EstimatedRemainingSeconds; e == nil || *e != math.Round((r.T-origin)/step*(total-step)) {
					t.Errorf("report %d: ETA %v, want %v", k, e, math.Round((r.T-origin)/step*(total-step)))
				}
			}
		})
	}
}

func mustMetric(t *testing.T, r progress.FileReport, name string) string {
	t.Helper()
	v, ok := metric(r, name)
	if !ok {
		t.Fatalf("t=%v: no %s", r.T, name)
	}
	return v
}

func TestIncidents(t *testing.T) {
	for _, h := range Examples() {
		hd := h.Header
		at, _ := hd.IncidentFloat("atSeconds")
		switch hd.IncidentType() {
		case IncidentHang:
			var after []progress.FileReport
			for _, r := range h.Reports {
				if r.T > at {
					after = append(after, r)
				}
			}
			variant := string(hd.Incident["variant"])
			if hd.Outcome.Status != "unknown" {
				t.Errorf("%s: status %s", hd.Name, hd.Outcome.Status)
			}
			switch variant {
			case `"silent"`:
				if len(after) != 0 {
					t.Errorf("%s: %d reports after a silent hang", hd.Name, len(after))
				}
			case `"stale"`:
				if len(after) < 10 {
					t.Errorf("%s: only %d heartbeats", hd.Name, len(after))
				}
				for _, r := range after {
					if mustMetric(t, r, "current_step") != mustMetric(t, h.Reports[0+len(h.Reports)-len(after)-1], "current_step") {
						t.Errorf("%s: heartbeat step moved", hd.Name)
					}
				}
			}
		case IncidentDivergence:
			nanAt, _ := hd.IncidentFloat("nanSeconds")
			sawNaN := false
			for _, r := range h.Reports {
				if v, _ := metric(r, "loss"); v == "nan" {
					sawNaN = true
					if r.T < nanAt {
						t.Errorf("%s: nan at %v before nanSeconds %v", hd.Name, r.T, nanAt)
					}
				}
			}
			if !sawNaN || string(hd.Outcome.Final["eval_loss"]) != `"nan"` {
				t.Errorf("%s: no nan (final %s)", hd.Name, hd.Outcome.Final["eval_loss"])
			}
		case IncidentPlateauExtension:
			orig, _ := hd.IncidentFloat("originalEndSeconds")
			if hd.Outcome.EndSeconds < 1.4*orig {
				t.Errorf("%s: end %v not extended from %v", hd.Name, hd.Outcome.EndSeconds, orig)
			}
		case IncidentPreemptResume:
			resume, _ := hd.IncidentFloat("resumeSeconds")
			gap, _ := hd.IncidentFloat("gapSeconds")
			if math.Abs(resume-at-gap) > 1e-6 {
				t.Errorf("%s: resume %v != at %v + gap %v", hd.Name, resume, at, gap)
			}
			for k, r := range h.Reports {
				if r.T > at && r.T < resume {
					t.Errorf("%s: report during the gap at %v", hd.Name, r.T)
				}
				if r.T > resume && k > 0 && h.Reports[k-1].T == resume {
					if _, ok := metric(r, "eval_loss"); ok {
						t.Errorf("%s: eval_loss survived the restart", hd.Name)
					}
				}
			}
		}
	}
}

func TestCurves(t *testing.T) {
	for _, c := range []Curve{
		{Family: FamilyInversePower, C: 1, A: 2, R: 0.01, Alpha: 0.5},
		{Family: FamilyPowerLaw, C: 1, A: 2, Alpha: 0.5},
		{Family: FamilyExponential, C: 1, A: 2, R: 0.01},
		{Family: FamilyOptimus, C: 1, A: 2, R: 0.01},
	} {
		if v := c.Value(0); math.Abs(v-3) > 1e-12 {
			t.Errorf("%s: value at 0 = %v, want C+A", c.Family, v)
		}
		prev := c.Value(0)
		for s := 10.0; s < 1e5; s *= 2 {
			v := c.Value(s)
			if v > prev || v < c.C || (s < 1000 && v == prev) {
				t.Errorf("%s: not decreasing towards C at %v", c.Family, s)
			}
			prev = v
		}
	}
}

func TestValidate(t *testing.T) {
	ok := specInversePower
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
	bad := []func(*Spec){
		func(s *Spec) { s.Name = "" },
		func(s *Spec) { s.TotalSteps = 0 },
		func(s *Spec) { s.EvalEvery = 30 },
		func(s *Spec) { s.StopAtTarget = true },
		func(s *Spec) { s.Incident = &Incident{Type: "meteor", DerivedFrom: "x", At: 0.5} },
		func(s *Spec) {
			s.Incident = &Incident{Type: IncidentHang, DerivedFrom: "x", At: 0.5, Variant: "loud", HangSeconds: 1}
		},
		func(s *Spec) { s.Incident = &Incident{Type: IncidentDivergence, At: 0.5, GrowthFactor: 3} },
	}
	for i, f := range bad {
		s := ok
		f(&s)
		if s.Validate() == nil {
			t.Errorf("case %d: invalid spec accepted", i)
		}
	}
}

func TestFormatValue(t *testing.T) {
	for v, want := range map[float64]string{450: "450", 0.2347: "0.2347", 1.0 / 3: "0.333333", 4.94e-05: "4.94e-05", math.NaN(): "nan"} {
		if got := FormatValue(v); got != want {
			t.Errorf("FormatValue(%v) = %q, want %q", v, got, want)
		}
	}
}
