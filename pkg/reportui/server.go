// Package reportui serves the planner's report as a read-only live page
// (`planner run --ui-addr`): the HTML of pkg/report, rebuilt from the
// controller's cache on an interval, and the same report as JSON. It
// answers GET and HEAD only, writes nothing to the cluster, and shows
// nothing but what `planner report` shows (no Secrets are read).
package reportui

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/progress-planner/planner/pkg/admission"
	"github.com/progress-planner/planner/pkg/clusterview"
	"github.com/progress-planner/planner/pkg/kueueext"
	"github.com/progress-planner/planner/pkg/report"
)

// Options configure the page.
type Options struct {
	// Addr is the listen address; "0" or "" disables the page. Without a
	// host (":8082") it is loopback: the page has no authentication, so
	// serving it beyond this machine takes an explicit host
	// ("0.0.0.0:8082", "[::]:8082" or an interface's address).
	Addr string
	// Refresh is how often the report is rebuilt and the page reloads
	// itself (default 30s).
	Refresh time.Duration
	// GPUResource is the resource counted as GPUs.
	GPUResource corev1.ResourceName
	// Title of the page.
	Title string
	Log   logr.Logger
	// Now is the clock (tests); default time.Now.
	Now func() time.Time
	// Wrap, when set, wraps the page's handler (planner run adds its
	// security headers there).
	Wrap func(http.Handler) http.Handler
	// Admission, when set, estimates when each waiting job is admitted
	// (pkg/admission, its Options.Policy the controller's policy) at every
	// rebuild; nil: no estimates.
	Admission *admission.Settings
	// OnAdmissions, when set, is told after each rebuild's estimates the
	// estimates newly scored against their admission and the calibration
	// in use (planner run publishes them as metrics).
	OnAdmissions func(admission.Scored, admission.Calibration)
	// Latest, when set, gives the controller's latest forecasts (in the
	// planner's process): the estimates take running jobs' ETAs from them
	// instead of refitting (clustersnap.Options.Latest).
	Latest func() map[types.NamespacedName]kueueext.LatestForecast
}

// Server builds and serves the page.
type Server struct {
	opt        Options
	cache, api client.Reader

	mu   sync.RWMutex
	html []byte
	json []byte
	// failed says what the last build failed at, for the error page (the
	// error itself, with internal URLs, goes to the log only).
	failed string
	built  time.Time
	// bound is the listener's address once Start listens (tests use
	// ":0").
	bound chan string
	// estimator estimates the waiting jobs' admissions and keeps their
	// outcomes for the calibration (nil: Options.Admission unset).
	estimator *admission.Estimator
}

// New returns a server reading the namespaced kinds from cache (the
// controller's) and ClusterQueues from api.
func New(cache, api client.Reader, opt Options) *Server {
	if opt.Refresh <= 0 {
		opt.Refresh = 30 * time.Second
	}
	if opt.Now == nil {
		opt.Now = time.Now
	}
	if opt.Title == "" {
		opt.Title = "Progress Planner: live report"
	}
	s := &Server{opt: opt, cache: cache, api: api, bound: make(chan string, 1)}
	if opt.Admission != nil {
		s.estimator = &admission.Estimator{Settings: *opt.Admission}
	}
	return s
}

// Rebuild reads the cluster and renders the page once.
func (s *Server) Rebuild(ctx context.Context) error {
	snap, err := clusterview.ReadWith(ctx, s.cache, s.api, "")
	if err != nil {
		s.setFailed("reading the cluster failed")
		return err
	}
	in, notes := snap.ReportInput(clusterview.Options{GPUResource: s.opt.GPUResource, Now: s.opt.Now()})
	in.Title = s.opt.Title
	in.Source = "planner run (read-only)"
	in.RefreshSeconds = max(int(s.opt.Refresh.Seconds()), 1)
	r := report.Build(in)
	if s.estimator != nil {
		r.SetAdmissions(s.admissions(snap))
	}
	var h, j bytes.Buffer
	if err := r.Write(&h, "html"); err != nil {
		s.setFailed("rendering the report failed")
		return err
	}
	if err := r.Write(&j, "json"); err != nil {
		s.setFailed("rendering the report failed")
		return err
	}
	for _, n := range append(snap.Missing, notes...) {
		s.opt.Log.V(1).Info("report page", "note", n)
	}
	s.mu.Lock()
	s.html, s.json, s.failed, s.built = h.Bytes(), j.Bytes(), "", s.opt.Now()
	s.mu.Unlock()
	return nil
}

// admissions estimates the waiting jobs' admissions, the ranges
// calibrated on how this server's earlier estimates turned out.
func (s *Server) admissions(snap *clusterview.Snapshot) map[string]*report.AdmissionEstimate {
	e, err := s.estimator.Estimate(snap, admission.PlannerOptions(s.opt.GPUResource, s.opt.Now(), s.opt.Latest))
	if err != nil {
		// The page still shows everything else.
		s.opt.Log.Error(err, "admission estimates")
		return nil
	}
	if s.opt.OnAdmissions != nil {
		s.opt.OnAdmissions(e.Scored, e.Calibration)
	}
	return e.Estimates
}

func (s *Server) setFailed(what string) {
	s.mu.Lock()
	s.failed = what
	s.mu.Unlock()
}

// ServeHTTP serves "/" (HTML) and "/report.json"; anything but GET and
// HEAD is refused with 405.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "read-only: GET and HEAD only", http.StatusMethodNotAllowed)
		return
	}
	s.mu.RLock()
	html, js, failed := s.html, s.json, s.failed
	s.mu.RUnlock()
	var body []byte
	ctype := ""
	switch r.URL.Path {
	case "/", "/index.html":
		body, ctype = html, "text/html; charset=utf-8"
	case "/report.json":
		body, ctype = js, "application/json"
	default:
		http.NotFound(w, r)
		return
	}
	if body == nil {
		msg := "the report is not built yet"
		if failed != "" {
			msg += ": " + failed + " (the planner's log has the details)"
		}
		w.Header().Set("Retry-After", "5")
		http.Error(w, msg, http.StatusServiceUnavailable)
		return
	}
	h := w.Header()
	h.Set("Content-Type", ctype)
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	// The page is self-contained: inline styles and SVG, no scripts.
	h.Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; img-src data:")
	_, _ = w.Write(body)
}

// NeedLeaderElection: every replica serves the page (it only reads).
func (s *Server) NeedLeaderElection() bool { return false }

// Addr returns the address the server listens on once it does.
func (s *Server) Addr(ctx context.Context) (string, error) {
	select {
	case a := <-s.bound:
		s.bound <- a
		return a, nil
	case <-ctx.Done():
		return "", ctx.Err()
	}
}

// Start listens on Options.Addr, rebuilds the report every Refresh and
// serves it until ctx ends (a controller-runtime Runnable).
func (s *Server) Start(ctx context.Context) error {
	addr, err := ListenAddr(s.opt.Addr)
	if err != nil {
		return fmt.Errorf("report page: %w", err)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("report page: listen %s: %w", addr, err)
	}
	s.bound <- ln.Addr().String()
	var h http.Handler = s
	if s.opt.Wrap != nil {
		h = s.opt.Wrap(s)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, WriteTimeout: 30 * time.Second}
	go func() {
		t := time.NewTicker(s.opt.Refresh)
		defer t.Stop()
		for {
			if err := s.Rebuild(ctx); err != nil && ctx.Err() == nil {
				s.opt.Log.Error(err, "report page: rebuild failed; serving the previous page")
			}
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	s.opt.Log.Info("serving the read-only report page", "addr", ln.Addr().String(), "refresh", s.opt.Refresh,
		"loopbackOnly", isLoopback(ln.Addr()))
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("report page: %w", err)
	}
	return nil
}

// ListenAddr is the address the page listens on for addr: loopback
// (127.0.0.1) when addr names no host.
func ListenAddr(addr string) (string, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", fmt.Errorf("address %q: want [HOST]:PORT: %w", addr, err)
	}
	if host == "" {
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, port), nil
}

func isLoopback(a net.Addr) bool {
	ta, ok := a.(*net.TCPAddr)
	return ok && ta.IP.IsLoopback()
}
