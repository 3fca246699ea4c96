//go:build e2e

package framework

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"k8s.io/client-go/kubernetes"
)

// Fault injection on the control plane's processes (the fault e2e tests,
// docs/testing.md). envtest cannot restart its kube-apiserver in place: its
// Stop removes the generated certificate directory and a new Start makes a
// new CA, users and port, so every client of the old one would break. The
// helpers below therefore work on the processes themselves: they find
// kube-apiserver by its --cert-dir and etcd by its --data-dir in /proc.

// APIServerRestart is what RestartAPIServer measured.
type APIServerRestart struct {
	// OldPID and NewPID are kube-apiserver's process ids before and after.
	OldPID, NewPID int
	// Stop is how long the old process took to exit after SIGTERM.
	Stop time.Duration
	// Killed says it had not exited APIServerStopGrace after SIGTERM and
	// was killed with SIGKILL.
	Killed bool
	// Down is how long nothing listened on the port: from the old
	// process's exit to the new one's start.
	Down time.Duration
	// Ready is how long the new process took from its start to /readyz.
	Ready time.Duration
}

// APIServerStopGrace is how long RestartAPIServer waits for kube-apiserver
// to exit after SIGTERM before it sends SIGKILL. With clients watching, a
// kube-apiserver on a loaded 2-core machine did not exit within 30 s, nor
// within 15 s; it refuses connections right after SIGTERM, so the grace
// only lengthens the outage.
const APIServerStopGrace = 5 * time.Second

// RestartAPIServer stops kube-apiserver (SIGTERM, then SIGKILL after
// APIServerStopGrace),
// leaves it down for down, and starts it again with exactly the same
// command line (same address and port, certificates, users and etcd), then
// waits up to 2 minutes for /readyz. Clients of e.Config keep working
// across it. The restarted process belongs to e: Stop ends it before the
// rest of the control plane. Its output goes to kube-apiserver.log next to
// LogPath (or is dropped when there is no LogPath).
func (e *Env) RestartAPIServer(ctx context.Context, down time.Duration) (APIServerRestart, error) {
	var r APIServerRestart
	as := e.testEnv.ControlPlane.APIServer
	if as == nil || as.CertDir == "" {
		return r, errors.New("no kube-apiserver cert dir known")
	}
	pid, argv, err := findProcess(as.Path, "--cert-dir="+as.CertDir)
	if err != nil {
		return r, fmt.Errorf("finding kube-apiserver: %w", err)
	}
	r.OldPID = pid
	stopAt := time.Now()
	r.Killed, err = e.stopPID(pid, APIServerStopGrace)
	if err != nil {
		return r, fmt.Errorf("stopping kube-apiserver (pid %d): %w", pid, err)
	}
	stopped := time.Now()
	r.Stop = stopped.Sub(stopAt)
	select {
	case <-ctx.Done():
		// Start it anyway: the rest of the test and Stop need it.
	case <-time.After(down):
	}

	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if e.LogPath != "" {
		f, err := os.OpenFile(filepath.Join(filepath.Dir(e.LogPath), "kube-apiserver.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err == nil {
			cmd.Stdout, cmd.Stderr = f, f
			defer f.Close() // the child holds its own descriptor
		}
	}
	if err := cmd.Start(); err != nil {
		return r, fmt.Errorf("starting kube-apiserver again: %w", err)
	}
	started := time.Now()
	r.Down = started.Sub(stopped)
	r.NewPID = cmd.Process.Pid
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	e.restartedAPIServer = &ownedProcess{cmd: cmd, exited: exited}

	cs, err := kubernetes.NewForConfig(e.Config)
	if err != nil {
		return r, err
	}
	if _, err := Poll(ctx, 2*time.Minute, func(ctx context.Context) (bool, error) {
		select {
		case <-exited:
			return false, fmt.Errorf("restarted kube-apiserver (pid %d) exited: %v", r.NewPID, cmd.ProcessState)
		default:
		}
		body, err := cs.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		return err == nil && bytes.Equal(bytes.TrimSpace(body), []byte("ok")), nil
	}); err != nil {
		return r, fmt.Errorf("waiting for the restarted kube-apiserver's /readyz: %w", err)
	}
	r.Ready = time.Since(started)
	return r, nil
}

// FreezeEtcd stops etcd with SIGSTOP, keeps it stopped for d (or until ctx
// ends) and resumes it with SIGCONT; it always sends SIGCONT before it
// returns once SIGSTOP was sent. It returns etcd's pid.
func (e *Env) FreezeEtcd(ctx context.Context, d time.Duration) (int, error) {
	et := e.testEnv.ControlPlane.Etcd
	if et == nil || et.DataDir == "" {
		return 0, errors.New("no etcd data dir known")
	}
	pid, _, err := findProcess(et.Path, "--data-dir="+et.DataDir)
	if err != nil {
		return 0, fmt.Errorf("finding etcd: %w", err)
	}
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		return pid, fmt.Errorf("SIGSTOP etcd (pid %d): %w", pid, err)
	}
	defer func() { _ = syscall.Kill(pid, syscall.SIGCONT) }()
	select {
	case <-ctx.Done():
		return pid, ctx.Err()
	case <-time.After(d):
	}
	if err := syscall.Kill(pid, syscall.SIGCONT); err != nil {
		return pid, fmt.Errorf("SIGCONT etcd (pid %d): %w", pid, err)
	}
	return pid, nil
}

// ownedProcess is a control-plane process the Env started itself.
type ownedProcess struct {
	cmd    *exec.Cmd
	exited chan struct{}
}

// stop sends SIGTERM, then SIGKILL after timeout.
func (p *ownedProcess) stop(timeout time.Duration) error {
	select {
	case <-p.exited:
		return nil
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
		return nil
	case <-time.After(timeout):
		_ = p.cmd.Process.Kill()
		<-p.exited
		return fmt.Errorf("%s (pid %d) did not stop within %v of SIGTERM; killed", filepath.Base(p.cmd.Path), p.cmd.Process.Pid, timeout)
	}
}

// stopPID stops a control-plane process with SIGTERM, and SIGKILL when it
// has not exited after grace (killed says so): the one e restarted itself,
// or one envtest started (envtest's own goroutine reaps that one, so its
// exit is seen as the pid going away).
func (e *Env) stopPID(pid int, grace time.Duration) (killed bool, err error) {
	if p := e.restartedAPIServer; p != nil && p.cmd.Process.Pid == pid {
		e.restartedAPIServer = nil
		err := p.stop(grace)
		return err != nil, nil
	}
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
		return false, err
	}
	deadline := time.Now().Add(grace)
	for time.Now().Before(deadline) {
		if !pidAlive(pid) {
			return false, nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	_ = syscall.Kill(pid, syscall.SIGKILL)
	for i := 0; i < 200; i++ {
		if !pidAlive(pid) {
			return true, nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return true, fmt.Errorf("pid %d still alive 10s after SIGKILL", pid)
}

// pidAlive says whether pid exists and is not a zombie.
func pidAlive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// pid (comm) S ...: the state follows the last ')'.
	s := string(b)
	if i := strings.LastIndexByte(s, ')'); i >= 0 && i+2 < len(s) {
		return s[i+2] != 'Z'
	}
	return true
}

// findProcess finds the one live process whose argv[0] is path and that has
// an argument equal to arg, and returns its pid and argv.
func findProcess(path, arg string) (int, []string, error) {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return 0, nil, err
	}
	var pids []int
	var argvs [][]string
	for _, ent := range ents {
		pid, err := strconv.Atoi(ent.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", ent.Name(), "cmdline"))
		if err != nil || len(b) == 0 {
			continue
		}
		argv := strings.Split(strings.TrimSuffix(string(b), "\x00"), "\x00")
		if argv[0] != path || !pidAlive(pid) {
			continue
		}
		for _, a := range argv[1:] {
			if a == arg {
				pids = append(pids, pid)
				argvs = append(argvs, argv)
				break
			}
		}
	}
	switch len(pids) {
	case 0:
		return 0, nil, fmt.Errorf("no process %s with %s", path, arg)
	case 1:
		return pids[0], argvs[0], nil
	default:
		return 0, nil, fmt.Errorf("%d processes %s with %s: %v", len(pids), path, arg, pids)
	}
}
