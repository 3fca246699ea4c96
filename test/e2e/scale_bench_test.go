//go:build e2e

package e2e

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	kftrainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/progress-planner/planner/api/v1alpha1"
	"github.com/progress-planner/planner/pkg/kueueext"
	"github.com/progress-planner/planner/pkg/progress"
	statusreplay "github.com/progress-planner/planner/pkg/replay"
	"github.com/progress-planner/planner/test/framework"
)

// BenchmarkPlannerScale is the controller-at-scale measurement of
// docs/benchmarks.md ("Controller at scale"): PLANNER_SCALE_JOBS TrainJobs
// (default 1,000), all admitted by Kueue, each get a new
// status.trainerStatus every PLANNER_SCALE_PERIOD (default 5s) for
// PLANNER_SCALE_WARMUP (default 90s, so that the start-up, when the planner
// creates 1,000 ProgressForecasts under its client's rate limit, stays out
// of the window) plus PLANNER_SCALE_DURATION (default 5m), against the real
// control plane. `planner run` is a separate process
// (built from ./cmd/planner, default config but leader election, metrics and
// health off), so its CPU and memory are its own.
//
// It runs the scenario once whatever b.N is (run it with -benchtime 1x) and
// reports, over the measurement window (after the warm-up):
//
//   - p50/p99-latency-s: for every new forecast the planner writes to a
//     ProgressForecast (status.forecast.time changes and status.forecast.step
//     is a newer step than the previous forecast's), the planner's decision
//     time (status.decision.at, the planner's clock; same machine) minus the
//     time the driver sent the trainerStatus write carrying that step (the
//     newest report the decision incorporates): status update to decision.
//     Counting from the send, not the acknowledgement, charges the API
//     server's own write time to the planner (the planner often decides
//     before the driver has the acknowledgement), so it is an upper bound.
//   - p50/p99-visible-s: the same, up to when this process's watch saw the
//     decision in the ProgressForecast: it adds the planner's status write
//     and the watch delivery, both API server time (write-p99-s is the
//     acknowledgement time of the driver's own writes, for comparison).
//   - p99-planner-s: the planner's own part, from its metric
//     planner_update_to_decision_seconds (the watch delivering the update
//     with the newest report → the decision), over the window.
//   - planner-cores: the planner's utime+stime over the window / window.
//   - planner-maxrss-MiB: the planner's VmHWM at the end.
//   - decisions, updates/s: the counts behind them.
func BenchmarkPlannerScale(b *testing.B) {
	jobs := scaleEnvInt(b, "PLANNER_SCALE_JOBS", 1000)
	period := scaleEnvDur(b, "PLANNER_SCALE_PERIOD", 5*time.Second)
	warmup := scaleEnvDur(b, "PLANNER_SCALE_WARMUP", 90*time.Second)
	duration := scaleEnvDur(b, "PLANNER_SCALE_DURATION", 5*time.Minute)
	if period < time.Second {
		b.Fatalf("PLANNER_SCALE_PERIOD %v: reports are told apart by their second, use 1s or more", period)
	}
	// One run whatever b.N: it takes minutes, so the framework never asks
	// for more than b.N = 1 unless -benchtime says so.
	for i := 0; i < b.N; i++ {
		if i > 0 {
			continue
		}
		runPlannerScale(b, jobs, period, warmup, duration)
	}
}

func runPlannerScale(b *testing.B, jobs int, period, warmup, duration time.Duration) {
	opts := framework.Options{ExtraCRDPaths: []string{crdDir}}
	if parent := os.Getenv("PLANNER_SCALE_ETCD_PARENT"); parent != "" {
		// e.g. /dev/shm: etcd's data in memory, so the disk of a shared
		// machine does not set the API server's write latency.
		dir, err := os.MkdirTemp(parent, "planner-scale-etcd-")
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = os.RemoveAll(dir) })
		opts.EtcdDataDir = dir
		b.Logf("etcd data in %s", dir)
	}
	// Set-up time grows with the jobs: Kueue, at its production client
	// limits (20 QPS), writes each job's Workload, its admission and the
	// job's unsuspension (about 25 min for 10,000).
	setup := max(30*time.Minute, time.Duration(jobs)*300*time.Millisecond)
	pb, cancel := startPlannerBench(b, opts, warmup+duration+setup)
	defer cancel()
	env, ctx, dcfg, dc := pb.env, pb.ctx, pb.dcfg, pb.dc
	ns, queue := "scale", "scale"
	if _, err := env.InstallTorchRuntime(ctx); err != nil {
		b.Fatal(err)
	}
	if _, _, err := env.CreateGPUQueue(ctx, ns, queue, jobs); err != nil {
		b.Fatal(err)
	}

	// Create the TrainJobs, 16 at a time.
	createStart := time.Now()
	names := benchJobNames(jobs)
	if err := forEachParallel(jobs, func(j int) error {
		_, err := env.CreateTrainJob(ctx, ns, names[j], queue, 1, "")
		return err
	}); err != nil {
		b.Fatal(err)
	}
	b.Logf("created %d TrainJobs in %v", jobs, time.Since(createStart).Round(time.Second))
	pb.waitAdmitted(b, ns, jobs)

	// acks[j][k] is when the driver sent job j's report k (current_step =
	// 10k) and when the API server acknowledged it; zero when not (yet)
	// written.
	type write struct{ sent, ack, seen time.Time }
	type jobAcks struct {
		mu   sync.Mutex
		acks []write
	}
	acks := make([]*jobAcks, jobs)
	index := make(map[string]int, jobs)
	for i, n := range names {
		acks[i] = &jobAcks{}
		index[n] = i
	}

	// Watch the ProgressForecasts.
	var (
		mu         sync.Mutex
		winStart   time.Time
		winEnd     time.Time
		latencies  []float64
		visible    []float64
		fromAck    []float64
		ackToSeen  []float64
		seenToDec  []float64
		unmatched  int
		lastKey    = map[string]string{}
		lastStep   = map[string]int{}
		pfSeen     = map[string]bool{}
		forecasts  int
		inWindowOK = func(t time.Time) bool {
			return !winStart.IsZero() && !t.Before(winStart) && (winEnd.IsZero() || t.Before(winEnd))
		}
	)
	onPF := func(obj any) {
		seen := time.Now()
		pf, ok := obj.(*v1alpha1.ProgressForecast)
		if !ok || pf.Namespace != ns {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		pfSeen[pf.Name] = true
		var dec struct {
			At float64 `json:"at"`
		}
		if pf.Status.Decision != nil {
			_ = json.Unmarshal(pf.Status.Decision.Raw, &dec)
		}
		f := pf.Status.Forecast
		if f == nil {
			return
		}
		key := fmt.Sprintf("%s|%s|%d", f.Time.UTC().Format(time.RFC3339), f.Step, f.Reports)
		if lastKey[pf.Name] == key {
			return
		}
		lastKey[pf.Name] = key
		stepStr, _, _ := strings.Cut(f.Step, "/")
		step, err := strconv.ParseFloat(stepStr, 64)
		k := int(math.Round(step / 10))
		if err != nil || k <= lastStep[pf.Name] {
			return // no newer report than the previous forecast
		}
		lastStep[pf.Name] = k
		forecasts++
		if !inWindowOK(seen) {
			return
		}
		j, ok := index[pf.Name]
		if !ok {
			return
		}
		ja := acks[j]
		ja.mu.Lock()
		var w write
		if k < len(ja.acks) {
			w = ja.acks[k]
		}
		ja.mu.Unlock()
		if w.ack.IsZero() || dec.At < 1e9 {
			unmatched++
			return
		}
		// The decision and the forecast are one status write: dec.At is
		// the time of the decision on this step.
		decided := time.Unix(0, int64(dec.At*1e9))
		latencies = append(latencies, decided.Sub(w.sent).Seconds())
		fromAck = append(fromAck, decided.Sub(w.ack).Seconds())
		if !w.seen.IsZero() {
			ackToSeen = append(ackToSeen, w.seen.Sub(w.ack).Seconds())
			seenToDec = append(seenToDec, decided.Sub(w.seen).Seconds())
		}
		visible = append(visible, seen.Sub(w.sent).Seconds())
	}
	pfCache, err := cache.New(dcfg, cache.Options{Scheme: kueueext.NewScheme(), DefaultNamespaces: map[string]cache.Config{ns: {}}})
	if err != nil {
		b.Fatal(err)
	}
	onAddOrUpdate(ctx, b, pfCache, &v1alpha1.ProgressForecast{}, onPF)
	go func() { _ = pfCache.Start(ctx) }()
	if !pfCache.WaitForCacheSync(ctx) {
		b.Fatal("ProgressForecast cache did not sync")
	}
	// A second watcher of the TrainJobs: when this process sees report k
	// of a job is about when the API server delivers it to any watcher,
	// the planner's included (same cacher), which splits the latency into
	// the API server's part and the planner's.
	onTJ := func(obj any) {
		seen := time.Now()
		tj, ok := obj.(*kftrainer.TrainJob)
		if !ok || tj.Status.TrainerStatus == nil {
			return
		}
		j, ok := index[tj.Name]
		if !ok {
			return
		}
		k := -1
		for _, m := range tj.Status.TrainerStatus.Metrics {
			if m.Name == "current_step" {
				if v, err := strconv.Atoi(m.Value); err == nil {
					k = v / 10
				}
			}
		}
		ja := acks[j]
		ja.mu.Lock()
		for len(ja.acks) <= k {
			ja.acks = append(ja.acks, write{})
		}
		if k >= 0 && ja.acks[k].seen.IsZero() {
			ja.acks[k].seen = seen
		}
		ja.mu.Unlock()
	}
	onAddOrUpdate(ctx, b, pfCache, &kftrainer.TrainJob{}, onTJ)
	if !pfCache.WaitForCacheSync(ctx) {
		b.Fatal("TrainJob cache did not sync")
	}

	// Start `planner run` as its own process.
	forecastYAML := "" // the defaults
	if os.Getenv("PLANNER_SCALE_WORKERS") != "" {
		forecastYAML += fmt.Sprintf("  maxConcurrentReconciles: %d\n", scaleEnvInt(b, "PLANNER_SCALE_WORKERS", 0))
	}
	if v := os.Getenv("PLANNER_SCALE_CHECKPOINT"); v != "" {
		// e.g. 0s: every forecast written, as before the checkpoint cadence
		// (the latency measures below see only written forecasts).
		forecastYAML += fmt.Sprintf("  checkpointInterval: %s\n", scaleEnvDur(b, "PLANNER_SCALE_CHECKPOINT", 0))
	}
	if forecastYAML != "" {
		forecastYAML = "forecast:\n" + forecastYAML
	}
	planner := pb.startPlanner(b, forecastYAML, "planner-scale", "PLANNER_SCALE_ARGS") // e.g. "-v 3"
	defer planner.stop()
	b.Logf("planner pid %d, log %s", planner.Pid(), planner.logPath)

	// The driver: job j writes at offset j*period/jobs in every period.
	driveCtx, stopDriving := context.WithCancel(ctx)
	var (
		written, failed atomic.Int64
		wmu             sync.Mutex
		writeLat        []float64
	)
	var dwg sync.WaitGroup
	driveStart := time.Now()
	for j, name := range names {
		dwg.Go(func() {
			key := client.ObjectKey{Namespace: ns, Name: name}
			offset := time.Duration(int64(period) * int64(j) / int64(jobs))
			paced(driveCtx, driveStart.Add(offset), period, func(k int) bool {
				r := scaleReport(k)
				sent := time.Now()
				n, err := statusreplay.Run(driveCtx, dc, key, []progress.FileReport{r}, statusreplay.Options{})
				ack := time.Now()
				if err != nil || n != 1 {
					if driveCtx.Err() == nil {
						failed.Add(1)
					}
					return true
				}
				written.Add(1)
				ja := acks[j]
				ja.mu.Lock()
				for len(ja.acks) <= k {
					ja.acks = append(ja.acks, write{})
				}
				ja.acks[k].sent, ja.acks[k].ack = sent, ack
				ja.mu.Unlock()
				if !sent.Before(winStartLoad(&mu, &winStart)) {
					wmu.Lock()
					writeLat = append(writeLat, ack.Sub(sent).Seconds())
					wmu.Unlock()
				}
				return true
			})
		})
	}

	planner.waitRunning(b, warmup, "during the warm-up")
	// Who else uses the 2 cores: the control plane's processes and this
	// one (Kueue in-process, the driver, the benchmark's watch).
	w := planner.startWindow(ctx, b, "this test process (Kueue, driver, watch)")
	cs, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		b.Fatal(err)
	}
	apiMetrics := func() map[string]*dto.MetricFamily {
		data, err := cs.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
		if err != nil {
			b.Logf("kube-apiserver metrics: %v", err)
			return nil
		}
		tp := expfmt.NewTextParser(model.UTF8Validation)
		fams, err := tp.TextToMetricFamilies(strings.NewReader(string(data)))
		if err != nil {
			b.Logf("kube-apiserver metrics: %v", err)
		}
		return fams
	}
	api0 := apiMetrics()
	kueue0 := kueueMetrics(b)
	// etcd's write-ahead log bytes: what the window cost etcd's disk.
	wal0, walErr := env.EtcdMetric(ctx, "etcd_disk_wal_write_bytes_total")
	if dir := os.Getenv("PLANNER_SCALE_PPROF"); dir != "" {
		go profileControlPlane(ctx, b, cs, planner.pprofAddr, dir, duration)
	}
	written0 := written.Load()
	mu.Lock()
	winStart = time.Now()
	pfs := len(pfSeen)
	mu.Unlock()
	b.Logf("warm-up done: %d ProgressForecasts, %d writes, %d failed; measuring for %v", pfs, written0, failed.Load(), duration)

	planner.waitRunning(b, duration, "during the measurement")
	cpu, rssMiB := w.plannerUsage(b)
	mu.Lock()
	winEnd = time.Now()
	wall := winEnd.Sub(winStart).Seconds()
	lat := slices.Clone(latencies)
	vis := slices.Clone(visible)
	fack := slices.Clone(fromAck)
	a2s, s2d := slices.Clone(ackToSeen), slices.Clone(seenToDec)
	unm, pfs := unmatched, len(pfSeen)
	mu.Unlock()
	updates := written.Load() - written0
	stopDriving()
	dwg.Wait()

	slices.Sort(lat)
	slices.Sort(vis)
	slices.Sort(fack)
	slices.Sort(a2s)
	slices.Sort(s2d)
	wmu.Lock()
	wl := slices.Clone(writeLat)
	wmu.Unlock()
	slices.Sort(wl)
	cores := cpu / wall
	b.ReportMetric(quantile(lat, 0.99), "p99-latency-s")
	b.ReportMetric(quantile(lat, 0.50), "p50-latency-s")
	b.ReportMetric(cores, "planner-cores")
	b.ReportMetric(rssMiB, "planner-maxrss-MiB")
	b.ReportMetric(float64(len(lat)), "decisions")
	b.ReportMetric(float64(updates)/wall, "updates/s")
	b.ReportMetric(quantile(wl, 0.99), "write-p99-s")
	b.ReportMetric(quantile(vis, 0.99), "p99-visible-s")
	b.ReportMetric(quantile(vis, 0.50), "p50-visible-s")
	b.ReportMetric(float64(len(lat))/wall, "decisions/s")
	b.ReportMetric(float64(pfs), "progressforecasts")
	b.Logf("%d jobs, period %v, window %.0fs: %d updates (%.1f/s, %d failed overall), %d ProgressForecasts",
		jobs, period, wall, updates, float64(updates)/wall, failed.Load(), pfs)
	b.Logf("decisions in window: %d = %.2f/s (a job per minInterval would be %.1f/s) (+%d unmatched); status update to decision p50 %.2fs p90 %.2fs p99 %.2fs max %.2fs",
		len(lat), float64(len(lat))/wall, float64(jobs)/scaleMinInterval.Seconds(), unm, quantile(lat, 0.5), quantile(lat, 0.9), quantile(lat, 0.99), quantile(lat, 1))
	b.Logf("from the acknowledgement of the write instead of its start (negative: the planner decided before the driver got the answer): p50 %.2fs p99 %.2fs",
		quantile(fack, 0.5), quantile(fack, 0.99))
	b.Logf("split at this process's own TrainJob watch (%d decisions): write ack → report seen by a watcher p50 %.2fs p90 %.2fs p99 %.2fs; report seen → decision p50 %.2fs p90 %.2fs p99 %.2fs",
		len(s2d), quantile(a2s, 0.5), quantile(a2s, 0.9), quantile(a2s, 0.99), quantile(s2d, 0.5), quantile(s2d, 0.9), quantile(s2d, 0.99))
	b.Logf("until the decision was visible in the ProgressForecast: p50 %.2fs p90 %.2fs p99 %.2fs max %.2fs",
		quantile(vis, 0.5), quantile(vis, 0.9), quantile(vis, 0.99), quantile(vis, 1))
	b.Logf("trainerStatus write ack: p50 %.3fs p99 %.3fs", quantile(wl, 0.5), quantile(wl, 0.99))
	b.Logf("planner: %.3f cores (%.1f CPU-s over %.0fs), max RSS %.1f MiB", cores, cpu, wall, rssMiB)
	w.logOthers(b, w.othersCores(wall))
	// The API server's view of the same window.
	api1 := apiMetrics()
	if api1 != nil {
		for _, h := range []struct {
			family string
			match  map[string]string
			what   string
		}{
			{"apiserver_request_duration_seconds", map[string]string{"verb": "APPLY", "resource": "trainjobs", "subresource": "status"}, "trainerStatus apply (APPLY trainjobs/status)"},
			{"apiserver_request_duration_seconds", map[string]string{"verb": "PUT", "resource": "progressforecasts", "subresource": "status"}, "ProgressForecast status write (PUT)"},
			{"etcd_request_duration_seconds", map[string]string{"operation": "update"}, "etcd update"},
		} {
			if q, n, ok := histQuantilesMatching(api1[h.family], api0[h.family], h.match, 0.5, 0.99); ok {
				b.Logf("kube-apiserver %s: p50 %.3fs p99 %.3fs (%d)", h.what, q[0], q[1], n)
			}
		}
		// Who writes: mutating requests by resource and verb.
		counts := counterDelta(api1["apiserver_request_total"], api0["apiserver_request_total"], func(l map[string]string) string {
			switch l["verb"] {
			case "GET", "LIST", "WATCH":
				return ""
			}
			res := l["resource"]
			if l["subresource"] != "" {
				res += "/" + l["subresource"]
			}
			if l["dry_run"] != "" {
				// Kueue computes a job's pod sets through a dryRun=All
				// Workload create on every reconcile: no etcd write.
				return l["verb"] + " " + res + " (dry-run)"
			}
			return l["verb"] + " " + res
		})
		keys := slices.SortedFunc(maps.Keys(counts), func(a, b string) int { return cmp.Compare(counts[b], counts[a]) })
		var parts []string
		for _, k := range keys[:min(len(keys), 10)] {
			parts = append(parts, fmt.Sprintf("%s %.1f/s", k, counts[k]/wall))
		}
		b.Logf("kube-apiserver mutating requests over the window: %s", strings.Join(parts, ", "))
	}
	if wal1, err := env.EtcdMetric(ctx, "etcd_disk_wal_write_bytes_total"); err == nil && walErr == nil {
		perJobHour := (wal1 - wal0) / wall * 3600 / float64(jobs)
		b.Logf("etcd WAL bytes written over the window: %.1f MiB (%.1f KiB/s), %.0f KiB per job-hour", (wal1-wal0)/(1<<20), (wal1-wal0)/wall/1024, perJobHour/1024)
		b.ReportMetric(perJobHour, "etcd-B/job-hour")
	} else {
		b.Logf("etcd WAL bytes: %v %v", walErr, err)
	}
	logKueueLag(b, kueueMetrics(b), kueue0)
	// Where the time goes inside the planner (over the window: the
	// difference of two scrapes; quantiles interpolated within histogram
	// buckets).
	if fams := planner.metrics(ctx, b, "at the window's end"); fams != nil {
		for _, h := range []struct{ family, label, what string }{
			{"planner_update_to_decision_seconds", "", "watch delivery of the newest report → decision"},
			{"workqueue_queue_duration_seconds", "trainjob-progress", "TrainJob workqueue wait"},
			{"workqueue_work_duration_seconds", "trainjob-progress", "TrainJob reconcile"},
		} {
			if q, n, ok := histQuantiles(fams[h.family], w.metrics0[h.family], h.label, 0.5, 0.99); ok {
				b.Logf("planner %s: p50 %.3fs p99 %.3fs (%d)", h.what, q[0], q[1], n)
				if h.family == "planner_update_to_decision_seconds" {
					b.ReportMetric(q[1], "p99-planner-s") // the planner's own part
				}
			}
		}
		byMethod := counterDelta(fams["rest_client_requests_total"], w.metrics0["rest_client_requests_total"], func(l map[string]string) string { return l["method"] })
		b.Logf("planner API requests by method (window): %v", byMethod)
		byTrigger := counterDelta(fams["planner_forecasts_total"], w.metrics0["planner_forecasts_total"], func(l map[string]string) string { return l["trigger"] })
		b.Logf("planner forecasts by trigger (window): %v", byTrigger)
	}
}

// plannerBench is what the planner benchmarks (BenchmarkPlannerScale,
// BenchmarkProgressEndpointLoad) share: the planner binary, a control
// plane, the run's context and the driver's own client.
type plannerBench struct {
	bin  string
	tmp  string
	env  *framework.Env
	ctx  context.Context
	dcfg *rest.Config // the driver's: no client-side rate limit worth the name
	dc   client.Client
}

// startPlannerBench builds the planner and starts a control plane with
// opts; the context ends after timeout or when cancel is called.
func startPlannerBench(b *testing.B, opts framework.Options, timeout time.Duration) (*plannerBench, context.CancelFunc) {
	b.Helper()
	pb := &plannerBench{tmp: b.TempDir()}
	buildStart := time.Now()
	pb.bin = plannerBinary(b)
	b.Logf("built the planner in %v", time.Since(buildStart).Round(time.Second))
	pb.env = framework.Start(b, opts)
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	pb.ctx = ctx
	pb.dcfg = rest.CopyConfig(pb.env.Config)
	pb.dcfg.QPS, pb.dcfg.Burst = 5000, 10000
	var err error
	if pb.dc, err = client.New(pb.dcfg, client.Options{Scheme: kueueext.NewScheme()}); err != nil {
		cancel()
		b.Fatal(err)
	}
	return pb, cancel
}

// benchJobNames are the benchmark's job names: job-0000, job-0001, …
func benchJobNames(n int) []string {
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("job-%04d", i)
	}
	return names
}

// forEachParallel runs fn for every j in [0, n), 16 at a time; the first
// error wins.
func forEachParallel(n int, fn func(j int) error) error {
	var firstErr atomic.Value
	work := make(chan int)
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for j := range work {
				if err := fn(j); err != nil {
					firstErr.CompareAndSwap(nil, err)
				}
			}
		})
	}
	for j := range n {
		work <- j
	}
	close(work)
	wg.Wait()
	err, _ := firstErr.Load().(error)
	return err
}

// waitAdmitted waits until Kueue has admitted n Workloads in ns.
func (pb *plannerBench) waitAdmitted(b *testing.B, ns string, n int) {
	b.Helper()
	admitStart := time.Now()
	// At 20 QPS Kueue needs about 0.15 s of writes per job; list at most
	// every 5 s, so the wait does not load the API server it measures.
	timeout := max(15*time.Minute, time.Duration(n)*250*time.Millisecond)
	admitted, lastLog := 0, time.Now()
	for admitted < n {
		var wls kueue.WorkloadList
		if err := pb.dc.List(pb.ctx, &wls, client.InNamespace(ns)); err != nil {
			b.Fatalf("waiting for Kueue to admit %d Workloads: %v", n, err)
		}
		admitted = 0
		for i := range wls.Items {
			if framework.WorkloadAdmitted(&wls.Items[i]) {
				admitted++
			}
		}
		if admitted >= n {
			break
		}
		if time.Since(admitStart) > timeout {
			b.Fatalf("Kueue admitted %d of %d Workloads in %v", admitted, n, timeout)
		}
		if time.Since(lastLog) > time.Minute {
			b.Logf("Kueue admitted %d of %d Workloads after %v", admitted, n, time.Since(admitStart).Round(time.Second))
			lastLog = time.Now()
		}
		select {
		case <-pb.ctx.Done():
			b.Fatalf("waiting for Kueue to admit %d Workloads: %v", n, pb.ctx.Err())
		case <-time.After(min(5*time.Second, time.Duration(n)*time.Millisecond)):
		}
	}
	b.Logf("Kueue admitted all %d Workloads in %v", n, time.Since(admitStart).Round(time.Second))
}

// benchPlanner is `planner run` as a benchmark runs it (startPlanner).
type benchPlanner struct {
	*plannerProcess
	metricsAddr string
	pprofAddr   string // the planner's pprof.bindAddress
	logPath     string
	logFile     *os.File
}

// startPlanner starts `planner run` as its own process against the
// control plane: the default config but leader election and health off,
// metrics on a free loopback port and the policy enforcing, followed by
// extraYAML; its flags followed by those in the environment variable
// argsEnv; its log in logName-PID.log in the temporary directory (kept
// after the run). stop ends it.
func (pb *plannerBench) startPlanner(b *testing.B, extraYAML, logName, argsEnv string) *benchPlanner {
	b.Helper()
	kubeconfig := writeKubeconfig(b, pb.env.Config)
	metricsAddr, pprofAddr := freeLoopbackAddr(b), freeLoopbackAddr(b)
	cfgFile := filepath.Join(pb.tmp, "planner.yaml")
	if err := os.WriteFile(cfgFile, []byte(`apiVersion: planner.progress.io/v1alpha1
kind: PlannerConfiguration
leaderElection:
  enabled: false
metrics:
  bindAddress: "`+metricsAddr+`"
health:
  bindAddress: "0"
pprof:
  bindAddress: "`+pprofAddr+`"
policy:
  mode: enforce
`+extraYAML), 0o600); err != nil {
		b.Fatal(err)
	}
	logPath := filepath.Join(os.TempDir(), fmt.Sprintf("%s-%d.log", logName, os.Getpid()))
	logFile, err := os.Create(logPath)
	if err != nil {
		b.Fatal(err)
	}
	args := []string{"run", "--config", cfgFile, "--kubeconfig", kubeconfig}
	args = append(args, strings.Fields(os.Getenv(argsEnv))...)
	return &benchPlanner{plannerProcess: startPlannerProcess(b, pb.bin, args, logFile),
		metricsAddr: metricsAddr, pprofAddr: pprofAddr, logPath: logPath, logFile: logFile}
}

// stop stops the planner (SIGTERM, SIGKILL after 15 s) and closes its log.
func (p *benchPlanner) stop() {
	p.Stop()
	p.logFile.Close()
}

// waitRunning waits for d; the planner exiting meanwhile (during says
// when) fails the benchmark.
func (p *benchPlanner) waitRunning(b *testing.B, d time.Duration, during string) {
	b.Helper()
	select {
	case <-time.After(d):
	case <-p.Exited():
		b.Fatalf("planner exited %s: %v (log %s)", during, p.Err(), p.logPath)
	}
}

// metrics scrapes the planner's metrics; a failure is logged (when says
// which scrape) and gives nil.
func (p *benchPlanner) metrics(ctx context.Context, b *testing.B, when string) map[string]*dto.MetricFamily {
	b.Helper()
	fams, err := scrapeMetrics(ctx, "http://"+p.metricsAddr+"/metrics")
	if err != nil {
		b.Logf("planner metrics %s: %v", when, err)
		return nil
	}
	return fams
}

// benchWindow is the start of a benchmark's measurement window: the
// planner's CPU time and metrics, and the CPU time of the others on the
// machine (the control plane's processes and this one).
type benchWindow struct {
	planner    *benchPlanner
	cpu0       float64
	others     map[string]int // pid by name
	othersCPU0 map[string]float64
	metrics0   map[string]*dto.MetricFamily
}

// startWindow starts the measurement window; self names this process
// among the others.
func (p *benchPlanner) startWindow(ctx context.Context, b *testing.B, self string) *benchWindow {
	b.Helper()
	w := &benchWindow{planner: p, others: controlPlanePIDs(), othersCPU0: map[string]float64{}}
	var err error
	if w.cpu0, err = procCPUSeconds(p.Pid()); err != nil {
		b.Fatal(err)
	}
	w.others[self] = os.Getpid()
	for name, pid := range w.others {
		if c, err := procCPUSeconds(pid); err == nil {
			w.othersCPU0[name] = c
		}
	}
	w.metrics0 = p.metrics(ctx, b, "at the window's start")
	return w
}

// plannerUsage is the planner's CPU seconds since the window's start and
// its VmHWM (the whole run) in MiB.
func (w *benchWindow) plannerUsage(b *testing.B) (cpuSeconds, maxRSSMiB float64) {
	b.Helper()
	cpu1, err := procCPUSeconds(w.planner.Pid())
	if err != nil {
		b.Fatal(err)
	}
	hwm, err := procStatusKiB(w.planner.Pid(), "VmHWM")
	if err != nil {
		b.Fatal(err)
	}
	return cpu1 - w.cpu0, float64(hwm) / 1024
}

// othersCores is the others' CPU use since the window's start, in cores
// over wall seconds.
func (w *benchWindow) othersCores(wall float64) map[string]float64 {
	cores := map[string]float64{}
	for name, pid := range w.others {
		if c, err := procCPUSeconds(pid); err == nil {
			cores[name] = (c - w.othersCPU0[name]) / wall
		}
	}
	return cores
}

// logOthers logs othersCores' answer.
func (w *benchWindow) logOthers(b *testing.B, cores map[string]float64) {
	b.Helper()
	for _, name := range slices.Sorted(maps.Keys(cores)) {
		b.Logf("%s (pid %d): %.3f cores", name, w.others[name], cores[name])
	}
}

// paced calls fn(k) for k = 1, 2, … at first, first+period, …, skipping
// the slots it fell behind on, until ctx ends or fn returns false.
func paced(ctx context.Context, first time.Time, period time.Duration, fn func(k int) bool) {
	next := first
	for k := 1; ; k++ {
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Until(next)):
		}
		next = next.Add(period)
		for !next.After(time.Now()) { // fell behind: skip slots
			next = next.Add(period)
		}
		if !fn(k) {
			return
		}
	}
}

func scrapeMetrics(ctx context.Context, url string) (map[string]*dto.MetricFamily, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("scrape %s: %w", url, err)
	}
	defer resp.Body.Close()
	p := expfmt.NewTextParser(model.UTF8Validation)
	return p.TextToMetricFamilies(resp.Body)
}

// kueueMetrics gathers the metrics of this process, where Kueue runs
// (the planner is a child process with its own): Kueue's controllers'
// workqueues among them.
func kueueMetrics(b *testing.B) map[string]*dto.MetricFamily {
	fams, err := ctrlmetrics.Registry.Gather()
	if err != nil {
		b.Logf("Kueue's metrics: %v", err)
	}
	out := map[string]*dto.MetricFamily{}
	for _, f := range fams {
		out[f.GetName()] = f
	}
	return out
}

// logKueueLag logs how long TrainJob events waited in Kueue's workqueues
// over the window: every trainerStatus write costs Kueue a reconcile, so a
// growing wait is Kueue falling behind the reports.
func logKueueLag(b *testing.B, now, base map[string]*dto.MetricFamily) {
	names := map[string]bool{}
	for _, m := range now["workqueue_queue_duration_seconds"].GetMetric() {
		for _, lp := range m.GetLabel() {
			if lp.GetName() == "name" && strings.Contains(strings.ToLower(lp.GetValue()), "trainjob") {
				names[lp.GetValue()] = true
			}
		}
	}
	for _, name := range slices.Sorted(maps.Keys(names)) {
		if q, n, ok := histQuantiles(now["workqueue_queue_duration_seconds"], base["workqueue_queue_duration_seconds"], name, 0.5, 0.99); ok {
			b.Logf("Kueue's %s workqueue wait: p50 %.3fs p99 %.3fs (%d items)", name, q[0], q[1], n)
		}
	}
	for _, m := range now["workqueue_depth"].GetMetric() {
		for _, lp := range m.GetLabel() {
			if lp.GetName() == "name" && names[lp.GetValue()] {
				b.Logf("Kueue's %s workqueue depth at the window's end: %.0f", lp.GetValue(), m.GetGauge().GetValue())
			}
		}
	}
}

// histQuantiles merges the histogram's series (those whose label "name"
// is label, when label is set), subtracts the same series of base (an
// earlier scrape; nil for none) and interpolates the quantiles within the
// cumulative buckets.
func histQuantiles(f, base *dto.MetricFamily, label string, qs ...float64) ([]float64, uint64, bool) {
	if label == "" {
		return histQuantilesMatching(f, base, nil, qs...)
	}
	return histQuantilesMatching(f, base, map[string]string{"name": label}, qs...)
}

// histQuantilesMatching is histQuantiles over the series carrying all the
// labels of match.
func histQuantilesMatching(f, base *dto.MetricFamily, match map[string]string, qs ...float64) ([]float64, uint64, bool) {
	if f == nil {
		return nil, 0, false
	}
	cum := map[float64]uint64{}
	var total uint64
	add := func(f *dto.MetricFamily, sign int64) {
		for _, m := range f.GetMetric() {
			n := 0
			for _, lp := range m.GetLabel() {
				if v, ok := match[lp.GetName()]; ok && v == lp.GetValue() {
					n++
				}
			}
			if n < len(match) {
				continue
			}
			h := m.GetHistogram()
			total = uint64(int64(total) + sign*int64(h.GetSampleCount()))
			for _, bk := range h.GetBucket() {
				ub := bk.GetUpperBound()
				cum[ub] = uint64(int64(cum[ub]) + sign*int64(bk.GetCumulativeCount()))
			}
		}
	}
	add(f, 1)
	add(base, -1)
	if total == 0 {
		return nil, 0, false
	}
	bounds := make([]float64, 0, len(cum))
	for ub := range cum {
		bounds = append(bounds, ub)
	}
	slices.Sort(bounds)
	out := make([]float64, len(qs))
	for i, q := range qs {
		rank := q * float64(total)
		lo, prev := 0.0, uint64(0)
		out[i] = math.Inf(1)
		for _, ub := range bounds {
			c := cum[ub]
			if float64(c) >= rank {
				if math.IsInf(ub, 1) {
					out[i] = lo
				} else {
					out[i] = lo + (ub-lo)*(rank-float64(prev))/math.Max(float64(c-prev), 1)
				}
				break
			}
			lo, prev = ub, c
		}
	}
	return out, total, true
}

// onAddOrUpdate calls fn with every object the cache's informer for obj
// adds or updates.
func onAddOrUpdate(ctx context.Context, b *testing.B, c cache.Cache, obj client.Object, fn func(any)) {
	inf, err := c.GetInformer(ctx, obj)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    fn,
		UpdateFunc: func(_, o any) { fn(o) },
	}); err != nil {
		b.Fatal(err)
	}
}

// counterDelta sums the counter f minus its earlier scrape base by the key
// each series' labels give (series with the key "" are left out).
func counterDelta(f, base *dto.MetricFamily, key func(labels map[string]string) string) map[string]float64 {
	out := map[string]float64{}
	for sign, fam := range map[float64]*dto.MetricFamily{1: f, -1: base} {
		for _, m := range fam.GetMetric() {
			l := map[string]string{}
			for _, lp := range m.GetLabel() {
				l[lp.GetName()] = lp.GetValue()
			}
			if k := key(l); k != "" {
				out[k] += sign * m.GetCounter().GetValue()
			}
		}
	}
	return out
}

// controlPlanePIDs finds this process's children kube-apiserver and etcd
// (envtest starts them).
func controlPlanePIDs() map[string]int {
	out := map[string]int{}
	dirs, _ := os.ReadDir("/proc")
	for _, d := range dirs {
		pid, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			continue
		}
		s := string(data)
		open, closing := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
		if open < 0 || closing < open {
			continue
		}
		f := strings.Fields(s[closing+1:]) // f[1] is field 4 (ppid)
		if len(f) < 2 || f[1] != strconv.Itoa(os.Getpid()) {
			continue
		}
		if comm := s[open+1 : closing]; comm == "kube-apiserver" || comm == "etcd" {
			out[comm] = pid
		}
	}
	return out
}

// profileControlPlane writes 30 s CPU profiles of kube-apiserver (its
// /debug/pprof is on by default), of the planner (its pprof.bindAddress)
// and of this process, from a third of the window on, into dir
// (PLANNER_SCALE_PPROF).
func profileControlPlane(ctx context.Context, b *testing.B, cs kubernetes.Interface, plannerPprof, dir string, window time.Duration) {
	select {
	case <-ctx.Done():
		return
	case <-time.After(window / 3):
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		b.Logf("pprof: %v", err)
		return
	}
	if self, err := os.Create(filepath.Join(dir, "testprocess.pprof")); err == nil {
		if err := pprof.StartCPUProfile(self); err == nil {
			defer func() { pprof.StopCPUProfile(); self.Close() }()
		}
	}
	planner := make(chan error, 1)
	go func() {
		planner <- fetchProfile(ctx, "http://"+plannerPprof+"/debug/pprof/profile?seconds=30", filepath.Join(dir, "planner.pprof"))
	}()
	data, err := cs.CoreV1().RESTClient().Get().AbsPath("/debug/pprof/profile").Param("seconds", "30").Timeout(time.Minute).DoRaw(ctx)
	if err == nil {
		err = os.WriteFile(filepath.Join(dir, "kube-apiserver.pprof"), data, 0o644)
	}
	b.Logf("pprof: kube-apiserver (err %v), planner (err %v) and this process's profiles in %s", err, <-planner, dir)
}

// fetchProfile writes what url answers to file.
func fetchProfile(ctx context.Context, url, file string) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", url, resp.Status)
	}
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	return os.WriteFile(file, data, 0o644)
}

// scaleMinInterval is forecast.minInterval of the planner's (default) config.
const scaleMinInterval = 30 * time.Second

func winStartLoad(mu *sync.Mutex, t *time.Time) time.Time {
	mu.Lock()
	defer mu.Unlock()
	if t.IsZero() {
		return time.Unix(1<<40, 0) // not started: nothing counts
	}
	return *t
}

// scaleReport is a progressing job's k-th report: steps up, loss down.
func scaleReport(k int) progress.FileReport {
	loss := 0.5 + 2*math.Exp(-float64(k)/40) + 0.01*math.Sin(float64(k))
	return progress.FileReport{TrainerStatus: progress.TrainerStatus{Metrics: []progress.MetricValue{
		{Name: "loss", Value: strconv.FormatFloat(loss, 'f', 4, 64)},
		{Name: "current_step", Value: strconv.Itoa(10 * k)},
		{Name: "total_steps", Value: "1000000"},
	}}}
}

func quantile(sorted []float64, q float64) float64 {
	if len(sorted) == 0 {
		return math.NaN()
	}
	i := int(math.Ceil(q*float64(len(sorted)))) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}

var clkTck = sync.OnceValue(func() float64 {
	out, err := exec.Command("getconf", "CLK_TCK").Output()
	if err == nil {
		if v, err := strconv.ParseFloat(strings.TrimSpace(string(out)), 64); err == nil && v > 0 {
			return v
		}
	}
	return 100
})

// procCPUSeconds is utime+stime of pid from /proc/PID/stat.
func procCPUSeconds(pid int) (float64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	s := string(data)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc/%d/stat: %q", pid, s)
	}
	f := strings.Fields(s[i+1:]) // f[0] is field 3 (state)
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: %q", pid, s)
	}
	ut, err1 := strconv.ParseFloat(f[11], 64) // field 14
	st, err2 := strconv.ParseFloat(f[12], 64) // field 15
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("/proc/%d/stat: %q", pid, s)
	}
	return (ut + st) / clkTck(), nil
}

// procStatusKiB reads a "Name: N kB" line of /proc/PID/status.
func procStatusKiB(pid int, name string) (int64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for line := range strings.Lines(string(data)) {
		if v, ok := strings.CutPrefix(line, name+":"); ok {
			return strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		}
	}
	return 0, fmt.Errorf("/proc/%d/status: no %s", pid, name)
}

func scaleEnvInt(b *testing.B, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		b.Fatalf("%s=%q: want a positive integer", name, v)
	}
	return n
}

func scaleEnvDur(b *testing.B, name string, def time.Duration) time.Duration {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		b.Fatalf("%s=%q: want a duration", name, v)
	}
	return d
}
