package simulator

import (
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"

	"github.com/progress-planner/planner/pkg/preempt"
)

// A what-if is a list of knob settings, each "KNOB=VALUE", applied to a
// resolved Input and the run Options before a run. The knobs:
//
//	gpus=N | +N | -N           the cluster's GPUs: every queue's nominal
//	                           quota scaled to the new total (largest
//	                           remainder), so the queues keep their shares
//	gpus.QUEUE=N | +N | -N     one ClusterQueue's nominal quota (the
//	                           simulator models one resource, GPUs: a
//	                           flavor is a queue's quota here)
//	borrowingLimit.QUEUE=N|none  one queue's borrowing limit
//	deactivate=true|false      every queue opts in to Deactivate (or none)
//	deactivate.QUEUE=true|false  one queue opts in (a policy override on
//	                           that ClusterQueue)
//	policy.PATH=VALUE          a field of the preempt policy by its YAML
//	                           path (docs/policy.md), e.g.
//	                           policy.boosts.plateaued=-50,
//	                           policy.stability.dwell=30m,
//	                           policy.plateau.minProbability=0.8
//	arrival-rate=X             arrivals X times as fast (times since the
//	                           first arrival divided by X): X > 1 is more
//	                           load on the same jobs
//
// The Input's jobs are never modified: a what-if that changes them copies
// them, so one resolved Input serves every point of a sweep, concurrently.

// Setting is one knob and its value.
type Setting struct {
	Knob  string `json:"knob"`
	Value string `json:"value"`
}

func (s Setting) String() string { return s.Knob + "=" + s.Value }

// ParseSetting reads "KNOB=VALUE" and checks the knob's name.
func ParseSetting(s string) (Setting, error) {
	k, v, ok := strings.Cut(strings.TrimSpace(s), "=")
	k, v = strings.TrimSpace(k), strings.TrimSpace(v)
	if !ok || k == "" || v == "" {
		return Setting{}, fmt.Errorf("%q: want KNOB=VALUE", s)
	}
	if err := checkKnob(k); err != nil {
		return Setting{}, err
	}
	return Setting{Knob: k, Value: v}, nil
}

func checkKnob(k string) error {
	base, sub, _ := strings.Cut(k, ".")
	switch base {
	case "gpus", "deactivate":
		return nil
	case "borrowingLimit", "policy":
		if sub == "" {
			return fmt.Errorf("knob %q: want %s.NAME", k, base)
		}
		return nil
	case "arrival-rate":
		if sub != "" {
			return fmt.Errorf("knob %q: arrival-rate applies to every job", k)
		}
		return nil
	}
	return fmt.Errorf("unknown knob %q (want gpus, gpus.QUEUE, borrowingLimit.QUEUE, deactivate, deactivate.QUEUE, policy.PATH or arrival-rate)", k)
}

// ApplyWhatIf returns in and opt with the settings applied, in order. in
// is shared when no setting changes it; otherwise a copy is returned (its
// jobs copied only when their arrivals change). The options are validated.
func ApplyWhatIf(in *Input, opt Options, settings []Setting) (*Input, Options, error) {
	out := *in
	out.Queues = append([]Queue(nil), in.Queues...)
	for _, s := range settings {
		if err := applySetting(&out, &opt, s); err != nil {
			return nil, opt, fmt.Errorf("what-if %s: %w", s, err)
		}
	}
	if err := opt.Validate(); err != nil {
		return nil, opt, fmt.Errorf("what-if: %w", err)
	}
	if err := opt.Policy.Validate(); err != nil {
		return nil, opt, fmt.Errorf("what-if: %w", err)
	}
	return &out, opt, nil
}

func applySetting(in *Input, opt *Options, s Setting) error {
	base, sub, _ := strings.Cut(s.Knob, ".")
	switch base {
	case "gpus":
		if sub == "" {
			total, err := adjust(in.Capacity(), s.Value)
			if err != nil {
				return err
			}
			return scaleQueues(in.Queues, total)
		}
		q, err := queueNamed(in.Queues, sub)
		if err != nil {
			return err
		}
		n, err := adjust(q.GPUs, s.Value)
		if err != nil {
			return err
		}
		q.GPUs = n
		return checkGPUs("gpus."+sub, in.Capacity(), 1)
	case "borrowingLimit":
		q, err := queueNamed(in.Queues, sub)
		if err != nil {
			return err
		}
		if s.Value == "none" {
			q.BorrowingLimit = nil
			return nil
		}
		cur := 0
		if q.BorrowingLimit != nil {
			cur = *q.BorrowingLimit
		}
		n, err := adjust(cur, s.Value)
		if err != nil {
			return err
		}
		q.BorrowingLimit = &n
		return nil
	case "deactivate":
		on, err := strconv.ParseBool(s.Value)
		if err != nil {
			return fmt.Errorf("want true or false")
		}
		if sub == "" {
			opt.Deactivate = on
			return nil
		}
		if _, err := queueNamed(in.Queues, sub); err != nil {
			return err
		}
		// A policy override on the ClusterQueue is how the controller lets
		// one queue opt in; the copy keeps the caller's overrides intact.
		opt.Policy.Overrides = append(append([]preempt.Override(nil), opt.Policy.Overrides...),
			preempt.Override{ClusterQueue: sub, Stop: &on})
		return nil
	case "policy":
		p, err := setPolicyField(opt.Policy, sub, s.Value)
		if err != nil {
			return err
		}
		opt.Policy = p
		return nil
	case "arrival-rate":
		x, err := strconv.ParseFloat(s.Value, 64)
		if err != nil || !(x > 0) || math.IsInf(x, 0) {
			return fmt.Errorf("%q: want a number > 0", s.Value)
		}
		return scaleArrivals(in, x)
	}
	return checkKnob(s.Knob)
}

func queueNamed(qs []Queue, name string) (*Queue, error) {
	for i := range qs {
		if qs[i].Name == name {
			return &qs[i], nil
		}
	}
	names := make([]string, len(qs))
	for i, q := range qs {
		names[i] = q.Name
	}
	return nil, fmt.Errorf("no ClusterQueue %q (have %s)", name, strings.Join(names, ", "))
}

// adjust reads N (absolute) or +N / -N (relative to cur); the result must
// be in [0, MaxGPUs].
func adjust(cur int, v string) (int, error) {
	n, err := strconv.Atoi(v)
	if err != nil {
		return 0, fmt.Errorf("%q: want N, +N or -N", v)
	}
	if v[0] == '+' || v[0] == '-' {
		n += cur
	}
	if n < 0 || n > MaxGPUs {
		return 0, fmt.Errorf("%q gives %d GPUs: must be in [0, %d]", v, n, MaxGPUs)
	}
	return n, nil
}

// scaleQueues sets the queues' nominal quotas to total GPUs in proportion
// to their current quotas (largest remainder, ties by queue order).
func scaleQueues(qs []Queue, total int) error {
	if total < 1 {
		return fmt.Errorf("%d GPUs: need at least 1", total)
	}
	cur := 0
	for _, q := range qs {
		cur += q.GPUs
	}
	if cur == 0 {
		return fmt.Errorf("the queues have no GPUs to scale")
	}
	rem := make([]float64, len(qs))
	used := 0
	for i := range qs {
		exact := float64(total) * float64(qs[i].GPUs) / float64(cur)
		qs[i].GPUs = int(math.Floor(exact))
		rem[i] = exact - float64(qs[i].GPUs)
		used += qs[i].GPUs
	}
	order := make([]int, len(qs))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool { return rem[order[a]] > rem[order[b]] })
	for i := 0; used < total; i = (i + 1) % len(order) {
		qs[order[i]].GPUs++
		used++
	}
	return nil
}

// scaleArrivals divides every arrival's distance from the first by x. The
// jobs are copied (the curves are shared: runs only read them).
func scaleArrivals(in *Input, x float64) error {
	if len(in.Jobs) == 0 || x == 1 {
		return nil
	}
	t0 := in.Jobs[0].Arrival // jobs are in arrival order
	jobs := make([]*Job, len(in.Jobs))
	for i, j := range in.Jobs {
		c := *j
		c.Arrival = t0 + (j.Arrival-t0)/x
		jobs[i] = &c
	}
	in.Jobs = jobs
	return nil
}

// setPolicyField sets one field of p by its YAML path through the policy's
// own JSON form, so every field the policy file knows is a knob and the
// policy's parser checks the result (unknown fields, ranges).
func setPolicyField(p preempt.Policy, path, value string) (preempt.Policy, error) {
	b, err := json.Marshal(p)
	if err != nil {
		return p, err
	}
	var doc map[string]any
	if err := json.Unmarshal(b, &doc); err != nil {
		return p, err
	}
	parts := strings.Split(path, ".")
	m := doc
	for _, k := range parts[:len(parts)-1] {
		next, ok := m[k].(map[string]any)
		if !ok {
			return p, fmt.Errorf("policy has no section %q in %q", k, path)
		}
		m = next
	}
	last := parts[len(parts)-1]
	if _, ok := m[last]; !ok {
		return p, fmt.Errorf("policy has no field %q", path)
	}
	m[last] = policyValue(value)
	if b, err = json.Marshal(doc); err != nil {
		return p, err
	}
	np, err := preempt.ParsePolicy(b)
	if err != nil {
		return p, err
	}
	return np, nil
}

// policyValue types a knob's value as the policy file would: a number, a
// boolean, or a string (durations, modes).
func policyValue(v string) any {
	if f, err := strconv.ParseFloat(v, 64); err == nil {
		return f
	}
	if b, err := strconv.ParseBool(v); err == nil {
		return b
	}
	return v
}

// LocalQueue is a namespace's queue into a ClusterQueue (informational:
// the simulator queues jobs by ClusterQueue).
type LocalQueue struct {
	Namespace    string `json:"namespace"`
	Name         string `json:"name"`
	ClusterQueue string `json:"clusterQueue"`
}
