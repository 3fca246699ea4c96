package kueueext

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/go-logr/logr"
)

// flushTimeout bounds the flush at shutdown: the pod's grace period
// (terminationGracePeriodSeconds 30 in config/ and the chart) and the
// manager's graceful shutdown (30 s) must leave it room.
const flushTimeout = 15 * time.Second

// flushWorkers write checkpoints in parallel; the client's rate limit
// (--kube-api-qps) is the real bound.
const flushWorkers = 16

// checkpointFlusher writes, when this replica stops leading (a rolling
// update, a drained node, a planned failover), every checkpoint still due
// (jobState.unsaved), oldest first, within flushTimeout. It is a leader
// election runnable: the manager stops those before it releases the
// Lease, so no other replica writes meanwhile. (After a lost Lease it
// runs too; a new leader's newer status then wins: writeStatus updates
// with the resourceVersion last seen and gives up on a newer revision.) A
// crash still loses up to forecast.checkpointInterval of a job's reports.
type checkpointFlusher struct {
	rec *JobReconciler // any kind's: the table, client and config are shared
	log logr.Logger
}

// NeedLeaderElection implements manager.LeaderElectionRunnable.
func (f *checkpointFlusher) NeedLeaderElection() bool { return true }

// Start waits for the stop, then flushes on a context of its own (the
// manager's is done by then).
func (f *checkpointFlusher) Start(ctx context.Context) error {
	<-ctx.Done()
	fctx, cancel := context.WithTimeout(context.Background(), flushTimeout)
	defer cancel()
	written, left, err := f.rec.flushCheckpoints(fctx)
	log := f.log.WithValues("written", written, "left", left)
	if err != nil {
		log.Error(err, "checkpoints not all written at shutdown; those jobs lose the reports since their last checkpoint")
		return nil
	}
	log.Info("checkpoints written at shutdown")
	return nil
}

// flushCheckpoints writes the status of every job with an unsaved
// forecast or observation, the oldest checkpoint first. written counts
// the writes, left the jobs still unsaved when ctx ended; err is the
// first failed write.
func (r *JobReconciler) flushCheckpoints(ctx context.Context) (written, left int, err error) {
	pending := r.unsavedJobs()
	work := make(chan *jobState)
	var mu sync.Mutex
	var wg sync.WaitGroup
	for range min(flushWorkers, len(pending)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for st := range work {
				ok, werr := r.flushOne(ctx, st)
				mu.Lock()
				if ok {
					written++
				}
				if werr != nil && err == nil {
					err = werr
				}
				mu.Unlock()
			}
		}()
	}
	for _, st := range pending {
		if ctx.Err() != nil {
			break
		}
		work <- st
	}
	close(work)
	wg.Wait()
	for _, st := range pending {
		st.mu.Lock()
		if st.unsaved && st.obj != nil {
			left++
		}
		st.mu.Unlock()
	}
	if err == nil && left > 0 {
		err = ctx.Err() // stopped before reaching them
	}
	return written, left, err
}

// unsavedJobs lists the jobs with an unsaved checkpoint, oldest due first.
func (r *JobReconciler) unsavedJobs() []*jobState {
	r.table.mu.Lock()
	all := make([]*jobState, 0, len(r.table.jobs))
	for _, st := range r.table.jobs {
		all = append(all, st)
	}
	r.table.mu.Unlock()
	type due struct {
		st *jobState
		at time.Time
	}
	var pending []due
	for _, st := range all {
		st.mu.Lock()
		if st.unsaved && st.obj != nil {
			pending = append(pending, due{st, st.checkpointAt})
		}
		st.mu.Unlock()
	}
	slices.SortFunc(pending, func(a, b due) int { return a.at.Compare(b.at) })
	out := make([]*jobState, len(pending))
	for i, p := range pending {
		out[i] = p.st
	}
	return out
}

// flushOne writes st's checkpoint if it is still unsaved (a reconcile may
// have written it meanwhile).
func (r *JobReconciler) flushOne(ctx context.Context, st *jobState) (bool, error) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if !st.unsaved || st.obj == nil || ctx.Err() != nil {
		return false, ctx.Err()
	}
	if err := r.writeStatus(ctx, st, false, true, r.clock.Now()); err != nil {
		return false, err
	}
	return true, nil
}
