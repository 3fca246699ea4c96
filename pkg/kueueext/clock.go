package kueueext

import "time"

// notAfter is t, or now when t is later: times from other components and
// from stored state never lie in the planner's future.
func notAfter(t, now time.Time) time.Time {
	if t.After(now) {
		return now
	}
	return t
}
