package supervisor

import (
	"context"
	"maps"
	"os"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
	"go.uber.org/zap/zaptest"
)

func TestMain(m *testing.M) {
	if os.Getenv(panicChildEnv) != "" {
		// The panic test's child process crashes on purpose; a leak check
		// would only get in its way.
		os.Exit(m.Run())
	}
	goleak.VerifyTestMain(m)
}

// testDeadline bounds every wait for an outcome. Tests never sleep a fixed
// time: they wait for a channel or a condition, and fail past the deadline.
const testDeadline = 10 * time.Second

// recv receives from ch, failing the test if nothing comes before the
// deadline.
func recv[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(testDeadline):
		t.Fatalf("timed out waiting for %s", what)
		panic("unreachable")
	}
}

// send sends v on ch, failing the test if nobody takes it before the
// deadline.
func send[T any](t *testing.T, ch chan<- T, v T, what string) {
	t.Helper()
	select {
	case ch <- v:
	case <-time.After(testDeadline):
		t.Fatalf("timed out sending %s", what)
	}
}

// fakeClock is a Clock that moves only when told to. Every wait the
// supervisor starts shows up on timers, where the test reads how long it is
// and fires it.
type fakeClock struct {
	mu     sync.Mutex
	now    time.Time
	timers chan fakeTimer
}

type fakeTimer struct {
	d time.Duration
	c chan time.Time
}

func newFakeClock() *fakeClock {
	return &fakeClock{
		now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC),
		// Buffered so that a keeper never blocks on a test that does not
		// care about its timer.
		timers: make(chan fakeTimer, 1024),
	}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) After(d time.Duration) <-chan time.Time {
	ft := fakeTimer{d: d, c: make(chan time.Time, 1)}
	c.timers <- ft
	return ft.c
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// nextTimer waits for the supervisor to start a backoff wait.
func (c *fakeClock) nextTimer(t *testing.T) fakeTimer {
	t.Helper()
	return recv(t, c.timers, "a backoff timer")
}

// noTimer fails the test if a backoff wait has been started.
func (c *fakeClock) noTimer(t *testing.T) {
	t.Helper()
	select {
	case ft := <-c.timers:
		t.Fatalf("unexpected backoff timer of %v", ft.d)
	default:
	}
}

func (ft fakeTimer) fire() { ft.c <- time.Time{} }

const (
	testInitial = 100 * time.Millisecond
	testMax     = time.Second
	testReset   = 10 * time.Second
)

// startTree starts a supervisor over root with a fake clock, exact backoff
// (no jitter) and logs to the test, and stops it when the test ends.
func startTree(t *testing.T, root Runnable, opts ...Option) (*Supervisor, *fakeClock, context.CancelFunc) {
	t.Helper()
	clock := newFakeClock()
	ctx, cancel := context.WithCancel(context.Background())
	all := append([]Option{
		WithLogger(zaptest.NewLogger(t)),
		WithClock(clock),
		WithBackoff(testInitial, testMax),
		WithBackoffReset(testReset),
		WithJitter(0),
	}, opts...)
	s := New(ctx, root, all...)
	t.Cleanup(func() {
		cancel()
		select {
		case <-s.Done():
		case <-time.After(testDeadline):
			t.Errorf("tree did not stop; still running:\n%s", formatSnapshot(s.Snapshot()))
		}
	})
	return s, clock, cancel
}

// parentOf returns a root runnable that starts children, signals Healthy and
// runs until cancelled.
func parentOf(children map[string]Runnable) Runnable {
	return func(ctx context.Context) error {
		if err := RunGroup(ctx, children); err != nil {
			return err
		}
		Signal(ctx, Healthy)
		<-ctx.Done()
		return ctx.Err()
	}
}

// blockUntilCancelled is a healthy runnable that runs until cancelled.
func blockUntilCancelled(ctx context.Context) error {
	Signal(ctx, Healthy)
	<-ctx.Done()
	return ctx.Err()
}

// counter counts events by runnable name.
type counter struct {
	mu sync.Mutex
	m  map[string]int
}

func newCounter() *counter { return &counter{m: make(map[string]int)} }

func (c *counter) inc(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.m[name]++
}

func (c *counter) get() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.m)
}

// view is a NodeState that cmp can compare: the error as its text.
type view struct {
	Name     string
	State    State
	Restarts int
	Backoff  time.Duration
	Err      string
}

func viewOf(st NodeState) view {
	v := view{Name: st.Name, State: st.State, Restarts: st.Restarts, Backoff: st.Backoff}
	if st.Err != nil {
		v.Err = st.Err.Error()
	}
	return v
}

func views(states []NodeState) []view {
	out := make([]view, 0, len(states))
	for _, st := range states {
		out = append(out, viewOf(st))
	}
	return out
}

// allHealthy reports whether exactly the named runnables are live, all healthy.
func allHealthy(s *Supervisor, names ...string) func() bool {
	return func() bool {
		snap := s.Snapshot()
		if len(snap) != len(names) {
			return false
		}
		want := make(map[string]bool, len(names))
		for _, n := range names {
			want[n] = true
		}
		for _, st := range snap {
			if !want[st.Name] || st.State != StateHealthy {
				return false
			}
		}
		return true
	}
}
