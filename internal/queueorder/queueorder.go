// Package queueorder is Kueue's effective priority and its order of
// pending Workloads, written once for the policy (pkg/preempt), the report
// and explain (pkg/report) and the simulator.
package queueorder

import (
	"cmp"
	"math"
)

// EffectivePriority is a Workload's priority plus its priority boost
// (kueue.x-k8s.io/priority-boost), saturating at the int32 bounds as
// Kueue's int32 priority does.
func EffectivePriority(base, boost int32) int32 {
	s := int64(base) + int64(boost)
	return int32(max(math.MinInt32, min(math.MaxInt32, s)))
}

// Compare orders two pending Workloads as Kueue's queue does: the higher
// effective priority first, then the earlier queue-order time (creation,
// or the requeue time after an eviction), then the key, so that equal
// Workloads still get one answer. Negative when a comes first.
func Compare[T, K cmp.Ordered](effA, effB int32, timeA, timeB T, keyA, keyB K) int {
	return cmp.Or(cmp.Compare(effB, effA), cmp.Compare(timeA, timeB), cmp.Compare(keyA, keyB))
}
