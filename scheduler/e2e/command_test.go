//go:build e2e

package e2e

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/yaml"

	"github.com/progress-planner/planner/pkg/preempt"
)

// TestPlannerSchedulerCommand runs the planner-scheduler binary, as built
// from cmd/planner-scheduler, with the shipped configuration (leader
// election included; only the credentials are added) against the control
// plane, and checks the main scenario's outcome: the plateaued job is the
// victim.
func TestPlannerSchedulerCommand(t *testing.T) {
	cfg, c := setup(t)
	sc := scenario{nodes: 2, jobs: []job{
		{name: "plateaued", pods: 1, pc: midPC, verdict: preempt.Plateaued, reported: 20 * time.Minute},
		{name: "near-done", pods: 1, pc: lowPC, verdict: preempt.NearDone, reported: time.Minute, leased: true},
	}}
	if victims := runScenario(t, c, "command", runBinary(t, cfg, configFile, "planner-scheduler"), sc); !slices.Equal(victims, []string{"plateaued-0"}) {
		t.Errorf("planner-scheduler preempted %v, want [plateaued-0]", victims)
	}
}

var (
	buildOnce sync.Once
	binary    string
	buildErr  error
)

// plannerScheduler builds cmd/planner-scheduler once per test process.
func plannerScheduler(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "planner-scheduler-e2e-")
		if err != nil {
			buildErr = err
			return
		}
		binary = filepath.Join(dir, "planner-scheduler")
		if out, err := exec.Command("go", "build", "-o", binary, "../cmd/planner-scheduler").CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("building planner-scheduler: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binary
}

// runBinary runs the planner-scheduler binary with the configuration file
// (only its credentials replaced) for pods of schedulerName.
func runBinary(t *testing.T, cfg *rest.Config, file, schedulerName string) schedulerRun {
	bin := plannerScheduler(t)
	dir := t.TempDir()
	kubeconfig := writeKubeconfig(t, cfg, filepath.Join(dir, "kubeconfig"))
	config := withKubeconfig(t, file, kubeconfig, filepath.Join(dir, "scheduler-config.yaml"))
	return func() (string, func()) {
		var logs bytes.Buffer
		cmd := exec.Command(bin, "--config", config, "--secure-port", "0", "-v", "2")
		cmd.Stdout, cmd.Stderr = &logs, &logs
		if err := cmd.Start(); err != nil {
			t.Fatalf("starting planner-scheduler: %v", err)
		}
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait() }()
		return schedulerName, func() {
			_ = cmd.Process.Signal(os.Interrupt)
			select {
			case <-exited:
			case <-time.After(20 * time.Second):
				_ = cmd.Process.Kill()
				<-exited
			}
			if t.Failed() {
				t.Logf("planner-scheduler output:\n%s", logs.String())
			}
		}
	}
}

// withKubeconfig copies the configuration file with clientConnection
// pointing at kubeconfig (with --config, kube-scheduler takes its
// credentials from the file, not from --kubeconfig).
func withKubeconfig(t *testing.T, file, kubeconfig, out string) string {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := yaml.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	m["clientConnection"] = map[string]any{"kubeconfig": kubeconfig}
	if b, err = yaml.Marshal(m); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(out, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return out
}

// writeKubeconfig writes cfg (envtest's administrator) as a kubeconfig.
func writeKubeconfig(t *testing.T, cfg *rest.Config, path string) string {
	t.Helper()
	kc := clientcmdapi.NewConfig()
	kc.Clusters["envtest"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
	kc.AuthInfos["admin"] = &clientcmdapi.AuthInfo{ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData, Token: cfg.BearerToken}
	kc.Contexts["envtest"] = &clientcmdapi.Context{Cluster: "envtest", AuthInfo: "admin"}
	kc.CurrentContext = "envtest"
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		t.Fatal(err)
	}
	return path
}
