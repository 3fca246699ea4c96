package main

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"
)

// Exit codes of the planner binary (main maps returned errors to them with
// exitCode; no subcommand calls os.Exit itself).
const (
	exitFailure = 1 // the command ran and failed: bad input file, I/O
	exitUsage   = 2 // the command line is wrong, or asks for something not built
)

// exitError is an error that carries the process exit code main should use.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

// usageErrorf is a command-line mistake: exit code 2.
func usageErrorf(format string, args ...any) error {
	return &exitError{code: exitUsage, err: fmt.Errorf(format, args...)}
}

// exitCode maps an error returned by a command to the process exit code:
// 0 for nil, the code of an exitError, else 1.
func exitCode(err error) int {
	if err == nil {
		return 0
	}
	var e *exitError
	if errors.As(err, &e) {
		return e.code
	}
	return exitFailure
}

// usageErrors makes cobra's own command-line errors, in c and every
// subcommand, usage errors: flag parsing (unknown flag, bad value) and
// argument validation (cobra.NoArgs, cobra.ExactArgs). Subcommands inherit
// the root's flag error function.
func usageErrors(c *cobra.Command) {
	c.SetFlagErrorFunc(func(_ *cobra.Command, err error) error {
		return &exitError{code: exitUsage, err: err}
	})
	var wrap func(*cobra.Command)
	wrap = func(c *cobra.Command) {
		if args := c.Args; args != nil {
			c.Args = func(cmd *cobra.Command, a []string) error {
				if err := args(cmd, a); err != nil {
					return &exitError{code: exitUsage, err: err}
				}
				return nil
			}
		}
		for _, sub := range c.Commands() {
			wrap(sub)
		}
	}
	wrap(c)
}
