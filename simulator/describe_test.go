package simulator

import (
	"fmt"
	"strings"
	"testing"
)

// TestDefaultDescriptionMatchesParameters: what --print-default prints
// describes the numbers the built-in run uses (the hand-written text had
// said 48 GPUs at load 0.95 while the run used 32 GPUs at load 2.5).
func TestDefaultDescriptionMatchesParameters(t *testing.T) {
	text := DefaultScenarioYAML()
	s, err := ParseScenario(text)
	if err != nil {
		t.Fatalf("the printed default does not parse: %v", err)
	}
	if s.Description != s.Describe() || s.Description != DefaultScenario().Description {
		t.Errorf("printed description %q, want the one generated from its parameters %q", s.Description, s.Describe())
	}
	in, err := s.Resolve()
	if err != nil {
		t.Fatal(err)
	}
	g := s.Generate
	for _, want := range []string{
		fmt.Sprintf("%d generated jobs", len(in.Jobs)),
		fmt.Sprintf("a %d-GPU cluster", in.Capacity()),
		fmt.Sprintf("of %d ClusterQueues", len(in.Queues)),
		fmt.Sprintf("offered load %g,", g.Load),
		fmt.Sprintf("median run time %s", Seconds(g.duration(0.5))),
		fmt.Sprintf("truncated at %s", g.MaxDuration),
		fmt.Sprintf("%s of the jobs plateau", share(s.Families.PlateauShare)),
	} {
		if !strings.Contains(s.Description, want) {
			t.Errorf("description %q lacks %q", s.Description, want)
		}
	}
	for _, q := range in.Queues {
		if want := fmt.Sprintf("%s %d", q.Name, q.GPUs); !strings.Contains(s.Description, want) {
			t.Errorf("description %q lacks queue %q", s.Description, want)
		}
	}
	if strings.Count(string(text), "\ndescription:") != 1 {
		t.Errorf("the printed default has no single description line:\n%s", text)
	}
}

// TestDescribeFollowsTheParameters: change a parameter and the
// description changes with it.
func TestDescribeFollowsTheParameters(t *testing.T) {
	s := DefaultScenario()
	s.Generate.Load = 0.95
	s.Generate.Jobs = 120
	s.Queues = append(s.Queues, Queue{Name: "extra", GPUs: 16})
	d := s.Describe()
	for _, want := range []string{"120 generated jobs", "offered load 0.95,", "a 48-GPU cluster of 4 ClusterQueues", "extra 16", "3 of them in the cohort gpu-pool"} {
		if !strings.Contains(d, want) {
			t.Errorf("description %q lacks %q", d, want)
		}
	}
	explicit := &Scenario{Name: "x", Jobs: []JobSpec{{Name: "a", Queue: "q", GPUs: 1, Duration: 60}}, Queues: []Queue{{Name: "q", GPUs: 4}}}
	if d := explicit.Describe(); d != "1 explicitly listed job on a 4-GPU cluster of 1 ClusterQueue (q 4); each job's own plateau point (plateauAt)." {
		t.Errorf("explicit jobs: %q", d)
	}
}
