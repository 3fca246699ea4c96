package main

import "github.com/progress-planner/planner/simulator"

// maxRunSeconds bounds every time flag (--at, --from): ten years, the
// bound the simulator and pkg/forecast put on a duration (docs/limits.md).
// A float beyond it has no time.Duration and printed as
// "-9223372036854775808s since run start".
const maxRunSeconds = simulator.MaxSeconds
