//go:build e2e

package e2e

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	configapi "github.com/kubeflow/trainer/v2/pkg/apis/config/v1alpha1"
	"github.com/kubeflow/trainer/v2/pkg/statusserver"

	"github.com/progress-planner/planner/pkg/jobframework"
	"github.com/progress-planner/planner/pkg/progressendpoint"
)

// allowAll lets every request through the Trainer's server: this test
// compares what the two servers accept as a report, not who may send it
// (the audiences differ by design).
type allowAll struct{}

func (allowAll) Init(context.Context) error { return nil }
func (allowAll) Authorize(context.Context, string, string, string) (bool, error) {
	return true, nil
}

// TestProgressEndpointMatchesTrainerStatusServer posts the same reports to
// Kubeflow Trainer's own status server (pkg/statusserver of the pinned
// module, writing TrainJob status on the real API server, whose CRD schema
// is the Trainer's validation) and to the planner's endpoint, and checks
// both accept and refuse the same ones, except where docs/progress-sources.md
// says the planner is stricter.
func TestProgressEndpointMatchesTrainerStatusServer(t *testing.T) {
	w := startEndpointWorld(t, progressendpoint.RateLimit{QPS: 100, Burst: 100})
	ctx := t.Context()
	if _, err := w.env.InstallTorchRuntime(ctx); err != nil {
		t.Fatal(err)
	}
	tj, err := w.env.CreateTrainJob(ctx, w.ns, "tj", "none", 1, "")
	if err != nil {
		t.Fatal(err)
	}
	// The TrainJob's pod, owned as the Trainer's JobSet would own it; here
	// pod → Job → TrainJob.
	node := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: "tj-node", OwnerReferences: []metav1.OwnerReference{{
			APIVersion: "trainer.kubeflow.org/v1alpha1", Kind: "TrainJob", Name: tj.Name, UID: tj.UID, Controller: ptr.To(true),
		}}},
		Spec: batchv1.JobSpec{Suspend: ptr.To(true), Template: corev1.PodTemplateSpec{Spec: reporterPodSpec()}},
	}
	mustCreateOwned(t, w.env.Client, node)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: "tj-node-0", OwnerReferences: []metav1.OwnerReference{{
			APIVersion: "batch/v1", Kind: "Job", Name: node.Name, UID: node.UID, Controller: ptr.To(true),
		}}},
		Spec: reporterPodSpec(),
	}
	mustCreate(t, w.env.Client, pod)
	w.pods["tj"] = pod
	token := w.token(t, "tj", progressendpoint.DefaultAudience)
	trainerURL := startTrainerStatusServer(t, w)

	long := strings.Repeat("m", 65)
	many := strings.TrimSuffix(strings.Repeat(`{"name":"m","value":"1"},`, 257), ",")
	for _, tc := range []struct {
		name, body string
		// planner is the planner's code where it is stricter than the
		// Trainer (documented); 0: the same as the Trainer's.
		planner int
	}{
		{"valid", e2eReport, 0},
		{"no trainerStatus", `{}`, 0},
		{"progress over 100", `{"trainerStatus":{"progressPercentage":101}}`, 0},
		{"negative progress", `{"trainerStatus":{"progressPercentage":-1}}`, 0},
		{"negative ETA", `{"trainerStatus":{"progressPercentage":5,"estimatedRemainingSeconds":-5}}`, 0},
		{"fractional progress", `{"trainerStatus":{"progressPercentage":45.5}}`, 0},
		{"string progress", `{"trainerStatus":{"progressPercentage":"45"}}`, 0},
		{"malformed JSON", `{"trainerStatus":`, 0},
		{"metric name too long", `{"trainerStatus":{"metrics":[{"name":"` + long + `","value":"1"}]}}`, 0},
		{"metric value empty", `{"trainerStatus":{"metrics":[{"name":"loss","value":""}]}}`, 0},
		{"257 metrics", `{"trainerStatus":{"metrics":[` + many + `]}}`, 0},
		{"no lastUpdatedTime", `{"trainerStatus":{"progressPercentage":5}}`, 0},
		{"bad time", `{"trainerStatus":{"progressPercentage":5,"lastUpdatedTime":"yesterday"}}`, 0},
		{"unknown field", `{"trainerStatus":{"progressPercentage":5,"progres":7,"lastUpdatedTime":"2026-12-02T12:00:00Z"}}`, http.StatusUnprocessableEntity},
		{"duplicate metric", `{"trainerStatus":{"progressPercentage":5,"lastUpdatedTime":"2026-12-02T12:00:00Z","metrics":[{"name":"loss","value":"1"},{"name":"loss","value":"2"}]}}`, http.StatusUnprocessableEntity},
		{"nothing but the time", `{"trainerStatus":{"lastUpdatedTime":"2026-12-02T12:00:00Z"}}`, http.StatusUnprocessableEntity},
		{"step beyond total", `{"trainerStatus":{"lastUpdatedTime":"2026-12-02T12:00:00Z","metrics":[{"name":"current_step","value":"50"},{"name":"total_steps","value":"10"}]}}`, http.StatusUnprocessableEntity},
	} {
		t.Run(tc.name, func(t *testing.T) {
			trainerCode, trainerBody := postBody(t, w.client, trainerURL+statusserver.StatusUrl(w.ns, tj.Name), "", tc.body)
			t.Logf("Trainer's answer: %s", strings.TrimSpace(trainerBody))
			path, _ := progressendpoint.StatusPath(jobframework.TrainJob{}.GVK().GroupKind(), w.ns, tj.Name)
			plannerCode := postTo(t, w.client, w.url+path, token, tc.body)
			want := trainerCode
			if tc.planner != 0 {
				want = tc.planner
				if trainerCode == tc.planner {
					t.Errorf("the Trainer now refuses this too (%d): drop the documented difference", trainerCode)
				}
			}
			t.Logf("Trainer %d, planner %d", trainerCode, plannerCode)
			if plannerCode != want {
				t.Errorf("planner answered %d, want %d (Trainer %d)", plannerCode, want, trainerCode)
			}
		})
	}
}

// startTrainerStatusServer runs the Trainer's status server on a free
// loopback port, serving the planner's managed certificate (its own cert
// management needs the Trainer's webhook Secret).
func startTrainerStatusServer(t *testing.T, w *endpointWorld) string {
	t.Helper()
	port := freeLoopbackPort(t)
	certs, err := progressendpoint.NewCertManager(w.env.Client, progressendpoint.CertOptions{Namespace: "planner-system", SecretName: "progress-tls",
		DNSNames: []string{"progress-planner-progress.planner-system.svc"}, Log: testr.New(t)})
	if err != nil {
		t.Fatal(err)
	}
	if err := certs.Ensure(t.Context()); err != nil {
		t.Fatal(err)
	}
	srv, err := statusserver.NewServer(w.env.Client, &configapi.StatusServer{Port: ptr.To(int32(port))},
		&tls.Config{GetCertificate: certs.GetCertificate}, allowAll{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	// Its Start does not return after a shutdown (v2.3.0): not waited for.
	go func() { _ = srv.Start(ctx) }()
	url := fmt.Sprintf("https://127.0.0.1:%d", port)
	deadline := time.Now().Add(10 * time.Second)
	for {
		conn, err := tls.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port), &tls.Config{RootCAs: poolOf(t, certs.CABundle()), ServerName: "progress-planner-progress.planner-system.svc"})
		if err == nil {
			conn.Close()
			return url
		}
		if time.Now().After(deadline) {
			t.Fatalf("the Trainer's status server did not come up: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func poolOf(t *testing.T, pemCA []byte) *x509.CertPool {
	t.Helper()
	p := x509.NewCertPool()
	if !p.AppendCertsFromPEM(pemCA) {
		t.Fatal("CA bundle is not PEM")
	}
	return p
}

func postTo(t *testing.T, c *http.Client, url, token, body string) int {
	code, _ := postBody(t, c, url, token, body)
	return code
}

func postBody(t *testing.T, c *http.Client, url, token, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}
