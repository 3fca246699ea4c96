package plugin

import (
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
)

// gangTotals is one tracked job's footprint on the whole cluster.
type gangTotals struct {
	pods  int
	gpus  int64
	start time.Time // earliest pod start
}

// gangIndex maps namespace/job to the job's totals over every node in the
// scheduler's snapshot; only tracked jobs appear.
type gangIndex map[string]gangTotals

// buildGangIndex sums the assigned pods of tracked jobs over the snapshot.
func (p *Plugin) buildGangIndex() (gangIndex, error) {
	nodes, err := p.fh.SnapshotSharedLister().NodeInfos().List()
	if err != nil {
		return nil, fmt.Errorf("listing the snapshot's nodes for the gang index: %w", err)
	}
	idx := gangIndex{}
	for _, ni := range nodes {
		for _, pi := range ni.GetPods() {
			p.addToIndex(idx, pi.GetPod())
		}
	}
	return idx, nil
}

func (p *Plugin) addToIndex(idx gangIndex, pod *v1.Pod) {
	job := jobName(pod)
	if job == "" || !p.forecasts.Get(pod.Namespace, job).Tracked() {
		return
	}
	key := pod.Namespace + "/" + job
	t := idx[key]
	t.pods++
	t.gpus += podGPUs(pod, p.set.gpuResource)
	if s := podStart(pod); t.start.IsZero() || s.Before(t.start) {
		t.start = s
	}
	idx[key] = t
}

// workLost is the cost of evicting a gang (or a lone pod) at now: its GPUs
// (its pods, when it has no GPUs) times the time since the job's last
// progress report. Without a report, or with one from before the gang
// started (a restarted job), everything since the start is lost; a report
// from the future (the job's clock is untrusted) counts as now.
func workLost(now time.Time, weight int64, start, lastReport time.Time) float64 {
	from := start
	if lastReport.After(from) {
		from = lastReport
	}
	if from.After(now) {
		from = now
	}
	return float64(weight) * now.Sub(from).Seconds()
}
