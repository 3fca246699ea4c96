package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestPluginName(t *testing.T) {
	for argv0, want := range map[string]bool{"kubectl-planner": true, "/usr/local/bin/kubectl-planner": true, "kubectl-planner.exe": true,
		"planner": false, "/bin/planner": false, "kubectl-plannerx": false} {
		if got := asPlugin(argv0); got != want {
			t.Errorf("asPlugin(%q) = %v", argv0, got)
		}
	}
	root := newRootCmd()
	pluginMode(root)
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetArgs([]string{"explain", "--help"})
	if err := root.Execute(); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"kubectl planner explain", "--kubeconfig", "--context", "-n, --namespace"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("help lacks %q:\n%s", want, out.String())
		}
	}
}
