package progressendpoint

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"time"
)

// The endpoint's two caches keep every accepted report from costing API
// requests: at 1,000 jobs reporting every 5 s, a TokenReview and the owner
// chain's reads per report would be 600 requests a second. Only successes
// are cached: a refusal costs a lookup again, so a flood of bad requests
// cannot fill a cache, and a fixed problem (a pod that appears) is seen at
// once.

// tokenCacheTTL bounds how long a successful TokenReview is reused: 30 s
// plus up to half of that again, by the token's hash. A reporter sends
// every few seconds with the same token (the kubelet rotates it hourly),
// so this saves most reviews, as KEP-2779 asks. The spread keeps the
// reviews of jobs that started together from expiring together: at 1,000
// jobs the reviews all fell due in the same seconds and queued behind the
// client's rate limit (reports answered in 5 s at p99). It is also how
// long a token stays accepted after its pod is deleted (the API server
// refuses a bound token whose pod is gone): at most 45 s.
const tokenCacheTTL = 30 * time.Second

// tokenRenewAhead: a report whose token's cached review expires within
// this is answered from the cache while the review is renewed in the
// background, once per token. A token in use is then never waited on: at
// 1,000 jobs the p99 report was one that found its review just expired
// and queued behind the client's rate limit for a new one (713 ms). A
// renewal the API server refuses drops the entry, so the next report is
// reviewed and refused; the window after a pod's deletion does not grow.
const tokenRenewAhead = 10 * time.Second

// ownerCacheTTL bounds how long "this pod belongs to this job" is reused.
// The answer is a fact about two UIDs: a pod's controller chain does not
// change in its life, a recreated job has a new UID (a miss), and a
// deleted pod's token stops passing the TokenReview within tokenCacheTTL.
// The TTL only bounds how long an owner reference edited by hand keeps
// its old meaning.
const ownerCacheTTL = 5 * time.Minute

// maxCached bounds each cache; past it, the cache is emptied (the cost is
// a lookup per key again, never a wrong answer).
const maxCached = 10000

// expiringCache keeps values until their expiry, at most maxCached.
type expiringCache[K comparable, V any] struct {
	mu      sync.Mutex
	entries map[K]expiring[V]
}

type expiring[V any] struct {
	v       V
	expires time.Time
}

func newExpiringCache[K comparable, V any]() *expiringCache[K, V] {
	return &expiringCache[K, V]{entries: map[K]expiring[V]{}}
}

func (c *expiringCache[K, V]) get(k K, now time.Time) (V, bool) {
	v, _, ok := c.getExpiry(k, now)
	return v, ok
}

// getExpiry is get with the entry's expiry.
func (c *expiringCache[K, V]) getExpiry(k K, now time.Time) (V, time.Time, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[k]
	if !ok {
		var zero V
		return zero, time.Time{}, false
	}
	if !now.Before(e.expires) {
		delete(c.entries, k)
		var zero V
		return zero, time.Time{}, false
	}
	return e.v, e.expires, true
}

func (c *expiringCache[K, V]) delete(k K) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.entries, k)
}

// put keeps v until expires (nothing when that is not after now).
func (c *expiringCache[K, V]) put(k K, v V, expires, now time.Time) {
	if !now.Before(expires) {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.entries) >= maxCached {
		clear(c.entries)
	}
	c.entries[k] = expiring[V]{v: v, expires: expires}
}

// tokenCache keeps successful TokenReviews by the token's hash (the token
// itself is kept only while its renewal runs).
type tokenCache struct {
	c *expiringCache[[sha256.Size]byte, caller]
	// renewing holds the tokens whose review is being renewed.
	renewing *expiringCache[[sha256.Size]byte, struct{}]
}

func newTokenCache() tokenCache {
	return tokenCache{newExpiringCache[[sha256.Size]byte, caller](), newExpiringCache[[sha256.Size]byte, struct{}]()}
}

func cacheKey(token, audience string) [sha256.Size]byte {
	return sha256.Sum256([]byte(audience + "\x00" + token))
}

// get returns the cached review of token; renew is true, once per token
// until renewed, when it expires within tokenRenewAhead.
func (t tokenCache) get(token, audience string, now time.Time) (who caller, ok, renew bool) {
	k := cacheKey(token, audience)
	who, exp, ok := t.c.getExpiry(k, now)
	if !ok || exp.Sub(now) > tokenRenewAhead {
		return who, ok, false
	}
	if te, ok := tokenExpiry(token); ok && !te.After(exp) {
		return who, true, false // the token itself ends there: nothing to renew
	}
	if _, busy := t.renewing.get(k, now); busy {
		return who, true, false
	}
	// Marked until the entry's expiry: a renewal that never returns does
	// not block the next one past it.
	t.renewing.put(k, struct{}{}, exp, now)
	return who, true, true
}

// renewed records a renewal's outcome: a success is kept like a new
// review, a refusal drops the entry, another error leaves it to expire.
func (t tokenCache) renewed(token, audience string, who caller, err error, now time.Time) {
	k := cacheKey(token, audience)
	switch {
	case err == nil:
		t.put(token, audience, who, now)
	case errors.Is(err, errUnauthenticated):
		t.c.delete(k)
	}
	t.renewing.delete(k)
}

// put keeps a successful review until the token's TTL or its own expiry,
// whichever is first.
func (t tokenCache) put(token, audience string, who caller, now time.Time) {
	k := cacheKey(token, audience)
	exp := now.Add(tokenTTL(k))
	if te, ok := tokenExpiry(token); ok && te.Before(exp) {
		exp = te
	}
	t.c.put(k, who, exp, now)
}

// tokenTTL is tokenCacheTTL plus a share of half of it taken from the
// token's hash: the same token always gets the same TTL.
func tokenTTL(k [sha256.Size]byte) time.Duration {
	spread := tokenCacheTTL / 2
	return tokenCacheTTL + time.Duration(binary.BigEndian.Uint64(k[:8])%uint64(spread))
}

// ownerKey is a pod (by UID: not a later pod reusing the name) and the job
// a report of it named (without the job's UID, which the cache answers).
type ownerKey struct {
	podUID                       string
	group, kind, namespace, name string
}

func ownerKeyOf(who caller, job JobRef) ownerKey {
	return ownerKey{podUID: who.PodUID, group: job.Group, kind: job.Kind, namespace: job.Namespace, name: job.Name}
}

// tokenExpiry reads a JWT's exp claim without verifying it: it only ever
// shortens how long an already verified review is reused.
func tokenExpiry(token string) (time.Time, bool) {
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return time.Time{}, false
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return time.Time{}, false
	}
	var claims struct {
		Exp *int64 `json:"exp"`
	}
	if json.Unmarshal(payload, &claims) != nil || claims.Exp == nil {
		return time.Time{}, false
	}
	return time.Unix(*claims.Exp, 0), true
}
