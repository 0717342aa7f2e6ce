package supervisor

import (
	"context"
	"sync"
	"time"
)

// Running counts the runs of runnables (Wrap), so that their parent can
// wait for them to end (Wait) before it takes away what they still use on
// their way out: a curator that must reach etcd to resign, an agent that
// stops etcd after its curator. The zero value counts nothing running.
type Running struct {
	mu   sync.Mutex
	n    int
	zero chan struct{}
}

// Wrap counts the runs of r.
func (rs *Running) Wrap(r Runnable) Runnable {
	return func(ctx context.Context) error {
		rs.mu.Lock()
		if rs.n == 0 {
			rs.zero = make(chan struct{})
		}
		rs.n++
		rs.mu.Unlock()
		defer func() {
			rs.mu.Lock()
			defer rs.mu.Unlock()
			rs.n--
			if rs.n == 0 {
				close(rs.zero)
			}
		}()
		return r(ctx)
	}
}

// Wait waits until nothing runs, at most d.
func (rs *Running) Wait(d time.Duration) {
	rs.mu.Lock()
	if rs.n == 0 {
		rs.mu.Unlock()
		return
	}
	zero := rs.zero
	rs.mu.Unlock()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-zero:
	case <-t.C:
	}
}
