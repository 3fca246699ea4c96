package plannerconfig

import (
	"strings"
	"testing"
)

func TestPodWebhookConfig(t *testing.T) {
	c, err := ParseConfig([]byte(`apiVersion: planner.progress.io/v1alpha1
kind: PlannerConfiguration
progressEndpoint:
  bindAddress: ":9443"
  podWebhook: {port: 9444, tokenExpirationSeconds: 7200}
`))
	if err != nil {
		t.Fatal(err)
	}
	if w := c.ProgressEndpoint.PodWebhook; !w.Enabled() || w.TokenExpirationSeconds != 7200 || w.ServicePort != 443 || w.ConfigurationName != "progress-planner-pods" {
		t.Fatalf("parsed %+v", w)
	}
	for _, tc := range []struct{ yaml, field string }{
		{"podWebhook: {port: 9444}", "podWebhook.port"}, // endpoint off
		{"bindAddress: \":9443\"\n  certDir: /tls\n  podWebhook: {port: 9444}", "podWebhook.port"},
		{"bindAddress: \":9443\"\n  podWebhook: {port: 70000}", "podWebhook.port"},
		{"podWebhook: {tokenExpirationSeconds: 60}", "podWebhook.tokenExpirationSeconds"},
		{"podWebhook: {servicePort: 0}", "podWebhook.servicePort"},
		{"podWebhook: {configurationName: Bad_Name}", "podWebhook.configurationName"},
	} {
		_, err := ParseConfig([]byte("apiVersion: planner.progress.io/v1alpha1\nkind: PlannerConfiguration\nprogressEndpoint:\n  " + tc.yaml + "\n"))
		if err == nil || !strings.Contains(err.Error(), "progressEndpoint."+tc.field) {
			t.Errorf("%q: error %v, want one naming %s", tc.yaml, err, tc.field)
		}
	}
}
