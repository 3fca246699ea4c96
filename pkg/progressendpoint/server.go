package progressendpoint

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
)

// Server timeouts, as the Trainer's status server's: a report is a small
// POST, and slow clients must not hold connections.
const (
	readTimeout     = 10 * time.Second
	writeTimeout    = 10 * time.Second
	idleTimeout     = 120 * time.Second
	shutdownTimeout = 5 * time.Second
)

// CertSource gives the serving certificate for each TLS handshake, so a
// renewed certificate is served without a restart.
type CertSource interface {
	GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error)
}

// Server serves a Handler over HTTPS; it is a manager.Runnable that runs
// on every replica (reports must not wait for a leader).
type Server struct {
	Addr    string
	Handler http.Handler
	Certs   CertSource
	Log     logr.Logger

	mu       sync.Mutex
	listener net.Listener
	ready    chan struct{}
}

// NeedLeaderElection: every replica serves reports.
func (s *Server) NeedLeaderElection() bool { return false }

// Start listens and serves until ctx ends.
func (s *Server) Start(ctx context.Context) error {
	ln, err := net.Listen("tcp", s.Addr)
	if err != nil {
		return fmt.Errorf("progress endpoint: listen on %s: %w", s.Addr, err)
	}
	s.mu.Lock()
	s.listener = ln
	if s.ready != nil {
		close(s.ready)
	}
	s.mu.Unlock()
	srv := &http.Server{
		Handler:      s.Handler,
		TLSConfig:    &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: s.Certs.GetCertificate},
		ErrorLog:     slog.NewLogLogger(logr.ToSlogHandler(s.Log), slog.LevelInfo),
		ReadTimeout:  readTimeout,
		WriteTimeout: writeTimeout,
		IdleTimeout:  idleTimeout,
	}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
		defer cancel()
		if err := srv.Shutdown(sctx); err != nil {
			s.Log.Error(err, "progress endpoint shutdown")
		}
	}()
	s.Log.Info("progress endpoint serving", "address", ln.Addr().String())
	if err := srv.ServeTLS(ln, "", ""); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("progress endpoint: %w", err)
	}
	return nil
}

// ListenAddr waits until Start listens and returns the bound address
// (tests bind to port 0).
func (s *Server) ListenAddr(ctx context.Context) (string, error) {
	s.mu.Lock()
	if s.listener != nil {
		s.mu.Unlock()
		return s.listener.Addr().String(), nil
	}
	if s.ready == nil {
		s.ready = make(chan struct{})
	}
	ready := s.ready
	s.mu.Unlock()
	select {
	case <-ready:
		return s.listener.Addr().String(), nil
	case <-ctx.Done():
		return "", ctx.Err()
	}
}

// FileCerts serves tls.crt and tls.key from a directory (a mounted
// cert-manager Secret), reloading them when they change: the kubelet
// updates the mounted files when cert-manager renews the Secret.
type FileCerts struct {
	Dir           string
	CheckInterval time.Duration
	Log           logr.Logger

	cur     atomic.Pointer[tls.Certificate]
	modTime time.Time
}

// Load reads the pair now.
func (f *FileCerts) Load() error {
	crt, key := filepath.Join(f.Dir, keyCert), filepath.Join(f.Dir, keyKey)
	st, err := os.Stat(crt)
	if err != nil {
		return fmt.Errorf("progress endpoint certificate: %w", err)
	}
	if st.ModTime().Equal(f.modTime) && f.cur.Load() != nil {
		return nil
	}
	c, err := tls.LoadX509KeyPair(crt, key)
	if err != nil {
		return fmt.Errorf("progress endpoint certificate in %s: %w", f.Dir, err)
	}
	f.cur.Store(&c)
	f.modTime = st.ModTime()
	return nil
}

// GetCertificate is tls.Config.GetCertificate.
func (f *FileCerts) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	if c := f.cur.Load(); c != nil {
		return c, nil
	}
	return nil, errors.New("progress endpoint certificate not loaded")
}

// NeedLeaderElection: every replica serves.
func (f *FileCerts) NeedLeaderElection() bool { return false }

// Start reloads the files every CheckInterval (default 1 minute).
func (f *FileCerts) Start(ctx context.Context) error {
	iv := f.CheckInterval
	if iv <= 0 {
		iv = time.Minute
	}
	t := time.NewTicker(iv)
	defer t.Stop()
	for {
		if err := f.Load(); err != nil {
			f.Log.Error(err, "progress endpoint certificate reload")
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}
