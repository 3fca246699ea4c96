package progressendpoint

import (
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// RateLimit is the per-job token bucket: Burst reports at once, then QPS
// per second. Reporters throttle themselves (the Kubeflow SDK sends at most
// one report every 5 s), so the default is generous for one job yet keeps a
// job with hundreds of pods, all reporting, from costing the API server a
// TokenReview each.
type RateLimit struct {
	QPS   float64
	Burst int
}

// DefaultRateLimit: one report per second sustained, bursts of 20.
func DefaultRateLimit() RateLimit { return RateLimit{QPS: 1, Burst: 20} }

// maxBuckets bounds the limiter's memory; past it, idle buckets go first.
const maxBuckets = 100000

// limiter keeps one token bucket per job, so that a flood from one job
// delays only that job's reports.
type limiter struct {
	cfg RateLimit
	now func() time.Time

	mu      sync.Mutex
	buckets map[string]*bucket
}

type bucket struct {
	lim  *rate.Limiter
	last time.Time
}

func newLimiter(cfg RateLimit, now func() time.Time) *limiter {
	return &limiter{cfg: cfg, now: now, buckets: map[string]*bucket{}}
}

// allow takes a token from key's bucket; when there is none it returns
// how long until there is.
func (l *limiter) allow(key string) (ok bool, retryAfter time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	b := l.buckets[key]
	if b == nil {
		if len(l.buckets) >= maxBuckets {
			l.evictIdle(now)
		}
		b = &bucket{lim: rate.NewLimiter(rate.Limit(l.cfg.QPS), l.cfg.Burst)}
		l.buckets[key] = b
	}
	b.last = now
	r := b.lim.ReserveN(now, 1)
	if !r.OK() {
		return false, time.Second
	}
	if d := r.DelayFrom(now); d > 0 {
		r.CancelAt(now)
		return false, d
	}
	return true, 0
}

// evictIdle drops buckets that have refilled completely: forgetting them
// changes nothing.
func (l *limiter) evictIdle(now time.Time) {
	full := time.Duration(float64(l.cfg.Burst) / l.cfg.QPS * float64(time.Second))
	for k, b := range l.buckets {
		if now.Sub(b.last) > full {
			delete(l.buckets, k)
		}
	}
}
