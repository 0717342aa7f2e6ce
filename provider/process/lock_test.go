//go:build linux || darwin || dragonfly || freebsd || netbsd || openbsd

package process

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The lock excludes a second holder, in the same process too: it waits
// for the first to let go, or says whose lock it waited for when its
// context ends.
func TestLock(t *testing.T) {
	dir := t.TempDir()
	a := newTestProvider(t, dir, testAddrs, 0)
	b := newTestProvider(t, dir, testAddrs, 0)
	unlock, err := a.lock(context.Background())
	if err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err = b.lock(ctx)
	want := "lock " + filepath.Join(dir, "lock") + ": "
	if !errors.Is(err, context.DeadlineExceeded) || !strings.HasPrefix(err.Error(), want) {
		t.Fatalf("lock while another holds it: %v, want %q and the deadline", err, want)
	}

	got := make(chan error, 1)
	go func() {
		unlockB, err := b.lock(context.Background())
		if err == nil {
			unlockB()
		}
		got <- err
	}()
	select {
	case err := <-got:
		t.Fatalf("second lock taken while the first is held: %v", err)
	case <-time.After(50 * time.Millisecond):
	}
	unlock()
	select {
	case err := <-got:
		if err != nil {
			t.Fatalf("second lock after the first let go: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("second lock not taken 10s after the first let go")
	}
}
