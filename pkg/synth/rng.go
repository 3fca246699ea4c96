package synth

import "github.com/progress-planner/planner/internal/splitmix"

// rng is the shared deterministic source, so that the generated histories
// stay byte-identical across Go releases.
type rng = splitmix.Source

func newRNG(seed uint64) *rng { return splitmix.New(seed ^ 0x5851f42d4c957f2d) }
