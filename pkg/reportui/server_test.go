package reportui

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

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
