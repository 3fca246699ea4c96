package synth

import (
	"github.com/progress-planner/planner/pkg/progress"
)

func f64(v float64) *float64 { return &v }

// Healthy example runs: different curve shapes, one with a batch-size
// schedule (step time doubling at 1/3 and 2/3 of the run, so the
// reporter's whole-run-average ETA is biased low), one stopping at a
// quality target without a fixed total (MLPerf-like), one checkpoint
// snapshot that ends early (status unknown).
var (
	specInversePower = Spec{
		Name: "synth__inverse-power", Seed: 101,
		Curve:      Curve{Family: FamilyInversePower, C: 1.9, A: 3.2, R: 0.004, Alpha: 0.8},
		TrainNoise: 0.02, EvalNoise: 0.003, EvalOffset: 0.05, LearningRate: 3e-4,
		TotalSteps: 3000, StepSeconds: 0.3, StepJitter: 0.05,
		LogEvery: 25, EvalEvery: 250, EvalAtStart: true, StepsPerEpoch: 1000, GPUs: 8,
	}
	specEarlyPlateau = Spec{
		Name: "synth__early-plateau", Seed: 102,
		Curve:      Curve{Family: FamilyExponential, C: 0.9, A: 2.5, R: 0.0025},
		TrainNoise: 0.01, EvalNoise: 0.002, EvalOffset: 0.03,
		TotalSteps: 5000, StepSeconds: 0.2, StepJitter: 0.03,
		LogEvery: 50, EvalEvery: 250, StepsPerEpoch: 2500, GPUs: 4,
	}
	specBatchSchedule = Spec{
		Name: "synth__batch-schedule", Seed: 103,
		Curve:      Curve{Family: FamilyPowerLaw, C: 2.2, A: 8, Alpha: 0.45},
		TrainNoise: 0.01, EvalNoise: 0.002, EvalOffset: 0.02, LearningRate: 1e-3,
		TotalSteps: 2400, StepSeconds: 0.2, Slowdowns: []float64{1.0 / 3, 2.0 / 3}, SlowdownFactor: 2,
		StepJitter: 0.02, LogEvery: 20, EvalEvery: 200, EvalAtStart: true, GPUs: 8,
	}
	specTargetStop = Spec{
		Name: "synth__target-stop", Seed: 104,
		Curve:     Curve{Family: FamilyOptimus, C: 1.0, A: 3, R: 0.002},
		EvalNoise: 0.002, TrainNoise: 0.01,
		TotalSteps: 6000, StepSeconds: 0.4, StepJitter: 0.03,
		LogEvery: 50, EvalEvery: 100, NoTotal: true,
		Target: f64(1.25), StopAtTarget: true, GPUs: 16,
	}
	specCheckpoint = Spec{
		Name: "synth__checkpoint-snapshot", Seed: 105,
		Curve:      Curve{Family: FamilyInversePower, C: 0.6, A: 2.0, R: 0.002, Alpha: 1.1},
		TrainNoise: 0.04, EvalNoise: 0.004, EvalOffset: 0.08, LearningRate: 5e-5,
		TotalSteps: 10000, StepSeconds: 0.5, StepJitter: 0.05, TruncateAt: 0.6,
		LogEvery: 40, EvalEvery: 400, StepsPerEpoch: 2000,
	}
)

// derive returns base turned into an incident history named
// "synth-incident-<kind>__<base without synth__>".
func derive(base Spec, kind string, inc Incident) Spec {
	s := base
	s.Name = "synth-incident-" + kind + "__" + base.Name[len("synth__"):]
	inc.DerivedFrom = base.Name
	s.Incident = &inc
	return s
}

// ExampleSpecs is the fixed set of specs behind Examples: five healthy
// runs and two of each incident type. Every history has < 300 reports.
func ExampleSpecs() []Spec {
	return []Spec{
		specInversePower,
		specEarlyPlateau,
		specBatchSchedule,
		specTargetStop,
		specCheckpoint,
		derive(specInversePower, "hang-stale", Incident{Type: IncidentHang, At: 0.5, Variant: "stale", HangSeconds: 7200}),
		derive(specBatchSchedule, "hang-silent", Incident{Type: IncidentHang, At: 0.6, Variant: "silent", HangSeconds: 10800}),
		derive(specInversePower, "divergence", Incident{Type: IncidentDivergence, At: 0.45, GrowthFactor: 20}),
		derive(specBatchSchedule, "divergence", Incident{Type: IncidentDivergence, At: 0.6, GrowthFactor: 8}),
		derive(specEarlyPlateau, "plateau-extension", Incident{Type: IncidentPlateauExtension, ExtensionFactor: 2.5}),
		derive(specInversePower, "plateau-extension", Incident{Type: IncidentPlateauExtension, ExtensionFactor: 1.8}),
		derive(specBatchSchedule, "preempt-resume", Incident{Type: IncidentPreemptResume, At: 0.3, GapSeconds: 300}),
		derive(specInversePower, "preempt-resume", Incident{Type: IncidentPreemptResume, At: 0.6, GapSeconds: 1500}),
	}
}

// Examples generates the fixed example set (shipped as
// examples/histories/*.jsonl, file name = header name + ".jsonl").
func Examples() []*progress.HistoryFile {
	specs := ExampleSpecs()
	out := make([]*progress.HistoryFile, len(specs))
	for i, s := range specs {
		out[i] = Generate(s)
	}
	return out
}
