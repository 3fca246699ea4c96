package main

import (
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/cobra"
)

// The printer set: every command that prints chooses among these with
// -o/--output, offering the ones meaningful for what it prints. One flag
// type checks the choice as the flag is parsed, so every command refuses
// a format with the same words and exit code 2 (a usage error).
const (
	formatTable    = "table"
	formatJSON     = "json"
	formatYAML     = "yaml"
	formatMarkdown = "markdown"
	formatHTML     = "html"
)

// outputFlag is the -o/--output value of one command.
type outputFlag struct {
	value   string
	allowed []string
}

// addOutputFlag declares -o/--output on cmd with its default and the
// formats it prints (the default first).
func addOutputFlag(cmd *cobra.Command, allowed ...string) *outputFlag {
	o := &outputFlag{value: allowed[0], allowed: allowed}
	cmd.Flags().VarP(o, "output", "o", "output format: "+o.choices())
	return o
}

func (o *outputFlag) String() string { return o.value }

// Set accepts one of the command's formats ("md" is markdown).
func (o *outputFlag) Set(s string) error {
	if s == "md" {
		s = formatMarkdown
	}
	if !slices.Contains(o.allowed, s) {
		return fmt.Errorf("want %s", o.choices())
	}
	o.value = s
	return nil
}

func (o *outputFlag) Type() string { return "format" }

// choices lists the formats: "table, json or yaml".
func (o *outputFlag) choices() string {
	if len(o.allowed) == 1 {
		return o.allowed[0]
	}
	return strings.Join(o.allowed[:len(o.allowed)-1], ", ") + " or " + o.allowed[len(o.allowed)-1]
}
