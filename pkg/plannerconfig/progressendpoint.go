package plannerconfig

import (
	"math"
	"os"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// ProgressEndpointConfig configures the progress endpoint
// (pkg/progressendpoint, docs/progress-sources.md): an HTTPS listener for
// KEP-2779 progress reports, off by default.
type ProgressEndpointConfig struct {
	// BindAddress of the HTTPS listener; "0" (the default) disables it.
	BindAddress string `json:"bindAddress"`
	// Audience the jobs' projected tokens must carry.
	Audience string `json:"audience"`
	// RateLimit is the per-job token bucket.
	RateLimit RateLimitConfig `json:"rateLimit"`
	// MaxBodyBytes bounds a report's body (the Trainer's limit, 64 KiB).
	MaxBodyBytes int64 `json:"maxBodyBytes"`
	// ServiceName is the Service jobs reach the endpoint through; the
	// managed certificate is for its DNS names in CertNamespace.
	ServiceName string `json:"serviceName"`
	// CertNamespace and CertSecretName: the Secret holding the managed CA
	// and serving certificate; an empty namespace is $POD_NAMESPACE, else
	// progress-planner-system.
	CertNamespace  string `json:"certNamespace"`
	CertSecretName string `json:"certSecretName"`
	// CertDir, when set, holds tls.crt and tls.key provided by the admin
	// (e.g. a mounted cert-manager Secret); the planner then manages no
	// certificate and reloads the files when they change.
	CertDir string `json:"certDir"`
	// PodWebhook points opted-in jobs' pods at the endpoint
	// (pkg/podwebhook); it needs the endpoint on and its managed
	// certificate (no CertDir).
	PodWebhook PodWebhookConfig `json:"podWebhook"`
}

// PodWebhookConfig configures the mutating webhook for pods.
type PodWebhookConfig struct {
	// Port the webhook listens on, on every replica; 0 (the default) turns
	// it off. It is served through the endpoint's Service (ServiceName),
	// so the endpoint's certificate covers it.
	Port int `json:"port"`
	// ServicePort is the Service's port for the endpoint, used in the URL
	// given to pods.
	ServicePort int32 `json:"servicePort"`
	// ConfigurationName is the MutatingWebhookConfiguration whose caBundle
	// the planner keeps set.
	ConfigurationName string `json:"configurationName"`
	// TokenExpirationSeconds of the pods' projected token (600-86400).
	TokenExpirationSeconds int64 `json:"tokenExpirationSeconds"`
}

// Enabled reports whether the webhook serves.
func (w PodWebhookConfig) Enabled() bool { return w.Port != 0 }

// RateLimitConfig is a token bucket: Burst at once, then QPS per second.
type RateLimitConfig struct {
	QPS   float64 `json:"qps"`
	Burst int     `json:"burst"`
}

func defaultProgressEndpoint() ProgressEndpointConfig {
	return ProgressEndpointConfig{
		BindAddress:    "0",
		Audience:       "progress-planner",
		RateLimit:      RateLimitConfig{QPS: 1, Burst: 20},
		MaxBodyBytes:   1 << 16,
		ServiceName:    "progress-planner-progress",
		CertSecretName: "progress-planner-progress-tls",
		PodWebhook: PodWebhookConfig{
			ServicePort: 443, ConfigurationName: "progress-planner-pods", TokenExpirationSeconds: 3600,
		},
	}
}

// Enabled reports whether the endpoint listens.
func (p ProgressEndpointConfig) Enabled() bool { return p.BindAddress != "0" }

// Namespace resolves CertNamespace.
func (p ProgressEndpointConfig) Namespace() string {
	if p.CertNamespace != "" {
		return p.CertNamespace
	}
	if ns := os.Getenv("POD_NAMESPACE"); ns != "" {
		return ns
	}
	return DefaultLeaderElectionNamespace
}

// DNSNames are the Service's names the managed certificate is for.
func (p ProgressEndpointConfig) DNSNames() []string {
	base := p.ServiceName + "." + p.Namespace() + ".svc"
	return []string{base, base + ".cluster.local"}
}

// validate lists the rules the section breaks, each naming its field.
func (p ProgressEndpointConfig) validate() []string {
	var out []string
	add := func(field, msg string) { out = append(out, "progressEndpoint."+field+": "+msg) }
	if err := checkBindAddress(p.BindAddress); err != nil {
		add("bindAddress", err.Error())
	}
	if p.Audience == "" || len(p.Audience) > 253 || strings.TrimSpace(p.Audience) != p.Audience {
		add("audience", "must be 1-253 characters without surrounding spaces")
	}
	if !(p.RateLimit.QPS > 0 && p.RateLimit.QPS <= 1000) || math.IsNaN(p.RateLimit.QPS) {
		add("rateLimit.qps", "must be in (0, 1000]")
	}
	if p.RateLimit.Burst < 1 || p.RateLimit.Burst > 10000 {
		add("rateLimit.burst", "must be in [1, 10000]")
	}
	if p.MaxBodyBytes < 1024 || p.MaxBodyBytes > 1<<20 {
		add("maxBodyBytes", "must be in [1024, 1048576]")
	}
	for _, msg := range validation.IsDNS1035Label(p.ServiceName) {
		add("serviceName", msg)
	}
	if p.CertNamespace != "" {
		for _, msg := range validation.IsDNS1123Label(p.CertNamespace) {
			add("certNamespace", msg)
		}
	}
	for _, msg := range validation.IsDNS1123Subdomain(p.CertSecretName) {
		add("certSecretName", msg)
	}
	out = append(out, p.PodWebhook.validate(p)...)
	return out
}

func (w PodWebhookConfig) validate(p ProgressEndpointConfig) []string {
	var out []string
	add := func(field, msg string) { out = append(out, "progressEndpoint.podWebhook."+field+": "+msg) }
	if w.Port < 0 || w.Port > 65535 {
		add("port", "must be in [0, 65535]")
	}
	if w.Enabled() && !p.Enabled() {
		add("port", "needs the endpoint on (progressEndpoint.bindAddress)")
	}
	if w.Enabled() && p.CertDir != "" {
		add("port", "needs the managed certificate (no progressEndpoint.certDir): the planner injects its CA")
	}
	if w.ServicePort < 1 || w.ServicePort > 65535 {
		add("servicePort", "must be in [1, 65535]")
	}
	for _, msg := range validation.IsDNS1123Subdomain(w.ConfigurationName) {
		add("configurationName", msg)
	}
	if w.TokenExpirationSeconds < 600 || w.TokenExpirationSeconds > 86400 {
		add("tokenExpirationSeconds", "must be in [600, 86400]")
	}
	return out
}
