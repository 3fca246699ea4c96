//go:build e2e

package e2e

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/progress-planner/planner/pkg/jobframework"
	"github.com/progress-planner/planner/pkg/progress"
	"github.com/progress-planner/planner/pkg/progressendpoint"
	"github.com/progress-planner/planner/test/framework"
)

// BenchmarkProgressEndpointLoad is the progress endpoint under load of
// docs/benchmarks.md ("Progress endpoint under load"): PLANNER_ENDPOINT_JOBS
// batch/v1 Jobs (default 1,000), all admitted by Kueue (its batch/job
// integration) from one ClusterQueue with a GPU each, each with one pod it
// controls (created as the Job controller would: no kubelet or Job
// controller runs) run by ServiceAccount reporter, and a token bound to
// that pod from the real TokenRequest API (audience progress-planner).
// `planner run` runs as a separate process (built from ./cmd/planner,
// default config but leader election and health off, metrics on a free
// port, the progress endpoint on a free port with its managed certificate
// in planner-system), so its CPU and memory are its own. One client per
// job posts a Kubeflow-Trainer-style report (`{"trainerStatus": …}`:
// progressPercentage, loss, current_step, total_steps, lastUpdatedTime)
// every PLANNER_ENDPOINT_PERIOD (default 5s), the jobs staggered over the
// period, over TLS trusting only the CA of the planner's Secret (ca.crt),
// for PLANNER_ENDPOINT_WARMUP (default 60s) plus PLANNER_ENDPOINT_DURATION
// (default 3m). Each client is its own http.Client, as each pod is its own
// process; PLANNER_ENDPOINT_KEEPALIVE=false makes every report a new TLS
// connection (a reporter that does not reuse connections).
//
// It runs the scenario once whatever b.N is (use -benchtime 1x) and
// reports, over the window after the warm-up:
//
//   - planner-cores: the planner's utime+stime over the window / window.
//   - planner-maxrss-MiB: the planner's VmHWM at the end (the whole run).
//   - p50-ms/p99-ms/max-ms: client-side latency of a POST (request written
//     to response read), answered with any code.
//   - p99-decision-s (and p50): the planner's
//     planner_update_to_decision_seconds over the window: the report being
//     accepted into the job's history → the decision that includes it.
//   - reports/s, non200: answers in the window; non-200 answers are logged
//     by code, transport errors separately (errors).
//
// The endpoint has no latency histogram of its own (its metrics are
// planner_endpoint_reports_total{outcome} and
// planner_endpoint_forbidden_total): the outcome counts over the window
// are logged for comparison with the client's codes.
func BenchmarkProgressEndpointLoad(b *testing.B) {
	jobs := scaleEnvInt(b, "PLANNER_ENDPOINT_JOBS", 1000)
	period := scaleEnvDur(b, "PLANNER_ENDPOINT_PERIOD", 5*time.Second)
	warmup := scaleEnvDur(b, "PLANNER_ENDPOINT_WARMUP", 60*time.Second)
	duration := scaleEnvDur(b, "PLANNER_ENDPOINT_DURATION", 3*time.Minute)
	keepAlive := true
	if v := os.Getenv("PLANNER_ENDPOINT_KEEPALIVE"); v != "" {
		var err error
		if keepAlive, err = strconv.ParseBool(v); err != nil {
			b.Fatalf("PLANNER_ENDPOINT_KEEPALIVE=%q: %v", v, err)
		}
	}
	if period < time.Second {
		b.Fatalf("PLANNER_ENDPOINT_PERIOD %v: the default per-job rate limit is 1 report/s, use 1s or more", period)
	}
	for i := 0; i < b.N; i++ {
		if i > 0 {
			continue
		}
		runEndpointLoad(b, jobs, period, warmup, duration, keepAlive)
	}
}

func runEndpointLoad(b *testing.B, jobs int, period, warmup, duration time.Duration, keepAlive bool) {
	pb, cancel := startPlannerBench(b, framework.Options{ExtraCRDPaths: []string{crdDir},
		Frameworks: []string{framework.TrainJobFramework, framework.JobSetFramework, framework.BatchJobFramework}},
		warmup+duration+30*time.Minute)
	defer cancel()
	env, ctx, dcfg, dc := pb.env, pb.ctx, pb.dcfg, pb.dc
	cs, err := kubernetes.NewForConfig(dcfg)
	if err != nil {
		b.Fatal(err)
	}
	const ns, queue, certNS = "endpoint-load", "gpus", "planner-system"
	if _, _, err := env.CreateGPUQueue(ctx, ns, queue, jobs); err != nil {
		b.Fatal(err)
	}
	if err := env.CreateNamespace(ctx, certNS); err != nil {
		b.Fatal(err)
	}
	// No controller-manager runs: the ServiceAccount is created by hand.
	if err := dc.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "reporter"}}); err != nil {
		b.Fatal(err)
	}

	names := benchJobNames(jobs)

	createStart := time.Now()
	uids := make([]metav1.ObjectMeta, jobs)
	if err := forEachParallel(jobs, func(j int) error {
		job := gpuJob(ns, names[j], queue, 1)
		job.Spec.Template.Spec.ServiceAccountName = "reporter"
		if err := dc.Create(ctx, job); err != nil {
			return fmt.Errorf("create Job %s: %w", names[j], err)
		}
		uids[j] = job.ObjectMeta
		return nil
	}); err != nil {
		b.Fatal(err)
	}
	b.Logf("created %d Jobs in %v", jobs, time.Since(createStart).Round(time.Second))
	pb.waitAdmitted(b, ns, jobs)

	// A pod per admitted Job, as the Job controller would create it, and
	// a token bound to it, as the kubelet asks for a projected volume.
	podStart := time.Now()
	tokens := make([]string, jobs)
	tokenTTL := int64(max(3600, (warmup + duration + 10*time.Minute).Seconds()))
	if err := forEachParallel(jobs, func(j int) error {
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: names[j] + "-0", OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "batch/v1", Kind: "Job", Name: names[j], UID: uids[j].UID, Controller: ptr.To(true)}}},
			Spec: reporterPodSpec(),
		}
		if err := dc.Create(ctx, pod); err != nil {
			return fmt.Errorf("create pod %s: %w", pod.Name, err)
		}
		tr, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, "reporter", &authnv1.TokenRequest{Spec: authnv1.TokenRequestSpec{
			Audiences: []string{progressendpoint.DefaultAudience}, ExpirationSeconds: ptr.To(tokenTTL),
			BoundObjectRef: &authnv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID},
		}}, metav1.CreateOptions{})
		if err != nil {
			return fmt.Errorf("TokenRequest for pod %s: %w", pod.Name, err)
		}
		tokens[j] = tr.Status.Token
		return nil
	}); err != nil {
		b.Fatal(err)
	}
	b.Logf("created %d pods and their tokens in %v", jobs, time.Since(podStart).Round(time.Second))

	// Start `planner run` as its own process, the endpoint on.
	endpointAddr := freeLoopbackAddr(b)
	const serviceName, secretName = "progress-planner-progress", "progress-planner-progress-tls"
	planner := pb.startPlanner(b, `progressEndpoint:
  bindAddress: "`+endpointAddr+`"
  serviceName: `+serviceName+`
  certNamespace: `+certNS+`
  certSecretName: `+secretName+`
`, "planner-endpoint-load", "PLANNER_ENDPOINT_ARGS")
	defer planner.stop()
	logPath := planner.logPath
	b.Logf("planner pid %d, endpoint https://%s, metrics %s, log %s", planner.Pid(), endpointAddr, planner.metricsAddr, logPath)

	// The clients trust only the CA the planner wrote into its Secret.
	var caPEM []byte
	if _, err := framework.Poll(ctx, 2*time.Minute, func(ctx context.Context) (bool, error) {
		var s corev1.Secret
		if err := dc.Get(ctx, client.ObjectKey{Namespace: certNS, Name: secretName}, &s); err != nil {
			return false, client.IgnoreNotFound(err)
		}
		caPEM = s.Data[progressendpoint.KeyCACert]
		return len(caPEM) > 0, nil
	}); err != nil {
		b.Fatalf("the planner's certificate Secret %s/%s: %v (log %s)", certNS, secretName, err, logPath)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		b.Fatal("ca.crt is not PEM")
	}
	tlsConfig := &tls.Config{RootCAs: pool, ServerName: serviceName + "." + certNS + ".svc"}
	newClient := func() *http.Client {
		return &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
			TLSClientConfig: tlsConfig.Clone(), DisableKeepAlives: !keepAlive, MaxIdleConnsPerHost: 1, IdleConnTimeout: 10 * period,
		}}
	}
	baseURL := "https://" + endpointAddr
	post := func(ctx context.Context, hc *http.Client, j, k int) (int, error) {
		path, err := progressendpoint.StatusPath(jobframework.BatchJob{}.GVK().GroupKind(), ns, names[j])
		if err != nil {
			return 0, err
		}
		body, err := json.Marshal(map[string]any{"trainerStatus": endpointReport(k)})
		if err != nil {
			return 0, err
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, baseURL+path, strings.NewReader(string(body)))
		if err != nil {
			return 0, err
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+tokens[j])
		resp, err := hc.Do(req)
		if err != nil {
			return 0, err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode, nil
	}
	// Wait for the endpoint to serve (the planner's caches sync first).
	probe := newClient()
	upStart := time.Now()
	if _, err := framework.Poll(ctx, 3*time.Minute, func(ctx context.Context) (bool, error) {
		code, err := post(ctx, probe, 0, 0)
		return err == nil && code == http.StatusOK, nil
	}); err != nil {
		b.Fatalf("the endpoint never answered 200: %v (log %s)", err, logPath)
	}
	probe.CloseIdleConnections()
	b.Logf("the endpoint answered 200 %v after its CA was in the Secret", time.Since(upStart).Round(time.Millisecond))

	// The clients: job j posts at offset j*period/jobs in every period.
	type sample struct {
		at   time.Time
		lat  float64
		code int // 0: transport error
	}
	var (
		smu     sync.Mutex
		samples []sample
		errMsgs = map[string]int{}
	)
	driveCtx, stopDriving := context.WithCancel(ctx)
	var dwg sync.WaitGroup
	driveStart := time.Now()
	for j := range names {
		dwg.Go(func() {
			hc := newClient()
			defer hc.CloseIdleConnections()
			paced(driveCtx, driveStart.Add(time.Duration(int64(period)*int64(j)/int64(jobs))), period, func(k int) bool {
				sent := time.Now()
				code, err := post(driveCtx, hc, j, k)
				lat := time.Since(sent).Seconds()
				if err != nil && driveCtx.Err() != nil {
					return false
				}
				smu.Lock()
				samples = append(samples, sample{at: sent, lat: lat, code: code})
				if err != nil {
					msg := err.Error()
					if i := strings.Index(msg, `": `); i >= 0 { // Post "URL": …
						msg = msg[i+3:]
					}
					errMsgs[msg]++
				}
				smu.Unlock()
				return true
			})
		})
	}

	planner.waitRunning(b, warmup, "during the warm-up")
	w := planner.startWindow(ctx, b, "this test process (Kueue, clients)")
	metrics0 := w.metrics0
	winStart := time.Now()
	smu.Lock()
	warm := len(samples)
	smu.Unlock()
	b.Logf("warm-up done: %d posts; measuring for %v", warm, duration)

	planner.waitRunning(b, duration, "during the measurement")
	cpu, rssMiB := w.plannerUsage(b)
	winEnd := time.Now()
	wall := winEnd.Sub(winStart).Seconds()
	metrics1 := planner.metrics(ctx, b, "at the window's end")
	othersCores := w.othersCores(wall)
	stopDriving()
	dwg.Wait()

	var lat, errLat []float64
	codes := map[int]int{}
	smu.Lock()
	for _, s := range samples {
		if s.at.Before(winStart) || !s.at.Before(winEnd) {
			continue
		}
		codes[s.code]++
		if s.code != 0 {
			lat = append(lat, s.lat)
		} else {
			errLat = append(errLat, s.lat)
		}
	}
	errs := maps.Clone(errMsgs)
	smu.Unlock()
	slices.Sort(lat)
	slices.Sort(errLat)
	ok := codes[http.StatusOK]
	non200 := 0
	for c, n := range codes {
		if c != http.StatusOK {
			non200 += n
		}
	}
	cores := cpu / wall
	b.ReportMetric(cores, "planner-cores")
	b.ReportMetric(rssMiB, "planner-maxrss-MiB")
	b.ReportMetric(1000*quantile(lat, 0.50), "p50-ms")
	b.ReportMetric(1000*quantile(lat, 0.99), "p99-ms")
	b.ReportMetric(1000*quantile(lat, 1), "max-ms")
	b.ReportMetric(float64(ok)/wall, "reports/s")
	b.ReportMetric(float64(non200), "non200")
	b.ReportMetric(float64(codes[0]), "errors")
	b.Logf("%d jobs, period %v (%.1f reports/s offered), keep-alive %v, window %.0fs: %d answers 200 (%.1f/s), %d not 200",
		jobs, period, float64(jobs)/period.Seconds(), keepAlive, wall, ok, float64(ok)/wall, non200)
	for _, c := range slices.Sorted(maps.Keys(codes)) {
		if c == 0 {
			b.Logf("  transport errors: %d, after min %.2fs p50 %.2fs max %.2fs (over the whole run, by message: %v)",
				codes[0], quantile(errLat, 0), quantile(errLat, 0.5), quantile(errLat, 1), errs)
		} else if c != http.StatusOK {
			b.Logf("  HTTP %d: %d", c, codes[c])
		}
	}
	b.Logf("client-side POST latency (answered, %d): p50 %.1f ms p90 %.1f ms p99 %.1f ms max %.1f ms",
		len(lat), 1000*quantile(lat, 0.5), 1000*quantile(lat, 0.9), 1000*quantile(lat, 0.99), 1000*quantile(lat, 1))
	b.Logf("planner: %.3f cores (%.1f CPU-s over %.0fs), max RSS %.1f MiB", cores, cpu, wall, rssMiB)
	w.logOthers(b, othersCores)
	if metrics1 != nil {
		if q, n, ok := histQuantiles(metrics1["planner_update_to_decision_seconds"], metrics0["planner_update_to_decision_seconds"], "", 0.5, 0.99); ok {
			b.ReportMetric(q[1], "p99-decision-s")
			b.ReportMetric(q[0], "p50-decision-s")
			b.Logf("planner report accepted → decision (planner_update_to_decision_seconds): p50 %.3fs p99 %.3fs (%d decisions on new reports)", q[0], q[1], n)
		} else {
			b.Logf("planner_update_to_decision_seconds: no decisions on new reports in the window")
		}
		for _, h := range []struct{ family, label, what string }{
			{"planner_reconcile_duration_seconds", "", "reconcile"},
			{"planner_fit_duration_seconds", "", "forecast fit"},
		} {
			if q, n, ok := histQuantiles(metrics1[h.family], metrics0[h.family], h.label, 0.5, 0.99); ok {
				b.Logf("planner %s: p50 %.4fs p99 %.4fs (%d)", h.what, q[0], q[1], n)
			}
		}
		outcomes := counterDelta(metrics1["planner_endpoint_reports_total"], metrics0["planner_endpoint_reports_total"], func(l map[string]string) string { return l["outcome"] })
		b.Logf("planner_endpoint_reports_total over the window, by outcome: %v", outcomes)
		decisions := counterDelta(metrics1["planner_decisions_total"], metrics0["planner_decisions_total"], func(l map[string]string) string { return l["verdict"] })
		var nd float64
		for _, v := range decisions {
			nd += v
		}
		b.ReportMetric(nd/wall, "decisions/s")
		b.Logf("planner decisions over the window: %.0f (%.2f/s; a job per minInterval would be %.1f/s), by verdict %v",
			nd, nd/wall, float64(jobs)/scaleMinInterval.Seconds(), decisions)
		byMethod := counterDelta(metrics1["rest_client_requests_total"], metrics0["rest_client_requests_total"], func(l map[string]string) string { return l["method"] })
		b.Logf("planner API requests by method (window): %v", byMethod)
	}
	if len(lat) == 0 {
		b.Logf("NO report answered in the window")
	}
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		b.Errorf("ran out of time")
	}
}

// endpointReport is a progressing job's k-th report as a Trainer reporter
// sends it: progress, step of total, loss, stamped with the send time.
func endpointReport(k int) progress.TrainerStatus {
	const total = 100000
	step := 10 * k
	loss := 0.5 + 2*math.Exp(-float64(k)/40) + 0.01*math.Sin(float64(k))
	pct := math.Floor(100 * float64(step) / total)
	now := time.Now().UTC().Truncate(time.Second)
	return progress.TrainerStatus{
		ProgressPercentage: &pct,
		Metrics: []progress.MetricValue{
			{Name: "loss", Value: strconv.FormatFloat(loss, 'f', 4, 64)},
			{Name: "current_step", Value: strconv.Itoa(step)},
			{Name: "total_steps", Value: strconv.Itoa(total)},
		},
		LastUpdatedTime: &now,
	}
}
