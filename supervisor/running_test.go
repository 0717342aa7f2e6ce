package supervisor

import (
	"context"
	"testing"
	"time"
)

func TestRunningWait(t *testing.T) {
	var rs Running
	rs.Wait(time.Hour) // nothing runs: returns at once
	release := make(chan struct{})
	started := make(chan struct{})
	go func() {
		_ = rs.Wrap(func(context.Context) error { close(started); <-release; return nil })(context.Background())
	}()
	<-started
	done := make(chan struct{})
	go func() { rs.Wait(time.Hour); close(done) }()
	select {
	case <-done:
		t.Fatal("Wait returned while a run was active")
	case <-time.After(20 * time.Millisecond):
	}
	close(release)
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Wait did not return after the run ended")
	}
	// A run that outlives the wait: Wait gives up after d.
	block := make(chan struct{})
	defer close(block)
	started = make(chan struct{})
	go func() {
		_ = rs.Wrap(func(context.Context) error { close(started); <-block; return nil })(context.Background())
	}()
	<-started
	t0 := time.Now()
	rs.Wait(50 * time.Millisecond)
	if d := time.Since(t0); d < 50*time.Millisecond || d > 5*time.Second {
		t.Errorf("Wait(50ms) with a run that goes on returned after %v", d)
	}
}
