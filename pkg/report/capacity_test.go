package report

import (
	"math"
	"testing"

	"github.com/progress-planner/planner/internal/stats"
	"github.com/progress-planner/planner/pkg/forecast"
)

func eta(v, rel float64) forecast.Estimate {
	z := stats.CentralZ(0.8)
	return forecast.Estimate{Known: true, Value: v, Lo: math.Max(0, v*(1-z*rel)), Hi: v * (1 + z*rel)}
}

func TestFinishProbability(t *testing.T) {
	for _, tc := range []struct {
		name string
		eta  forecast.Estimate
		h    float64
		want float64
	}{
		{"unknown never counts", forecast.Estimate{}, 1e9, 0},
		{"at the median", eta(3600, 0.2), 3600, 0.5},
		{"at the upper end of the 80% interval", eta(3600, 0.2), 3600 * (1 + stats.CentralZ(0.8)*0.2), 0.9},
		{"at the lower end", eta(3600, 0.2), 3600 * (1 - stats.CentralZ(0.8)*0.2), 0.1},
		{"no spread, before", forecast.Estimate{Known: true, Value: 100, Lo: 100, Hi: 100}, 99, 0},
		{"no spread, after", forecast.Estimate{Known: true, Value: 100, Lo: 100, Hi: 100}, 100, 1},
	} {
		if got := FinishProbability(tc.eta, tc.h, 0.8); math.Abs(got-tc.want) > 1e-9 {
			t.Errorf("%s: P = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestFreedDistExact checks the dynamic program against enumerating every
// combination of finished jobs.
func TestFreedDistExact(t *testing.T) {
	jobs := []RunningJob{{GPUs: 8, ETA: eta(1800, 0.3)}, {GPUs: 4, ETA: eta(4000, 0.5)}, {GPUs: 8, ETA: eta(3000, 0.1)},
		{GPUs: 2, ETA: forecast.Estimate{}}, {GPUs: 1, ETA: eta(100, 0.5)}}
	const h = 3600
	want := make([]float64, 24)
	for mask := 0; mask < 1<<len(jobs); mask++ {
		p, g := 1.0, 0
		for i, j := range jobs {
			pi := FinishProbability(j.ETA, h, 0.8)
			if mask&(1<<i) != 0 {
				p *= pi
				g += j.GPUs
			} else {
				p *= 1 - pi
			}
		}
		want[g] += p
	}
	d := FreedDist(jobs, h, 0.8)
	if len(d.PMF) != 24 {
		t.Fatalf("support %d, want 24", len(d.PMF))
	}
	sum := 0.0
	for k := range want {
		if math.Abs(d.PMF[k]-want[k]) > 1e-12 {
			t.Errorf("P(%d) = %v, want %v", k, d.PMF[k], want[k])
		}
		sum += d.PMF[k]
	}
	if math.Abs(sum-1) > 1e-12 {
		t.Errorf("sum %v", sum)
	}
	f := FreedWithin(jobs, h, 0.8)
	if !(f.Lo <= f.Median && f.Median <= f.Hi) || f.Hi > 23 {
		t.Errorf("freed %+v", f)
	}
}

func TestAdmitWhen(t *testing.T) {
	grid := AdmissionSearch()
	running := []RunningJob{{GPUs: 8, ETA: eta(7200, 0.2)}}
	// Free now.
	a := AdmitWhen(16, 8, 0, 8, running, 0.8, grid)
	if a.Median == nil || *a.Median != 0 || *a.Hi != 0 {
		t.Errorf("fits now: %+v", a)
	}
	// Needs the running job's GPUs: median near its ETA.
	a = AdmitWhen(8, 0, 0, 8, running, 0.8, grid)
	if a.Median == nil || math.Abs(*a.Median-7200) > 300 || !(*a.Lo < *a.Median && *a.Median < *a.Hi) {
		t.Errorf("after the running job: %+v", a)
	}
	// Larger than the quota.
	if a := AdmitWhen(8, 0, 0, 16, running, 0.8, grid); a.Median != nil || a.Note == "" {
		t.Errorf("too large: %+v", a)
	}
	// Work ahead that no finishing job can make room for.
	if a := AdmitWhen(8, 0, 8, 8, running, 0.8, grid); a.Hi != nil || a.Note == "" {
		t.Errorf("blocked: %+v", a)
	}
}

// TestFreedDistSaturates: counts beyond MaxGPUs are clamped, the mass
// beyond the limit collects in the last entry, and the distribution still
// sums to 1.
func TestFreedDistSaturates(t *testing.T) {
	jobs := []RunningJob{{GPUs: 999999999, ETA: eta(100, 0.2)}, {GPUs: 64 << 30, ETA: eta(100, 0.2)}, {GPUs: 3, ETA: eta(100, 0.2)}}
	d := FreedDist(jobs, 3600, 0.8)
	if len(d.PMF) != MaxGPUs+1 {
		t.Fatalf("%d entries, want %d", len(d.PMF), MaxGPUs+1)
	}
	sum := 0.0
	for _, p := range d.PMF {
		sum += p
	}
	if math.Abs(sum-1) > 1e-9 || d.AtLeast(MaxGPUs) < 0.99 {
		t.Errorf("sum %v, P(>= MaxGPUs) %v", sum, d.AtLeast(MaxGPUs))
	}
	small := freedDist(jobs[2:], 3600, 0.8, 2)
	if len(small.PMF) != 3 || math.Abs(small.AtLeast(2)-FreedDist(jobs[2:], 3600, 0.8).AtLeast(2)) > 1e-12 {
		t.Errorf("saturated at 2: %v", small.PMF)
	}
}
