package main

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/progress-planner/planner/pkg/reportui"
)

func TestLivePageSecurityHeaders(t *testing.T) {
	page := reportui.New(nil, nil, reportui.Options{})
	for name, h := range map[string]http.Handler{
		// The real page before its first build: a 503 error page.
		"page": securityHeaders(page),
		// A response that sets its own policy keeps it, plus frame-ancestors.
		"own CSP": securityHeaders(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'")
			_, _ = w.Write([]byte("<p>ok</p>"))
		})),
	} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil))
		hd := rec.Result().Header
		csp := hd.Get("Content-Security-Policy")
		if !strings.Contains(csp, "frame-ancestors 'none'") || !strings.Contains(csp, "default-src 'none'") {
			t.Errorf("%s: Content-Security-Policy %q", name, csp)
		}
		if name == "own CSP" && !strings.Contains(csp, "style-src 'unsafe-inline'") {
			t.Errorf("%s: the page's own policy was replaced: %q", name, csp)
		}
		for k, want := range map[string]string{"X-Content-Type-Options": "nosniff", "X-Frame-Options": "DENY", "Referrer-Policy": "no-referrer"} {
			if got := hd.Get(k); got != want {
				t.Errorf("%s: %s = %q, want %q", name, k, got, want)
			}
		}
		t.Logf("%s: %d, CSP %q", name, rec.Code, csp)
	}
}
