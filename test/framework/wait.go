//go:build e2e

package framework

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// PollInterval is how often Poll re-checks its condition.
const PollInterval = 100 * time.Millisecond

// Poll checks cond every PollInterval (the first time at once) until it
// returns true, returns an error, ctx ends or timeout passes. It returns the
// time it took. Every wait in the suites goes through it, so every wait is
// bounded.
func Poll(ctx context.Context, timeout time.Duration, cond func(context.Context) (bool, error)) (time.Duration, error) {
	start := time.Now()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	t := time.NewTicker(PollInterval)
	defer t.Stop()
	for {
		ok, err := cond(ctx)
		if err != nil {
			return time.Since(start), err
		}
		if ok {
			return time.Since(start), nil
		}
		select {
		case <-ctx.Done():
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return time.Since(start), fmt.Errorf("condition not met within %v", timeout)
			}
			return time.Since(start), ctx.Err()
		case <-t.C:
		}
	}
}

// Consistently checks cond every PollInterval for the whole of d (the first
// time at once) and fails as soon as cond returns false or an error. Use it
// for negative claims ("stays pending"), which need a window.
func Consistently(ctx context.Context, d time.Duration, cond func(context.Context) (bool, error)) error {
	start := time.Now()
	deadline := start.Add(d)
	t := time.NewTicker(PollInterval)
	defer t.Stop()
	for {
		ok, err := cond(ctx)
		if err != nil {
			return err
		}
		if !ok {
			return fmt.Errorf("condition stopped holding after %v", time.Since(start).Round(time.Millisecond))
		}
		if !time.Now().Before(deadline) {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}
