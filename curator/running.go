package curator

import (
	"context"
	"sync"
	"time"

	"github.com/curatorproject/curator/supervisor"
)

// runningSet counts the runs of a curator's runnables, so that Run returns
// only once they have: the agent stops etcd when Run returns, and a leader
// must still reach etcd to resign (revoke its election lease) on its way
// out. Without the wait the lease outlived the stop and the next leader
// waited out its TTL.
type runningSet struct {
	mu   sync.Mutex
	n    int
	zero chan struct{}
}

// wrap counts the runs of r.
func (rs *runningSet) wrap(r supervisor.Runnable) supervisor.Runnable {
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

// wait waits until nothing runs, at most d.
func (rs *runningSet) wait(d time.Duration) {
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
