package main

import (
	"fmt"
	"math"
	"net/http"
	"strings"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/progress-planner/planner/pkg/admission"
	"github.com/progress-planner/planner/pkg/admissionstatus"
	"github.com/progress-planner/planner/pkg/kueueext"
	"github.com/progress-planner/planner/pkg/plannerconfig"
	"github.com/progress-planner/planner/pkg/reportui"
)

// addReportUI adds the read-only report page (--ui-addr) to the manager:
// it reads the controller's cache and, for ClusterQueues (not cached), the
// API server directly.
func addReportUI(mgr manager.Manager, cfg plannerconfig.Config, fl runFlags, log logr.Logger,
	latest func() map[types.NamespacedName]kueueext.LatestForecast) error {
	if fl.uiAddr == "" {
		return nil
	}
	if fl.uiRefresh <= 0 {
		return usageErrorf("--ui-refresh %v: want a positive duration", fl.uiRefresh)
	}
	set := admissionstatus.Settings(cfg)
	o := reportui.Options{Addr: fl.uiAddr, Refresh: fl.uiRefresh,
		GPUResource: cfg.GPUResourceName(), Log: log.WithName("report-page"), Wrap: securityHeaders, Admission: &set, Latest: latest}
	if cfg.AdmissionEstimates.Interval.Duration == 0 {
		// The published estimates' metrics, when nothing is published
		// (admissionstatus.Publisher records them otherwise).
		o.OnAdmissions = func(sc admission.Scored, c admission.Calibration) {
			kueueext.RecordAdmissionEstimates(sc.Inside, sc.Below, sc.Above, c.Outcomes, math.Exp(c.Shift))
		}
	}
	s := reportui.New(mgr.GetClient(), mgr.GetAPIReader(), o)
	if err := mgr.Add(s); err != nil {
		return fmt.Errorf("add the report page: %w", err)
	}
	return nil
}

// securityHeaders adds, to every response of the live page (error pages
// included), the headers that keep it from being framed, sniffed or
// leaking its URL: the page's own Content-Security-Policy gains
// frame-ancestors 'none' (a page with none gets default-src 'none').
func securityHeaders(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		next.ServeHTTP(&headerWriter{ResponseWriter: w}, r)
	})
}

type headerWriter struct {
	http.ResponseWriter
	done bool
}

// WriteHeader sets the headers last, after the page set its own.
func (w *headerWriter) WriteHeader(code int) {
	if !w.done {
		w.done = true
		h := w.Header()
		csp := h.Get("Content-Security-Policy")
		if csp == "" {
			csp = "default-src 'none'"
		}
		if !strings.Contains(csp, "frame-ancestors") {
			csp += "; frame-ancestors 'none'"
		}
		h.Set("Content-Security-Policy", csp)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("X-Frame-Options", "DENY") // for browsers without frame-ancestors
		h.Set("Referrer-Policy", "no-referrer")
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *headerWriter) Write(b []byte) (int, error) {
	if !w.done {
		w.WriteHeader(http.StatusOK)
	}
	return w.ResponseWriter.Write(b)
}
