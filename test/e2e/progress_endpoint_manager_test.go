//go:build e2e

package e2e

import (
	"context"
	"crypto/tls"
	"net/http"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/progress-planner/planner/pkg/kueueext"
	"github.com/progress-planner/planner/pkg/plannerconfig"
	"github.com/progress-planner/planner/pkg/progressendpoint"
	"github.com/progress-planner/planner/test/framework"
)

// TestProgressEndpointInManager runs the endpoint as `planner run` wires
// it (kueueext.NewManager, progressendpoint.Setup from the config): the
// certificate Secret is created by the manager's runnable, the server
// serves it, reports are authorised through the manager's API reader and
// refusals recorded with its event recorder.
func TestProgressEndpointInManager(t *testing.T) {
	w := newEndpointWorld(t)
	ctx, cancel := context.WithCancel(t.Context())
	cfg := plannerconfig.DefaultConfig()
	cfg.LeaderElection.Enabled = false
	cfg.Metrics.BindAddress, cfg.Health.BindAddress = "0", "0"
	cfg.ProgressEndpoint.BindAddress = freeLoopbackAddr(t)
	cfg.ProgressEndpoint.CertNamespace = "planner-system"
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	mgr, err := kueueext.NewManager(w.env.Config, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := progressendpoint.Setup(mgr, cfg.ProgressEndpoint, w.sink); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("manager: %v", err)
		}
	})

	var secret corev1.Secret
	key := client.ObjectKey{Namespace: "planner-system", Name: cfg.ProgressEndpoint.CertSecretName}
	if _, err := framework.Poll(ctx, 30*time.Second, func(ctx context.Context) (bool, error) {
		return w.env.Client.Get(ctx, key, &secret) == nil, nil
	}); err != nil {
		t.Fatalf("no certificate Secret %s: %v", key, err)
	}
	w.url = "https://" + cfg.ProgressEndpoint.BindAddress
	w.client = &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{
		RootCAs: poolOf(t, secret.Data[progressendpoint.KeyCACert]), ServerName: cfg.ProgressEndpoint.DNSNames()[0],
	}}}
	t.Cleanup(w.client.CloseIdleConnections)
	tokX := w.token(t, "x", cfg.ProgressEndpoint.Audience)
	// The server may still be loading the certificate it just wrote.
	if _, err := framework.Poll(ctx, 30*time.Second, func(context.Context) (bool, error) {
		conn, err := tls.Dial("tcp", cfg.ProgressEndpoint.BindAddress, w.client.Transport.(*http.Transport).TLSClientConfig)
		if err != nil {
			return false, nil
		}
		return true, conn.Close()
	}); err != nil {
		t.Fatalf("endpoint not serving its certificate: %v", err)
	}
	if code, st, _ := w.post(t, "x", tokX, e2eReport); code != http.StatusOK || w.sink.reports("x") != 1 {
		t.Fatalf("report for x: %d %q, sink %d", code, st.Message, w.sink.reports("x"))
	}
	if code, st, _ := w.post(t, "y", tokX, e2eReport); code != http.StatusForbidden {
		t.Fatalf("x's pod for y: %d %q, want 403", code, st.Message)
	}
	if _, err := framework.Poll(ctx, 20*time.Second, func(ctx context.Context) (bool, error) {
		var evs eventsv1.EventList
		if err := w.env.Client.List(ctx, &evs, client.InNamespace(w.ns)); err != nil {
			return false, err
		}
		for _, e := range evs.Items {
			if e.Regarding.Name == "y" && e.Reason == "ProgressReportForbidden" && e.ReportingController == progressendpoint.EventSource {
				return true, nil
			}
		}
		return false, nil
	}); err != nil {
		t.Fatalf("no ProgressReportForbidden Event on y from the manager's recorder: %v", err)
	}
}
