package simulator

import "container/heap"

// evKind orders events that fall on the same instant: completions first
// (they free quota), then arrivals, then policy ticks (which see the state
// after both). Within a kind, the lower job id goes first, so a run is a
// pure function of its inputs.
type evKind uint8

const (
	evFinish  evKind = iota // a job completes its planned budget
	evArrival               // a job is submitted
	evTick                  // the policy re-decides one running job
)

func (k evKind) String() string {
	switch k {
	case evFinish:
		return "finish"
	case evArrival:
		return "arrival"
	}
	return "tick"
}

// event is one scheduled happening. gen identifies the admission (finish)
// or the tick it belongs to; an event whose gen no longer matches the job's
// is stale and dropped.
type event struct {
	t    float64
	kind evKind
	job  int32
	gen  int32
}

func (a event) before(b event) bool {
	if a.t != b.t {
		return a.t < b.t
	}
	if a.kind != b.kind {
		return a.kind < b.kind
	}
	if a.job != b.job {
		return a.job < b.job
	}
	return a.gen < b.gen
}

// eventQueue is a binary min-heap of events in (time, kind, job id) order.
type eventQueue []event

func (q eventQueue) Len() int           { return len(q) }
func (q eventQueue) Less(i, j int) bool { return q[i].before(q[j]) }
func (q eventQueue) Swap(i, j int)      { q[i], q[j] = q[j], q[i] }
func (q *eventQueue) Push(x any)        { *q = append(*q, x.(event)) }
func (q *eventQueue) Pop() any {
	old := *q
	e := old[len(old)-1]
	*q = old[:len(old)-1]
	return e
}

func (q *eventQueue) push(e event) { heap.Push(q, e) }
func (q *eventQueue) pop() event   { return heap.Pop(q).(event) }
func (q eventQueue) peek() event   { return q[0] }

// Record is one entry of a run's event log (Options.RecordEvents): the
// order of admissions, preemptions, completions and stops that a run on a
// real control plane can be compared with.
type Record struct {
	T    float64 `json:"t"`
	Type string  `json:"type"` // admit, preempt, finish, deactivate
	Job  string  `json:"job"`
	// By names the preemptor (preempt only).
	By string `json:"by,omitempty"`
	// Queue is the job's ClusterQueue; Priority its effective priority
	// (base + boost) at the time.
	Queue    string `json:"queue"`
	Priority int64  `json:"priority"`
}
