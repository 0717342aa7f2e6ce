package supervisor

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"go.uber.org/zap"
)

// A Runnable is one supervised part of a program. It runs until ctx is
// cancelled, returning then (with any error), or until it has nothing more to
// do, returning nil after Signal(ctx, Done). Any other return, and any panic,
// is a failure after which the supervisor restarts it.
type Runnable func(ctx context.Context) error

// Errors returned by Run and RunGroup, and recorded as failures.
var (
	// ErrNotSupervised: the context was not given by a supervisor.
	ErrNotSupervised = errors.New("context does not belong to a supervised runnable")
	// ErrNotRunning: the runnable that owns the context has returned or is
	// being stopped, so it can start no children.
	ErrNotRunning = errors.New("runnable is not running")
	// ErrInvalidName: a child name is empty or contains a dot.
	ErrInvalidName = errors.New("invalid runnable name")
	// ErrDuplicateName: a live sibling already has the name.
	ErrDuplicateName = errors.New("runnable name already in use")
	// ErrReturnedWithoutDone is the failure of a runnable that returned nil
	// without having signalled Done.
	ErrReturnedWithoutDone = errors.New("runnable returned nil without signalling Done")
)

// Run starts r as a child, named name, of the runnable that owns ctx. ctx must
// be the context the supervisor gave that runnable, or derive from it. The
// child runs, and is restarted when it fails, until it finishes or until the
// run of its parent that started it fails or is stopped. A parent that
// finishes leaves its children running.
func Run(ctx context.Context, name string, r Runnable) error {
	return RunGroup(ctx, map[string]Runnable{name: r})
}

// RunGroup starts several children of the runnable that owns ctx at once. If
// any of them cannot be started (see Run), none is.
func RunGroup(ctx context.Context, runnables map[string]Runnable) error {
	a := attemptFrom(ctx)
	if a == nil {
		return ErrNotSupervised
	}
	names := make([]string, 0, len(runnables))
	for name, r := range runnables {
		switch {
		case name == "":
			return fmt.Errorf("start child of %s: empty name: %w", a.node.name, ErrInvalidName)
		case strings.Contains(name, "."):
			return fmt.Errorf("start child %q of %s: name contains a dot: %w", name, a.node.name, ErrInvalidName)
		case r == nil:
			return fmt.Errorf("start child %q of %s: runnable is nil", name, a.node.name)
		}
		names = append(names, name)
	}
	slices.Sort(names)

	s := a.node.sup
	s.mu.Lock()
	defer s.mu.Unlock()
	// Starting children of a run that has ended, or that is being
	// cancelled, would only leave orphans for nobody to wait for.
	if a.returned || a.ctx.Err() != nil {
		return fmt.Errorf("start children of %s: %w", a.node.name, ErrNotRunning)
	}
	for _, name := range names {
		if _, ok := a.kids[name]; ok {
			return fmt.Errorf("start child %q of %s: %w", name, a.node.name, ErrDuplicateName)
		}
	}
	for _, name := range names {
		s.startLocked(a.ctx, a, name, runnables[name])
	}
	return nil
}

// SignalType is what a runnable tells its supervisor about itself.
type SignalType int

const (
	// Healthy: the runnable has started and is doing its job.
	Healthy SignalType = iota + 1
	// Done: the runnable has nothing more to do and will return nil. Done
	// implies Healthy.
	Done
)

func (t SignalType) String() string {
	switch t {
	case Healthy:
		return "healthy"
	case Done:
		return "done"
	default:
		return fmt.Sprintf("SignalType(%d)", int(t))
	}
}

// Signal tells the supervisor about the runnable that owns ctx. Signals from
// a run that has already returned are ignored. Signal panics if ctx was not
// given by a supervisor, or if sig is not a known signal: both are bugs in
// the caller.
func Signal(ctx context.Context, sig SignalType) {
	a := attemptFrom(ctx)
	if a == nil {
		panic(fmt.Sprintf("supervisor: Signal(%v) with %v", sig, ErrNotSupervised))
	}
	if sig != Healthy && sig != Done {
		panic(fmt.Sprintf("supervisor: Signal with unknown %v", sig))
	}
	n := a.node
	s := n.sup
	s.mu.Lock()
	if a.returned {
		s.mu.Unlock()
		return
	}
	becameHealthy := !a.healthy
	if becameHealthy {
		a.healthy = true
		a.healthySince = s.cfg.clock.Now()
		n.state = StateHealthy
	}
	becameDone := sig == Done && !a.done
	if becameDone {
		a.done = true
	}
	s.mu.Unlock()

	if becameHealthy {
		n.logger.Debug("healthy")
	}
	if becameDone {
		n.logger.Debug("signalled done")
	}
}

// Name returns the dotted name of the runnable that owns ctx, for example
// "root.curator.leader", or "" if ctx was not given by a supervisor.
func Name(ctx context.Context) string {
	if a := attemptFrom(ctx); a != nil {
		return a.node.name
	}
	return ""
}

// Logger returns the logger of the runnable that owns ctx: the supervisor's
// base logger named by the runnable's dotted name. If ctx was not given by a
// supervisor it returns a logger that discards everything.
func Logger(ctx context.Context) *zap.Logger {
	if a := attemptFrom(ctx); a != nil {
		return a.node.logger
	}
	return zap.NewNop()
}
