package plugin

import (
	"cmp"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/progress-planner/planner/pkg/gang"
)

// group is what the victim rules rank: the eligible pods of one gang on one
// node (or one pod of no gang), with the cost of evicting the whole gang
// (or, for a gang whose quorum the rest keeps, of these pods).
type group struct {
	// key is the gang's key (pkg/gang), namespace/pod for a lone pod.
	key  string
	pods []*v1.Pod
	// infos are the pods' PodInfos (victim selection only).
	infos []fwk.PodInfo
	// gang is the pods' gang; nil for a lone pod.
	gang *gang.Gang
	// partial: the gang's pods on other nodes meet its minMember without
	// these, so only these are evicted.
	partial bool
	// job is the gang's forecast; nil for a lone pod and an untracked
	// PodGroup.
	job *JobForecast
	// protected: the job holds an active NearDone lease.
	protected bool
	// pdbViolating: evicting the group's pods would violate a PDB.
	pdbViolating bool
	// stalled: a fresh verdict of Plateaued, Hung or Diverging.
	stalled bool
	// priority is the highest pod priority in the group.
	priority int32
	// workLost is GPU-seconds lost by evicting the whole gang (pod-seconds
	// for a gang without GPUs).
	workLost float64
	// gangPods is how many pods evicting the group deletes, on all nodes.
	gangPods int
	// start is when the group's earliest pod started.
	start time.Time
}

// victimRule is one named comparison: negative when a is the better victim
// (to be evicted before b), positive when b is, 0 when the rule does not
// decide.
type victimRule struct {
	name string
	cmp  func(a, b *group) int
}

// victimRules apply in order; the first that decides wins. The order is the
// policy described in the package doc: a lease protects before anything
// else, the cluster's own disruption budgets come next, then the planner's
// verdict, then the scheduler's priority contract, then the cost.
var victimRules = [...]victimRule{
	{"protectedLast", protectedLast},
	{"pdbLast", pdbLast},
	{"stalledFirst", stalledFirst},
	{"lowerPriorityFirst", lowerPriorityFirst},
	{"lessWorkLostFirst", lessWorkLostFirst},
	{"smallerGangFirst", smallerGangFirst},
	{"newerFirst", newerFirst},
}

// compareVictims orders groups best victim first; the key breaks the last
// tie so that the order is total and runs are reproducible.
func compareVictims(a, b *group) int {
	for _, r := range victimRules {
		if c := r.cmp(a, b); c != 0 {
			return c
		}
	}
	return strings.Compare(a.key, b.key)
}

// decidingRule names the first rule that orders a and b ("key" when only
// the tie-break does); for logs and tests.
func decidingRule(a, b *group) string {
	for _, r := range victimRules {
		if r.cmp(a, b) != 0 {
			return r.name
		}
	}
	return "key"
}

// protectedLast: a job near its end under a NearDone lease loses the most
// by being evicted now, and the lease is the planner's promise to let it
// finish.
func protectedLast(a, b *group) int { return boolLast(a.protected, b.protected) }

// pdbLast: the cluster's disruption budgets are honoured before the
// planner's opinion, as the default preemption does.
func pdbLast(a, b *group) int { return boolLast(a.pdbViolating, b.pdbViolating) }

// stalledFirst: a Plateaued, Hung or Diverging job gains little from the
// GPUs it holds, so it yields even to a job of equal or lower priority.
func stalledFirst(a, b *group) int { return -boolLast(a.stalled, b.stalled) }

// lowerPriorityFirst keeps the scheduler's priority contract among jobs
// the planner has no reason to treat differently.
func lowerPriorityFirst(a, b *group) int { return cmp.Compare(a.priority, b.priority) }

// lessWorkLostFirst: what is lost is what the job must redo after a
// restart, approximated by GPU-time since its last progress report.
func lessWorkLostFirst(a, b *group) int { return cmp.Compare(a.workLost, b.workLost) }

// smallerGangFirst: fewer pods to restart.
func smallerGangFirst(a, b *group) int { return cmp.Compare(a.gangPods, b.gangPods) }

// newerFirst: as the default preemption, a pod that has run for less time
// goes first.
func newerFirst(a, b *group) int { return b.start.Compare(a.start) }

// boolLast orders false before true.
func boolLast(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return 1
	default:
		return -1
	}
}
