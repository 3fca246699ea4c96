package workloads

import (
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
)

var t0 = time.Unix(1_700_000_000, 0)

const trainerAPI = "trainer.kubeflow.org/v1alpha1"

// wlOpt sets up a test Workload.
type wlOpt func(*kueue.Workload)

func finished(w *kueue.Workload) {
	w.Status.Conditions = []metav1.Condition{{Type: kueue.WorkloadFinished, Status: metav1.ConditionTrue, Reason: "Succeeded"}}
}

func deleting(w *kueue.Workload) {
	now := metav1.NewTime(t0)
	w.DeletionTimestamp = &now
}

func owner(apiVersion, kind, name string, uid types.UID, controller bool) wlOpt {
	return func(w *kueue.Workload) {
		w.OwnerReferences = append(w.OwnerReferences, metav1.OwnerReference{APIVersion: apiVersion, Kind: kind, Name: name, UID: uid, Controller: ptr.To(controller)})
	}
}

func label(uid string) wlOpt {
	return func(w *kueue.Workload) { w.Labels = map[string]string{LabelJobUID: uid} }
}

// wl is a Workload in namespace "team" created at t0+age, set up by opts.
func wl(name string, age time.Duration, opts ...wlOpt) kueue.Workload {
	w := kueue.Workload{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: name, CreationTimestamp: metav1.NewTime(t0.Add(age))}}
	for _, o := range opts {
		o(&w)
	}
	return w
}

// job is TrainJob team/job with UID "new" (or unknown with uid "").
func job(uid types.UID) Ref {
	return Ref{APIVersion: trainerAPI, Kind: "TrainJob", Namespace: "team", Name: "job", UID: uid}
}

func TestFor(t *testing.T) {
	byNew := owner(trainerAPI, "TrainJob", "job", "new", true)
	byOld := owner(trainerAPI, "TrainJob", "job", "old", true)
	tests := []struct {
		name       string
		job        Ref
		wls        []kueue.Workload
		want       string
		ambiguous  bool
		reasonHas  string
		unfinished []string
	}{
		{name: "none", job: job("new"), want: "", reasonHas: "no Workload is controlled by TrainJob team/job (uid new)"},
		{name: "one", job: job("new"), wls: []kueue.Workload{wl("a", 0, byNew)}, want: "a", unfinished: []string{"a"}},
		{name: "finished and live: the live one", job: job("new"),
			wls:  []kueue.Workload{wl("old", time.Hour, byNew, finished), wl("a", 0, byNew)},
			want: "a", unfinished: []string{"a"}},
		{name: "two live: ambiguous", job: job("new"),
			wls:  []kueue.Workload{wl("b", time.Second, byNew), wl("a", 0, byNew)},
			want: "", ambiguous: true, unfinished: []string{"a", "b"}, reasonHas: "2 unfinished Workloads"},
		{name: "two finished: the newest", job: job("new"),
			wls:  []kueue.Workload{wl("f2", time.Hour, byNew, finished), wl("f1", 0, byNew, finished)},
			want: "f2"},
		{name: "being deleted is ignored", job: job("new"),
			wls:  []kueue.Workload{wl("gone", time.Hour, byNew, deleting), wl("a", 0, byNew)},
			want: "a", unfinished: []string{"a"}},
		{name: "only one being deleted: none", job: job("new"),
			wls:  []kueue.Workload{wl("gone", 0, byNew, deleting)},
			want: "", reasonHas: "other than 1 being deleted"},
		{name: "recreated job: the old UID's Workload is not ours", job: job("new"),
			wls:  []kueue.Workload{wl("old", 0, byOld), wl("new", time.Minute, byNew)},
			want: "new", unfinished: []string{"new"}},
		{name: "recreated job, no Workload yet: none", job: job("new"),
			wls:  []kueue.Workload{wl("old", 0, byOld)},
			want: ""},
		{name: "recreated job, UID unknown: both by name, ambiguous", job: job(""),
			wls:  []kueue.Workload{wl("old", 0, byOld), wl("new", time.Minute, byNew)},
			want: "", ambiguous: true, unfinished: []string{"new", "old"}, reasonHas: "the job's UID is unknown"},
		{name: "UID unknown: by kind and name", job: job(""),
			wls:  []kueue.Workload{wl("a", 0, byNew)},
			want: "a", unfinished: []string{"a"}, reasonHas: "matched by kind and name"},
		{name: "no owner", job: job("new"), wls: []kueue.Workload{wl("x", 0), wl("y", 0, label("new"))}, want: ""},
		{name: "no owner, UID unknown", job: job(""), wls: []kueue.Workload{wl("job", 0)}, want: ""},
		{name: "owner that is not the controller", job: job("new"),
			wls: []kueue.Workload{wl("x", 0, owner(trainerAPI, "TrainJob", "job", "new", false))}, want: ""},
		{name: "wrong kind, UID unknown", job: job(""),
			wls: []kueue.Workload{wl("x", 0, owner("batch/v1", "Job", "job", "j", true))}, want: ""},
		{name: "wrong group, UID unknown", job: job(""),
			wls: []kueue.Workload{wl("x", 0, owner("example.com/v1", "TrainJob", "job", "j", true))}, want: ""},
		{name: "other version of the group, UID unknown", job: job(""),
			wls:  []kueue.Workload{wl("a", 0, owner("trainer.kubeflow.org/v2", "TrainJob", "job", "j", true))},
			want: "a", unfinished: []string{"a"}},
		{name: "wrong kind with another UID", job: job("new"),
			wls: []kueue.Workload{wl("x", 0, owner("batch/v1", "Job", "job", "j", true))}, want: ""},
		{name: "other namespace", job: Ref{APIVersion: trainerAPI, Kind: "TrainJob", Namespace: "other", Name: "job", UID: "new"},
			wls: []kueue.Workload{wl("a", 0, byNew)}, want: ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := For(tt.job, tt.wls)
			got := ""
			if m.Workload != nil {
				got = m.Workload.Name
			}
			if got != tt.want || m.Ambiguous != tt.ambiguous || !slices.Equal(m.Unfinished, tt.unfinished) {
				t.Errorf("got %q ambiguous %v unfinished %v, want %q %v %v (%s)", got, m.Ambiguous, m.Unfinished, tt.want, tt.ambiguous, tt.unfinished, m.Reason)
			}
			if m.ByName != (tt.job.UID == "") {
				t.Errorf("ByName %v for UID %q", m.ByName, tt.job.UID)
			}
			if !strings.Contains(m.Reason, tt.reasonHas) || m.Reason == "" {
				t.Errorf("reason %q, want it to contain %q", m.Reason, tt.reasonHas)
			}
		})
	}
}

// TestForOrderIndependent: the answer does not depend on the list order.
func TestForOrderIndependent(t *testing.T) {
	by := owner(trainerAPI, "TrainJob", "job", "new", true)
	wls := []kueue.Workload{wl("f1", 0, by, finished), wl("f2", 0, by, finished), wl("f0", -time.Hour, by, finished)}
	for i := range 3 {
		rot := append(slices.Clone(wls[i:]), wls[:i]...)
		if m := For(job("new"), rot); m.Workload == nil || m.Workload.Name != "f2" {
			t.Errorf("rotation %d: %+v", i, m)
		}
	}
}

func TestJobOf(t *testing.T) {
	tests := []struct {
		name string
		wl   kueue.Workload
		want Ref
		ok   bool
	}{
		{"controller", wl("a", 0, owner("batch/v1", "Job", "j", "u1", false), owner(trainerAPI, "TrainJob", "job", "u2", true), label("u2")),
			Ref{APIVersion: trainerAPI, Kind: "TrainJob", Namespace: "team", Name: "job", UID: "u2"}, true},
		{"label only", wl("a", 0, label("u3")), Ref{Namespace: "team", UID: "u3"}, true},
		{"neither", wl("a", 0, owner("batch/v1", "Job", "j", "u1", false)), Ref{}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := JobOf(&tt.wl)
			if got != tt.want || ok != tt.ok {
				t.Errorf("got %+v %v, want %+v %v", got, ok, tt.want, tt.ok)
			}
		})
	}
}

// TestJobOfRoundTrip: a job found by JobOf finds its Workload by For.
func TestJobOfRoundTrip(t *testing.T) {
	w := wl("a", 0, owner(trainerAPI, "TrainJob", "job", "new", true))
	ref, ok := JobOf(&w)
	if !ok || !ref.IsKind("trainer.kubeflow.org", "TrainJob") {
		t.Fatalf("JobOf: %+v %v", ref, ok)
	}
	gvk := schema.GroupVersionKind{Group: "trainer.kubeflow.org", Version: "v1alpha1", Kind: "TrainJob"}
	if got := RefTo(gvk, &metav1.ObjectMeta{Namespace: "team", Name: "job", UID: "new"}); got != ref {
		t.Errorf("RefTo: %+v, JobOf: %+v", got, ref)
	}
	if m := For(ref, []kueue.Workload{w}); m.Workload == nil || m.Workload.Name != "a" {
		t.Errorf("For(JobOf): %+v", m)
	}
	if s := Selector(ref); s[LabelJobUID] != "new" || Selector(Ref{}) != nil {
		t.Errorf("Selector: %v", s)
	}
}

func TestSame(t *testing.T) {
	tj := func(name string, uid types.UID) Ref {
		return Ref{APIVersion: trainerAPI, Kind: "TrainJob", Namespace: "team", Name: name, UID: uid}
	}
	tests := []struct {
		name string
		a, b Ref
		want bool
	}{
		{"same UID", tj("a", "u"), tj("a", "u"), true},
		{"recreated: same name, other UID", tj("a", "u1"), tj("a", "u2"), false},
		{"one UID unknown: by name", tj("a", ""), tj("a", "u"), true},
		{"other name", tj("a", ""), tj("b", "u"), false},
		{"other kind", tj("a", ""), Ref{APIVersion: "batch/v1", Kind: "Job", Namespace: "team", Name: "a"}, false},
		{"other version of the group", tj("a", ""), Ref{APIVersion: "trainer.kubeflow.org/v2", Kind: "TrainJob", Namespace: "team", Name: "a"}, true},
		{"other namespace", tj("a", ""), Ref{APIVersion: trainerAPI, Kind: "TrainJob", Namespace: "x", Name: "a"}, false},
	}
	for _, tt := range tests {
		if got := Same(tt.a, tt.b); got != tt.want || Same(tt.b, tt.a) != tt.want {
			t.Errorf("%s: got %v, want %v", tt.name, got, tt.want)
		}
	}
}
