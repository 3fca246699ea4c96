package progressendpoint

import (
	"fmt"
	"testing"
	"time"
)

// Tokens reviewed at the same moment fall due over the whole spread, not
// at once; one token always gets the same TTL.
func TestTokenTTLSpread(t *testing.T) {
	lo, hi := time.Duration(1<<62), time.Duration(0)
	for i := range 1000 {
		k := cacheKey(fmt.Sprintf("token-%d", i), DefaultAudience)
		d := tokenTTL(k)
		if d < tokenCacheTTL || d >= tokenCacheTTL*3/2 || d != tokenTTL(k) {
			t.Fatalf("TTL %v outside [%v, %v) or not stable", d, tokenCacheTTL, tokenCacheTTL*3/2)
		}
		lo, hi = min(lo, d), max(hi, d)
	}
	if hi-lo < tokenCacheTTL/3 {
		t.Errorf("1,000 tokens' TTLs span only %v..%v", lo, hi)
	}
}
