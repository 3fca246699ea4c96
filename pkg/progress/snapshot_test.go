package progress

import (
	"math"
	"testing"
)

func f64(v float64) *float64 { return &v }

func metrics(kv ...string) []MetricValue {
	var out []MetricValue
	for i := 0; i+1 < len(kv); i += 2 {
		out = append(out, MetricValue{Name: kv[i], Value: kv[i+1]})
	}
	return out
}

func TestParseAcceptsReporterNames(t *testing.T) {
	cases := []struct {
		name                            string
		in                              TrainerStatus
		step, total, epoch, totalEpochs float64
		metric                          string
		value                           float64
	}{
		{"snake", TrainerStatus{Metrics: metrics("current_step", "450", "total_steps", "1000", "current_epoch", "1.5", "loss", "0.23")}, 450, 1000, 1.5, math.NaN(), "loss", 0.23},
		{"camel", TrainerStatus{Metrics: metrics("currentStep", "10", "totalSteps", "100", "currentEpoch", "2", "totalEpochs", "8", "evalLoss", "1.5")}, 10, 100, 2, 8, "eval_loss", 1.5},
		{"mlperf counter", TrainerStatus{Metrics: metrics("samples_count", "300417", "mlm_accuracy", "0.4")}, 300417, math.NaN(), math.NaN(), math.NaN(), "mlm_accuracy", 0.4},
		// A language model pretrained on trillions of tokens.
		{"tokens past a trillion", TrainerStatus{Metrics: metrics("tokens_count", "2.4e12", "loss", "2.1")}, 2.4e12, math.NaN(), math.NaN(), math.NaN(), "loss", 2.1},
		{"steps past a trillion", TrainerStatus{Metrics: metrics("current_step", "3e12", "loss", "2.1")}, 3e12, math.NaN(), math.NaN(), math.NaN(), "loss", 2.1},
		{"eval star and grad", TrainerStatus{Metrics: metrics("current_step", "5", "eval_accuracy", "0.9", "grad_norm", "1.2", "learning_rate", "3e-4")}, 5, math.NaN(), math.NaN(), math.NaN(), "eval_accuracy", 0.9},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s, rejs, ok := Parse(1, c.in)
			if !ok || len(rejs) != 0 {
				t.Fatalf("ok=%v rejections=%v", ok, rejs)
			}
			for _, g := range []struct {
				name      string
				got, want float64
			}{{"step", s.Step, c.step}, {"total", s.TotalSteps, c.total}, {"epoch", s.Epoch, c.epoch}, {"totalEpochs", s.TotalEpochs, c.totalEpochs}} {
				if !sameF(g.got, g.want) {
					t.Errorf("%s = %v, want %v", g.name, g.got, g.want)
				}
			}
			if s.Metrics[c.metric] != c.value {
				t.Errorf("metric %s = %v, want %v (all %v)", c.metric, s.Metrics[c.metric], c.value, s.Metrics)
			}
		})
	}
}

func TestParseRejections(t *testing.T) {
	cases := []struct {
		name   string
		in     TrainerStatus
		ok     bool
		reason RejectReason
	}{
		{"unparsable metric keeps report", TrainerStatus{Metrics: metrics("current_step", "3", "loss", "abc")}, true, RejectUnparsable},
		{"NaN loss is a divergence signal", TrainerStatus{Metrics: metrics("current_step", "3", "loss", "nan")}, true, RejectNonFiniteObjective},
		{"Inf accuracy", TrainerStatus{Metrics: metrics("current_step", "3", "accuracy", "+Inf")}, true, RejectNonFinite},
		{"negative step", TrainerStatus{Metrics: metrics("current_step", "-1")}, false, RejectNegative},
		{"NaN step", TrainerStatus{Metrics: metrics("current_step", "NaN")}, false, RejectNonFinite},
		{"progress above 100", TrainerStatus{ProgressPercentage: f64(140)}, false, RejectProgressRange},
		{"progress below 0", TrainerStatus{ProgressPercentage: f64(-3)}, false, RejectProgressRange},
		{"progress NaN", TrainerStatus{ProgressPercentage: f64(math.NaN())}, false, RejectNonFinite},
		{"negative ETA", TrainerStatus{ProgressPercentage: f64(5), EstimatedRemainingSeconds: f64(-5)}, true, RejectNegative},
		{"absurd ETA", TrainerStatus{ProgressPercentage: f64(5), EstimatedRemainingSeconds: f64(1e12)}, true, RejectAbsurd},
		{"absurd step", TrainerStatus{Metrics: metrics("current_step", "1e20")}, false, RejectAbsurd},
		{"absurd tokens", TrainerStatus{Metrics: metrics("tokens_count", "2e15", "loss", "2")}, true, RejectAbsurd},
		{"absurd loss", TrainerStatus{Metrics: metrics("current_step", "3", "loss", "2e12")}, true, RejectAbsurd},
		{"step beyond total", TrainerStatus{Metrics: metrics("current_step", "500", "total_steps", "100")}, false, RejectInconsistent},
		{"duplicate metric", TrainerStatus{Metrics: metrics("loss", "1", "loss", "2")}, false, RejectDuplicateName},
		{"empty", TrainerStatus{}, false, RejectEmpty},
		{"empty name", TrainerStatus{Metrics: metrics("", "1", "loss", "2")}, true, RejectInvalidName},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, rejs, ok := Parse(7, c.in)
			if ok != c.ok {
				t.Errorf("ok = %v, want %v", ok, c.ok)
			}
			found := false
			for _, r := range rejs {
				if r.Reason == c.reason {
					found = true
					if r.T != 7 {
						t.Errorf("rejection time %v, want 7", r.T)
					}
				}
			}
			if !found {
				t.Errorf("no %q rejection in %v", c.reason, rejs)
			}
		})
	}
}

func TestCanonicalMetric(t *testing.T) {
	for in, want := range map[string]string{"evalLoss": "eval_loss", "eval_loss": "eval_loss", "loss": "loss", "TrainLoss": "train_loss", "mAP": "mAP", "eval_mAP": "eval_mAP", "currentEpoch": "current_epoch"} {
		if got := CanonicalMetric(in); got != want {
			t.Errorf("CanonicalMetric(%q) = %q, want %q", in, got, want)
		}
	}
}

// Every spelling of a total that Parse reads is a total counter; the
// position counters and other metrics are not.
func TestIsTotalCounter(t *testing.T) {
	for _, n := range []string{"total_steps", "totalSteps", "max_steps", "total_epochs", "totalEpochs"} {
		if !IsTotalCounter(n) {
			t.Errorf("%s: not a total counter", n)
		}
	}
	for _, n := range []string{"current_step", "step", "current_epoch", "samples_count", "eval_loss", ""} {
		if IsTotalCounter(n) {
			t.Errorf("%s: a total counter", n)
		}
	}
}

func TestParseObjective(t *testing.T) {
	o, err := ParseObjective("accuracy,maximize,target=0.9")
	if err != nil || o.Metric != "accuracy" || o.Direction != Maximize || o.Target == nil || *o.Target != 0.9 {
		t.Fatalf("got %+v, %v", o, err)
	}
	if o2, err := ParseObjective(o.String()); err != nil || o2.String() != o.String() {
		t.Errorf("round trip: %v %v", o2, err)
	}
	for _, bad := range []string{"", "loss,upward", "loss,target=x", ",minimize"} {
		if _, err := ParseObjective(bad); err == nil {
			t.Errorf("ParseObjective(%q): want error", bad)
		}
	}
}
