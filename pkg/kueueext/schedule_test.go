package kueueext

import (
	"testing"
	"time"
)

func TestNextForecast(t *testing.T) {
	const (
		minI    = 30 * time.Second
		urgentI = 5 * time.Second
		idleI   = 2 * time.Minute
	)
	last := t0
	tests := []struct {
		name     string
		since    time.Duration
		never    bool
		newData  bool
		urgent   string
		deadline time.Duration // from last; 0: none
		fresh    bool
		gap      time.Duration
		accepted time.Duration // the newest report's arrival, from last; 0: not known
		data     time.Duration // the last forecast with new reports, before last; 0: last itself
		run      bool
		why      string
		after    time.Duration
	}{
		{name: "first", never: true, run: true, why: "first forecast"},
		{name: "reports within min interval wait", since: 10 * time.Second, newData: true, after: 20 * time.Second},
		{name: "reports after min interval", since: 30 * time.Second, newData: true, run: true, why: "new reports"},
		{name: "no reports waits for idle", since: 40 * time.Second, after: 80 * time.Second},
		{name: "idle", since: 2 * time.Minute, run: true, why: "no forecast for the idle interval"},
		{name: "urgent right away after urgent interval", since: 6 * time.Second, newData: true, urgent: "a non-finite metric was reported", run: true, why: "a non-finite metric was reported"},
		{name: "urgent but too soon", since: 2 * time.Second, urgent: "the job restarted", after: 3 * time.Second},
		{name: "deadline passed", since: 10 * time.Second, deadline: 8 * time.Second, run: true, why: "a decision deadline passed"},
		{name: "deadline ahead", since: 10 * time.Second, deadline: 25 * time.Second, after: 15 * time.Second},
		{name: "deadline ahead of new data", since: 10 * time.Second, newData: true, deadline: 12 * time.Second, after: 2 * time.Second},
		{name: "deadline passed but too soon", since: 1 * time.Second, deadline: 500 * time.Millisecond, after: 4 * time.Second},
		{name: "window opens between reports: wait for the next", since: 30 * time.Second, newData: true, gap: 4 * time.Second, after: 8 * time.Second},
		{name: "the next report after the window opened", since: 32 * time.Second, newData: true, fresh: true, gap: 4 * time.Second, run: true, why: "new reports"},
		{name: "the next report a gap late still waited for", since: 37 * time.Second, newData: true, gap: 4 * time.Second, after: time.Second},
		{name: "no next report within two gaps: decide on what is there", since: 38 * time.Second, newData: true, gap: 4 * time.Second, run: true, why: "new reports"},
		{name: "a fresh report inside the window still waits", since: 20 * time.Second, newData: true, fresh: true, gap: 4 * time.Second, after: 18 * time.Second},
		{name: "the wait for a fresh report is at most min", since: 59 * time.Second, newData: true, gap: 10 * time.Minute, after: time.Second},
		{name: "reports a minute apart, one inside the window: decided when it opens", since: 20 * time.Second, newData: true, gap: time.Minute, accepted: 15 * time.Second, after: 10 * time.Second},
		{name: "reports a minute apart: the next is not due within the wait, decide at the opening", since: 30 * time.Second, newData: true, gap: time.Minute, accepted: 15 * time.Second, run: true, why: "new reports"},
		{name: "reports 4 s apart: the next is due, wait for it", since: 30 * time.Second, newData: true, gap: 4 * time.Second, accepted: 29 * time.Second, after: 8 * time.Second},
		{name: "a deadline forecast without reports does not hold the next report", since: 10 * time.Second, data: 50 * time.Second, newData: true, fresh: true, gap: time.Minute, run: true, why: "new reports"},
		{name: "but the urgent interval after it still holds", since: 2 * time.Second, data: 58 * time.Second, newData: true, fresh: true, gap: time.Minute, after: 3 * time.Second},
		{name: "and the min interval counts from the last forecast with reports", since: 10 * time.Second, data: 10 * time.Second, newData: true, fresh: true, gap: 4 * time.Second, after: 18 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := scheduleInput{Now: last.Add(tt.since), LastForecast: last, NewData: tt.newData, Urgent: tt.urgent,
				Fresh: tt.fresh, ReportGap: tt.gap, Min: minI, UrgentMin: urgentI, Idle: idleI}
			if tt.accepted != 0 {
				in.LastAccepted = last.Add(tt.accepted)
			}
			if tt.never {
				in.LastForecast = time.Time{}
			}
			if tt.deadline != 0 {
				in.Deadline = last.Add(tt.deadline)
			}
			if tt.data != 0 {
				in.LastDataForecast = last.Add(-tt.data)
			}
			got := nextForecast(in)
			if got.Run != tt.run || got.Why != tt.why || (!tt.run && got.After != tt.after) {
				t.Errorf("got %+v, want run %v why %q after %v", got, tt.run, tt.why, tt.after)
			}
		})
	}
}

// A job reporting every second for ten minutes is forecast about once per
// minInterval: cost follows jobs, not reports.
func TestNextForecastBoundsRate(t *testing.T) {
	in := scheduleInput{Min: 30 * time.Second, UrgentMin: 5 * time.Second, Idle: 2 * time.Minute}
	forecasts := 0
	for s := 0; s < 600; s++ {
		in.Now = t0.Add(time.Duration(s) * time.Second)
		in.NewData = true
		if s%7 == 0 {
			in.Urgent = "the job restarted" // a job that forges restarts
		}
		if nextForecast(in).Run {
			forecasts++
			in.LastForecast, in.NewData, in.Urgent = in.Now, false, ""
		}
	}
	if forecasts > 600/5+1 {
		t.Errorf("%d forecasts for 600 reports: the urgent interval does not bound them", forecasts)
	}
	in = scheduleInput{Min: 30 * time.Second, UrgentMin: 5 * time.Second, Idle: 2 * time.Minute}
	forecasts = 0
	for s := 0; s < 600; s++ {
		in.Now = t0.Add(time.Duration(s) * time.Second)
		in.NewData = true
		if nextForecast(in).Run {
			forecasts++
			in.LastForecast, in.NewData = in.Now, false
		}
	}
	if forecasts != 20 {
		t.Errorf("%d forecasts for 600 reports at 1/s, want 20 (one per 30s)", forecasts)
	}
}

// The report gap follows the usual interval, is not thrown by one late
// report, and is bounded.
// The first report may have waited since before the planner started: the
// gap to the next is not the job's cadence.
func TestNoteReportGapSkipsTheFirst(t *testing.T) {
	var st jobState
	st.noteReportGap(t0)                       // the report in the status at the planner's start
	st.noteReportGap(t0.Add(10 * time.Second)) // the job's next report
	st.noteReportGap(t0.Add(70 * time.Second))
	if st.reportGap != time.Minute {
		t.Fatalf("gap %v after reports a minute apart, want 1m", st.reportGap)
	}
}

func TestNoteReportGap(t *testing.T) {
	var st jobState
	now := t0
	for range 10 {
		st.noteReportGap(now)
		now = now.Add(5 * time.Second)
	}
	if st.reportGap != 5*time.Second {
		t.Fatalf("gap %v after regular 5s reports, want 5s", st.reportGap)
	}
	st.noteReportGap(now.Add(60 * time.Second))
	if st.reportGap <= 5*time.Second || st.reportGap > 20*time.Second {
		t.Errorf("gap %v after one 65s pause, want between 5s and 20s", st.reportGap)
	}
	st.noteReportGap(now.Add(24 * time.Hour))
	if st.reportGap > maxReportGap {
		t.Errorf("gap %v above the bound %v", st.reportGap, maxReportGap)
	}
}
