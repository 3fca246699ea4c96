package v1alpha1

import (
	"math"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// SetDecision sets the typed decision fields, at DecisionVersion, from the
// policy's times in Unix seconds (nil or non-finite: unset): the one
// writer of these fields, for the planner and for tests that play it.
func (st *ProgressForecastStatus) SetDecision(decided, verdictSince float64, stalledSince, protectedUntil *float64) {
	st.DecisionVersion = DecisionVersion
	st.DecidedTime = unixTime(&decided)
	st.VerdictSince = unixTime(&verdictSince)
	st.StalledSince = unixTime(stalledSince)
	st.ProtectedUntil = unixTime(protectedUntil)
}

// unixTime is sec at the precision the API server stores a metav1.Time
// (whole seconds; the raw decision keeps the fraction), so that the status
// in memory equals the stored one and an unchanged decision is not
// written again.
func unixTime(sec *float64) *metav1.Time {
	if sec == nil || math.IsNaN(*sec) || math.IsInf(*sec, 0) {
		return nil
	}
	t := metav1.NewTime(TimeFromUnix(*sec).Truncate(time.Second))
	return &t
}

// TimeFromUnix is the policy's time base (Unix seconds, as a float) as a
// time; a non-finite value is the zero time. The one conversion, for the
// controller and these fields alike.
func TimeFromUnix(sec float64) time.Time {
	if math.IsNaN(sec) || math.IsInf(sec, 0) {
		return time.Time{}
	}
	s, frac := math.Modf(sec)
	return time.Unix(int64(s), int64(frac*1e9))
}
