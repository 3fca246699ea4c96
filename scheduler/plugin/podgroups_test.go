package plugin

import (
	"cmp"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/progress-planner/planner/pkg/preempt"
)

// TestPostFilterPodGroups runs the whole PostFilter on clusters whose jobs
// are scheduler-plugins PodGroups: a PodGroup is one gang (evicted whole,
// its cost summed over its pods on every node) unless the pods it keeps on
// other nodes still meet its minMember. wantDeletes lists alternatives
// separated by | where the rules tie; defaultDeletes is what
// DefaultPreemption deletes in the same cluster ("" for nothing to check).
func TestPostFilterPodGroups(t *testing.T) {
	started := now.Add(-6 * time.Hour)
	nodes := func(n int) []*v1.Node {
		var out []*v1.Node
		for i := range n {
			out = append(out, gpuNode("n"+itoa(i+1), 8))
		}
		return out
	}
	tests := []struct {
		name           string
		c              cluster
		preGPUs        int    // the preemptor's GPUs; 0: 8
		wantDeletes    string // pod names joined by ",", alternatives by "|"
		defaultDeletes string
	}{{
		name: "a plateaued PodGroup goes whole, on both its nodes, where the default takes the lowest priority",
		c: cluster{nodes: nodes(3), pgs: podGroups(map[string]int32{"plat": 2}), pods: []*v1.Pod{
			pgPod("plat-0", "plat", "", "n1", 200, 8, started),
			pgPod("plat-1", "plat", "", "n2", 200, 8, started),
			jobPod("prog-0", "prog", "n3", 100, 8, started),
		}, fc: forecasts(forecastOf("plat", preempt.Plateaued, 5*time.Minute), forecastOf("prog", preempt.Progressing, 5*time.Minute))},
		wantDeletes: "plat-0,plat-1", defaultDeletes: "prog-0",
	}, {
		name: "an untracked PodGroup is still a gang: never one pod of it below minMember",
		c: cluster{nodes: nodes(2), pgs: podGroups(map[string]int32{"pg": 2}), pods: []*v1.Pod{
			pgPod("pg-0", "pg", "", "n1", 50, 8, started),
			pgPod("pg-1", "pg", "", "n2", 50, 8, started),
		}, fc: forecasts()},
		wantDeletes: "pg-0,pg-1", defaultDeletes: "pg-0|pg-1",
	}, {
		name: "minMember: the rest keeps its quorum, so only the pod on the chosen node goes",
		c: cluster{nodes: nodes(3), pgs: podGroups(map[string]int32{"elastic": 2}), pods: []*v1.Pod{
			pgPod("elastic-0", "elastic", "", "n1", 100, 8, started),
			pgPod("elastic-1", "elastic", "", "n2", 100, 8, started),
			pgPod("elastic-2", "elastic", "", "n3", 100, 8, started),
		}, fc: forecasts(forecastOf("elastic", preempt.Progressing, 5*time.Minute))},
		wantDeletes: "elastic-0|elastic-1|elastic-2",
	}, {
		name: "minMember: one pod fewer would break the quorum, so the whole gang goes",
		c: cluster{nodes: nodes(3), pgs: podGroups(map[string]int32{"rigid": 3}), pods: []*v1.Pod{
			pgPod("rigid-0", "rigid", "", "n1", 100, 8, started),
			pgPod("rigid-1", "rigid", "", "n2", 100, 8, started),
			pgPod("rigid-2", "rigid", "", "n3", 100, 8, started),
		}, fc: forecasts(forecastOf("rigid", preempt.Progressing, 5*time.Minute))},
		wantDeletes: "rigid-0,rigid-1,rigid-2", defaultDeletes: "rigid-0|rigid-1|rigid-2",
	}, {
		name: "minMember unknown (no PodGroup object yet): every pod is the quorum",
		c: cluster{nodes: nodes(3), pods: []*v1.Pod{
			pgPod("nopg-0", "nopg", "", "n1", 100, 8, started),
			pgPod("nopg-1", "nopg", "", "n2", 100, 8, started),
			pgPod("nopg-2", "nopg", "", "n3", 100, 8, started),
		}, fc: forecasts(forecastOf("nopg", preempt.Progressing, 5*time.Minute))},
		wantDeletes: "nopg-0,nopg-1,nopg-2",
	}, {
		name: "gangs across nodes: a two-node PodGroup's work lost is summed, so the one-node job goes",
		c: cluster{nodes: nodes(3), pgs: podGroups(map[string]int32{"gang": 2}), pods: []*v1.Pod{
			pgPod("gang-0", "gang", "", "n1", 100, 8, started),
			pgPod("gang-1", "gang", "", "n2", 100, 8, started),
			jobPod("solo-0", "solo", "n3", 100, 8, started),
		}, fc: forecasts(forecastOf("gang", preempt.Progressing, 10*time.Minute), forecastOf("solo", preempt.Progressing, 15*time.Minute))},
		wantDeletes: "solo-0",
	}, {
		name: "gangs across nodes, one node: a PodGroup pod whose gang also runs elsewhere costs the gang",
		c: cluster{nodes: []*v1.Node{gpuNode("n1", 8), gpuNode("n2", 4)}, pgs: podGroups(map[string]int32{"gang": 2}), pods: []*v1.Pod{
			pgPod("gang-0", "gang", "", "n1", 100, 4, started),
			pgPod("gang-1", "gang", "", "n2", 100, 4, started),
			jobPod("solo-0", "solo", "n1", 100, 4, started),
		}, fc: forecasts(forecastOf("gang", preempt.Progressing, 10*time.Minute), forecastOf("solo", preempt.Progressing, 15*time.Minute))},
		preGPUs: 4, wantDeletes: "solo-0",
	}, {
		name: "mixed: a plateaued JobSet gang goes before a progressing PodGroup gang of lower priority",
		c: cluster{nodes: nodes(4), pgs: podGroups(map[string]int32{"pg": 2}), pods: []*v1.Pod{
			jobPod("js-0", "js", "n1", 200, 8, started),
			jobPod("js-1", "js", "n2", 200, 8, started),
			pgPod("pg-0", "pg", "", "n3", 100, 8, started),
			pgPod("pg-1", "pg", "", "n4", 100, 8, started),
		}, fc: forecasts(forecastOf("js", preempt.Plateaued, 5*time.Minute), forecastOf("pg", preempt.Progressing, 5*time.Minute))},
		wantDeletes: "js-0,js-1", defaultDeletes: "pg-0|pg-1",
	}, {
		name: "mixed: a plateaued PodGroup gang goes before a progressing JobSet gang of lower priority",
		c: cluster{nodes: nodes(4), pgs: podGroups(map[string]int32{"pg": 2}), pods: []*v1.Pod{
			jobPod("js-0", "js", "n1", 100, 8, started),
			jobPod("js-1", "js", "n2", 100, 8, started),
			pgPod("pg-0", "pg", "", "n3", 200, 8, started),
			pgPod("pg-1", "pg", "", "n4", 200, 8, started),
		}, fc: forecasts(forecastOf("js", preempt.Progressing, 5*time.Minute), forecastOf("pg", preempt.Plateaued, 5*time.Minute))},
		wantDeletes: "pg-0,pg-1", defaultDeletes: "js-0|js-1",
	}, {
		name: "mixed, one job: a TrainJob with coscheduling is its PodGroup's gang and its JobSet's forecast",
		c: cluster{nodes: nodes(3), pgs: podGroups(map[string]int32{"tj-pg": 2}), pods: []*v1.Pod{
			pgPod("tj-0", "tj-pg", "tj", "n1", 200, 8, started),
			pgPod("tj-1", "tj-pg", "tj", "n2", 200, 8, started),
			jobPod("prog-0", "prog", "n3", 100, 8, started),
		}, fc: forecasts(forecastOf("tj", preempt.Plateaued, 5*time.Minute), forecastOf("prog", preempt.Progressing, 5*time.Minute))},
		wantDeletes: "tj-0,tj-1", defaultDeletes: "prog-0",
	}, {
		name: "a NearDone PodGroup is spared where the default would pick it",
		c: cluster{nodes: nodes(4), pgs: podGroups(map[string]int32{"near": 2, "plat": 2}), pods: []*v1.Pod{
			pgPod("near-0", "near", "", "n1", 100, 8, started),
			pgPod("near-1", "near", "", "n2", 100, 8, started),
			pgPod("plat-0", "plat", "", "n3", 200, 8, started),
			pgPod("plat-1", "plat", "", "n4", 200, 8, started),
		}, fc: forecasts(leased("near", time.Minute, now.Add(time.Hour)), forecastOf("plat", preempt.Plateaued, 20*time.Minute))},
		wantDeletes: "plat-0,plat-1", defaultDeletes: "near-0|near-1",
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pre := preemptor(1000, cmp.Or(tt.preGPUs, 8))
			_, deleted, status := preemptOnce(t, tt.c, pre, progressAwareWith(tt.c.fc, tt.c.args, tt.c.pgs))
			if !status.IsSuccess() {
				t.Fatalf("status %v", status)
			}
			if got := strings.Join(deleted, ","); !slices.Contains(strings.Split(tt.wantDeletes, "|"), got) {
				t.Errorf("deleted %s, want %s", got, tt.wantDeletes)
			}
			if tt.defaultDeletes != "" {
				_, def, _ := preemptOnce(t, tt.c, pre, defaultPreemption)
				if got := strings.Join(def, ","); !slices.Contains(strings.Split(tt.defaultDeletes, "|"), got) {
					t.Errorf("DefaultPreemption deleted %s, want %s", got, tt.defaultDeletes)
				}
			}
		})
	}
}
