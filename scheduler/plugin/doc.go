// Package plugin is a kube-scheduler framework plugin that uses the
// planner's published forecasts (ProgressForecast, api/v1alpha1) to order the
// scheduling queue and to choose preemption victims among GPU training pods.
// It serves clusters, or parts of clusters, where kube-scheduler rather than
// Kueue quota decides which pods run; with Kueue the planner acts through
// Workload priority boosts instead (docs/scheduler-plugin.md).
//
// # Pods, jobs and gangs
//
// A pod's gang comes from pkg/gang (an ordered table of named rules): a
// scheduler-plugins PodGroup (label scheduling.x-k8s.io/pod-group, with the
// PodGroup's minMember), else the pod's JobSet (jobset.sigs.k8s.io/jobset-name:
// the Trainer names the JobSet after the TrainJob). The gang's job, whose
// ProgressForecast the plugin reads, is the JobSet's name when the pod
// carries one, else the PodGroup's. A job is tracked when a
// ProgressForecast of that name exists in the pod's namespace and its
// decision is not in the policy's advise mode. All pods of a tracked job
// form one gang, and so do all pods of a PodGroup, tracked or not (the
// PodGroup declares them one): evicting any of them evicts all of them, on
// every node, and the cost of the eviction is the gang's — unless the
// gang's pods on other nodes still number at least its minMember, in which
// case only the pods on the chosen node go and only they are counted.
// Other pods are single-pod groups with no verdict.
//
// # Queue order (QueueSort)
//
// Pending pods are ordered by pod priority plus the job's boost (the
// decision's boost; 0 for untracked jobs and for decisions older than
// MaxForecastAge), then by the time they entered the queue — for a
// PodGroup's pods, the time the PodGroup was created, then the PodGroup,
// so that a gang's pods stay together as under Coscheduling's QueueSort.
//
// # Victim rules (PostFilter)
//
// Only pods whose priority is below the preemptor's are eligible, as with
// the default preemption; a pod of a gang is eligible only when every pod of
// its gang on that node is. Among eligible groups the rules apply in this
// order, each deciding only where the ones before it tie (see rules.go):
//
//  1. protectedLast: a group holding an active NearDone lease is evicted
//     only when evicting every other eligible group on the node still does
//     not make room, and only when the preemptor's priority exceeds the
//     group's by at least ProtectionMargin (otherwise it is not eligible).
//  2. pdbLast: groups whose eviction would violate a PodDisruptionBudget go
//     after those whose eviction would not.
//  3. stalledFirst: groups of Plateaued, Hung or Diverging jobs go first.
//  4. lowerPriorityFirst: lower pod priority goes first.
//  5. lessWorkLostFirst: less work lost goes first: the gang's GPUs times
//     the time since the job's last progress report (for an untracked pod,
//     since it started).
//  6. smallerGangFirst: fewer pods evicted (the whole gang) goes first.
//  7. newerFirst: the group that started later goes first; then by name.
//
// On each node the plugin removes every eligible group, checks that the
// preemptor fits, and then gives groups back in reverse rule order (the most
// valuable first) while the preemptor still fits: what cannot be given back
// are the node's victims. The node whose victims are cheapest by the same
// rules, compared over the whole victim set, wins (OrderedScoreFuncs in
// nodescore.go). When no eligible pod on a node belongs to a gang (a
// tracked job's or a PodGroup's), that node's victims are
// DefaultPreemption's, and when no candidate node has such a victim, so is
// the choice of node.
package plugin
