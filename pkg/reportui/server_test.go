package reportui

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/progress-planner/planner/internal/testnet"
	"github.com/progress-planner/planner/pkg/kueueext"
	"github.com/progress-planner/planner/pkg/report"
)

func TestServer(t *testing.T) {
	cq := &kueue.ClusterQueue{ObjectMeta: metav1.ObjectMeta{Name: "cq"}}
	c := fake.NewClientBuilder().WithScheme(kueueext.NewScheme()).WithObjects(cq).Build()
	s := New(c, c, Options{Refresh: time.Minute, Log: logr.Discard()})
	srv := httptest.NewServer(s)
	defer srv.Close()

	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("before the first build: %d", resp.StatusCode)
	}
	if err := s.Rebuild(context.Background()); err != nil {
		t.Fatal(err)
	}
	resp, err = http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(b), `http-equiv="refresh" content="60"`) || !strings.Contains(string(b), `data-queue="cq"`) {
		t.Errorf("GET /: %d\n%s", resp.StatusCode, b)
	}
	if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'none'") {
		t.Errorf("CSP %q", csp)
	}
	resp, err = http.Get(srv.URL + "/report.json")
	if err != nil {
		t.Fatal(err)
	}
	var r report.Report
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil || len(r.Queues) != 1 {
		t.Errorf("report.json: %v %+v", err, r)
	}
	resp.Body.Close()
	for _, m := range []string{http.MethodPost, http.MethodPut, http.MethodDelete, http.MethodPatch} {
		req, _ := http.NewRequest(m, srv.URL, strings.NewReader("x"))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get("Allow") != "GET, HEAD" {
			t.Errorf("%s: %d", m, resp.StatusCode)
		}
	}
	resp, _ = http.Get(srv.URL + "/secrets")
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("unknown path: %d", resp.StatusCode)
	}
}

// Issue 14: the error page says what failed, not the internal error (API
// server URLs); the log has it.
func TestServerErrorPageHidesInternals(t *testing.T) {
	internal := errors.New(`list ProgressForecasts: Get "https://127.0.0.1:1/api": dial tcp 127.0.0.1:1: connect: connection refused`)
	c := fake.NewClientBuilder().WithScheme(kueueext.NewScheme()).WithInterceptorFuncs(interceptor.Funcs{
		List: func(context.Context, client.WithWatch, client.ObjectList, ...client.ListOption) error {
			return internal
		},
	}).Build()
	s := New(c, c, Options{Refresh: time.Minute, Log: logr.Discard()})
	if err := s.Rebuild(context.Background()); !errors.Is(err, internal) {
		t.Fatalf("Rebuild: %v, want the internal error for the log", err)
	}
	rec := httptest.NewRecorder()
	s.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil))
	body := rec.Body.String()
	if rec.Code != http.StatusServiceUnavailable || !strings.Contains(body, "reading the cluster failed") {
		t.Errorf("%d %q: want 503 saying what failed", rec.Code, body)
	}
	for _, leak := range []string{"127.0.0.1", "https://", "dial tcp", "ProgressForecasts"} {
		if strings.Contains(body, leak) {
			t.Errorf("error page leaks %q: %q", leak, body)
		}
	}
}

// Issue 14: --ui-addr :PORT listens on loopback only. A real listener:
// requests to it over loopback are answered, connections to this machine's
// other addresses are refused.
func TestServerListensOnLoopbackByDefault(t *testing.T) {
	c := fake.NewClientBuilder().WithScheme(kueueext.NewScheme()).Build()
	s := New(c, c, Options{Addr: ":0", Refresh: time.Minute, Log: logr.Discard()})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Start(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	actx, acancel := context.WithTimeout(ctx, 30*time.Second)
	defer acancel()
	bound, err := s.Addr(actx)
	if err != nil {
		t.Fatal(err)
	}
	host, port, err := net.SplitHostPort(bound)
	if err != nil {
		t.Fatal(err)
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		t.Fatalf("listening on %s, want loopback", bound)
	}
	resp, err := http.Get("http://" + bound + "/")
	if err != nil {
		t.Fatalf("loopback request: %v", err)
	}
	resp.Body.Close()

	tried, accepted, err := testnet.DialOffLoopback(port, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	for _, target := range accepted {
		t.Errorf("connection to %s (this machine's non-loopback address) accepted", target)
	}
	t.Logf("listening on %s; %d non-loopback addresses of this machine refused", bound, tried)
}

func TestListenAddr(t *testing.T) {
	for in, want := range map[string]string{
		":8082": "127.0.0.1:8082", "0.0.0.0:8082": "0.0.0.0:8082", "[::]:8082": "[::]:8082", "10.0.0.5:80": "10.0.0.5:80",
	} {
		if got, err := ListenAddr(in); err != nil || got != want {
			t.Errorf("ListenAddr(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := ListenAddr("8082"); err == nil {
		t.Error("ListenAddr(\"8082\"): no error")
	}
}
