package main

import (
	"bufio"
	"encoding/json"
	"io"

	"github.com/spf13/cobra"

	"github.com/progress-planner/planner/simulator"
)

// capacityBacktestFlags: planner simulate --capacity-backtest scores the
// report's capacity forecast on the simulated cluster instead of comparing
// policies (docs/report.md, "Capacity backtest").
type capacityBacktestFlags struct {
	enabled        bool
	horizon, every string
}

func (c *capacityBacktestFlags) add(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.BoolVar(&c.enabled, "capacity-backtest", false, "score the report's capacity forecast (GPUs freed within --capacity-horizon) under the planner policy, instead of comparing policies")
	fl.StringVar(&c.horizon, "capacity-horizon", "1h", "with --capacity-backtest: the forecast horizon")
	fl.StringVar(&c.every, "capacity-every", "1h", "with --capacity-backtest: sample every this much simulated time")
}

func runCapacityBacktest(cmd *cobra.Command, in *simulator.Input, opt simulator.Options, c capacityBacktestFlags) error {
	h, err := simulator.ParseSeconds(c.horizon)
	if err != nil {
		return usageErrorf("--capacity-horizon: %v", err)
	}
	every, err := simulator.ParseSeconds(c.every)
	if err != nil {
		return usageErrorf("--capacity-every: %v", err)
	}
	opt.Progress = nil
	r, err := simulator.CapacityBacktest(in, opt, simulator.CapacityBacktestOptions{Horizon: h, Every: every})
	if err != nil {
		return err
	}
	return writeTableOrJSON(cmd, r)
}

// writeTableOrJSON prints a backtest result in the simulate command's
// -o format: indented JSON, else the result's own table.
func writeTableOrJSON(cmd *cobra.Command, r interface{ WriteTable(io.Writer) error }) error {
	w := bufio.NewWriter(cmd.OutOrStdout())
	var err error
	if cmd.Flags().Lookup("output").Value.String() == formatJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		err = enc.Encode(r)
	} else {
		err = r.WriteTable(w)
	}
	if err != nil {
		return err
	}
	return w.Flush()
}
