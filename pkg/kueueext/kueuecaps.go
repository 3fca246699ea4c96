package kueueext

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
)

// What the planner knows about the Kueue it acts through. Neither Kueue's
// version nor its feature gates are published in its API, so both are
// inferred from what the API server does (docs/compatibility.md):
//
//   - PriorityBoost: with the gate on, Kueue's Workload webhook refuses a
//     priority-boost annotation that is not a signed integer; with it off
//     the annotation is not looked at. A server-side dry-run patch that sets
//     an invalid value tells the two apart, writes nothing, and needs only
//     the `patch` on Workloads the planner already has.
//   - the API generation: ClusterQueue's spec.concurrentAdmissionPolicy is
//     served by Kueue v0.19 (absent in v0.17), read from the OpenAPI v3
//     document every authenticated client may read (system:discovery).
//     Reported (log, planner_kueue_info); it does not change the wake-up,
//     which must also work on v0.18 (wakeStyle).

// gateState is what the dry-run probe found.
type gateState int

const (
	gateUnknown gateState = iota
	gateOn
	gateOff
)

func (g gateState) String() string {
	switch g {
	case gateOn:
		return "on"
	case gateOff:
		return "off"
	}
	return "unknown"
}

// kueueGeneration is the API generation read from the OpenAPI document.
type kueueGeneration string

const (
	kueueGenUnknown kueueGeneration = "unknown"
	// kueueGenV017 serves kueue.x-k8s.io/v1beta2 without ClusterQueue
	// spec.concurrentAdmissionPolicy (v0.17; v0.18 was not examined).
	kueueGenV017 kueueGeneration = "v0.17"
	// kueueGenV019 serves ClusterQueue spec.concurrentAdmissionPolicy.
	kueueGenV019 kueueGeneration = "v0.19+"
)

// wakeStyle is how the planner wakes a ClusterQueue's waiting Workloads
// after lowering the boost of an admitted Workload without a
// WorkloadPriorityClass (Kueue retries them by itself only when the lowered
// Workload has one; measured in TestLoweredBoostNeedsNudge).
type wakeStyle string

const (
	// wakeRespell re-writes the same boost in another spelling ("0" →
	// "+0"). Enough on Kueue v0.17: any change of the annotation string
	// moves a waiting Workload back into the heap. Not enough from v0.18
	// on, where SchedulingEquivalenceHashing (on by default) keeps a
	// Workload whose scheduling hash (which holds its effective priority,
	// not the spelling) was found not to fit among the inadmissible ones.
	// Kept for a configuration that could name the version; not selected
	// today (wakeStyle).
	wakeRespell wakeStyle = "respell"
	// wakeDip lowers the waiting Workload's boost by one and at once
	// restores the priority (absent → "-1" → "0"): the effective priority
	// changes, so does the hash, and Kueue moves the Workload back into the
	// heap; the restore follows before it is scheduled in practice. A dip
	// can only make the Workload less eligible for the moment, never let it
	// preempt something new.
	// Works on v0.17 and v0.19 (measured); used on every generation.
	wakeDip wakeStyle = "dip"
)

// wakeStyle is the dip on every generation. A respelling would do on v0.17,
// but the API schema cannot tell v0.17 from v0.18 (not available here to
// test), where equivalence hashing is on by default and a respelling wakes
// nothing; the dip is measured to wake on v0.17 and v0.19 alike
// (TestControlPlaneYield, TestLoweredBoostNeedsNudge).
func (g kueueGeneration) wakeStyle() wakeStyle {
	return wakeDip
}

// boostProbeInterval is how long a PriorityBoost probe result is trusted:
// the gate changes only when Kueue restarts with another configuration.
// boostProbeRetry spaces the probes while none has succeeded, so that a
// probe that keeps failing does not cost an API call per reconcile.
const (
	boostProbeInterval = 5 * time.Minute
	boostProbeRetry    = 30 * time.Second
)

// probeValue is the invalid boost the dry-run probe sets.
const probeValue = "planner-probe"

// kueueCaps caches the detected capabilities.
type kueueCaps struct {
	// probe runs the PriorityBoost dry-run on a Workload (tests replace it).
	probe func(ctx context.Context, wl *kueue.Workload) (gateState, error)

	mu       sync.Mutex
	gate     gateState
	probedAt time.Time
	gen      kueueGeneration
}

func newKueueCaps(c client.Client) *kueueCaps {
	k := &kueueCaps{gen: kueueGenUnknown}
	k.probe = func(ctx context.Context, wl *kueue.Workload) (gateState, error) {
		return probePriorityBoost(ctx, c, wl)
	}
	setKueueMetrics(gateUnknown, kueueGenUnknown)
	return k
}

// boostGate returns the PriorityBoost gate's state, probing on wl when the
// last result is older than boostProbeInterval (boostProbeRetry while it is
// unknown). A failed probe keeps the previous result.
func (k *kueueCaps) boostGate(ctx context.Context, wl *kueue.Workload, now time.Time) gateState {
	k.mu.Lock()
	defer k.mu.Unlock()
	wait := boostProbeInterval
	if k.gate == gateUnknown {
		wait = boostProbeRetry
	}
	if !k.probedAt.IsZero() && now.Sub(k.probedAt) < wait {
		return k.gate
	}
	k.probedAt = now
	g, err := k.probe(ctx, wl)
	if err != nil {
		logr.FromContextOrDiscard(ctx).Error(err, "probing Kueue's PriorityBoost feature gate", "workload", wl.Namespace+"/"+wl.Name)
		return k.gate
	}
	if g != k.gate {
		logr.FromContextOrDiscard(ctx).Info("Kueue PriorityBoost feature gate detected", "priorityBoost", g.String(),
			"kueueAPI", string(k.gen), "workload", wl.Namespace+"/"+wl.Name)
	}
	k.gate = g
	setKueueMetrics(k.gate, k.gen)
	return g
}

// generation returns the detected API generation.
func (k *kueueCaps) generation() kueueGeneration {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.gen
}

func (k *kueueCaps) setGeneration(g kueueGeneration) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.gen = g
	setKueueMetrics(k.gate, k.gen)
}

// probePriorityBoost sets an invalid boost on wl with a server-side dry run.
// Refused by the Workload webhook with an error naming the annotation: the
// gate is on. Accepted: the gate is off (Kueue ignores the annotation).
// Anything else is an error (state unknown).
func probePriorityBoost(ctx context.Context, c client.Client, wl *kueue.Workload) (gateState, error) {
	probe := &kueue.Workload{}
	probe.Name, probe.Namespace = wl.Name, wl.Namespace
	// The UID precondition makes the probe fail rather than act on a
	// Workload recreated under the same name (it is a dry run either way).
	patch := fmt.Sprintf(`{"metadata":{"uid":%q,"annotations":{%q:%q}}}`, wl.UID, AnnotationPriorityBoost, probeValue)
	err := c.Patch(ctx, probe, client.RawPatch(types.MergePatchType, []byte(patch)), client.DryRunAll, client.FieldOwner(FieldManager))
	switch {
	case err == nil:
		return gateOff, nil
	case apierrors.IsInvalid(err) || apierrors.IsForbidden(err) || apierrors.IsBadRequest(err):
		if strings.Contains(err.Error(), AnnotationPriorityBoost) {
			return gateOn, nil
		}
	}
	return gateUnknown, fmt.Errorf("dry-run patch of Workload %s/%s with %s=%q: %w", wl.Namespace, wl.Name, AnnotationPriorityBoost, probeValue, err)
}

// DetectKueueGeneration reads kueue.x-k8s.io/v1beta2's OpenAPI v3 document
// and tells Kueue v0.17's API from v0.19's (docs/compatibility.md).
func DetectKueueGeneration(d discovery.DiscoveryInterface) (kueueGeneration, error) {
	paths, err := d.OpenAPIV3().Paths()
	if err != nil {
		return kueueGenUnknown, fmt.Errorf("OpenAPI v3 paths: %w", err)
	}
	gv, ok := paths["apis/kueue.x-k8s.io/v1beta2"]
	if !ok {
		return kueueGenUnknown, fmt.Errorf("OpenAPI v3 has no apis/kueue.x-k8s.io/v1beta2 document")
	}
	doc, err := gv.Schema("application/json")
	if err != nil {
		return kueueGenUnknown, fmt.Errorf("OpenAPI v3 document of kueue.x-k8s.io/v1beta2: %w", err)
	}
	if bytes.Contains(doc, []byte(`"concurrentAdmissionPolicy"`)) {
		return kueueGenV019, nil
	}
	return kueueGenV017, nil
}
