package podwebhook

import (
	"crypto/tls"
	"fmt"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/progress-planner/planner/pkg/plannerconfig"
	"github.com/progress-planner/planner/pkg/progressendpoint"
)

// Setup adds the webhook to mgr when cfg.PodWebhook is on: its HTTPS
// server (every replica) with the endpoint's managed certificate, and the
// CAInjector (leader only).
func Setup(mgr manager.Manager, cfg plannerconfig.ProgressEndpointConfig) error {
	if !cfg.Enabled() || !cfg.PodWebhook.Enabled() {
		return nil
	}
	log := mgr.GetLogger().WithName("pod-webhook")
	// Uncached, as the endpoint's: a Secret and a namespace per admitted
	// pod do not justify cluster-wide informers.
	direct, err := client.New(mgr.GetConfig(), client.Options{Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper()})
	if err != nil {
		return fmt.Errorf("pod webhook client: %w", err)
	}
	// The endpoint's certificate, loaded from its Secret with the same
	// options, so the two loaders agree; the webhook is reached through
	// the endpoint's Service, whose names the certificate carries.
	certs, err := progressendpoint.NewCertManager(direct, progressendpoint.CertOptions{
		Namespace: cfg.Namespace(), SecretName: cfg.CertSecretName, DNSNames: cfg.DNSNames(), Log: log,
	})
	if err != nil {
		return fmt.Errorf("pod webhook certificate: %w", err)
	}
	srv := NewServer("", cfg.PodWebhook.Port, certs.GetCertificate, &Handler{
		Reader: direct, Decoder: admission.NewDecoder(mgr.GetScheme()), Options: OptionsFor(cfg), CA: certs.CABundle, Log: log,
	})
	inj := &CAInjector{Client: direct, CA: certs.CABundle, WebhookConfiguration: cfg.PodWebhook.ConfigurationName, Log: log}
	for _, r := range []manager.Runnable{certs, srv, inj} {
		if err := mgr.Add(r); err != nil {
			return fmt.Errorf("add pod webhook %T: %w", r, err)
		}
	}
	return nil
}

// OptionsFor derives the pods' settings from the endpoint's config.
func OptionsFor(cfg plannerconfig.ProgressEndpointConfig) Options {
	return Options{
		BaseURL:                fmt.Sprintf("https://%s:%d", cfg.DNSNames()[0], cfg.PodWebhook.ServicePort),
		Audience:               cfg.Audience,
		TokenExpirationSeconds: cfg.PodWebhook.TokenExpirationSeconds,
	}
}

// NewServer is controller-runtime's webhook server on host:port serving h
// at Path, with the certificate getCert returns (rotated without restart).
func NewServer(host string, port int, getCert func(*tls.ClientHelloInfo) (*tls.Certificate, error), h *Handler) webhook.Server {
	srv := webhook.NewServer(webhook.Options{
		Host: host, Port: port,
		TLSOpts: []func(*tls.Config){func(c *tls.Config) { c.GetCertificate = getCert }},
	})
	srv.Register(Path, &webhook.Admission{Handler: h})
	return srv
}
