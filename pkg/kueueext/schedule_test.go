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
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := scheduleInput{Now: last.Add(tt.since), LastForecast: last, NewData: tt.newData, Urgent: tt.urgent,
				Min: minI, UrgentMin: urgentI, Idle: idleI}
			if tt.never {
				in.LastForecast = time.Time{}
			}
			if tt.deadline != 0 {
				in.Deadline = last.Add(tt.deadline)
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
