// Command planner is Progress Planner's command line. Subcommands live in
// their own files as newXxxCmd() constructors and are registered here.
package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/progress-planner/planner/internal/textsafe"
)

func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:           "planner",
		Short:         "Forecast ML training-job convergence from Kubeflow Trainer progress reports",
		SilenceUsage:  true,
		SilenceErrors: true,
		// With Args set, cobra hands an unknown subcommand to this RunE
		// instead of its own (exit 1) error.
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				return usageErrorf("unknown command %q for %q", args[0], cmd.CommandPath())
			}
			return cmd.Help()
		},
	}
	root.AddCommand(
		newVersionCmd(),
		newBacktestCmd(),
		newForecastCmd(),
		newSimulateCmd(),
		newRunCmd(),
		newReplayCmd(),
		newReportCmd(),
		newExplainCmd(),
		newGetCmd(),
	)
	usageErrors(root)
	return root
}

func main() {
	root := newRootCmd()
	if asPlugin(os.Args[0]) {
		pluginMode(root)
	}
	if err := root.Execute(); err != nil {
		// Errors quote inputs (names, values, lines): escaped like any
		// tenant text on a terminal.
		fmt.Fprintln(os.Stderr, "planner:", textsafe.Line(err.Error()))
		os.Exit(exitCode(err))
	}
}
