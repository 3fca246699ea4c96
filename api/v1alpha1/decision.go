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

func unixTime(sec *float64) *metav1.Time {
	if sec == nil || math.IsNaN(*sec) || math.IsInf(*sec, 0) {
		return nil
	}
	s, frac := math.Modf(*sec)
	t := metav1.NewTime(time.Unix(int64(s), int64(frac*1e9)))
	return &t
}
