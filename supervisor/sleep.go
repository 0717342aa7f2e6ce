package supervisor

import (
	"context"
	"time"
)

// Sleep waits d (not at all for d <= 0), or until ctx ends, and returns
// ctx's error if it ended first.
func Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// Kick wakes a runnable that waits on ch (a channel of capacity one)
// without blocking: a wake-up already pending is enough.
func Kick(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}
