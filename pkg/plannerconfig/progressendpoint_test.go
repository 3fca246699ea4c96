package plannerconfig

import (
	"strings"
	"testing"
)

func TestProgressEndpointDefaultsOff(t *testing.T) {
	c, err := ParseConfig([]byte("apiVersion: planner.progress.io/v1alpha1\nkind: PlannerConfiguration\n"))
	if err != nil {
		t.Fatal(err)
	}
	if c.ProgressEndpoint != DefaultConfig().ProgressEndpoint || c.ProgressEndpoint.Enabled() {
		t.Fatalf("progressEndpoint defaults %+v", c.ProgressEndpoint)
	}
}

func TestProgressEndpointParsed(t *testing.T) {
	c, err := ParseConfig([]byte(`apiVersion: planner.progress.io/v1alpha1
kind: PlannerConfiguration
progressEndpoint:
  bindAddress: ":9443"
  audience: planner-prod
  rateLimit: {qps: 0.2, burst: 5}
  certNamespace: tenants-system
`))
	if err != nil {
		t.Fatal(err)
	}
	p := c.ProgressEndpoint
	if !p.Enabled() || p.Audience != "planner-prod" || p.RateLimit.QPS != 0.2 || p.RateLimit.Burst != 5 || p.MaxBodyBytes != 1<<16 {
		t.Fatalf("parsed %+v", p)
	}
	if got := p.DNSNames(); got[0] != "progress-planner-progress.tenants-system.svc" {
		t.Fatalf("DNS names %v", got)
	}
}

func TestProgressEndpointErrors(t *testing.T) {
	for _, tc := range []struct{ yaml, field string }{
		{"bindAddress: nowhere", "progressEndpoint.bindAddress"},
		{"audience: ''", "progressEndpoint.audience"},
		{"rateLimit: {qps: 0}", "progressEndpoint.rateLimit.qps"},
		{"rateLimit: {burst: 0}", "progressEndpoint.rateLimit.burst"},
		{"maxBodyBytes: 10", "progressEndpoint.maxBodyBytes"},
		{"serviceName: Not_A_Name", "progressEndpoint.serviceName"},
		{"certSecretName: ''", "progressEndpoint.certSecretName"},
		{"certNamespace: A", "progressEndpoint.certNamespace"},
		{"audiense: x", "audiense"},
	} {
		_, err := ParseConfig([]byte("apiVersion: planner.progress.io/v1alpha1\nkind: PlannerConfiguration\nprogressEndpoint: {" +
			strings.TrimSpace(tc.yaml) + "}\n"))
		if err == nil || !strings.Contains(err.Error(), tc.field) {
			t.Errorf("%s: error %v, want one naming %s", tc.yaml, err, tc.field)
		}
	}
}
