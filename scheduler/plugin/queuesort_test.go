package plugin

import (
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/progress-planner/planner/pkg/preempt"
)

func queued(tb testing.TB, pod *v1.Pod, at time.Time) fwk.QueuedPodInfo {
	pi, err := framework.NewPodInfo(pod)
	if err != nil {
		panic(err) // only for pods the tests build
	}
	return &framework.QueuedPodInfo{PodInfo: pi, Timestamp: at}
}

func TestLess(t *testing.T) {
	boosted := func(job string, boost int32) *JobForecast {
		f := forecastOf(job, preempt.NearDone, time.Minute)
		f.Boost = boost
		return f
	}
	staleBoost := boosted("stale", 500)
	staleBoost.DecidedAt = now.Add(-time.Hour)
	adviseBoost := boosted("advise", 500)
	adviseBoost.Mode = preempt.ModeAdvise
	p := &Plugin{
		set:   settings{maxForecastAge: DefaultMaxForecastAge},
		clock: testingclock.NewFakePassiveClock(now),
		forecasts: forecasts(boosted("up", 300), boosted("down", -300), staleBoost, adviseBoost,
			boosted("up2", 300)),
	}
	pod := func(name, job string, prio int32) *v1.Pod {
		w := st.MakePod().Name(name).Namespace(ns).Priority(prio)
		if job != "" {
			w = w.Label(JobLabel, job)
		}
		return w.Obj()
	}
	early, late := now.Add(-time.Minute), now
	tests := []struct {
		name string
		a, b fwk.QueuedPodInfo
		want bool // a before b
	}{
		{"priority alone", queued(t, pod("a", "", 200), late), queued(t, pod("b", "", 100), early), true},
		{"equal priority: earlier arrival", queued(t, pod("a", "", 100), early), queued(t, pod("b", "", 100), late), true},
		{"a boost lifts a job over a higher priority", queued(t, pod("a", "up", 100), late), queued(t, pod("b", "", 300), early), true},
		{"a negative boost sinks a job", queued(t, pod("a", "down", 500), early), queued(t, pod("b", "", 300), late), false},
		{"equal priority plus boost: earlier arrival", queued(t, pod("a", "up", 100), late), queued(t, pod("b", "up2", 100), early), false},
		{"a stale decision's boost does not count", queued(t, pod("a", "stale", 100), early), queued(t, pod("b", "", 300), late), false},
		{"advise mode's boost does not count", queued(t, pod("a", "advise", 100), early), queued(t, pod("b", "", 300), late), false},
		{"no forecast: no boost", queued(t, pod("a", "unknown", 100), early), queued(t, pod("b", "", 101), late), false},
	}
	for _, tt := range tests {
		if got := p.Less(tt.a, tt.b); got != tt.want {
			t.Errorf("%s: Less = %v, want %v", tt.name, got, tt.want)
		}
	}
}

// TestLessPodGroups: at equal priority, a PodGroup's pods arrive when the
// PodGroup was created, and pods of one PodGroup sort next to each other
// (as Coscheduling's QueueSort keeps them), whenever each was queued.
func TestLessPodGroups(t *testing.T) {
	pgs := podGroups(map[string]int32{"old": 2, "new": 2})
	pgs[ns+"/new"].CreationTimestamp.Time = now.Add(-time.Hour)
	pgs[ns+"/old"].CreationTimestamp.Time = now.Add(-2 * time.Hour)
	pgs[ns+"/twin"] = pgs[ns+"/old"].DeepCopy()
	pgs[ns+"/twin"].Name = "twin"
	p := &Plugin{set: settings{maxForecastAge: DefaultMaxForecastAge}, clock: testingclock.NewFakePassiveClock(now),
		forecasts: forecasts(), podGroups: pgs}
	pod := func(name, pg string, prio int32) *v1.Pod {
		w := st.MakePod().Name(name).Namespace(ns).Priority(prio)
		if pg != "" {
			w = w.Label(PodGroupLabel, pg)
		}
		return w.Obj()
	}
	tests := []struct {
		name string
		a, b fwk.QueuedPodInfo
		want bool
	}{
		{"the older PodGroup first, though queued later", queued(t, pod("a", "old", 100), now), queued(t, pod("b", "new", 100), now.Add(-time.Minute)), true},
		{"priority still first", queued(t, pod("a", "old", 100), now), queued(t, pod("b", "new", 200), now), false},
		{"PodGroups created together: by key, so siblings stay adjacent", queued(t, pod("a", "old", 100), now), queued(t, pod("b", "twin", 100), now.Add(-time.Minute)), true},
		{"a PodGroup created before a lone pod was queued goes first", queued(t, pod("a", "new", 100), now), queued(t, pod("b", "", 100), now.Add(-time.Minute)), true},
		{"an unknown PodGroup: the pod's own arrival", queued(t, pod("a", "unknown", 100), now), queued(t, pod("b", "", 100), now.Add(-time.Minute)), false},
	}
	for _, tt := range tests {
		if got := p.Less(tt.a, tt.b); got != tt.want {
			t.Errorf("%s: Less = %v, want %v", tt.name, got, tt.want)
		}
	}
}
