package supervisor

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"
)

// rootName is the name of the runnable given to New.
const rootName = "root"

// Supervisor owns one supervision tree.
type Supervisor struct {
	cfg  config
	done chan struct{}

	// mu guards the tree: nodes, and every node's and attempt's fields that
	// say they are guarded by it.
	mu    sync.Mutex
	nodes map[string]*node // live nodes by dotted name
}

// New starts a supervision tree with root as its root runnable, named "root",
// and returns at once. Cancelling ctx stops the whole tree; Wait and Done tell
// when it has stopped. New panics if an option has an invalid value (a
// programming error, like a bad regular expression given to MustCompile).
func New(ctx context.Context, root Runnable, opts ...Option) *Supervisor {
	cfg := defaultConfig()
	for _, o := range opts {
		o(&cfg)
	}
	if err := cfg.validate(); err != nil {
		panic(fmt.Sprintf("supervisor: invalid configuration: %v", err))
	}
	if root == nil {
		panic("supervisor: root runnable is nil")
	}
	s := &Supervisor{
		cfg:   cfg,
		done:  make(chan struct{}),
		nodes: make(map[string]*node),
	}
	s.mu.Lock()
	s.startLocked(ctx, nil, rootName, root)
	s.mu.Unlock()
	return s
}

// Done returns a channel that is closed once every runnable in the tree has
// returned.
func (s *Supervisor) Done() <-chan struct{} { return s.done }

// Wait blocks until every runnable in the tree has returned.
func (s *Supervisor) Wait() { <-s.done }

// State is where a runnable is in its life.
type State int

const (
	// StateStarting: running, has not signalled Healthy yet.
	StateStarting State = iota
	// StateHealthy: running and has signalled Healthy.
	StateHealthy
	// StateDone: returned nil after signalling Done; its children, if any,
	// are still running.
	StateDone
	// StateFailed: failed; its subtree is being stopped, or it is waiting out
	// its backoff before it is restarted.
	StateFailed
	// StateStopping: returned because its parent is stopping; its subtree is
	// being stopped.
	StateStopping
)

func (st State) String() string {
	switch st {
	case StateStarting:
		return "starting"
	case StateHealthy:
		return "healthy"
	case StateDone:
		return "done"
	case StateFailed:
		return "failed"
	case StateStopping:
		return "stopping"
	default:
		return fmt.Sprintf("State(%d)", int(st))
	}
}

// NodeState describes one live runnable of the tree.
type NodeState struct {
	Name     string        // dotted name
	State    State         // where it is in its life
	Restarts int           // times it has been restarted
	Backoff  time.Duration // current nominal backoff; zero until it fails
	Err      error         // why it last failed; nil if it never failed
}

// State returns the state of the live runnable with the given dotted name,
// and false if there is none.
func (s *Supervisor) State(name string) (NodeState, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n, ok := s.nodes[name]
	if !ok {
		return NodeState{}, false
	}
	return n.stateLocked(), true
}

// Snapshot returns the state of every live runnable, ordered by name.
func (s *Supervisor) Snapshot() []NodeState {
	s.mu.Lock()
	out := make([]NodeState, 0, len(s.nodes))
	for _, n := range s.nodes {
		out = append(out, n.stateLocked())
	}
	s.mu.Unlock()
	slices.SortFunc(out, func(a, b NodeState) int { return strings.Compare(a.Name, b.Name) })
	return out
}
