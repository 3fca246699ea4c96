package admissionstatus

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/progress-planner/planner/api/v1alpha1"
	"github.com/progress-planner/planner/pkg/admission"
	"github.com/progress-planner/planner/pkg/forecast"
	"github.com/progress-planner/planner/pkg/kueueext"
	"github.com/progress-planner/planner/pkg/plannerconfig"
	"github.com/progress-planner/planner/pkg/report"
)

const gpu = "nvidia.com/gpu"

// cluster is a ClusterQueue of 1 GPU with "run" admitted at t0 (no ETA:
// it runs admission.DefaultRunSeconds) and "wait" pending behind it, each a TrainJob's Workload with a
// ProgressForecast.
func cluster(t0 time.Time) []client.Object {
	cq := &kueue.ClusterQueue{ObjectMeta: metav1.ObjectMeta{Name: "cq"}, Spec: kueue.ClusterQueueSpec{
		ResourceGroups: []kueue.ResourceGroup{{CoveredResources: []corev1.ResourceName{gpu}, Flavors: []kueue.FlavorQuotas{{Name: "f",
			Resources: []kueue.ResourceQuota{{Name: gpu, NominalQuota: resource.MustParse("1")}}}}}}}}
	lq := &kueue.LocalQueue{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "lq"}, Spec: kueue.LocalQueueSpec{ClusterQueue: "cq"}}
	objs := []client.Object{cq, lq}
	for i, job := range []string{"run", "wait"} {
		wl := &kueue.Workload{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "trainjob-" + job,
			CreationTimestamp: metav1.NewTime(t0.Add(time.Duration(i) * time.Second)),
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "trainer.kubeflow.org/v1alpha1", Kind: "TrainJob", Name: job,
				UID: types.UID("uid-" + job), Controller: ptr.To(true)}}},
			Spec: kueue.WorkloadSpec{QueueName: "lq", PodSets: []kueue.PodSet{{Name: "node", Count: 1, Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{gpu: resource.MustParse("1")}}}}}}}}}}
		pf := &v1alpha1.ProgressForecast{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: job},
			Spec: v1alpha1.ProgressForecastSpec{JobRef: v1alpha1.JobRef{APIVersion: "trainer.kubeflow.org/v1alpha1", Kind: "TrainJob", Name: job}}}
		if job == "run" {
			admit(wl, t0)
		}
		objs = append(objs, wl, pf)
	}
	return objs
}

func admit(wl *kueue.Workload, at time.Time) {
	wl.Status = kueue.WorkloadStatus{Admission: &kueue.Admission{ClusterQueue: "cq"}, Conditions: []metav1.Condition{
		{Type: kueue.WorkloadQuotaReserved, Status: metav1.ConditionTrue, Reason: "x", LastTransitionTime: metav1.NewTime(at)},
		{Type: kueue.WorkloadAdmitted, Status: metav1.ConditionTrue, Reason: "x", LastTransitionTime: metav1.NewTime(at)}}}
}

func TestPublisher(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	c := fake.NewClientBuilder().WithScheme(kueueext.NewScheme()).WithObjects(cluster(t0)...).
		WithStatusSubresource(&kueue.Workload{}, &v1alpha1.ProgressForecast{}).Build()
	clk := clocktesting.NewFakePassiveClock(t0.Add(time.Minute))
	p := New(publishing(), c, c, c, clk, logr.Discard())
	ctx := context.Background()
	get := func(name string) *v1alpha1.AdmissionEstimate {
		t.Helper()
		var pf v1alpha1.ProgressForecast
		if err := c.Get(ctx, client.ObjectKey{Namespace: "team", Name: name}, &pf); err != nil {
			t.Fatal(err)
		}
		return pf.Status.AdmissionEstimate
	}
	publish := func(want int) {
		t.Helper()
		if n, err := p.Publish(ctx); err != nil || n != want {
			t.Fatalf("Publish: %d patched, %v; want %d", n, err, want)
		}
	}

	publish(1)
	a := get("wait")
	if a == nil || a.Expected == nil || a.Earliest == nil || a.Latest == nil {
		t.Fatalf("the waiting job's estimate: %+v, want expected, earliest and latest", a)
	}
	// It waits for the running job's remaining 59 minutes.
	if want := t0.Add(admission.DefaultRunSeconds * time.Second); a.Expected.Sub(want).Abs() > time.Minute {
		t.Errorf("expected at %v, want when the running job ends (%v)", a.Expected, want)
	}
	if !a.Time.Equal(&metav1.Time{Time: clk.Now()}) || !strings.HasPrefix(a.Text, "expected in ") {
		t.Errorf("estimate time %v, text %q", a.Time, a.Text)
	}
	if got := get("run"); got != nil {
		t.Errorf("the running job has an admission estimate: %+v", got)
	}
	// The metric: the queue's one waiting job's expected wait.
	wait := a.Expected.Sub(clk.Now()).Seconds()
	for _, stat := range []string{"median", "max"} {
		if v, ok := admissionWait(t, "cq", stat); !ok || v != wait {
			t.Errorf("planner_admission_expected_wait_seconds{cluster_queue=cq,statistic=%s} = %v (present %v), want %v", stat, v, ok, wait)
		}
	}

	// A pass that finds the same estimate writes nothing.
	publish(0)

	// Once admitted, the estimate is cleared.
	var wl kueue.Workload
	if err := c.Get(ctx, client.ObjectKey{Namespace: "team", Name: "trainjob-wait"}, &wl); err != nil {
		t.Fatal(err)
	}
	admit(&wl, clk.Now())
	if err := c.Status().Update(ctx, &wl); err != nil {
		t.Fatal(err)
	}
	publish(1)
	if got := get("wait"); got != nil {
		t.Errorf("the admitted job keeps its estimate: %+v", got)
	}
	if v, ok := admissionWait(t, "cq", "max"); ok {
		t.Errorf("nothing waits in cq, yet its expected wait is %v", v)
	}
}

// admissionWait reads planner_admission_expected_wait_seconds from the
// registry the manager serves.
func admissionWait(t *testing.T, queue, stat string) (float64, bool) {
	t.Helper()
	kueueext.RegisterMetrics()
	mfs, err := ctrlmetrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "planner_admission_expected_wait_seconds" {
			continue
		}
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["cluster_queue"] == queue && labels["statistic"] == stat {
				return m.GetGauge().GetValue(), true
			}
		}
	}
	return 0, false
}

// publishing is the default config with estimates published every minute.
func publishing() plannerconfig.Config {
	cfg := plannerconfig.DefaultConfig()
	cfg.AdmissionEstimates.Interval.Duration = time.Minute
	return cfg
}

// The default config publishes every 5 minutes; interval 0 publishes none.
func TestNewOff(t *testing.T) {
	if p := New(plannerconfig.DefaultConfig(), nil, nil, nil, nil, logr.Discard()); p == nil || p.Interval != 5*time.Minute {
		t.Errorf("the default config: publisher %+v, want one every 5m", p)
	}
	off := plannerconfig.DefaultConfig()
	off.AdmissionEstimates.Interval.Duration = 0
	if p := New(off, nil, nil, nil, nil, logr.Discard()); p != nil {
		t.Errorf("interval 0: a publisher %+v, want none", p)
	}
}

func TestAdmissionMoved(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	at := func(d time.Duration) *metav1.Time { t := metav1.NewTime(now.Add(d)); return &t }
	est := func(lo, mid, hi *metav1.Time) *v1alpha1.AdmissionEstimate {
		return &v1alpha1.AdmissionEstimate{Time: metav1.NewTime(now), Earliest: lo, Expected: mid, Latest: hi}
	}
	base := est(at(10*time.Minute), at(time.Hour), at(3*time.Hour))
	for _, tc := range []struct {
		name       string
		have, want *v1alpha1.AdmissionEstimate
		moved      bool
	}{
		{"both none", nil, nil, false},
		{"first estimate", nil, base, true},
		{"admitted", base, nil, true},
		{"within a tenth of the wait", base, est(at(14*time.Minute), at(65*time.Minute), at(3*time.Hour+5*time.Minute)), false},
		{"the median moves past a tenth", base, est(at(10*time.Minute), at(75*time.Minute), at(3*time.Hour)), true},
		{"the upper end leaves the horizon", base, est(at(10*time.Minute), at(time.Hour), nil), true},
		{"a minute at least", est(nil, at(time.Minute), at(2*time.Minute)), est(nil, at(90*time.Second), at(2*time.Minute)), false},
	} {
		if got := admissionMoved(tc.have, tc.want, now); got != tc.moved {
			t.Errorf("%s: moved %v, want %v", tc.name, got, tc.moved)
		}
	}
}

func TestAdmissionStatus(t *testing.T) {
	now := time.Unix(1_700_000_000, 500_000_000)
	if a := admissionStatus(&report.AdmissionEstimate{Note: "no estimate: not in the simulated cluster"}, admission.Calibration{}, now); a != nil {
		t.Errorf("a note became %+v, want no estimate", a)
	}
	mid, hi := 600.0, 1800.0
	a := admissionStatus(&report.AdmissionEstimate{Runs: 20, Admitted: 15, Median: &mid, P90: &hi, CalibratedOn: 12},
		admission.Calibration{Outcomes: 12, Shift: 0.75}, now)
	if a.Earliest != nil || !a.Expected.Equal(&metav1.Time{Time: time.Unix(1_700_000_600, 0)}) || !a.Latest.Equal(&metav1.Time{Time: time.Unix(1_700_001_800, 0)}) ||
		a.CalibratedOn != 12 || a.CalibrationShift != "0.750000" {
		t.Errorf("status %+v", a)
	}
}

func TestPublishedCalibration(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	pf := func(ago time.Duration, on int32, shift string) v1alpha1.ProgressForecast {
		var p v1alpha1.ProgressForecast
		p.Status.AdmissionEstimate = &v1alpha1.AdmissionEstimate{Time: metav1.NewTime(now.Add(-ago)), CalibratedOn: on, CalibrationShift: shift}
		return p
	}
	for _, tc := range []struct {
		name string
		pfs  []v1alpha1.ProgressForecast
		want admission.Calibration
	}{
		{"none", []v1alpha1.ProgressForecast{{}}, admission.Calibration{}},
		{"the freshest", []v1alpha1.ProgressForecast{pf(5*time.Minute, 10, "0.5"), pf(time.Minute, 12, "0.25"), pf(3*time.Minute, 11, "1")},
			admission.Calibration{Outcomes: 12, Shift: 0.25}},
		{"uncalibrated ones skipped", []v1alpha1.ProgressForecast{pf(time.Minute, 0, ""), pf(2*time.Minute, 10, "-0.5")},
			admission.Calibration{Outcomes: 10, Shift: -0.5}},
		{"too old", []v1alpha1.ProgressForecast{pf(2*time.Hour, 10, "0.5")}, admission.Calibration{}},
		{"from the future (edited)", []v1alpha1.ProgressForecast{pf(-time.Hour, 10, "0.5")}, admission.Calibration{}},
		{"not a number", []v1alpha1.ProgressForecast{pf(time.Minute, 10, "NaN")}, admission.Calibration{}},
	} {
		if got := PublishedCalibration(tc.pfs, now, time.Hour); got != tc.want {
			t.Errorf("%s: %+v, want %+v", tc.name, got, tc.want)
		}
	}
}

// With Latest, the running job's remaining time is the controller's
// latest forecast (here 20 minutes, made a minute ago), not the
// default run time its missing history would give.
func TestPublisherTakesLatestForecasts(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	c := fake.NewClientBuilder().WithScheme(kueueext.NewScheme()).WithObjects(cluster(t0)...).
		WithStatusSubresource(&kueue.Workload{}, &v1alpha1.ProgressForecast{}).Build()
	now := t0.Add(time.Minute)
	p := New(publishing(), c, c, c, clocktesting.NewFakePassiveClock(now), logr.Discard())
	ctx := context.Background()
	var run v1alpha1.ProgressForecast
	if err := c.Get(ctx, client.ObjectKey{Namespace: "team", Name: "run"}, &run); err != nil {
		t.Fatal(err)
	}
	calls := 0
	p.Latest = func() map[types.NamespacedName]kueueext.LatestForecast {
		calls++
		return map[types.NamespacedName]kueueext.LatestForecast{{Namespace: "team", Name: "run"}: {ForecastUID: run.UID,
			At: now.Add(-time.Minute), ETA: forecast.Estimate{Known: true, Value: 20 * 60, Lo: 20 * 60, Hi: 20 * 60}}}
	}
	if n, err := p.Publish(ctx); err != nil || n != 1 || calls != 1 {
		t.Fatalf("Publish: %d patched, %v, Latest called %d times; want 1, nil, 1", n, err, calls)
	}
	var wait v1alpha1.ProgressForecast
	if err := c.Get(ctx, client.ObjectKey{Namespace: "team", Name: "wait"}, &wait); err != nil {
		t.Fatal(err)
	}
	a := wait.Status.AdmissionEstimate
	if want := now.Add(19 * time.Minute); a == nil || a.Expected == nil || a.Expected.Sub(want).Abs() > time.Minute {
		t.Errorf("estimate %+v: want expected at %v (the running job's 20 minutes, forecast a minute ago)", a, want)
	}
}
