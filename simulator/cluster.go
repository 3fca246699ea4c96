package simulator

import (
	"container/heap"
	"fmt"
	"math"
	"slices"
	"sort"

	"github.com/progress-planner/planner/internal/queueorder"
)

// The cluster follows Kueue's semantics for one resource (GPUs), as small
// named rules (compare Kueue's pkg/scheduler and pkg/scheduler/preemption):
//
//  1. orderRule: pending workloads are ordered by effective priority (base +
//     boost) descending, then by queue-order timestamp (arrival; an evicted
//     job keeps its arrival, as Kueue keeps the creation timestamp for
//     preempted workloads), then by job id.
//  2. fitRule: a workload fits its ClusterQueue when usage + request <=
//     nominal quota + borrowing limit, and, in a cohort, the cohort's usage
//     + request <= the cohort's nominal quota (unused quota of the other
//     queues is borrowable). Without a cohort nothing is borrowed. A
//     workload larger than it could ever fit is never admitted.
//  3. bestEffortFIFORule: the scheduler walks the pending workloads of all
//     ClusterQueues in one merged order; one that neither fits nor can
//     preempt is skipped and later ones may still be admitted
//     (queueingStrategy BestEffortFIFO).
//  4. preemptLowerPriorityRule (withinClusterQueue: LowerPriority): a
//     workload that does not fit may preempt admitted workloads of its own
//     ClusterQueue whose effective priority is strictly lower. Candidates
//     are taken lowest priority first, then most recently admitted first,
//     then highest job id, until the preemptor fits; then, as Kueue's
//     minimalPreemptions, every candidate but the last taken is dropped
//     again (in reverse order) if the preemptor still fits without it.
//     withinClusterQueue: Never turns preemption off for the queue.
//  5. evictionRule: victims leave at once (no termination grace) and are
//     requeued; each loses the work since its last checkpoint. The
//     preemptor is admitted in the same pass.
//
// Not modeled: reclaimWithinCohort and borrowWithinCohort preemption, fair
// sharing, lending limits, flavors and topology, admission checks,
// StrictFIFO, waitForPodsReady, termination grace periods.

// Queue configures one ClusterQueue.
type Queue struct {
	Name string `json:"name"`
	// GPUs is the nominal quota.
	GPUs int `json:"gpus"`
	// Cohort, when set, lets queues of the same cohort borrow each
	// other's unused quota.
	Cohort string `json:"cohort,omitempty"`
	// BorrowingLimit caps how much the queue borrows (nil: unlimited).
	BorrowingLimit *int `json:"borrowingLimit,omitempty"`
	// WithinClusterQueue is the preemption policy: LowerPriority (the
	// default) or Never.
	WithinClusterQueue string `json:"withinClusterQueue,omitempty"`
}

// Preemption policies (Queue.WithinClusterQueue).
const (
	PreemptLowerPriority = "LowerPriority"
	PreemptNever         = "Never"
)

type clusterQueue struct {
	spec    Queue
	idx     int
	cohort  *cohort
	used    int
	pending []*jobState // in orderRule order
	running []*jobState // unordered; jobState.runIdx is the position
	// minRun caches minRunningPriority; dirty after any change to the
	// running set or to a running job's boost.
	minRun      int64
	minRunDirty bool
	// per pass
	cursor       int
	failPriority int64 // a preemption attempt failed at this priority ...
	failGPUs     int   // ... for this many GPUs (or more)
}

type cohort struct {
	name    string
	nominal int
	used    int
}

// cluster is the ClusterQueues and cohorts of a run.
type cluster struct {
	queues []*clusterQueue
	byName map[string]*clusterQueue
}

func newCluster(qs []Queue) (*cluster, error) {
	c := &cluster{byName: map[string]*clusterQueue{}}
	cohorts := map[string]*cohort{}
	for i, q := range qs {
		if q.Name == "" {
			return nil, fmt.Errorf("queue %d has no name", i)
		}
		if _, dup := c.byName[q.Name]; dup {
			return nil, fmt.Errorf("queue %q defined twice", q.Name)
		}
		if q.GPUs < 0 {
			return nil, fmt.Errorf("queue %q: gpus %d must not be negative", q.Name, q.GPUs)
		}
		if q.BorrowingLimit != nil && *q.BorrowingLimit < 0 {
			return nil, fmt.Errorf("queue %q: borrowingLimit %d must not be negative", q.Name, *q.BorrowingLimit)
		}
		switch q.WithinClusterQueue {
		case "":
			q.WithinClusterQueue = PreemptLowerPriority
		case PreemptLowerPriority, PreemptNever:
		default:
			return nil, fmt.Errorf("queue %q: withinClusterQueue %q is neither %s nor %s", q.Name, q.WithinClusterQueue, PreemptLowerPriority, PreemptNever)
		}
		cq := &clusterQueue{spec: q, idx: i, minRunDirty: true}
		if q.Cohort != "" {
			co := cohorts[q.Cohort]
			if co == nil {
				co = &cohort{name: q.Cohort}
				cohorts[q.Cohort] = co
			}
			co.nominal += q.GPUs
			cq.cohort = co
		}
		c.queues = append(c.queues, cq)
		c.byName[q.Name] = cq
	}
	if len(c.queues) == 0 {
		return nil, fmt.Errorf("no queues")
	}
	return c, nil
}

// borrowLimit is how much the queue may use beyond its nominal quota.
func (q *clusterQueue) borrowLimit() int {
	if q.cohort == nil {
		return 0
	}
	if q.spec.BorrowingLimit != nil {
		return *q.spec.BorrowingLimit
	}
	return math.MaxInt32
}

// fitsAfter is fitRule with freed GPUs of the queue's own workloads
// released first.
func (q *clusterQueue) fitsAfter(gpus, freed int) bool {
	if int64(q.used-freed+gpus) > int64(q.spec.GPUs)+int64(q.borrowLimit()) {
		return false
	}
	return q.cohort == nil || q.cohort.used-freed+gpus <= q.cohort.nominal
}

func (q *clusterQueue) fits(gpus int) bool { return q.fitsAfter(gpus, 0) }

// everFits: the request fits an empty queue (and cohort).
func (q *clusterQueue) everFits(gpus int) bool {
	if int64(gpus) > int64(q.spec.GPUs)+int64(q.borrowLimit()) {
		return false
	}
	return q.cohort == nil || gpus <= q.cohort.nominal
}

// free is the largest request that fits now.
func (q *clusterQueue) free() int {
	f := int64(q.spec.GPUs) + int64(q.borrowLimit()) - int64(q.used)
	if q.cohort != nil {
		f = min(f, int64(q.cohort.nominal-q.cohort.used))
	}
	return int(max(0, min(f, math.MaxInt32)))
}

// orderRule: Kueue's queue order (queueorder.Compare), with the arrival
// as the queue-order time and the id as the key.
func queueBefore(a, b *jobState) bool {
	return queueorder.Compare(int32(a.effective()), int32(b.effective()), a.Arrival, b.Arrival, a.ID, b.ID) < 0
}

func (q *clusterQueue) addPending(j *jobState) {
	i := sort.Search(len(q.pending), func(i int) bool { return queueBefore(j, q.pending[i]) })
	q.pending = slices.Insert(q.pending, i, j)
}

func (q *clusterQueue) removePending(j *jobState) {
	i := sort.Search(len(q.pending), func(i int) bool { return !queueBefore(q.pending[i], j) })
	for ; i < len(q.pending); i++ {
		if q.pending[i] == j {
			q.pending = slices.Delete(q.pending, i, i+1)
			return
		}
	}
	panic(fmt.Sprintf("simulator: job %d not pending in %s", j.ID, q.spec.Name))
}

func (q *clusterQueue) addRunning(j *jobState) {
	j.runIdx = len(q.running)
	q.running = append(q.running, j)
	q.minRunDirty = true
	q.used += j.GPUs
	if q.cohort != nil {
		q.cohort.used += j.GPUs
	}
}

func (q *clusterQueue) removeRunning(j *jobState) {
	i := j.runIdx
	last := len(q.running) - 1
	q.running[i] = q.running[last]
	q.running[i].runIdx = i
	q.running[last] = nil
	q.running = q.running[:last]
	j.runIdx = -1
	q.minRunDirty = true
	q.used -= j.GPUs
	if q.cohort != nil {
		q.cohort.used -= j.GPUs
	}
}

// minRunningPriority is the lowest effective priority admitted in q
// (MaxInt64 when nothing runs).
func (q *clusterQueue) minRunningPriority() int64 {
	if q.minRunDirty {
		m := int64(math.MaxInt64)
		for _, r := range q.running {
			m = min(m, r.effective())
		}
		q.minRun, q.minRunDirty = m, false
	}
	return q.minRun
}

// victims implements preemptLowerPriorityRule: the minimal set of
// lower-priority workloads of q whose eviction lets j fit, or nil.
func (q *clusterQueue) victims(j *jobState) []*jobState {
	if q.spec.WithinClusterQueue == PreemptNever {
		return nil
	}
	p := j.effective()
	var cands []*jobState
	for _, r := range q.running {
		if r.effective() < p {
			cands = append(cands, r)
		}
	}
	if len(cands) == 0 {
		return nil
	}
	sort.Slice(cands, func(a, b int) bool {
		ca, cb := cands[a], cands[b]
		if ea, eb := ca.effective(), cb.effective(); ea != eb {
			return ea < eb
		}
		if ca.admitAt != cb.admitAt {
			return ca.admitAt > cb.admitAt
		}
		return ca.ID > cb.ID
	})
	freed := 0
	var chosen []*jobState
	for _, c := range cands {
		chosen = append(chosen, c)
		freed += c.GPUs
		if q.fitsAfter(j.GPUs, freed) {
			break
		}
	}
	if !q.fitsAfter(j.GPUs, freed) {
		return nil
	}
	for i := len(chosen) - 2; i >= 0; i-- {
		if q.fitsAfter(j.GPUs, freed-chosen[i].GPUs) {
			freed -= chosen[i].GPUs
			chosen = slices.Delete(chosen, i, i+1)
		}
	}
	return chosen
}

// headHeap merges the queues' pending lists in orderRule order
// (bestEffortFIFORule): it holds each queue whose cursor is on a
// candidate, keyed by that candidate.
type headHeap []*clusterQueue

func (h headHeap) Len() int { return len(h) }
func (h headHeap) Less(a, b int) bool {
	ja, jb := h[a].pending[h[a].cursor], h[b].pending[h[b].cursor]
	if ja.effective() != jb.effective() || ja.Arrival != jb.Arrival || ja.ID != jb.ID {
		return queueBefore(ja, jb)
	}
	return h[a].idx < h[b].idx
}
func (h headHeap) Swap(a, b int) { h[a], h[b] = h[b], h[a] }
func (h *headHeap) Push(x any)   { *h = append(*h, x.(*clusterQueue)) }
func (h *headHeap) Pop() any {
	old := *h
	q := old[len(old)-1]
	*h = old[:len(old)-1]
	return q
}

// schedule is one scheduling pass over every queue: it admits what fits,
// preempts where a pending workload may, and skips the rest. admit and
// evict perform the state changes (the engine's, which also accounts and
// notifies the policy).
func (c *cluster) schedule(admit func(*jobState), evict func(victim, by *jobState)) {
	var h headHeap
	for _, q := range c.queues {
		q.cursor = 0
		q.failPriority, q.failGPUs = math.MinInt64, math.MaxInt
		if q.advance() {
			h = append(h, q)
		}
	}
	heap.Init(&h)
	for len(h) > 0 {
		q := h[0]
		j := q.pending[q.cursor]
		switch {
		case q.fits(j.GPUs):
			q.removePending(j)
			admit(j)
		case j.effective() <= q.failPriority && j.GPUs >= q.failGPUs:
			q.cursor++ // a preemption for at least as much at no higher priority failed already
		default:
			if vs := q.victims(j); vs != nil {
				for _, v := range vs {
					evict(v, j)
				}
				q.removePending(j)
				admit(j)
			} else {
				if j.effective() > q.failPriority || j.GPUs < q.failGPUs {
					q.failPriority, q.failGPUs = j.effective(), j.GPUs
				}
				q.cursor++
			}
		}
		if q.advance() {
			heap.Fix(&h, 0)
		} else {
			heap.Pop(&h)
		}
	}
}

// advance moves q's cursor to its next candidate and reports whether one
// is left. Workloads that can never fit are passed over; when nothing fits
// and nothing further down the list can preempt, the queue is done.
func (q *clusterQueue) advance() bool {
	free := q.free()
	minRun := int64(math.MinInt64)
	if q.spec.WithinClusterQueue != PreemptNever {
		minRun = q.minRunningPriority()
	}
	for q.cursor < len(q.pending) {
		j := q.pending[q.cursor]
		if !q.everFits(j.GPUs) {
			q.cursor++
			continue
		}
		if j.GPUs > free && (q.spec.WithinClusterQueue == PreemptNever || j.effective() <= minRun) {
			// Cannot fit and cannot preempt; the list is in priority
			// order, so when nothing is free nothing later can either.
			if free == 0 {
				q.cursor = len(q.pending)
				return false
			}
			q.cursor++
			continue
		}
		return true
	}
	return false
}
