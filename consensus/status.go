package consensus

import (
	"context"
	"strconv"
	"sync"
)

// State is where a node's etcd is in its life.
type State int

const (
	// Stopped: Run is not running.
	Stopped State = iota
	// Starting: Run has started etcd and waits for it to be ready.
	Starting
	// Learner: etcd is ready and this member is a learner: it replicates
	// but does not vote, and serves no client requests but Status and
	// serializable reads.
	Learner
	// Voter: etcd is ready and this member votes.
	Voter
)

func (s State) String() string {
	switch s {
	case Stopped:
		return "stopped"
	case Starting:
		return "starting"
	case Learner:
		return "learner"
	case Voter:
		return "voter"
	}
	return "State(" + strconv.Itoa(int(s)) + ")"
}

// Status is what a node's etcd reports about itself. MemberID and ClusterID
// are zero until etcd is ready.
type Status struct {
	State     State
	MemberID  uint64
	ClusterID uint64
}

// statusValue holds the latest Status and wakes watchers when it changes.
// Watchers see the latest value, not every value: a consumer that recomputes
// from the current state (level-triggered, as our loops do) loses nothing by
// skipping intermediate ones.
type statusValue struct {
	mu      sync.Mutex
	cur     Status
	version uint64
	changed chan struct{} // closed and replaced on every change
}

func newStatusValue() *statusValue {
	return &statusValue{changed: make(chan struct{})}
}

func (v *statusValue) get() (Status, uint64, <-chan struct{}) {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.cur, v.version, v.changed
}

// set stores s and wakes watchers, unless nothing changed.
func (v *statusValue) set(s Status) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if s == v.cur {
		return
	}
	v.cur = s
	v.version++
	close(v.changed)
	v.changed = make(chan struct{})
}

// StatusWatcher follows a Service's Status. It is not safe for concurrent
// use; give each consumer its own.
type StatusWatcher struct {
	v    *statusValue
	seen uint64
	any  bool
}

// Get returns the current status on its first call, and after that blocks
// until the status differs from the one last returned, or ctx ends.
func (w *StatusWatcher) Get(ctx context.Context) (Status, error) {
	for {
		s, version, changed := w.v.get()
		if !w.any || version != w.seen {
			w.any, w.seen = true, version
			return s, nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return Status{}, ctx.Err()
		}
	}
}
