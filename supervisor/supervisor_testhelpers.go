package supervisor

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"
)

// HarnessStopTimeout is how long TestHarness waits for the tree to stop before
// it fails the test and names the runnables that are still running.
const HarnessStopTimeout = 30 * time.Second

// TestHarness runs r, named "root.main", in a supervisor made for tests:
// panics propagate and crash the test binary instead of being retried, and
// everything logs to the test's log. opts are applied after those defaults
// (for example WithClock or WithBackoff).
//
// The returned stop function cancels the tree and waits until every runnable
// has returned; it is safe to call more than once and from any goroutine, and
// TestHarness registers it with t.Cleanup. The returned logger is the base
// logger of the tree, for the test's own messages.
func TestHarness(t testing.TB, r Runnable, opts ...Option) (stop context.CancelFunc, logger *zap.Logger) {
	t.Helper()
	logger = zaptest.NewLogger(t)
	ctx, cancel := context.WithCancel(context.Background())
	all := append([]Option{WithLogger(logger), WithPropagatePanic()}, opts...)
	s := New(ctx, func(ctx context.Context) error {
		if err := Run(ctx, "main", r); err != nil {
			return err
		}
		Signal(ctx, Done)
		return nil
	}, all...)

	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			select {
			case <-s.Done():
			case <-time.After(HarnessStopTimeout):
				t.Errorf("supervisor: tree did not stop within %v; still running:\n%s", HarnessStopTimeout, formatSnapshot(s.Snapshot()))
			}
		})
	}
	t.Cleanup(stop)
	return stop, logger
}

func formatSnapshot(states []NodeState) string {
	var b strings.Builder
	for _, st := range states {
		fmt.Fprintf(&b, "\t%s: %v", st.Name, st.State)
		if st.Err != nil {
			fmt.Fprintf(&b, " (last failure: %v)", st.Err)
		}
		b.WriteByte('\n')
	}
	return b.String()
}
