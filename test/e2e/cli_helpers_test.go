//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
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
func writeKubeconfig(tb testing.TB, rc *rest.Config) string {
	tb.Helper()
	path := filepath.Join(tb.TempDir(), "kubeconfig")
	kc := clientcmdapi.NewConfig()
	kc.Clusters["e2e"] = &clientcmdapi.Cluster{Server: rc.Host, CertificateAuthorityData: rc.CAData}
	kc.AuthInfos["e2e"] = &clientcmdapi.AuthInfo{ClientCertificateData: rc.CertData, ClientKeyData: rc.KeyData, Token: rc.BearerToken}
	kc.Contexts["e2e"] = &clientcmdapi.Context{Cluster: "e2e", AuthInfo: "e2e"}
	kc.CurrentContext = "e2e"
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		tb.Fatal(err)
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

// plannerProcess is a `planner run` (or other long-running planner
// command) subprocess started by startPlannerProcess. The caller stops it
// (Stop, StopWith, Kill); a process that exited on its own is seen on
// Exited.
type plannerProcess struct {
	cmd    *exec.Cmd
	exited chan struct{}
	err    error // cmd.Wait's result, set before exited is closed
}

// startPlannerProcess starts bin with args, its standard output and error
// into log.
func startPlannerProcess(tb testing.TB, bin string, args []string, log io.Writer) *plannerProcess {
	tb.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	p := &plannerProcess{cmd: cmd, exited: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.exited)
	}()
	return p
}

// Pid is the process's id.
func (p *plannerProcess) Pid() int { return p.cmd.Process.Pid }

// Exited is closed when the process has exited.
func (p *plannerProcess) Exited() <-chan struct{} { return p.exited }

// Err is how the process exited (cmd.Wait's error); only once Exited is
// closed.
func (p *plannerProcess) Err() error { return p.err }

// State is the exited process's state; only once Exited is closed.
func (p *plannerProcess) State() *os.ProcessState { return p.cmd.ProcessState }

// Running says whether the process has not exited yet.
func (p *plannerProcess) Running() bool {
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// Stop stops the process as Kubernetes would: SIGTERM, then SIGKILL if it
// has not exited within 30 s (a pod's default grace period, in which the
// planner writes its due checkpoints); it returns once the process has
// exited.
func (p *plannerProcess) Stop() { p.StopWith(syscall.SIGTERM, 30*time.Second) }

// StopWith is Stop with signal sig and grace before the SIGKILL. A process
// that has already exited is left as it is.
func (p *plannerProcess) StopWith(sig os.Signal, grace time.Duration) {
	if !p.Running() {
		return
	}
	_ = p.cmd.Process.Signal(sig)
	select {
	case <-p.exited:
	case <-time.After(grace):
		_ = p.cmd.Process.Kill()
		<-p.exited
	}
}

// Kill kills the process with SIGKILL (a crash) and waits for its exit.
func (p *plannerProcess) Kill() error {
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		return err
	}
	<-p.exited
	return nil
}
