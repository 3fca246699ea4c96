// Package simulator is Progress Planner's offline, discrete-event simulator
// of a shared GPU cluster under Kueue semantics, for capacity what-ifs.
//
// It replays jobs (from a cluster trace, an explicit list or the built-in
// generator) with learning curves (recorded progress histories, time-scaled,
// or pkg/synth parametric families) through ClusterQueues with nominal
// quota and cohort borrowing (cluster.go lists the Kueue rules it follows),
// and compares policies on identical arrivals and curves:
//
//   - kueue: Kueue alone, no boosts;
//   - planner: every running job reports into its own bounded
//     progress.History; at a bounded cadence the job is forecast with
//     forecast.Fit and decided with preempt.Decide (the controller's code,
//     no copy), the Decision's boost becomes its effective priority and its
//     Deactivate stops it;
//   - oracle: preempt.Decide on a forecast built from the ground truth
//     (exact progress and ETA, the true plateau onset and remaining
//     improvement, confidence 1): the same policy with perfect knowledge;
//   - las: least attained GPU service (Tiresias-style discretized LAS) as a
//     peer reference.
//
// Simulation time is float64 seconds; events at the same instant are
// ordered by kind and then job id (events.go), so a run is a pure function
// of its inputs and seed. Run simulates one policy, Compare several; a
// Comparison writes a table, JSON or one self-contained HTML page with SVG
// plots (report.go).
//
// For capacity planning, ApplyWhatIf applies what-if knobs (GPUs per
// cluster or queue, borrowing limits, the Deactivate opt-in per queue, any
// policy field, the arrival rate) to a resolved Input without changing it;
// RunSweep runs a grid of them over seeds and policies on every core, and
// AnswerGoal names the smallest setting meeting a bound (whatif.go,
// sweep.go, goal.go); SweepConfig and CollectSweep split a sweep into the
// units of a Kubernetes Indexed Job and merge them back (sweep_job.go).
// docs/simulator.md documents the model, its
// assumptions, the built-in scenario and results on the Philly-derived
// trace.
package simulator
