package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/progress-planner/planner/pkg/plannerconfig"
)

func runPlannerCLI(args ...string) (string, error) {
	root := newRootCmd()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs(args)
	err := root.Execute()
	return out.String(), err
}

func TestRunPrintConfig(t *testing.T) {
	out, err := runPlannerCLI("run", "--print-config", "--config", "../../config/samples/planner-config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	c, err := plannerconfig.ParseConfig([]byte(out))
	if err != nil {
		t.Fatalf("--print-config output does not parse: %v\n%s", err, out)
	}
	if c.Policy.Mode != "advise" || len(c.Policy.Overrides) != 1 {
		t.Errorf("printed config lost the sample's policy: %+v", c.Policy)
	}
	def, err := runPlannerCLI("run", "--print-config")
	if err != nil || !strings.Contains(def, "minInterval: 30s") || !strings.Contains(def, "mode: enforce") {
		t.Errorf("defaults: %v\n%s", err, def)
	}
}

func TestRunInvalidConfig(t *testing.T) {
	path := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(path, []byte("apiVersion: planner.progress.io/v1alpha1\nkind: PlannerConfiguration\nforecast: {minInterval: -1s}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := runPlannerCLI("run", "--config", path)
	if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "forecast.minInterval") {
		t.Fatalf("err %v: want the file and the field named", err)
	}
	if exitCode(err) != exitFailure {
		t.Errorf("exit code %d", exitCode(err))
	}
	if _, err := runPlannerCLI("run", "--log-format", "xml"); exitCode(err) != exitUsage {
		t.Errorf("--log-format xml: %v", err)
	}
}

func TestRunProgressEndpointFlags(t *testing.T) {
	out, err := runPlannerCLI("run", "--print-config", "--progress-endpoint-bind-address", ":9443", "--progress-endpoint-cert-dir", "/etc/tls")
	if err != nil {
		t.Fatal(err)
	}
	c, err := plannerconfig.ParseConfig([]byte(out))
	if err != nil {
		t.Fatalf("--print-config output does not parse: %v\n%s", err, out)
	}
	if p := c.ProgressEndpoint; p.BindAddress != ":9443" || p.CertDir != "/etc/tls" {
		t.Errorf("flags not applied to the config: %+v", p)
	}
	_, err = runPlannerCLI("run", "--progress-endpoint-bind-address", "nowhere")
	if exitCode(err) != exitUsage || !strings.Contains(err.Error(), "progressEndpoint.bindAddress") {
		t.Errorf("--progress-endpoint-bind-address nowhere: %v", err)
	}
}

func TestRunPodWebhookFlag(t *testing.T) {
	out, err := runPlannerCLI("run", "--print-config", "--progress-endpoint-bind-address", ":9443", "--progress-endpoint-pod-webhook-port", "9444")
	if err != nil {
		t.Fatal(err)
	}
	c, err := plannerconfig.ParseConfig([]byte(out))
	if err != nil {
		t.Fatalf("--print-config output does not parse: %v\n%s", err, out)
	}
	if w := c.ProgressEndpoint.PodWebhook; w.Port != 9444 || w.ConfigurationName != "progress-planner-pods" {
		t.Errorf("flag not applied to the config: %+v", w)
	}
	// The webhook points pods at the endpoint: without it, a usage error.
	_, err = runPlannerCLI("run", "--progress-endpoint-pod-webhook-port", "9444")
	if exitCode(err) != exitUsage || !strings.Contains(err.Error(), "progressEndpoint.podWebhook.port") {
		t.Errorf("webhook without the endpoint: %v", err)
	}
}

func TestReplayUsage(t *testing.T) {
	for _, args := range [][]string{
		{"replay", "x.jsonl"},
		{"replay", "x.jsonl", "--trainjob", "noslash"},
		{"replay", "x.jsonl", "--trainjob", "ns/a/b"},
		{"replay", "x.jsonl", "--trainjob", "ns/a", "--speed", "-1"},
	} {
		if _, err := runPlannerCLI(args...); exitCode(err) != exitUsage {
			t.Errorf("%v: err %v (exit %d), want a usage error", args, err, exitCode(err))
		}
	}
	if _, err := runPlannerCLI("replay", "/nonexistent.jsonl", "--trainjob", "ns/a"); err == nil || exitCode(err) != exitFailure {
		t.Errorf("missing file: %v", err)
	}
}
