package plugin

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	policy "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/progress-planner/planner/pkg/preempt"
)

// TestPostFilterVictims runs the whole PostFilter (the Evaluator, the victim
// rules, node choice and the gang deletion) against a fake API server, one
// row per rule. defaultDeletes, when set, is what DefaultPreemption deletes
// in the same cluster: the rows where the planner's rules change the choice.
func TestPostFilterVictims(t *testing.T) {
	started := now.Add(-6 * time.Hour)
	two := []*v1.Node{gpuNode("n1", 8), gpuNode("n2", 8)}
	three := append(slices.Clone(two), gpuNode("n3", 8))
	one := []*v1.Node{gpuNode("n1", 8)}
	margin := func(m int32) *Args { return &Args{ProtectionMargin: &m} }
	pdbFor := func(job string, allowed int32) *policy.PodDisruptionBudget {
		return &policy.PodDisruptionBudget{
			ObjectMeta: metav1.ObjectMeta{Name: job, Namespace: ns},
			Spec: policy.PodDisruptionBudgetSpec{MinAvailable: &intstr.IntOrString{IntVal: 1},
				Selector: &metav1.LabelSelector{MatchLabels: map[string]string{JobLabel: job}}},
			Status: policy.PodDisruptionBudgetStatus{DisruptionsAllowed: allowed},
		}
	}
	stale := forecastOf("plat", preempt.Plateaued, 5*time.Minute)
	stale.DecidedAt = now.Add(-2 * time.Hour)
	advise := forecastOf("plat", preempt.Plateaued, 5*time.Minute)
	advise.Mode = preempt.ModeAdvise

	tests := []struct {
		name           string
		c              cluster
		pre            *v1.Pod
		wantDeletes    []string
		wantNode       string // alternatives separated by |
		wantCode       fwk.Code
		defaultDeletes []string
	}{{
		name: "stalledFirst: a plateaued job yields before a lower-priority progressing one",
		c: cluster{nodes: two, pods: []*v1.Pod{
			jobPod("plat-0", "plat", "n1", 200, 8, started),
			jobPod("prog-0", "prog", "n2", 100, 8, started),
		}, fc: forecasts(forecastOf("plat", preempt.Plateaued, 5*time.Minute), forecastOf("prog", preempt.Progressing, 5*time.Minute))},
		pre: preemptor(1000, 8), wantDeletes: []string{"plat-0"}, wantNode: "n1", defaultDeletes: []string{"prog-0"},
	}, {
		name: "stalledFirst: hung and diverging count as stalled",
		c: cluster{nodes: two, pods: []*v1.Pod{
			jobPod("hung-0", "hung", "n1", 200, 8, started),
			jobPod("prog-0", "prog", "n2", 100, 8, started),
		}, fc: forecasts(forecastOf("hung", preempt.Hung, time.Hour), forecastOf("prog", preempt.Progressing, 5*time.Minute))},
		pre: preemptor(1000, 8), wantDeletes: []string{"hung-0"}, wantNode: "n1", defaultDeletes: []string{"prog-0"},
	}, {
		name: "protectedLast: a NearDone lease keeps its job when another node frees enough",
		c: cluster{nodes: two, pods: []*v1.Pod{
			jobPod("near-0", "near", "n1", 100, 8, started),
			jobPod("prog-0", "prog", "n2", 200, 8, started),
		}, fc: forecasts(leased("near", time.Minute, now.Add(time.Hour)), forecastOf("prog", preempt.Progressing, 5*time.Minute))},
		pre: preemptor(5000, 8), wantDeletes: []string{"prog-0"}, wantNode: "n2", defaultDeletes: []string{"near-0"},
	}, {
		name: "protection margin not met: leased jobs only, nothing is evicted",
		c: cluster{nodes: two, pods: []*v1.Pod{
			jobPod("near-0", "near", "n1", 500, 8, started.Add(time.Hour)),
			jobPod("near2-0", "near2", "n2", 500, 8, started),
		}, fc: forecasts(leased("near", time.Minute, now.Add(time.Hour)), leased("near2", time.Minute, now.Add(time.Hour)))},
		pre: preemptor(1000, 8), wantCode: fwk.Unschedulable, defaultDeletes: []string{"near-0"},
	}, {
		name: "protection margin met: a leased job goes as the last resort, the cheaper one",
		c: cluster{nodes: two, args: margin(400), pods: []*v1.Pod{
			jobPod("near-0", "near", "n1", 500, 8, started),
			jobPod("near2-0", "near2", "n2", 500, 8, started),
		}, fc: forecasts(leased("near", 30*time.Minute, now.Add(time.Hour)), leased("near2", time.Minute, now.Add(time.Hour)))},
		pre: preemptor(1000, 8), wantDeletes: []string{"near2-0"}, wantNode: "n2",
	}, {
		name: "protectedLast: on one node the leased job is reprieved when the other pod frees enough",
		c: cluster{nodes: []*v1.Node{gpuNode("n1", 8)}, args: margin(0), pods: []*v1.Pod{
			jobPod("near-0", "near", "n1", 100, 4, started),
			jobPod("prog-0", "prog", "n1", 200, 4, started),
		}, fc: forecasts(leased("near", time.Minute, now.Add(time.Hour)), forecastOf("prog", preempt.Progressing, 5*time.Minute))},
		pre: preemptor(1000, 4), wantDeletes: []string{"prog-0"}, wantNode: "n1", defaultDeletes: []string{"near-0"},
	}, {
		name: "an expired lease protects nothing",
		c: cluster{nodes: two, pods: []*v1.Pod{
			jobPod("near-0", "near", "n1", 100, 8, started),
			jobPod("prog-0", "prog", "n2", 200, 8, started),
		}, fc: forecasts(leased("near", time.Minute, now.Add(-time.Minute)), forecastOf("prog", preempt.Progressing, 5*time.Minute))},
		pre: preemptor(5000, 8), wantDeletes: []string{"near-0"}, wantNode: "n1",
	}, {
		name: "pdbLast: a job whose budget is spent goes after one without",
		c: cluster{nodes: two, pdbs: []*policy.PodDisruptionBudget{pdbFor("low", 0)}, pods: []*v1.Pod{
			jobPod("low-0", "low", "n1", 100, 8, started),
			jobPod("high-0", "high", "n2", 200, 8, started),
		}, fc: forecasts(forecastOf("low", preempt.Progressing, time.Minute), forecastOf("high", preempt.Progressing, time.Minute))},
		pre: preemptor(1000, 8), wantDeletes: []string{"high-0"}, wantNode: "n2",
	}, {
		name: "lowerPriorityFirst: among jobs with no verdict to act on, priority decides",
		c: cluster{nodes: two, pods: []*v1.Pod{
			jobPod("a-0", "a", "n1", 200, 8, started),
			jobPod("b-0", "b", "n2", 100, 8, started),
		}, fc: forecasts(forecastOf("a", preempt.Progressing, time.Minute), forecastOf("b", preempt.Progressing, time.Hour))},
		pre: preemptor(1000, 8), wantDeletes: []string{"b-0"}, wantNode: "n2",
	}, {
		name: "lessWorkLostFirst: the job that reported most recently loses least",
		c: cluster{nodes: two, pods: []*v1.Pod{
			jobPod("old-0", "old", "n1", 100, 8, now.Add(-time.Hour)),
			jobPod("fresh-0", "fresh", "n2", 100, 8, started),
		}, fc: forecasts(forecastOf("old", preempt.Progressing, 50*time.Minute), forecastOf("fresh", preempt.Progressing, 2*time.Minute))},
		pre: preemptor(1000, 8), wantDeletes: []string{"fresh-0"}, wantNode: "n2", defaultDeletes: []string{"old-0"},
	}, {
		name: "gang: work lost counts every node of a multi-node job",
		c: cluster{nodes: three, pods: []*v1.Pod{
			jobPod("gang-0", "gang", "n1", 100, 8, started),
			jobPod("gang-1", "gang", "n2", 100, 8, started),
			jobPod("solo-0", "solo", "n3", 100, 8, started),
		}, fc: forecasts(forecastOf("gang", preempt.Progressing, 10*time.Minute), forecastOf("solo", preempt.Progressing, 15*time.Minute))},
		pre: preemptor(1000, 8), wantDeletes: []string{"solo-0"}, wantNode: "n3",
	}, {
		name: "gang: evicting one pod of a job evicts the job on every node",
		c: cluster{nodes: three, pods: []*v1.Pod{
			jobPod("gang-0", "gang", "n1", 100, 8, started),
			jobPod("gang-1", "gang", "n2", 100, 8, started),
			jobPod("solo-0", "solo", "n3", 100, 8, started),
		}, fc: forecasts(forecastOf("gang", preempt.Plateaued, 10*time.Minute), forecastOf("solo", preempt.Progressing, time.Minute))},
		pre: preemptor(1000, 8), wantDeletes: []string{"gang-0", "gang-1"}, wantNode: "n1|n2",
	}, {
		name: "gang: a tracked batch/v1 Job's pods (pkg/gang's job rule) are evicted together",
		c: cluster{nodes: three, pods: []*v1.Pod{
			batchJobPod(jobPod("sweep-0", "", "n1", 100, 8, started), "sweep"),
			batchJobPod(jobPod("sweep-1", "", "n2", 100, 8, started), "sweep"),
			jobPod("solo-0", "solo", "n3", 100, 8, started),
		}, fc: forecasts(forecastOf("sweep", preempt.Plateaued, 10*time.Minute), forecastOf("solo", preempt.Progressing, time.Minute))},
		pre: preemptor(1000, 8), wantDeletes: []string{"sweep-0", "sweep-1"}, wantNode: "n1|n2",
	}, {
		name: "gang: all pods of a job on the node go together",
		c: cluster{nodes: []*v1.Node{gpuNode("n1", 8)}, pods: []*v1.Pod{
			jobPod("gang-0", "gang", "n1", 100, 4, started),
			jobPod("gang-1", "gang", "n1", 100, 4, started),
		}, fc: forecasts(forecastOf("gang", preempt.Progressing, 10*time.Minute))},
		pre: preemptor(1000, 4), wantDeletes: []string{"gang-0", "gang-1"}, wantNode: "n1", defaultDeletes: []string{"gang-1"},
	}, {
		name: "one node, stalledFirst: the plateaued pod is the victim",
		c: cluster{nodes: one, pods: []*v1.Pod{
			jobPod("plat-0", "plat", "n1", 200, 4, started),
			jobPod("prog-0", "prog", "n1", 100, 4, started),
		}, fc: forecasts(forecastOf("plat", preempt.Plateaued, 5*time.Minute), forecastOf("prog", preempt.Progressing, 5*time.Minute))},
		pre: preemptor(1000, 4), wantDeletes: []string{"plat-0"}, wantNode: "n1", defaultDeletes: []string{"prog-0"},
	}, {
		name: "one node, pdbLast: the pod whose budget is spent is reprieved",
		c: cluster{nodes: one, pdbs: []*policy.PodDisruptionBudget{pdbFor("low", 0)}, pods: []*v1.Pod{
			jobPod("low-0", "low", "n1", 100, 4, started),
			jobPod("high-0", "high", "n1", 200, 4, started),
		}, fc: forecasts(forecastOf("low", preempt.Progressing, time.Minute), forecastOf("high", preempt.Progressing, time.Minute))},
		pre: preemptor(1000, 4), wantDeletes: []string{"high-0"}, wantNode: "n1", defaultDeletes: []string{"high-0"},
	}, {
		name: "one node, lowerPriorityFirst: before work lost",
		c: cluster{nodes: one, pods: []*v1.Pod{
			jobPod("a-0", "a", "n1", 200, 4, started),
			jobPod("b-0", "b", "n1", 100, 4, started),
		}, fc: forecasts(forecastOf("a", preempt.Progressing, time.Hour), forecastOf("b", preempt.Progressing, time.Hour+time.Minute))},
		pre: preemptor(1000, 4), wantDeletes: []string{"b-0"}, wantNode: "n1",
	}, {
		name: "one node, lessWorkLostFirst: the recently reporting job goes",
		c: cluster{nodes: one, pods: []*v1.Pod{
			jobPod("old-0", "old", "n1", 100, 4, now.Add(-time.Hour)),
			jobPod("fresh-0", "fresh", "n1", 100, 4, started),
		}, fc: forecasts(forecastOf("old", preempt.Progressing, 50*time.Minute), forecastOf("fresh", preempt.Progressing, 2*time.Minute))},
		pre: preemptor(1000, 4), wantDeletes: []string{"fresh-0"}, wantNode: "n1", defaultDeletes: []string{"old-0"},
	}, {
		name: "one node, gang cost: a pod whose job also runs elsewhere costs its whole gang",
		c: cluster{nodes: []*v1.Node{gpuNode("n1", 8), gpuNode("n2", 4)}, pods: []*v1.Pod{
			jobPod("gang-0", "gang", "n1", 100, 4, started),
			jobPod("gang-1", "gang", "n2", 100, 4, started),
			jobPod("solo-0", "solo", "n1", 100, 4, started),
		}, fc: forecasts(forecastOf("gang", preempt.Progressing, 10*time.Minute), forecastOf("solo", preempt.Progressing, 15*time.Minute))},
		pre: preemptor(1000, 4), wantDeletes: []string{"solo-0"}, wantNode: "n1",
	}, {
		name: "a stale decision's verdict is ignored",
		c: cluster{nodes: two, pods: []*v1.Pod{
			jobPod("plat-0", "plat", "n1", 200, 8, started),
			jobPod("prog-0", "prog", "n2", 100, 8, started),
		}, fc: forecasts(stale, forecastOf("prog", preempt.Progressing, 5*time.Minute))},
		pre: preemptor(1000, 8), wantDeletes: []string{"prog-0"}, wantNode: "n2",
	}, {
		name: "advise mode counts as untracked",
		c: cluster{nodes: two, pods: []*v1.Pod{
			jobPod("plat-0", "plat", "n1", 200, 8, started),
			jobPod("lone", "", "n2", 100, 8, started),
		}, fc: forecasts(advise)},
		pre: preemptor(1000, 8), wantDeletes: []string{"lone"}, wantNode: "n2", defaultDeletes: []string{"lone"},
	}, {
		name: "untracked pods only: the default's choice",
		c: cluster{nodes: two, pods: []*v1.Pod{
			jobPod("x", "", "n1", 100, 8, started),
			jobPod("y", "other", "n2", 50, 8, started),
		}, fc: forecasts()},
		pre: preemptor(1000, 8), wantDeletes: []string{"y"}, wantNode: "n2", defaultDeletes: []string{"y"},
	}, {
		name: "a gang with a pod at the preemptor's priority is not eligible",
		c: cluster{nodes: []*v1.Node{gpuNode("n1", 8)}, pods: []*v1.Pod{
			jobPod("gang-0", "gang", "n1", 100, 4, started),
			jobPod("gang-1", "gang", "n1", 1000, 4, started),
		}, fc: forecasts(forecastOf("gang", preempt.Plateaued, 10*time.Minute))},
		pre: preemptor(1000, 4), wantCode: fwk.UnschedulableAndUnresolvable, defaultDeletes: []string{"gang-0"},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			node, deleted, status := preemptOnce(t, tt.c, tt.pre, progressAware(tt.c.fc, tt.c.args))
			wantCode := tt.wantCode
			if tt.wantDeletes != nil {
				wantCode = fwk.Success
			}
			if status.Code() != wantCode && !(wantCode == fwk.UnschedulableAndUnresolvable && status.Code() == fwk.Unschedulable) {
				t.Fatalf("status %v, want code %v", status, wantCode)
			}
			if !slices.Equal(deleted, tt.wantDeletes) {
				t.Errorf("deleted %v, want %v", deleted, tt.wantDeletes)
			}
			if !slices.Contains(strings.Split(tt.wantNode, "|"), node) {
				t.Errorf("nominated %q, want %q", node, tt.wantNode)
			}
			if tt.defaultDeletes != nil {
				_, got, _ := preemptOnce(t, tt.c, tt.pre, defaultPreemption)
				if !slices.Equal(got, tt.defaultDeletes) {
					t.Errorf("DefaultPreemption deleted %v, want %v", got, tt.defaultDeletes)
				}
			}
		})
	}
}

// TestGangCostFromSnapshot: without the pod index (an informer that had
// already started), gang totals come from the scheduler's snapshot and the
// gang rows decide the same way.
func TestGangCostFromSnapshot(t *testing.T) {
	started := now.Add(-6 * time.Hour)
	c := cluster{nodes: []*v1.Node{gpuNode("n1", 8), gpuNode("n2", 8), gpuNode("n3", 8)}, pods: []*v1.Pod{
		jobPod("gang-0", "gang", "n1", 100, 8, started),
		jobPod("gang-1", "gang", "n2", 100, 8, started),
		jobPod("solo-0", "solo", "n3", 100, 8, started),
	}, fc: forecasts(forecastOf("gang", preempt.Progressing, 10*time.Minute), forecastOf("solo", preempt.Progressing, 15*time.Minute))}
	withoutIndex := func(ctx context.Context, fh fwk.Handle) (fwk.PostFilterPlugin, error) {
		p, err := progressAware(c.fc, nil)(ctx, fh)
		if err == nil {
			p.(*Plugin).podIndex = nil
		}
		return p, err
	}
	node, deleted, status := preemptOnce(t, c, preemptor(1000, 8), withoutIndex)
	if !status.IsSuccess() || node != "n3" || !slices.Equal(deleted, []string{"solo-0"}) {
		t.Errorf("got node %q, deleted %v, status %v; want n3, [solo-0]", node, deleted, status)
	}
}
