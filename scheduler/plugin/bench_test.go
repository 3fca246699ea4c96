package plugin

import (
	"context"
	"fmt"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/defaultpreemption"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/queuesort"
	"k8s.io/kubernetes/pkg/scheduler/framework/preemption"

	"github.com/progress-planner/planner/pkg/preempt"
)

// syntheticCluster is n full 8-GPU nodes, each with two 4-GPU pods. Job j
// has a pod on node j and one on node j+1 (every job is a two-node gang,
// and every node holds pods of two jobs); job priorities cycle over 100,
// 200 and 300; every 5th job is Plateaued, every 7th holds a NearDone
// lease, the rest are Progressing with reports up to an hour old. The
// preemptor asks for 8 GPUs at priority 1000.
func syntheticCluster(n int) cluster {
	c := cluster{fc: StaticForecasts{}}
	for i := range n {
		c.nodes = append(c.nodes, gpuNode(fmt.Sprintf("n%04d", i), 8))
	}
	for j := range n {
		job := fmt.Sprintf("job%04d", j)
		prio := int32(100 * (1 + j%3))
		started := now.Add(-time.Duration(1+j%11) * time.Hour)
		c.pods = append(c.pods,
			jobPod(job+"-0", job, c.nodes[j].Name, prio, 4, started),
			jobPod(job+"-1", job, c.nodes[(j+1)%n].Name, prio, 4, started))
		since := time.Duration(1+j%59) * time.Minute
		switch {
		case j%5 == 0:
			c.fc[ns+"/"+job] = forecastOf(job, preempt.Plateaued, since)
		case j%7 == 0:
			c.fc[ns+"/"+job] = leased(job, since, now.Add(time.Hour))
		default:
			c.fc[ns+"/"+job] = forecastOf(job, preempt.Progressing, since)
		}
	}
	return c
}

// noDeletes makes an Evaluator's victim deletion a no-op, so that the
// benchmark measures the scheduling-cycle work (dry runs, victim and node
// selection), not the API calls, which are the same for both plugins.
func noDeletes(ev *preemption.Evaluator) {
	ev.PreemptPod = func(context.Context, preemption.Candidate, *v1.Pod, *v1.Pod, string) error { return nil }
}

// podGroupCluster is syntheticCluster with every job a scheduler-plugins
// PodGroup instead of a JobSet: minMember 2 (both pods, the whole gang goes),
// except every 4th job, whose minMember 1 lets one pod go alone.
func podGroupCluster(n int) cluster {
	c := syntheticCluster(n)
	mm := map[string]int32{}
	for _, p := range c.pods {
		job := p.Labels[JobLabel]
		delete(p.Labels, JobLabel)
		p.Labels[PodGroupLabel] = job
		var j int
		fmt.Sscanf(job, "job%d", &j)
		mm[job] = 2
		if j%4 == 3 {
			mm[job] = 1
		}
	}
	c.pgs = podGroups(mm)
	return c
}

// BenchmarkPostFilter compares one PostFilter of ProgressAware with one of
// DefaultPreemption on the same synthetic cluster:
//
//	cd scheduler && go test -run '^$' -bench . -cpu 1 -count 10 ./plugin > bench.txt && benchstat -col /impl bench.txt
func BenchmarkPostFilter(b *testing.B) { benchmarkPostFilter(b, syntheticCluster) }

// BenchmarkPostFilterPodGroups is BenchmarkPostFilter with PodGroup gangs
// (podGroupCluster).
func BenchmarkPostFilterPodGroups(b *testing.B) { benchmarkPostFilter(b, podGroupCluster) }

func benchmarkPostFilter(b *testing.B, mkCluster func(int) cluster) {
	for _, n := range []int{16, 128, 512} {
		c := mkCluster(n)
		pre := preemptor(1000, 8)
		impls := []struct {
			name string
			mk   postFilterFactory
		}{
			{"default", func(ctx context.Context, fh fwk.Handle) (fwk.PostFilterPlugin, error) {
				p, err := defaultPreemption(ctx, fh)
				if err == nil {
					noDeletes(p.(*defaultpreemption.DefaultPreemption).Evaluator)
				}
				return p, err
			}},
			{"progressaware", func(ctx context.Context, fh fwk.Handle) (fwk.PostFilterPlugin, error) {
				p, err := progressAwareWith(c.fc, nil, c.pgs)(ctx, fh)
				if err == nil {
					noDeletes(p.(*Plugin).Evaluator())
				}
				return p, err
			}},
		}
		for _, impl := range impls {
			b.Run(fmt.Sprintf("nodes=%d/impl=%s", n, impl.name), func(b *testing.B) {
				e := newEnv(b, c, pre, impl.mk)
				m := unschedulableEverywhere(c.nodes)
				b.ReportAllocs()
				cpu0 := processCPU(b)
				for b.Loop() {
					if _, s := e.pf.PostFilter(e.ctx, e.state, pre, m); !s.IsSuccess() {
						b.Fatalf("PostFilter: %v", s)
					}
				}
				b.ReportMetric(float64(processCPU(b)-cpu0)/float64(b.N), "cpu-ns/op")
			})
		}
	}
}

// BenchmarkLess compares the queue order's comparison with PrioritySort's.
func BenchmarkLess(b *testing.B) { benchmarkLess(b, syntheticCluster) }

// BenchmarkLessPodGroups is BenchmarkLess with PodGroup jobs (a PodGroup
// look-up on each side).
func BenchmarkLessPodGroups(b *testing.B) { benchmarkLess(b, podGroupCluster) }

func benchmarkLess(b *testing.B, mkCluster func(int) cluster) {
	c := mkCluster(128)
	p := &Plugin{set: settings{maxForecastAge: DefaultMaxForecastAge}, clock: fakeNow{}, forecasts: c.fc}
	if c.pgs != nil {
		p.podGroups = c.pgs
	}
	ps := &queuesort.PrioritySort{}
	var qs []fwk.QueuedPodInfo
	for _, pod := range c.pods {
		qs = append(qs, queued(nil, pod.DeepCopy(), now))
	}
	for _, impl := range []struct {
		name string
		less func(a, b fwk.QueuedPodInfo) bool
	}{{"default", ps.Less}, {"progressaware", p.Less}} {
		b.Run("impl="+impl.name, func(b *testing.B) {
			i := 0
			for b.Loop() {
				impl.less(qs[i%len(qs)], qs[(i+1)%len(qs)])
				i++
			}
		})
	}
}

// processCPU is the CPU time (user and system) the process has used, in
// nanoseconds. On a machine shared with other work, wall time per
// operation varies with the load; the CPU time an operation costs (summed
// over the Evaluator's parallel dry runs) much less so.
func processCPU(b *testing.B) int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}

// fakeNow is a clock fixed at now, without the test clock's lock.
type fakeNow struct{}

func (fakeNow) Now() time.Time                  { return now }
func (fakeNow) Since(t time.Time) time.Duration { return now.Sub(t) }
