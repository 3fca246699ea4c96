package forecast

import "sort"

func sortFloats(v []float64) { sort.Float64s(v) }

func sortStrings(v []string) { sort.Strings(v) }
