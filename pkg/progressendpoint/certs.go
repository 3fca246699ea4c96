package progressendpoint

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"slices"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Keys of the certificate Secret. ca.crt is the bundle pods mount (the
// Trainer's ConfigMap copies the same key); tls.crt/tls.key follow
// kubernetes.io/tls so cert-manager's Secrets have the same shape.
const (
	KeyCACert = "ca.crt"
	keyCAKey  = "ca.key"
	keyCert   = corev1.TLSCertKey
	keyKey    = corev1.TLSPrivateKeyKey
)

// CertOptions configure the managed certificate.
type CertOptions struct {
	Namespace, SecretName string
	// DNSNames of the Service pods reach the endpoint through
	// (<service>.<namespace>.svc and its longer forms).
	DNSNames []string
	// CAValidity and CertValidity: lifetimes of the CA and of the serving
	// certificate (defaults 10 years and 1 year, as Kueue's cert-controller).
	CAValidity, CertValidity time.Duration
	// RenewBefore: a certificate is replaced once it has less than this
	// left (default 90 days; for the CA, the CA is replaced, with a new
	// serving certificate, once less than CertValidity+RenewBefore is
	// left, so that no serving certificate outlives its CA).
	RenewBefore time.Duration
	// CheckInterval: how often the Secret is checked (default 1 hour).
	CheckInterval time.Duration
	Now           func() time.Time
	Log           logr.Logger
}

func (o *CertOptions) defaults() {
	if o.CAValidity <= 0 {
		o.CAValidity = 10 * 365 * 24 * time.Hour
	}
	if o.CertValidity <= 0 {
		o.CertValidity = 365 * 24 * time.Hour
	}
	if o.RenewBefore <= 0 {
		o.RenewBefore = 90 * 24 * time.Hour
	}
	if o.CheckInterval <= 0 {
		o.CheckInterval = time.Hour
	}
	if o.Now == nil {
		o.Now = time.Now
	}
}

// CertManager keeps a self-signed CA and a serving certificate signed by
// it in a Secret, renews them before they expire, and serves the current
// one through GetCertificate (no restart on rotation). The CA is kept
// across serving-certificate renewals, so the bundle pods already mounted
// stays valid.
type CertManager struct {
	c    client.Client
	opts CertOptions
	cur  atomic.Pointer[tls.Certificate]
	ca   atomic.Pointer[[]byte]
}

// NewCertManager returns a manager for the Secret opts names.
func NewCertManager(c client.Client, opts CertOptions) (*CertManager, error) {
	if opts.Namespace == "" || opts.SecretName == "" || len(opts.DNSNames) == 0 {
		return nil, errors.New("certificate: namespace, secret name and DNS names are required")
	}
	opts.defaults()
	return &CertManager{c: c, opts: opts}, nil
}

// GetCertificate is tls.Config.GetCertificate.
func (m *CertManager) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	if c := m.cur.Load(); c != nil {
		return c, nil
	}
	return nil, errors.New("progress endpoint certificate not loaded yet")
}

// CABundle is the PEM CA certificate pods verify the endpoint with.
func (m *CertManager) CABundle() []byte {
	if b := m.ca.Load(); b != nil {
		return *b
	}
	return nil
}

// Start checks the Secret now and every CheckInterval until ctx ends
// (manager.Runnable, on every replica: each serves the endpoint).
func (m *CertManager) Start(ctx context.Context) error {
	t := time.NewTicker(m.opts.CheckInterval)
	defer t.Stop()
	for {
		if err := m.Ensure(ctx); err != nil {
			m.opts.Log.Error(err, "progress endpoint certificate check")
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// NeedLeaderElection: every replica serves, so every replica loads.
func (m *CertManager) NeedLeaderElection() bool { return false }

// Ensure creates or renews what is due in the Secret, then loads it.
// Replicas race through optimistic concurrency: the loser of an update
// conflict loads the winner's certificate at the next check.
func (m *CertManager) Ensure(ctx context.Context) error {
	var s corev1.Secret
	key := client.ObjectKey{Namespace: m.opts.Namespace, Name: m.opts.SecretName}
	err := m.c.Get(ctx, key, &s)
	create := apierrors.IsNotFound(err)
	if err != nil && !create {
		return fmt.Errorf("get secret %s: %w", key, err)
	}
	if create {
		s = corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}, Type: corev1.SecretTypeTLS}
	}
	changed, err := m.renew(&s)
	if err != nil {
		return err
	}
	switch {
	case create:
		err = m.c.Create(ctx, &s)
	case changed:
		err = m.c.Update(ctx, &s)
	}
	if apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err) {
		// Another replica renewed first; use its certificate.
		if err = m.c.Get(ctx, key, &s); err != nil {
			return fmt.Errorf("get secret %s: %w", key, err)
		}
	} else if err != nil {
		return fmt.Errorf("write secret %s: %w", key, err)
	}
	if changed {
		m.opts.Log.Info("progress endpoint certificate renewed", "secret", key.String())
	}
	return m.load(s.Data)
}

// renew puts a valid CA and serving certificate into s.Data, replacing
// what is missing, unreadable, about to expire or for other DNS names.
func (m *CertManager) renew(s *corev1.Secret) (bool, error) {
	now := m.opts.Now()
	if s.Data == nil {
		s.Data = map[string][]byte{}
	}
	ca, caKey, err := parsePair(s.Data[KeyCACert], s.Data[keyCAKey])
	changed := false
	if err != nil || !ca.IsCA || now.Add(m.opts.CertValidity+m.opts.RenewBefore).After(ca.NotAfter) {
		certPEM, keyPEM, err := newCA(now, m.opts.CAValidity)
		if err != nil {
			return false, err
		}
		s.Data[KeyCACert], s.Data[keyCAKey] = certPEM, keyPEM
		if ca, caKey, err = parsePair(certPEM, keyPEM); err != nil {
			return false, err
		}
		changed = true
		delete(s.Data, keyCert)
	}
	leaf, _, err := parsePair(s.Data[keyCert], s.Data[keyKey])
	if err != nil || leaf.CheckSignatureFrom(ca) != nil || now.Add(m.opts.RenewBefore).After(leaf.NotAfter) ||
		!slices.Equal(leaf.DNSNames, m.opts.DNSNames) {
		certPEM, keyPEM, err := newServing(now, m.opts.CertValidity, m.opts.DNSNames, ca, caKey)
		if err != nil {
			return false, err
		}
		s.Data[keyCert], s.Data[keyKey] = certPEM, keyPEM
		changed = true
	}
	return changed, nil
}

func (m *CertManager) load(d map[string][]byte) error {
	c, err := tls.X509KeyPair(d[keyCert], d[keyKey])
	if err != nil {
		return fmt.Errorf("load serving certificate: %w", err)
	}
	ca := slices.Clone(d[KeyCACert])
	m.cur.Store(&c)
	m.ca.Store(&ca)
	return nil
}

// parsePair parses a PEM certificate and its PEM private key.
func parsePair(certPEM, keyPEM []byte) (*x509.Certificate, crypto.Signer, error) {
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, nil, fmt.Errorf("parse key pair: %w", err)
	}
	cert, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		return nil, nil, fmt.Errorf("parse certificate: %w", err)
	}
	signer, ok := pair.PrivateKey.(crypto.Signer)
	if !ok {
		return nil, nil, errors.New("private key cannot sign")
	}
	return cert, signer, nil
}

func newCA(now time.Time, validity time.Duration) (certPEM, keyPEM []byte, err error) {
	tmpl := &x509.Certificate{
		Subject:               pkix.Name{CommonName: "progress-planner-endpoint-ca"},
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
	}
	return issue(tmpl, now, validity, nil, nil)
}

func newServing(now time.Time, validity time.Duration, dnsNames []string, ca *x509.Certificate, caKey crypto.Signer) (certPEM, keyPEM []byte, err error) {
	tmpl := &x509.Certificate{
		Subject:     pkix.Name{CommonName: dnsNames[0]},
		DNSNames:    slices.Clone(dnsNames),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	return issue(tmpl, now, validity, ca, caKey)
}

// issue signs tmpl with a new P-256 key, by parent (self-signed when nil).
// NotBefore is a little in the past to tolerate clock skew.
func issue(tmpl *x509.Certificate, now time.Time, validity time.Duration, parent *x509.Certificate, parentKey crypto.Signer) ([]byte, []byte, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("generate key: %w", err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, nil, fmt.Errorf("serial number: %w", err)
	}
	tmpl.SerialNumber = serial
	tmpl.NotBefore = now.Add(-5 * time.Minute)
	tmpl.NotAfter = now.Add(validity)
	if parent == nil {
		parent, parentKey = tmpl, key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, key.Public(), parentKey)
	if err != nil {
		return nil, nil, fmt.Errorf("create certificate %q: %w", tmpl.Subject.CommonName, err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, nil, fmt.Errorf("marshal key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), nil
}
