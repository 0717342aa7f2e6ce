package supervisor

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"sync"
	"time"

	"go.uber.org/zap"
)

// A node is one place in the tree. It outlives the runs of its runnable: each
// run is an attempt, and a node restarts its runnable with a new attempt until
// the runnable finishes or the node's parent stops.
type node struct {
	sup       *Supervisor
	name      string // dotted name
	local     string // last element of name
	runnable  Runnable
	logger    *zap.Logger
	parent    *attempt        // the run of the parent that started it; nil for the root
	parentCtx context.Context // parent.ctx, or New's context for the root

	// Guarded by sup.mu.
	state    State
	restarts int
	backoff  time.Duration
	lastErr  error
}

// An attempt is one run of a node's runnable. Its context is what the
// runnable is given; every child the runnable starts belongs to the attempt,
// so that stopping an attempt stops exactly the subtree it built.
type attempt struct {
	node   *node
	ctx    context.Context
	cancel context.CancelFunc
	// children counts the keepers of this attempt's children. Add is only
	// called under sup.mu while returned is false, and Wait only after
	// returned is set, so no Add races with Wait.
	children sync.WaitGroup

	// Guarded by sup.mu.
	returned     bool
	healthy      bool
	healthySince time.Time
	done         bool
	kids         map[string]*node // live children by local name
}

type attemptKey struct{}

// attemptFrom returns the attempt whose context ctx is or derives from, or
// nil if ctx was not given by a supervisor.
func attemptFrom(ctx context.Context) *attempt {
	a, _ := ctx.Value(attemptKey{}).(*attempt)
	return a
}

// startLocked adds a node for r under parent (nil for the root) and starts
// its keeper. s.mu must be held.
func (s *Supervisor) startLocked(parentCtx context.Context, parent *attempt, local string, r Runnable) {
	name := local
	if parent != nil {
		name = parent.node.name + "." + local
	}
	n := &node{
		sup:       s,
		name:      name,
		local:     local,
		runnable:  r,
		logger:    s.cfg.logger.Named(name),
		parent:    parent,
		parentCtx: parentCtx,
	}
	s.nodes[name] = n
	if parent != nil {
		parent.kids[local] = n
		parent.children.Add(1)
	}
	go s.keep(n)
}

// keep runs n's runnable until it finishes or n's parent stops, restarting it
// after every failure. It returns only once n and its whole subtree have
// returned.
func (s *Supervisor) keep(n *node) {
	defer s.forget(n)
	for first := true; ; first = false {
		a := s.begin(n, first)
		err := s.call(a)

		s.mu.Lock()
		a.returned = true
		var wait time.Duration
		switch {
		case err == nil && a.done:
			n.state = StateDone
		case n.parentCtx.Err() != nil:
			n.state = StateStopping
		default:
			if err == nil {
				err = ErrReturnedWithoutDone
			}
			wait = s.failLocked(n, a, err)
		}
		state, restarts := n.state, n.restarts
		s.mu.Unlock()

		switch state {
		case StateDone:
			// The runnable is finished but its children may not be: they
			// keep its context until they finish or our parent stops.
			n.logger.Debug("done")
			a.children.Wait()
			a.cancel()
			return
		case StateStopping:
			a.cancel()
			a.children.Wait()
			n.logger.Debug("stopped", zap.Error(err))
			return
		}

		fields := []zap.Field{zap.Error(err), zap.Duration("backoff", wait), zap.Int("restarts", restarts)}
		if p := (*panicError)(nil); errors.As(err, &p) {
			fields = append(fields, zap.ByteString("stack", p.stack))
		}
		n.logger.Error("runnable failed; stopping its subtree and restarting it after backoff", fields...)

		// Stop the whole subtree and wait for it before the backoff starts,
		// so that a restarted runnable never meets children of its
		// previous run.
		a.cancel()
		a.children.Wait()
		select {
		case <-s.cfg.clock.After(wait):
		case <-n.parentCtx.Done():
		}
		if n.parentCtx.Err() != nil {
			n.logger.Debug("stopped during backoff")
			return
		}
	}
}

// begin starts a new attempt of n.
func (s *Supervisor) begin(n *node, first bool) *attempt {
	ctx, cancel := context.WithCancel(n.parentCtx)
	a := &attempt{node: n, cancel: cancel, kids: make(map[string]*node)}
	a.ctx = context.WithValue(ctx, attemptKey{}, a)

	s.mu.Lock()
	if !first {
		n.restarts++
	}
	n.state = StateStarting
	restarts := n.restarts
	s.mu.Unlock()

	if first {
		n.logger.Debug("starting")
	} else {
		n.logger.Info("restarting", zap.Int("restarts", restarts))
	}
	return a
}

// failLocked records that attempt a of n failed with err and returns how long
// to wait before the next attempt. s.mu must be held.
func (s *Supervisor) failLocked(n *node, a *attempt, err error) time.Duration {
	n.state = StateFailed
	n.lastErr = err
	if a.healthy && s.cfg.clock.Now().Sub(a.healthySince) >= s.cfg.backoffReset {
		n.backoff = 0
	}
	n.backoff = nextBackoff(n.backoff, s.cfg.backoffInitial, s.cfg.backoffMax)
	return randomJitter(n.backoff, s.cfg.jitter)
}

// call runs a's runnable, turning a panic into an error unless panics are to
// propagate.
func (s *Supervisor) call(a *attempt) (err error) {
	if !s.cfg.propagatePanic {
		defer func() {
			if v := recover(); v != nil {
				err = &panicError{value: v, stack: debug.Stack()}
			}
		}()
	}
	return a.node.runnable(a.ctx)
}

// forget removes n from the tree once it and its subtree have returned for
// good, and tells whoever waits for it.
func (s *Supervisor) forget(n *node) {
	s.mu.Lock()
	delete(s.nodes, n.name)
	if n.parent != nil {
		delete(n.parent.kids, n.local)
	}
	s.mu.Unlock()
	if n.parent != nil {
		n.parent.children.Done()
	} else {
		close(s.done)
	}
}

func (n *node) stateLocked() NodeState {
	return NodeState{
		Name:     n.name,
		State:    n.state,
		Restarts: n.restarts,
		Backoff:  n.backoff,
		Err:      n.lastErr,
	}
}

// panicError is the failure of a runnable that panicked.
type panicError struct {
	value any
	stack []byte
}

func (p *panicError) Error() string { return fmt.Sprintf("panic: %v", p.value) }
