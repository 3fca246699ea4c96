//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// The CLI tests run the real planner binary, built once per test process
// from ../../cmd/planner, against the control plane through a kubeconfig,
// as a user would.

var (
	plannerBinOnce sync.Once
	plannerBinDir  string
	plannerBinErr  error
	plannerBinOut  []byte
)

// plannerBinary builds the planner binary (go build, cached by the Go
// build cache) and returns its path; kubectl-planner beside it is a
// symlink to it, the kubectl plugin name.
func plannerBinary(tb testing.TB) string {
	tb.Helper()
	plannerBinOnce.Do(func() {
		plannerBinDir, plannerBinErr = os.MkdirTemp("", "planner-e2e-bin-")
		if plannerBinErr != nil {
			return
		}
		cmd := exec.Command("go", "build", "-o", filepath.Join(plannerBinDir, "planner"), "./cmd/planner")
		cmd.Dir = "../.."
		plannerBinOut, plannerBinErr = cmd.CombinedOutput()
		if plannerBinErr == nil {
			plannerBinErr = os.Symlink("planner", filepath.Join(plannerBinDir, "kubectl-planner"))
		}
	})
	if plannerBinErr != nil {
		tb.Fatalf("build the planner binary: %v\n%s", plannerBinErr, plannerBinOut)
	}
	return filepath.Join(plannerBinDir, "planner")
}

// writeKubeconfig writes a kubeconfig for rc (context "e2e").
func writeKubeconfig(t *testing.T, rc *rest.Config) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "kubeconfig")
	kc := clientcmdapi.NewConfig()
	kc.Clusters["e2e"] = &clientcmdapi.Cluster{Server: rc.Host, CertificateAuthorityData: rc.CAData}
	kc.AuthInfos["e2e"] = &clientcmdapi.AuthInfo{ClientCertificateData: rc.CertData, ClientKeyData: rc.KeyData, Token: rc.BearerToken}
	kc.Contexts["e2e"] = &clientcmdapi.Context{Cluster: "e2e", AuthInfo: "e2e"}
	kc.CurrentContext = "e2e"
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// runCLI runs bin with args and returns its standard output; a failure
// fails the test with the standard error.
func runCLI(ctx context.Context, t *testing.T, bin string, args ...string) string {
	t.Helper()
	cctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	cmd := exec.CommandContext(cctx, bin, args...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %v: %v\nstdout:\n%s\nstderr:\n%s", filepath.Base(bin), args, err, out.String(), errOut.String())
	}
	return out.String()
}

// freeLoopbackPort is a loopback TCP port free when asked (a server that
// must be told its port up front takes it).
func freeLoopbackPort(tb testing.TB) int {
	tb.Helper()
	return freeLoopback(tb).Port
}

// freeLoopbackAddr is freeLoopbackPort as an address, 127.0.0.1:PORT.
func freeLoopbackAddr(tb testing.TB) string {
	tb.Helper()
	return freeLoopback(tb).String()
}

func freeLoopback(tb testing.TB) *net.TCPAddr {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr)
}
