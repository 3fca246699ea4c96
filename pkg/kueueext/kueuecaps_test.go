package kueueext

import (
	"context"
	"errors"
	"testing"
	"time"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
)

// Issue 15: the PriorityBoost probe's cache: a known result is reused for
// boostProbeInterval, a failing probe is retried only every boostProbeRetry
// and keeps the last known state.
func TestBoostGateCache(t *testing.T) {
	k := &kueueCaps{gen: kueueGenUnknown}
	calls, next, fail := 0, gateOn, false
	k.probe = func(context.Context, *kueue.Workload) (gateState, error) {
		calls++
		if fail {
			return gateUnknown, errors.New("boom")
		}
		return next, nil
	}
	wl := &kueue.Workload{}
	at := func(d time.Duration) gateState { return k.boostGate(context.Background(), wl, t0.Add(d)) }
	if g := at(0); g != gateOn || calls != 1 {
		t.Fatalf("first: %v after %d probes", g, calls)
	}
	next = gateOff
	if g := at(boostProbeInterval - time.Second); g != gateOn || calls != 1 {
		t.Errorf("within the interval: %v after %d probes, want the cached on", g, calls)
	}
	if g := at(boostProbeInterval); g != gateOff || calls != 2 {
		t.Errorf("after the interval: %v after %d probes, want off", g, calls)
	}
	fail = true
	if g := at(2 * boostProbeInterval); g != gateOff || calls != 3 {
		t.Errorf("failed probe: %v after %d probes, want the last known off", g, calls)
	}
	k2 := &kueueCaps{gen: kueueGenUnknown, probe: k.probe}
	for i := range 5 {
		k2.boostGate(context.Background(), wl, t0.Add(time.Duration(i)*time.Second))
	}
	if calls != 4 {
		t.Errorf("%d probes in 5 s while failing, want 1 (then one per %v)", calls-3, boostProbeRetry)
	}
}
