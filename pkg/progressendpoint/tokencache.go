package progressendpoint

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"strings"
	"sync"
	"time"
)

// tokenCacheTTL bounds how long a successful TokenReview is reused. A
// reporter sends every few seconds with the same token (the kubelet
// rotates it hourly), so this saves most reviews, as KEP-2779 asks; a
// token revoked meanwhile (its pod deleted) is still refused within the
// TTL by the owner-chain check, which reads the pod on every report.
const tokenCacheTTL = 30 * time.Second

// maxCachedTokens bounds the cache; past it, it is emptied (the cost is a
// review per token again, never a wrong answer).
const maxCachedTokens = 10000

// tokenCache keeps successful TokenReviews by the token's hash (the token
// itself is never kept). Failed reviews are not cached: a fixed token
// might become valid (e.g. its pod appears) and a flood of bad tokens must
// not fill the cache.
type tokenCache struct {
	mu      sync.Mutex
	entries map[[sha256.Size]byte]cachedReview
}

type cachedReview struct {
	who     caller
	expires time.Time
}

func newTokenCache() *tokenCache {
	return &tokenCache{entries: map[[sha256.Size]byte]cachedReview{}}
}

func cacheKey(token, audience string) [sha256.Size]byte {
	return sha256.Sum256([]byte(audience + "\x00" + token))
}

func (c *tokenCache) get(token, audience string, now time.Time) (caller, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	k := cacheKey(token, audience)
	e, ok := c.entries[k]
	if !ok {
		return caller{}, false
	}
	if !now.Before(e.expires) {
		delete(c.entries, k)
		return caller{}, false
	}
	return e.who, true
}

// put keeps a successful review until the TTL or the token's own expiry,
// whichever is first.
func (c *tokenCache) put(token, audience string, who caller, now time.Time) {
	exp := now.Add(tokenCacheTTL)
	if te, ok := tokenExpiry(token); ok && te.Before(exp) {
		exp = te
	}
	if !now.Before(exp) {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.entries) >= maxCachedTokens {
		clear(c.entries)
	}
	c.entries[cacheKey(token, audience)] = cachedReview{who: who, expires: exp}
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
