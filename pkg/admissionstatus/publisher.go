// Package admissionstatus publishes, on the leader, each waiting job's
// admission estimate (pkg/admission) on its ProgressForecast
// (status.admissionEstimate), and clears it once the job is admitted.
package admissionstatus

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/progress-planner/planner/api/v1alpha1"
	"github.com/progress-planner/planner/pkg/admission"
	"github.com/progress-planner/planner/pkg/clusterview"
	"github.com/progress-planner/planner/pkg/kueueext"
	"github.com/progress-planner/planner/pkg/plannerconfig"
	"github.com/progress-planner/planner/pkg/report"
	"github.com/progress-planner/planner/simulator"
)

// Settings are the settings of the admission estimates the planner makes
// by itself (published, and on the live page): the futures simulate the
// controller's own policy, its advise or enforce mode included.
func Settings(cfg plannerconfig.Config) admission.Settings {
	sim := simulator.DefaultOptions()
	sim.Policy = cfg.Policy
	return admission.Settings{Runs: admission.DefaultRuns, Policy: simulator.PolicyPlanner, Options: sim}
}

// New returns the publisher of cfg (nil when cfg publishes none): it reads
// through cache (the manager's) and, for ClusterQueues, api, and patches
// through w.
func New(cfg plannerconfig.Config, cache, api client.Reader, w client.StatusClient, clk clock.PassiveClock, log logr.Logger) *Publisher {
	iv := cfg.AdmissionEstimates.Interval.Duration
	if iv <= 0 {
		return nil
	}
	return &Publisher{Cache: cache, API: api, Writer: w, Interval: iv, GPU: cfg.GPUResourceName(),
		Estimator: &admission.Estimator{Settings: Settings(cfg)}, Clock: clk, Log: log}
}

// Publisher writes, on the leader, every waiting job's admission
// estimate to its ProgressForecast (status.admissionEstimate) and clears
// it once the job is admitted: the estimate explain and the live page
// show, for `kubectl get` and other tools. Each pass reads the cluster as
// the live page does, estimates every waiting Workload in one set of
// simulated futures (admission.Estimator, calibrated on how its own
// earlier estimates turned out) and patches only the estimates that moved
// (admissionMoved): a waiting job costs a write when its estimate
// changes, not every pass.
type Publisher struct {
	// Cache reads the namespaced kinds (the manager's cache), API the
	// ClusterQueues (not cached), Writer patches the statuses.
	Cache, API client.Reader
	Writer     client.StatusClient
	Interval   time.Duration
	GPU        corev1.ResourceName
	Estimator  *admission.Estimator
	Clock      clock.PassiveClock
	Log        logr.Logger
	// Latest, when set, gives the controller's latest forecasts
	// (kueueext.Planner.LatestForecasts): a running job found there is
	// not refitted each pass (clustersnap.Options.Latest).
	Latest func() map[types.NamespacedName]kueueext.LatestForecast
}

// NeedLeaderElection: only the leader writes.
func (p *Publisher) NeedLeaderElection() bool { return true }

// Start publishes every Interval until ctx ends (a controller-runtime
// Runnable); a failed pass is logged and the next one tries again.
func (p *Publisher) Start(ctx context.Context) error {
	t := time.NewTicker(p.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		if n, err := p.Publish(ctx); err != nil && ctx.Err() == nil {
			p.Log.Error(err, "admission estimates: pass failed", "patched", n)
		}
	}
}

// Publish runs one pass and returns the number of ProgressForecasts
// patched.
func (p *Publisher) Publish(ctx context.Context) (int, error) {
	snap, err := clusterview.ReadWith(ctx, p.Cache, p.API, "")
	if err != nil {
		return 0, fmt.Errorf("read the cluster: %w", err)
	}
	now := p.Clock.Now()
	e, err := p.Estimator.Estimate(snap, admission.PlannerOptions(p.GPU, now, p.Latest))
	if err != nil {
		return 0, err
	}
	kueueext.RecordAdmissionEstimates(e.Scored.Inside, e.Scored.Below, e.Scored.Above, e.Calibration.Outcomes, math.Exp(e.Calibration.Shift))
	patched := 0
	var errs []error // one refused patch does not hold back the others
	waits := map[string][]float64{}
	for i := range snap.Forecasts {
		pf := &snap.Forecasts[i]
		// ForWaiting keys each estimate by its job too: a ProgressForecast
		// is named like its job.
		key := pf.Namespace + "/" + pf.Name
		want := admissionStatus(e.Estimates[key], e.Calibration, now)
		if q := e.Queues[key]; want != nil && want.Expected != nil && q != "" {
			waits[q] = append(waits[q], math.Max(0, want.Expected.Sub(now).Seconds()))
		}
		if !admissionMoved(pf.Status.AdmissionEstimate, want, now) {
			continue
		}
		if err := p.patch(ctx, pf, want); err != nil {
			errs = append(errs, err)
			continue
		}
		patched++
	}
	kueueext.RecordAdmissionWaits(waits)
	p.Log.V(1).Info("admission estimates published", "patched", patched, "calibratedOn", e.Calibration.Outcomes)
	return patched, errors.Join(errs...)
}

// patch replaces the status's admissionEstimate alone: a merge patch
// without a resourceVersion, every field spelled out (null when absent),
// so that a field the cache has not seen yet cannot survive it. The job
// reconciler's own status writes carry the field (writeStatus).
func (p *Publisher) patch(ctx context.Context, pf *v1alpha1.ProgressForecast, a *v1alpha1.AdmissionEstimate) error {
	var field any // nil: remove it
	if a != nil {
		field = map[string]any{"time": a.Time, "expected": a.Expected, "earliest": a.Earliest, "latest": a.Latest,
			"calibratedOn": a.CalibratedOn, "calibrationShift": a.CalibrationShift, "text": a.Text}
	}
	body, err := json.Marshal(map[string]any{"status": map[string]any{"admissionEstimate": field}})
	if err != nil {
		return fmt.Errorf("encode the admission estimate of %s/%s: %w", pf.Namespace, pf.Name, err)
	}
	if err := p.Writer.Status().Patch(ctx, pf, client.RawPatch(types.MergePatchType, body)); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("patch the admission estimate of ProgressForecast %s/%s: %w", pf.Namespace, pf.Name, err)
	}
	return nil
}

// admissionStatus is a report estimate, calibrated by c, as the status
// carries it: times instead of seconds after now; nil for none or a note
// (no estimate).
func admissionStatus(a *report.AdmissionEstimate, c admission.Calibration, now time.Time) *v1alpha1.AdmissionEstimate {
	if a == nil || a.Note != "" {
		return nil
	}
	at := func(s *float64) *metav1.Time {
		if s == nil {
			return nil
		}
		t := metav1.NewTime(now.Add(time.Duration(*s * float64(time.Second))).Truncate(time.Second))
		return &t
	}
	st := &v1alpha1.AdmissionEstimate{Time: metav1.NewTime(now.Truncate(time.Second)),
		Expected: at(a.Median), Earliest: at(a.P10), Latest: at(a.P90),
		CalibratedOn: int32(min(a.CalibratedOn, math.MaxInt32)), Text: a.Text()}
	if a.CalibratedOn > 0 {
		st.CalibrationShift = strconv.FormatFloat(c.Shift, 'f', 6, 64)
	}
	return st
}

// PublishedCalibration is the calibration of the freshest estimate
// published on pfs, made at most maxAge before now: what `planner
// explain`, which keeps no earlier estimates of its own, calibrates its
// range with. The zero value (none) when there is none, or its shift does
// not parse as a finite number.
func PublishedCalibration(pfs []v1alpha1.ProgressForecast, now time.Time, maxAge time.Duration) admission.Calibration {
	var best *v1alpha1.AdmissionEstimate
	for i := range pfs {
		a := pfs[i].Status.AdmissionEstimate
		if a == nil || a.CalibratedOn <= 0 || a.CalibrationShift == "" || now.Sub(a.Time.Time) > maxAge || a.Time.After(now) {
			continue
		}
		if best == nil || a.Time.After(best.Time.Time) {
			best = a
		}
	}
	if best == nil {
		return admission.Calibration{}
	}
	shift, err := strconv.ParseFloat(best.CalibrationShift, 64)
	if err != nil || math.IsNaN(shift) || math.IsInf(shift, 0) {
		return admission.Calibration{}
	}
	return admission.Calibration{Outcomes: int(best.CalibratedOn), Shift: shift}
}

// admissionMoved says whether want replaces have: one is missing, an end
// appeared or vanished, or a time moved by more than a tenth of the
// expected wait (at least a minute), so a waiting job is patched when its
// estimate changes, not at every pass.
func admissionMoved(have, want *v1alpha1.AdmissionEstimate, now time.Time) bool {
	if have == nil || want == nil {
		return have != want
	}
	tol := time.Minute
	if have.Expected != nil {
		tol = max(tol, have.Expected.Sub(now)/10)
	}
	for _, t := range [][2]*metav1.Time{{have.Expected, want.Expected}, {have.Earliest, want.Earliest}, {have.Latest, want.Latest}} {
		if (t[0] == nil) != (t[1] == nil) {
			return true
		}
		if t[0] != nil && t[0].Sub(t[1].Time).Abs() > tol {
			return true
		}
	}
	return false
}
