package progressendpoint

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/progress-planner/planner/pkg/kueueext"
)

type testClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *testClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *testClock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

var testDNS = []string{"planner-progress.planner-system.svc", "planner-progress.planner-system.svc.cluster.local"}

func newCertManager(t *testing.T, c client.Client, clk *testClock, dns []string) *CertManager {
	t.Helper()
	m, err := NewCertManager(c, CertOptions{Namespace: "planner-system", SecretName: "planner-progress-tls", DNSNames: dns,
		CAValidity: 1000 * time.Hour, CertValidity: 100 * time.Hour, RenewBefore: 10 * time.Hour, Now: clk.Now, Log: testr.New(t)})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// served returns the leaf the manager serves, after checking it verifies
// against its CA bundle for the Service name at the clock's time.
func served(t *testing.T, m *CertManager, at time.Time) *x509.Certificate {
	t.Helper()
	c, err := m.GetCertificate(&tls.ClientHelloInfo{})
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(c.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(m.CABundle()) {
		t.Fatal("CA bundle is not PEM")
	}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool, DNSName: testDNS[0], CurrentTime: at}); err != nil {
		t.Fatalf("served certificate does not verify against the bundle: %v", err)
	}
	return leaf
}

func TestCertCreatedKeptAndRotated(t *testing.T) {
	ctx := context.Background()
	c := fake.NewClientBuilder().WithScheme(kueueext.NewScheme()).Build()
	clk := &testClock{now: time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)}
	m := newCertManager(t, c, clk, testDNS)
	if _, err := m.GetCertificate(nil); err == nil {
		t.Fatal("a certificate before the first Ensure")
	}
	if err := m.Ensure(ctx); err != nil {
		t.Fatal(err)
	}
	first := served(t, m, clk.Now())
	ca := bytes.Clone(m.CABundle())
	var s corev1.Secret
	if err := c.Get(ctx, client.ObjectKey{Namespace: "planner-system", Name: "planner-progress-tls"}, &s); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(s.Data[KeyCACert], ca) || s.Type != corev1.SecretTypeTLS {
		t.Fatal("the Secret does not hold the served CA")
	}

	// Far from expiry: nothing changes; a second replica loads the same.
	clk.add(50 * time.Hour)
	other := newCertManager(t, c, clk, testDNS)
	for _, mm := range []*CertManager{m, other} {
		if err := mm.Ensure(ctx); err != nil {
			t.Fatal(err)
		}
		if got := served(t, mm, clk.Now()); got.SerialNumber.Cmp(first.SerialNumber) != 0 {
			t.Fatal("certificate replaced long before expiry")
		}
	}

	// Within RenewBefore of expiry: a new certificate, the same CA.
	clk.add(45 * time.Hour)
	if err := m.Ensure(ctx); err != nil {
		t.Fatal(err)
	}
	second := served(t, m, clk.Now())
	if second.SerialNumber.Cmp(first.SerialNumber) == 0 || !second.NotAfter.After(first.NotAfter) {
		t.Fatal("certificate near expiry was not renewed")
	}
	if !bytes.Equal(m.CABundle(), ca) {
		t.Fatal("the CA changed with the serving certificate")
	}
	// The other replica picks the renewal up from the Secret.
	if err := other.Ensure(ctx); err != nil {
		t.Fatal(err)
	}
	if got := served(t, other, clk.Now()); got.SerialNumber.Cmp(second.SerialNumber) != 0 {
		t.Fatal("second replica serves another certificate")
	}
}

func TestCARenewedBeforeItCouldOutliveNoCert(t *testing.T) {
	ctx := context.Background()
	c := fake.NewClientBuilder().WithScheme(kueueext.NewScheme()).Build()
	clk := &testClock{now: time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)}
	m := newCertManager(t, c, clk, testDNS)
	if err := m.Ensure(ctx); err != nil {
		t.Fatal(err)
	}
	ca := bytes.Clone(m.CABundle())
	// 1000h CA: once less than CertValidity+RenewBefore (110h) is left.
	clk.add(895 * time.Hour)
	if err := m.Ensure(ctx); err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(m.CABundle(), ca) {
		t.Fatal("CA near expiry was kept")
	}
	served(t, m, clk.Now())
}

func TestCertFollowsDNSNames(t *testing.T) {
	ctx := context.Background()
	c := fake.NewClientBuilder().WithScheme(kueueext.NewScheme()).Build()
	clk := &testClock{now: time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)}
	if err := newCertManager(t, c, clk, testDNS[:1]).Ensure(ctx); err != nil {
		t.Fatal(err)
	}
	m := newCertManager(t, c, clk, testDNS)
	if err := m.Ensure(ctx); err != nil {
		t.Fatal(err)
	}
	if got := served(t, m, clk.Now()); len(got.DNSNames) != 2 {
		t.Fatalf("DNS names %v, want %v", got.DNSNames, testDNS)
	}
}

// The server serves over TLS with the managed certificate, and a renewed
// certificate is served to the next connection without a restart.
func TestServerHotReloadsCertificate(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c := fake.NewClientBuilder().WithScheme(kueueext.NewScheme()).Build()
	// Issued 95 h ago (100 h validity, renewed 10 h before expiry): valid
	// now, and due for renewal at the real time the client checks with.
	clk := &testClock{now: time.Now().Add(-95 * time.Hour)}
	m := newCertManager(t, c, clk, testDNS)
	if err := m.Ensure(ctx); err != nil {
		t.Fatal(err)
	}
	f := newFixture(t, RateLimit{})
	srv := &Server{Addr: "127.0.0.1:0", Handler: f.h, Certs: m, Log: testr.New(t)}
	done := make(chan error, 1)
	go func() { done <- srv.Start(ctx) }()
	addr, err := srv.ListenAddr(ctx)
	if err != nil {
		t.Fatal(err)
	}
	get := func() *x509.Certificate {
		pool := x509.NewCertPool()
		pool.AppendCertsFromPEM(m.CABundle())
		cl := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, ServerName: testDNS[0]}}}
		defer cl.CloseIdleConnections()
		resp, err := cl.Post("https://"+addr+jobPath(t, "batch", "x"), "application/json", strings.NewReader(goodBody))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("no token over TLS: code %d, want 401", resp.StatusCode)
		}
		return resp.TLS.PeerCertificates[0]
	}
	first := get()
	clk.add(95 * time.Hour)
	if err := m.Ensure(ctx); err != nil {
		t.Fatal(err)
	}
	if second := get(); second.SerialNumber.Cmp(first.SerialNumber) == 0 {
		t.Fatal("the renewed certificate is not served")
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func TestFileCertsReload(t *testing.T) {
	dir := t.TempDir()
	write := func(serialHint time.Time) {
		ca, caKey, err := newCA(serialHint, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		caCert, caSigner, err := parsePair(ca, caKey)
		if err != nil {
			t.Fatal(err)
		}
		crt, key, err := newServing(serialHint, time.Hour, testDNS, caCert, caSigner)
		if err != nil {
			t.Fatal(err)
		}
		for name, b := range map[string][]byte{keyCert: crt, keyKey: key} {
			if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
				t.Fatal(err)
			}
		}
		mt := serialHint
		for _, name := range []string{keyCert, keyKey} {
			if err := os.Chtimes(filepath.Join(dir, name), mt, mt); err != nil {
				t.Fatal(err)
			}
		}
	}
	t0 := time.Now().Add(-time.Minute).Truncate(time.Second)
	write(t0)
	fc := &FileCerts{Dir: dir}
	if err := fc.Load(); err != nil {
		t.Fatal(err)
	}
	a, _ := fc.GetCertificate(nil)
	write(t0.Add(time.Second))
	if err := fc.Load(); err != nil {
		t.Fatal(err)
	}
	b, _ := fc.GetCertificate(nil)
	if bytes.Equal(a.Certificate[0], b.Certificate[0]) {
		t.Fatal("a changed certificate file was not reloaded")
	}
	if err := (&FileCerts{Dir: t.TempDir()}).Load(); err == nil {
		t.Fatal("an empty directory loaded")
	}
}
