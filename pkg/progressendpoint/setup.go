package progressendpoint

import (
	"fmt"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/progress-planner/planner/pkg/plannerconfig"
)

// EventSource names the Events the endpoint records.
const EventSource = "progress-planner-endpoint"

// Setup adds the endpoint to mgr: the certificate (managed in a Secret, or
// cfg.CertDir's files) and the HTTPS server, both on every replica. sink
// receives accepted reports; `planner run` passes ToSource of the report
// source its controllers read.
func Setup(mgr manager.Manager, cfg plannerconfig.ProgressEndpointConfig, sink Sink) error {
	if !cfg.Enabled() {
		return nil
	}
	RegisterMetrics()
	log := mgr.GetLogger().WithName("progress-endpoint")
	// An uncached client: the manager's would start a cluster-wide Secret
	// informer for one Secret (and need list/watch on every Secret).
	direct, err := client.New(mgr.GetConfig(), client.Options{Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper()})
	if err != nil {
		return fmt.Errorf("progress endpoint client: %w", err)
	}
	var certs interface {
		CertSource
		manager.Runnable
	}
	if cfg.CertDir != "" {
		certs = &FileCerts{Dir: cfg.CertDir, Log: log}
	} else {
		cm, err := NewCertManager(direct, CertOptions{Namespace: cfg.Namespace(), SecretName: cfg.CertSecretName, DNSNames: cfg.DNSNames(), Log: log})
		if err != nil {
			return err
		}
		certs = cm
	}
	h, err := NewHandler(Options{
		Client: direct, Reader: mgr.GetAPIReader(), Recorder: mgr.GetEventRecorder(EventSource), Sink: sink,
		Audience: cfg.Audience, RateLimit: RateLimit{QPS: cfg.RateLimit.QPS, Burst: cfg.RateLimit.Burst},
		MaxBodyBytes: cfg.MaxBodyBytes, Log: log,
	})
	if err != nil {
		return err
	}
	if err := mgr.Add(certs); err != nil {
		return fmt.Errorf("add progress endpoint certificates: %w", err)
	}
	if err := mgr.Add(&Server{Addr: cfg.BindAddress, Handler: h, Certs: certs, Log: log}); err != nil {
		return fmt.Errorf("add progress endpoint server: %w", err)
	}
	return nil
}
