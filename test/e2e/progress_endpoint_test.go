//go:build e2e

package e2e

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	authnv1 "k8s.io/api/authentication/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/progress-planner/planner/pkg/jobframework"
	"github.com/progress-planner/planner/pkg/progress"
	"github.com/progress-planner/planner/pkg/progressendpoint"
	"github.com/progress-planner/planner/test/framework"
)

type e2eSink struct {
	mu   sync.Mutex
	jobs []progressendpoint.JobRef
	snap []progress.Snapshot
}

func (s *e2eSink) Accept(_ context.Context, job progressendpoint.JobRef, status progress.TrainerStatus, _ time.Time) error {
	snap, _, _ := progress.Parse(0, status)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.jobs = append(s.jobs, job)
	s.snap = append(s.snap, snap)
	return nil
}

func (s *e2eSink) reports(name string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, j := range s.jobs {
		if j.Name == name {
			n++
		}
	}
	return n
}

// endpointWorld is a tenant namespace with Jobs x and y, one pod each
// (owned by its Job, run by ServiceAccount reporter), and the endpoint
// served over TLS with its managed CA.
type endpointWorld struct {
	env *framework.Env
	cs  *kubernetes.Clientset
	ns  string
	// kind is the jobs' kind, which names their status path (zero: Job).
	kind schema.GroupKind
	jobs map[string]*batchv1.Job
	pods map[string]*corev1.Pod
	sink *e2eSink
	// to, when set, receives the accepted reports instead of sink (the
	// planner's report source, as `planner run` wires it).
	to     progressendpoint.Sink
	url    string
	client *http.Client
}

const endpointNS = "tenant"

func startEndpointWorld(t *testing.T, rl progressendpoint.RateLimit) *endpointWorld {
	t.Helper()
	w := newEndpointWorld(t)
	w.serve(t, t.Context(), rl)
	return w
}

// newEndpointWorld creates the tenant's objects; nothing serves yet.
func newEndpointWorld(t *testing.T) *endpointWorld {
	t.Helper()
	env := framework.Start(t)
	cs, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	w := &endpointWorld{env: env, cs: cs, ns: endpointNS, jobs: map[string]*batchv1.Job{}, pods: map[string]*corev1.Pod{}, sink: &e2eSink{}}
	for _, ns := range []string{endpointNS, "planner-system"} {
		mustCreate(t, env.Client, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	}
	// No controller-manager runs: the ServiceAccount is created by hand.
	mustCreate(t, env.Client, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: endpointNS, Name: "reporter"}})
	for _, name := range []string{"x", "y"} {
		w.jobs[name], w.pods[name] = jobWithPod(t, env.Client, name)
	}
	return w
}

func mustCreate(t *testing.T, c client.Client, obj client.Object) {
	t.Helper()
	if err := c.Create(t.Context(), obj); err != nil {
		t.Fatalf("create %T %s: %v", obj, obj.GetName(), err)
	}
}

// mustCreateOwned creates a child of a job just created (a TrainJob's
// JobSet or Job). Kueue's webhooks look the owner up in their informer
// cache, which may not hold it yet a few milliseconds after its creation
// ("TrainJob ... not found"): that denial alone is retried, within 30 s.
func mustCreateOwned(t *testing.T, c client.Client, obj client.Object) {
	t.Helper()
	var last error
	if _, err := framework.Poll(t.Context(), 30*time.Second, func(ctx context.Context) (bool, error) {
		last = c.Create(ctx, obj)
		if last != nil && strings.Contains(last.Error(), "denied the request") && strings.Contains(last.Error(), "not found") {
			return false, nil
		}
		return true, last
	}); err != nil {
		t.Fatalf("create %T %s: %v (last: %v)", obj, obj.GetName(), err, last)
	}
}

// jobWithPod creates a suspended batch/v1 Job and a pod it controls, as
// the Job controller would (none runs here).
func jobWithPod(t *testing.T, c client.Client, name string) (*batchv1.Job, *corev1.Pod) {
	t.Helper()
	spec := reporterPodSpec()
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Namespace: endpointNS, Name: name},
		Spec:       batchv1.JobSpec{Suspend: ptr.To(true), Template: corev1.PodTemplateSpec{Spec: spec}},
	}
	mustCreate(t, c, job)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: endpointNS, Name: name + "-0", OwnerReferences: []metav1.OwnerReference{{
			APIVersion: "batch/v1", Kind: "Job", Name: job.Name, UID: job.UID, Controller: ptr.To(true),
		}}},
		Spec: spec,
	}
	mustCreate(t, c, pod)
	return job, pod
}

// reporterPodSpec is a training pod run by ServiceAccount reporter.
func reporterPodSpec() corev1.PodSpec {
	return corev1.PodSpec{
		ServiceAccountName:           "reporter",
		AutomountServiceAccountToken: ptr.To(false),
		RestartPolicy:                corev1.RestartPolicyNever,
		Containers:                   []corev1.Container{{Name: "train", Image: "registry.invalid/train:1"}},
	}
}

// serve starts the endpoint the way progressendpoint.Setup does, with the
// test's sink, on a free loopback port.
func (w *endpointWorld) serve(t *testing.T, ctx context.Context, rl progressendpoint.RateLimit) {
	t.Helper()
	dns := []string{"progress-planner-progress.planner-system.svc"}
	certs, err := progressendpoint.NewCertManager(w.env.Client, progressendpoint.CertOptions{Namespace: "planner-system", SecretName: "progress-tls", DNSNames: dns, Log: testr.New(t)})
	if err != nil {
		t.Fatal(err)
	}
	if err := certs.Ensure(ctx); err != nil {
		t.Fatal(err)
	}
	progressendpoint.RegisterMetrics()
	bc := events.NewBroadcaster(&events.EventSinkImpl{Interface: w.cs.EventsV1()})
	bc.StartRecordingToSink(ctx.Done())
	t.Cleanup(bc.Shutdown)
	h, err := progressendpoint.NewHandler(progressendpoint.Options{
		Client: w.env.Client, Reader: w.env.Client, Sink: w.sinkTo(), RateLimit: rl, Log: testr.New(t),
		Recorder: bc.NewRecorder(w.env.Scheme, progressendpoint.EventSource),
	})
	if err != nil {
		t.Fatal(err)
	}
	srvCtx, cancel := context.WithCancel(ctx)
	srv := &progressendpoint.Server{Addr: "127.0.0.1:0", Handler: h, Certs: certs, Log: testr.New(t)}
	done := make(chan error, 1)
	go func() { done <- srv.Start(srvCtx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("endpoint: %v", err)
		}
	})
	addr, err := srv.ListenAddr(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// The client trusts only the bundle pods would mount, and checks the
	// Service's name in the certificate.
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(certs.CABundle()) {
		t.Fatal("CA bundle is not PEM")
	}
	w.url = "https://" + addr
	w.client = &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, ServerName: dns[0]}}}
	t.Cleanup(w.client.CloseIdleConnections)
}

func (w *endpointWorld) sinkTo() progressendpoint.Sink {
	if w.to != nil {
		return w.to
	}
	return w.sink
}

// token asks the real TokenRequest API for a token bound to pod with
// audience, as the kubelet does for a projected volume.
func (w *endpointWorld) token(t *testing.T, pod, audience string) string {
	t.Helper()
	p := w.pods[pod]
	tr, err := w.cs.CoreV1().ServiceAccounts(w.ns).CreateToken(t.Context(), "reporter", &authnv1.TokenRequest{Spec: authnv1.TokenRequestSpec{
		Audiences: []string{audience}, ExpirationSeconds: ptr.To[int64](600),
		BoundObjectRef: &authnv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: p.Name, UID: p.UID},
	}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("TokenRequest for pod %s: %v", p.Name, err)
	}
	return tr.Status.Token
}

func (w *endpointWorld) post(t *testing.T, job, token, body string) (int, metav1.Status, http.Header) {
	t.Helper()
	code, st, h, err := w.postCtx(t.Context(), job, token, body)
	if err != nil {
		t.Fatal(err)
	}
	return code, st, h
}

// postCtx is post for any goroutine: errors are returned.
func (w *endpointWorld) postCtx(ctx context.Context, job, token, body string) (int, metav1.Status, http.Header, error) {
	var st metav1.Status
	kind := w.kind
	if kind.Empty() {
		kind = jobframework.BatchJob{}.GVK().GroupKind()
	}
	path, err := progressendpoint.StatusPath(kind, w.ns, job)
	if err != nil {
		return 0, st, nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, w.url+path, strings.NewReader(body))
	if err != nil {
		return 0, st, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := w.client.Do(req)
	if err != nil {
		return 0, st, nil, fmt.Errorf("POST %s: %w", path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		if err := json.Unmarshal(b, &st); err != nil || st.Message == "" {
			return 0, st, nil, fmt.Errorf("POST %s: refusal %d without a readable reason: %s", path, resp.StatusCode, b)
		}
	}
	return resp.StatusCode, st, resp.Header, nil
}

const e2eReport = `{"trainerStatus":{"progressPercentage":30,"estimatedRemainingSeconds":600,` +
	`"metrics":[{"name":"loss","value":"0.42"},{"name":"current_step","value":"300"},{"name":"total_steps","value":"1000"}],` +
	`"lastUpdatedTime":"2026-12-02T12:00:00Z"}}`

func TestProgressEndpointAuthentication(t *testing.T) {
	w := startEndpointWorld(t, progressendpoint.RateLimit{})
	good := w.token(t, "x", progressendpoint.DefaultAudience)

	code, st, _ := w.post(t, "x", good, e2eReport)
	if code != http.StatusOK {
		t.Fatalf("pod of x reporting for x: %d %s, want 200", code, st.Message)
	}
	if w.sink.reports("x") != 1 || w.sink.jobs[0].UID != string(w.jobs["x"].UID) || w.sink.snap[0].Step != 300 {
		t.Fatalf("sink got %+v", w.sink.jobs)
	}

	// The Trainer's audience (a token meant for its status server) and the
	// API server's own are not the planner's.
	for _, tc := range []struct{ name, token string }{
		{"no token", ""},
		{"Trainer audience", w.token(t, "x", "trainer.kubeflow.org/v1alpha1/namespaces/tenant/trainjobs/x/status")},
		{"API server audience", w.token(t, "x", "https://kubernetes.default.svc")},
		{"expired", expiredCopy(t, w.env, good)},
	} {
		code, st, hdr := w.post(t, "x", tc.token, e2eReport)
		if code != http.StatusUnauthorized || hdr.Get("WWW-Authenticate") == "" {
			t.Errorf("%s: %d %q, want 401", tc.name, code, st.Message)
		}
		t.Logf("%s: 401 %q", tc.name, st.Message)
	}

	big := `{"trainerStatus":{"progressPercentage":1,"metrics":[` + strings.Repeat(`{"name":"a","value":"1"},`, 4000) + `{"name":"b","value":"1"}]}}`
	if code, st, _ := w.post(t, "x", good, big); code != http.StatusRequestEntityTooLarge {
		t.Errorf("oversized body: %d %q, want 413", code, st.Message)
	}
	if code, st, _ := w.post(t, "x", good, `{"trainerStatus":{"progressPercentage":101}}`); code != http.StatusUnprocessableEntity {
		t.Errorf("progress 101: %d %q, want 422", code, st.Message)
	}
	if n := w.sink.reports("x"); n != 1 {
		t.Errorf("sink got %d reports for x, want only the valid one", n)
	}
}

func TestProgressEndpointForeignPodForbidden(t *testing.T) {
	w := startEndpointWorld(t, progressendpoint.RateLimit{})
	before := gatherCounter(t, "planner_endpoint_forbidden_total")
	code, st, _ := w.post(t, "y", w.token(t, "x", progressendpoint.DefaultAudience), e2eReport)
	if code != http.StatusForbidden || !strings.Contains(st.Message, "does not belong to") {
		t.Fatalf("pod of x reporting for y: %d %q, want 403", code, st.Message)
	}
	if d := gatherCounter(t, "planner_endpoint_forbidden_total") - before; d != 1 {
		t.Errorf("planner_endpoint_forbidden_total grew by %g, want 1", d)
	}
	if w.sink.reports("y") != 0 {
		t.Error("the forbidden report reached the sink")
	}
	// The Event on y, through the real events API.
	_, err := framework.Poll(t.Context(), 20*time.Second, func(ctx context.Context) (bool, error) {
		var evs eventsv1.EventList
		if err := w.env.Client.List(ctx, &evs, client.InNamespace(w.ns)); err != nil {
			return false, err
		}
		for _, e := range evs.Items {
			if e.Regarding.Kind == "Job" && e.Regarding.Name == "y" && e.Regarding.UID == w.jobs["y"].UID && e.Reason == "ProgressReportForbidden" {
				t.Logf("event on job y: %s", e.Note)
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("no ProgressReportForbidden Event on job y: %v", err)
	}
}

func TestProgressEndpointRateLimitPerJob(t *testing.T) {
	w := startEndpointWorld(t, progressendpoint.RateLimit{QPS: 0.01, Burst: 3})
	tokX, tokY := w.token(t, "x", progressendpoint.DefaultAudience), w.token(t, "y", progressendpoint.DefaultAudience)
	limited := false
	for i := range 10 {
		code, st, hdr := w.post(t, "x", tokX, e2eReport)
		if code == http.StatusTooManyRequests {
			if hdr.Get("Retry-After") == "" {
				t.Fatalf("429 without Retry-After: %q", st.Message)
			}
			t.Logf("report %d of x: 429 after %s s: %q", i, hdr.Get("Retry-After"), st.Message)
			limited = true
			break
		}
		if code != http.StatusOK {
			t.Fatalf("report %d of x: %d %q", i, code, st.Message)
		}
	}
	if !limited || w.sink.reports("x") != 3 {
		t.Fatalf("x's flood: limited %v after %d accepted, want 429 after 3", limited, w.sink.reports("x"))
	}
	if code, st, _ := w.post(t, "y", tokY, e2eReport); code != http.StatusOK {
		t.Fatalf("y during x's flood: %d %q, want 200", code, st.Message)
	}
}

// gatherCounter reads a counter from controller-runtime's registry.
func gatherCounter(t *testing.T, name string) float64 {
	t.Helper()
	mfs, err := ctrlmetrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			sum := 0.0
			for _, m := range mf.GetMetric() {
				sum += m.GetCounter().GetValue()
			}
			return sum
		}
	}
	return 0
}

// expiredCopy re-signs a real token's claims with exp (and iat, nbf) in
// the past, with the API server's own signing key: a token it issued, now
// expired (TokenRequest refuses lifetimes under ten minutes).
func expiredCopy(t *testing.T, env *framework.Env, token string) string {
	t.Helper()
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		t.Fatal("token is not a JWS")
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		t.Fatal(err)
	}
	var claims map[string]any
	if err := json.Unmarshal(payload, &claims); err != nil {
		t.Fatal(err)
	}
	past := time.Now().Add(-time.Hour).Unix()
	claims["iat"], claims["nbf"], claims["exp"] = past-600, past-600, past
	payload, _ = json.Marshal(claims)
	signing := parts[0] + "." + base64.RawURLEncoding.EncodeToString(payload)
	return signing + "." + base64.RawURLEncoding.EncodeToString(signJWS(t, env.ServiceAccountSigningKeyFile(), signing))
}

func signJWS(t *testing.T, keyFile, signing string) []byte {
	t.Helper()
	b, err := os.ReadFile(keyFile)
	if err != nil {
		t.Fatal(err)
	}
	blk, _ := pem.Decode(b)
	if blk == nil {
		t.Fatalf("%s is not PEM", keyFile)
	}
	key, err := x509.ParsePKCS8PrivateKey(blk.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256([]byte(signing))
	switch k := key.(type) {
	case *rsa.PrivateKey:
		sig, err := rsa.SignPKCS1v15(rand.Reader, k, crypto.SHA256, sum[:])
		if err != nil {
			t.Fatal(err)
		}
		return sig
	case *ecdsa.PrivateKey:
		r, s, err := ecdsa.Sign(rand.Reader, k, sum[:])
		if err != nil {
			t.Fatal(err)
		}
		// JWS ES256: r and s, 32 bytes each.
		return append(pad32(r), pad32(s)...)
	default:
		t.Fatalf("signing key %T", key)
		return nil
	}
}

func pad32(n *big.Int) []byte {
	out := make([]byte, 32)
	n.FillBytes(out)
	return out
}
