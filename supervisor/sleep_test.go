package supervisor

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestSleep(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	start := time.Now()
	if err := Sleep(ctx, 20*time.Millisecond); err != nil || time.Since(start) < 20*time.Millisecond {
		t.Fatalf("Sleep(20ms) = %v after %v, want nil after 20ms", err, time.Since(start))
	}
	if err := Sleep(ctx, -time.Second); err != nil {
		t.Fatalf("Sleep(-1s) = %v, want nil at once", err)
	}
	go func() {
		time.Sleep(10 * time.Millisecond)
		cancel()
	}()
	start = time.Now()
	if err := Sleep(ctx, time.Hour); !errors.Is(err, context.Canceled) || time.Since(start) > 10*time.Second {
		t.Fatalf("Sleep(1h) with ctx cancelled = %v after %v, want context.Canceled at once", err, time.Since(start))
	}
	if err := Sleep(ctx, 0); !errors.Is(err, context.Canceled) {
		t.Fatalf("Sleep(0) on an ended ctx = %v, want context.Canceled", err)
	}
}
