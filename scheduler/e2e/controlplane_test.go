//go:build e2e

package e2e

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// The project's test/framework starts Kueue in-process, and Kueue's feature
// gates clash with k8s.io/kubernetes's when both are linked into one binary
// (both register DynamicResourceAllocation, among others), so this module
// cannot import it. startControlPlane starts the same control plane without
// Kueue: kube-apiserver and etcd from the directory hack/build-testbins.sh
// fills (the rule of framework.BinaryDir), with the planner's CRDs.

// The control plane is the default e2e pair's (hack/testbin), so a cold
// `make test` builds one kube-apiserver. The plugin is built against
// k8s.io/kubernetes v1.35.4: a kube-scheduler one minor version older than
// its API server, within Kubernetes' version-skew policy.
const (
	kubernetesVersion = "v1.36.3"
	etcdVersion       = "v3.6.8"
)

// binaryDir is $PLANNER_TESTBIN or the build script's default directory.
func binaryDir() string {
	if d := os.Getenv("PLANNER_TESTBIN"); d != "" {
		return d
	}
	home, err := os.UserHomeDir()
	if err != nil || home == "" {
		home = os.Getenv("HOME")
	}
	return filepath.Join(home, ".cache", "progress-planner", "testbin", "k8s-"+kubernetesVersion+"-etcd-"+etcdVersion)
}

// startControlPlane starts kube-apiserver and etcd for t and stops them when
// t ends. A missing binary fails the test (it never skips).
func startControlPlane(t *testing.T, crdPaths ...string) *rest.Config {
	t.Helper()
	dir := binaryDir()
	for _, b := range []string{"kube-apiserver", "etcd"} {
		if fi, err := os.Stat(filepath.Join(dir, b)); err != nil || fi.Mode()&0o111 == 0 {
			t.Fatalf("control-plane binary %s missing in %s: build it with `make testbins` (hack/build-testbins.sh)", b, dir)
		}
	}
	begin := time.Now()
	env := &envtest.Environment{
		CRDInstallOptions:        envtest.CRDInstallOptions{Paths: crdPaths},
		ErrorIfCRDPathMissing:    true,
		ControlPlaneStartTimeout: 2 * time.Minute,
		ControlPlaneStopTimeout:  30 * time.Second,
	}
	env.ControlPlane.APIServer = &envtest.APIServer{Path: filepath.Join(dir, "kube-apiserver")}
	env.ControlPlane.Etcd = &envtest.Etcd{Path: filepath.Join(dir, "etcd")}
	cfg, err := env.Start()
	if err != nil {
		t.Fatalf("starting the control plane from %s: %v", dir, err)
	}
	t.Cleanup(func() {
		if err := env.Stop(); err != nil {
			t.Errorf("stopping the control plane: %v", err)
		}
	})
	t.Logf("control plane up in %v (kube-apiserver %s, etcd %s from %s)", time.Since(begin).Round(10*time.Millisecond), kubernetesVersion, etcdVersion, dir)
	return cfg
}
