//go:build e2e

package framework

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	kftrainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	jobsetapi "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	mpi "github.com/kubeflow/mpi-operator/pkg/apis/kubeflow/v2beta1"
	kftraining "github.com/kubeflow/training-operator/pkg/apis/kubeflow.org/v1"
)

// Integration names as Kueue's Configuration spells them.
const (
	TrainJobFramework = "trainer.kubeflow.org/trainjob"
	JobSetFramework   = "jobset.x-k8s.io/jobset"
	// BatchJobFramework: batch/v1 Jobs. Not on by default: with it every
	// Job the tests create goes through Kueue's webhook.
	BatchJobFramework = "batch/job"
	// PyTorchJobFramework: Kubeflow Training Operator v1 PyTorchJobs. Not
	// on by default (Kueue then waits for nothing of theirs).
	PyTorchJobFramework = "kubeflow.org/pytorchjob"
	// TFJobFramework: Training Operator v1 TFJobs, likewise.
	TFJobFramework = "kubeflow.org/tfjob"
	// MPIJobFramework: MPI Operator v2beta1 MPIJobs, likewise.
	MPIJobFramework = "kubeflow.org/mpijob"
)

// Options tune a control plane. The zero value is what the e2e suites use.
type Options struct {
	// BinaryDir holds kube-apiserver and etcd; default BinaryDir().
	BinaryDir string
	// ExtraCRDPaths are installed with the others (files or directories),
	// e.g. the planner's own CRDs under config/crd.
	ExtraCRDPaths []string
	// Frameworks are the Kueue integrations to enable; default TrainJob and
	// JobSet. Only those two and BatchJobFramework are linked in.
	Frameworks []string
	// FeatureGates are Kueue feature gates set for this process on top of
	// PriorityBoost=true.
	FeatureGates map[string]bool
	// Log receives the logs of Kueue, controller-runtime and client-go
	// (one line each). Default: a file kueue.log in a temporary directory,
	// whose path Env.LogPath gives; Start prints its tail when a test fails.
	Log io.Writer
	// AttachControlPlaneOutput sends kube-apiserver's and etcd's output to
	// the test process's stdout/stderr.
	AttachControlPlaneOutput bool
	// StartTimeout bounds the whole start; default 2 minutes.
	StartTimeout time.Duration
	// EtcdDataDir is an existing directory etcd keeps its data in (the
	// caller removes it); default a new temporary directory that Stop
	// removes.
	EtcdDataDir string
}

// Env is a running control plane with Kueue in-process.
type Env struct {
	// Config reaches the apiserver as an administrator.
	Config *rest.Config
	// Client is a client with Scheme, reading straight from the apiserver
	// (no cache), so every read sees the latest state.
	Client client.Client
	// Scheme holds core Kubernetes, Kueue v1beta2, Trainer v1alpha1 and JobSet v1alpha2.
	Scheme *runtime.Scheme
	// LogPath is the file Kueue logs to, when Options.Log was nil. Start
	// removes it when the test passes and keeps it (printing its tail) when
	// it fails.
	LogPath string
	// BinaryDir is where kube-apiserver and etcd came from.
	BinaryDir string

	manifests *manifests
	testEnv   *envtest.Environment
	cancel    context.CancelFunc
	mgrDone   chan error
	logFile   *os.File
	stopOnce  sync.Once
	stopErr   error
	// restartedAPIServer is the kube-apiserver RestartAPIServer started,
	// which envtest does not know about.
	restartedAPIServer *ownedProcess
}

// NewScheme returns a scheme with core Kubernetes, Kueue v1beta2, Trainer
// v1alpha1 and JobSet v1alpha2 types.
func NewScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	utilruntime.Must(kueue.AddToScheme(s))
	utilruntime.Must(kftrainer.AddToScheme(s))
	utilruntime.Must(jobsetapi.AddToScheme(s))
	utilruntime.Must(kftraining.AddToScheme(s))
	utilruntime.Must(mpi.AddToScheme(s))
	return s
}

// Start starts a control plane for t and stops it when t ends. Any failure
// to start, a missing binary included, fails t (it never skips).
func Start(t testing.TB, opts ...Options) *Env {
	t.Helper()
	var o Options
	if len(opts) > 0 {
		o = opts[0]
	}
	begin := time.Now()
	env, err := New(context.Background(), o)
	if err != nil {
		t.Fatalf("starting the control plane: %v", err)
	}
	t.Logf("control plane up in %v (kube-apiserver %s, etcd %s, Kueue in-process; binaries %s; Kueue log %s)",
		time.Since(begin).Round(10*time.Millisecond), KubernetesVersion, EtcdVersion, env.BinaryDir, env.LogPath)
	t.Cleanup(func() {
		if t.Failed() && env.LogPath != "" {
			t.Logf("last lines of %s:\n%s", env.LogPath, tail(env.LogPath, 80))
		}
		if err := env.Stop(); err != nil {
			t.Errorf("stopping the control plane: %v", err)
		}
		if !t.Failed() && env.LogPath != "" {
			_ = os.RemoveAll(filepath.Dir(env.LogPath))
		}
	})
	return env
}

// New starts a control plane; the caller must Stop it. Use it from TestMain
// to share one control plane between the tests of a package.
func New(ctx context.Context, o Options) (env *Env, err error) {
	if o.StartTimeout <= 0 {
		o.StartTimeout = 2 * time.Minute
	}
	if len(o.Frameworks) == 0 {
		o.Frameworks = []string{TrainJobFramework, JobSetFramework}
	}
	if o.BinaryDir == "" {
		o.BinaryDir = BinaryDir()
	}
	apiserverPath, etcdPath, err := checkBinaries(o.BinaryDir)
	if err != nil {
		return nil, err
	}
	if err := setFeatureGates(o.FeatureGates); err != nil {
		return nil, err
	}
	m, err := findManifests()
	if err != nil {
		return nil, err
	}
	muts, vals, err := loadWebhooks(m.webhookFile, o.Frameworks)
	if err != nil {
		return nil, err
	}

	env = &Env{Scheme: NewScheme(), BinaryDir: o.BinaryDir, manifests: m}
	defer func() {
		if err != nil {
			_ = env.Stop()
			if env.LogPath != "" {
				err = fmt.Errorf("%w (log: %s)\n%s", err, env.LogPath, tail(env.LogPath, 40))
			}
			env = nil
		}
	}()

	logw := o.Log
	if logw == nil {
		dir, err := os.MkdirTemp("", "planner-e2e-")
		if err != nil {
			return env, err
		}
		env.logFile, err = os.Create(filepath.Join(dir, "kueue.log"))
		if err != nil {
			return env, err
		}
		env.LogPath = env.logFile.Name()
		logw = env.logFile
	}
	setLogger(logw)

	env.testEnv = &envtest.Environment{
		CRDInstallOptions: envtest.CRDInstallOptions{
			Paths: append(append([]string{}, m.crdPaths...), o.ExtraCRDPaths...),
		},
		ErrorIfCRDPathMissing: true, // envtest copies it over CRDInstallOptions.ErrorIfPathMissing
		WebhookInstallOptions: envtest.WebhookInstallOptions{
			MutatingWebhooks:   muts,
			ValidatingWebhooks: vals,
		},
		ControlPlaneStartTimeout: o.StartTimeout,
		ControlPlaneStopTimeout:  30 * time.Second,
		AttachControlPlaneOutput: o.AttachControlPlaneOutput,
	}
	env.testEnv.ControlPlane.APIServer = &envtest.APIServer{Path: apiserverPath}
	env.testEnv.ControlPlane.Etcd = &envtest.Etcd{Path: etcdPath, DataDir: o.EtcdDataDir}

	startCtx, cancelStart := context.WithTimeout(ctx, o.StartTimeout)
	defer cancelStart()

	cfg, err := env.testEnv.Start()
	if err != nil {
		return env, fmt.Errorf("envtest (kube-apiserver %s, etcd %s from %s): %w", apiserverPath, etcdPath, o.BinaryDir, err)
	}
	env.Config = cfg
	env.Client, err = client.New(cfg, client.Options{Scheme: env.Scheme})
	if err != nil {
		return env, err
	}

	mgrCtx, cancel := context.WithCancel(context.Background())
	env.cancel = cancel
	mgr, err := newKueueManager(mgrCtx, cfg, &env.testEnv.WebhookInstallOptions, o.Frameworks)
	if err != nil {
		return env, fmt.Errorf("setting up Kueue: %w", err)
	}
	env.mgrDone = make(chan error, 1)
	go func() { env.mgrDone <- mgr.Start(mgrCtx) }()

	wio := &env.testEnv.WebhookInstallOptions
	addr := net.JoinHostPort(wio.LocalServingHost, fmt.Sprint(wio.LocalServingPort))
	if _, err := Poll(startCtx, o.StartTimeout, func(ctx context.Context) (bool, error) {
		select {
		case err := <-env.mgrDone:
			env.mgrDone <- err
			return false, fmt.Errorf("Kueue's manager exited: %v", err)
		default:
		}
		d := &net.Dialer{Timeout: time.Second}
		conn, err := tls.DialWithDialer(d, "tcp", addr, &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // local test server
		if err != nil {
			return false, nil
		}
		_ = conn.Close()
		return true, nil
	}); err != nil {
		return env, fmt.Errorf("waiting for Kueue's webhook server on %s: %w", addr, err)
	}
	if !mgr.GetCache().WaitForCacheSync(startCtx) {
		return env, errors.New("Kueue's informer caches did not sync")
	}
	return env, nil
}

// Stop stops Kueue and the control plane. It is idempotent; Start registers
// it with t.Cleanup.
func (e *Env) Stop() error {
	e.stopOnce.Do(func() {
		var errs []error
		if e.cancel != nil {
			e.cancel()
		}
		if e.mgrDone != nil {
			select {
			case err := <-e.mgrDone:
				if err != nil && !errors.Is(err, context.Canceled) {
					errs = append(errs, fmt.Errorf("Kueue's manager: %w", err))
				}
			case <-time.After(30 * time.Second):
				errs = append(errs, errors.New("Kueue's manager did not stop within 30s"))
			}
		}
		if p := e.restartedAPIServer; p != nil {
			if err := p.stop(30 * time.Second); err != nil {
				errs = append(errs, err)
			}
		}
		if e.testEnv != nil {
			if err := e.testEnv.Stop(); err != nil {
				errs = append(errs, err)
			}
		}
		if e.logFile != nil {
			logSink.unset(e.logFile)
			_ = e.logFile.Close()
		}
		e.stopErr = errors.Join(errs...)
	})
	return e.stopErr
}

var loggerOnce sync.Once

// setLogger points controller-runtime's and klog's loggers at w. Those
// loggers are process-global: they are set once and write to whatever
// writer the newest Env set.
func setLogger(w io.Writer) {
	logSink.set(w)
	loggerOnce.Do(func() {
		l := funcr.New(func(prefix, args string) {
			if prefix != "" {
				logSink.writeLine(time.Now().Format("15:04:05.000") + " " + prefix + ": " + args)
			} else {
				logSink.writeLine(time.Now().Format("15:04:05.000") + " " + args)
			}
		}, funcr.Options{Verbosity: 2})
		ctrl.SetLogger(l)
		klog.SetLogger(l)
	})
}

// logSink serialises log lines to the current writer.
var logSink = &lineWriter{}

type lineWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lineWriter) set(w io.Writer) {
	l.mu.Lock()
	l.w = w
	l.mu.Unlock()
}

func (l *lineWriter) unset(w io.Writer) {
	l.mu.Lock()
	if l.w == w {
		l.w = nil
	}
	l.mu.Unlock()
}

func (l *lineWriter) writeLine(s string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.w != nil {
		_, _ = io.WriteString(l.w, s+"\n")
	}
}

// tail returns the last n lines of a file.
func tail(path string, n int) string {
	f, err := os.Open(path)
	if err != nil {
		return err.Error()
	}
	defer f.Close()
	var lines []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64*1024), 1024*1024)
	for sc.Scan() {
		lines = append(lines, sc.Text())
		if len(lines) > n {
			lines = lines[1:]
		}
	}
	return strings.Join(lines, "\n")
}

// EtcdMetric is the sum of etcd's Prometheus counter or gauge name over
// its label sets, read from etcd's client URL (plain HTTP on loopback in
// envtest).
func (e *Env) EtcdMetric(ctx context.Context, name string) (float64, error) {
	et := e.testEnv.ControlPlane.Etcd
	if et == nil || et.URL == nil {
		return 0, errors.New("no etcd URL known")
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, et.URL.String()+"/metrics", nil)
	if err != nil {
		return 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, fmt.Errorf("etcd metrics: %w", err)
	}
	defer resp.Body.Close()
	tp := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := tp.TextToMetricFamilies(resp.Body)
	if err != nil {
		return 0, fmt.Errorf("etcd metrics: %w", err)
	}
	mf, ok := fams[name]
	if !ok {
		return 0, fmt.Errorf("etcd metric %s not found", name)
	}
	var sum float64
	for _, m := range mf.GetMetric() {
		sum += m.GetCounter().GetValue() + m.GetGauge().GetValue()
	}
	return sum, nil
}
