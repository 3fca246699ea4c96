package kueueext

import (
	"time"
)

// scheduleInput is what decides whether a job is forecast now: the rate
// limit that makes forecast cost grow with the number of jobs, not with
// how often they report.
type scheduleInput struct {
	Now          time.Time
	LastForecast time.Time // zero: never forecast
	// LastDataForecast is the last forecast that included new reports
	// (zero: LastForecast). The rate limit on reports counts from it: an
	// off-phase forecast without reports (a decision deadline, say the
	// job's minimum age after admission) must not hold the next report
	// for up to Min (at 3,000 jobs reporting every minute it held one
	// decision in ten for up to 30 s).
	LastDataForecast time.Time
	// NewData: observations arrived since the last forecast.
	NewData bool
	// Fresh: a report arrived in this very reconcile, so a forecast now
	// uses the newest data there is.
	Fresh bool
	// ReportGap is the job's usual time between reports (0: not known).
	// When the rate limit opens between two reports, the forecast waits up
	// to about one gap for the next report instead of deciding on data
	// that is already a gap old.
	ReportGap time.Duration
	// LastAccepted is when the newest accepted report arrived (zero: not
	// known).
	LastAccepted time.Time
	// Urgent names why the verdict could change at once ("" when nothing
	// did): a non-finite loss, a restart, an admission or eviction, a new
	// objective, a new Workload.
	Urgent string
	// Deadline is the earliest time after the last forecast at which the
	// last decision could change by itself (lease end, dwell end, ...);
	// zero when none.
	Deadline time.Time
	// Min, UrgentMin and Idle are plannerconfig.ForecastConfig's intervals.
	Min, UrgentMin, Idle time.Duration
}

// schedule is the outcome: run now (Why says why), or check again After.
type schedule struct {
	Run   bool
	Why   string
	After time.Duration
}

// nextForecast applies the rate limit. A job is forecast:
//   - the first time;
//   - when something urgent happened, at most once per UrgentMin;
//   - when a decision deadline passed, at most once per UrgentMin;
//   - when new reports arrived, at most once per Min after the last
//     forecast that had new reports (and UrgentMin after any): at the
//     first report after the Min interval, or, when none comes within
//     about one report gap after it, on the reports already there;
//   - otherwise once per Idle (a hang shows as the absence of reports).
func nextForecast(in scheduleInput) schedule {
	if in.LastForecast.IsZero() {
		return schedule{Run: true, Why: "first forecast"}
	}
	since, sinceData := in.Now.Sub(in.LastForecast), in.Now.Sub(in.dataAnchor())
	switch {
	case in.Urgent != "" && since >= in.UrgentMin:
		return schedule{Run: true, Why: in.Urgent}
	case !in.Deadline.IsZero() && !in.Now.Before(in.Deadline) && since >= in.UrgentMin:
		return schedule{Run: true, Why: "a decision deadline passed"}
	case in.NewData && sinceData >= in.Min && since >= in.UrgentMin && (in.Fresh || sinceData >= in.Min+in.freshWait()):
		return schedule{Run: true, Why: "new reports"}
	case since >= in.Idle:
		return schedule{Run: true, Why: "no forecast for the idle interval"}
	}
	wait := in.Idle - since
	if in.NewData {
		wait = min(wait, max(in.Min+in.freshWait()-sinceData, in.UrgentMin-since))
	}
	if in.Urgent != "" {
		wait = min(wait, in.UrgentMin-since)
	}
	if !in.Deadline.IsZero() {
		wait = min(wait, max(in.Deadline.Sub(in.Now), in.UrgentMin-since))
	}
	return schedule{After: max(wait, 100*time.Millisecond)}
}

// freshWait is how long after the Min interval a forecast waits for the
// next report: two usual gaps, so that a report the API server delivers up
// to a whole gap late still gets a decision on fresh data (at 1,000 jobs on
// a saturated API server, delivery lagged by up to 4 s and a wait of 1.25
// gaps decided 1 % of the time on a report 5 s old); never more than Min.
// No wait when the next report is not due before the wait would end (the
// newest report is then as fresh as the job's data gets): a job reporting
// every minute whose report came between an off-phase forecast (an urgent
// one, a deadline) and the interval's end would otherwise be decided
// 30–60 s late at every report from then on (the scale benchmark at 60 s
// periods: the planner's own p50 above 32 s).
func (in scheduleInput) freshWait() time.Duration {
	w := min(2*in.ReportGap, in.Min)
	if !in.LastAccepted.IsZero() && in.LastAccepted.Add(in.ReportGap).After(in.dataAnchor().Add(in.Min+w)) {
		return 0
	}
	return w
}

// dataAnchor is when the rate limit on reports started counting.
func (in scheduleInput) dataAnchor() time.Time {
	if in.LastDataForecast.IsZero() {
		return in.LastForecast
	}
	return in.LastDataForecast
}
