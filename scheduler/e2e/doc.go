// Package e2e holds planner-scheduler's end-to-end suites (build tag
// e2e): the ProgressAware plugin, alone and with the scheduler-plugins
// distribution's Coscheduling and CapacityScheduling, scheduling and
// preempting real pods on a real kube-apiserver and etcd
// (docs/scheduler-plugin.md, "Tests").
package e2e
