package main

import (
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
)

// pluginBinary is the kubectl plugin name: kubectl finds an executable
// named kubectl-planner on $PATH and runs it for `kubectl planner ...`.
// The same binary serves both names (ln -s planner kubectl-planner).
const pluginBinary = "kubectl-planner"

// asPlugin reports whether the binary was invoked under the plugin name
// (argv[0]; ".exe" ignored).
func asPlugin(argv0 string) bool {
	return strings.TrimSuffix(filepath.Base(argv0), ".exe") == pluginBinary
}

// pluginMode makes help and usage read `kubectl planner ...`.
func pluginMode(root *cobra.Command) {
	// Cobra takes a command's name from the first word of Use; the
	// display-name annotation is its way to print a two-word name.
	if root.Annotations == nil {
		root.Annotations = map[string]string{}
	}
	root.Annotations[cobra.CommandDisplayNameAnnotation] = "kubectl planner"
	root.Short += " (kubectl plugin)"
}
