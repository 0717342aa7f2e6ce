package supervisor

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/curatorproject/curator/internal/testenv"
)

// TestOutcomes checks how each way a runnable can end is judged: finished,
// or failed and due for a restart after the initial backoff.
func TestOutcomes(t *testing.T) {
	for _, tc := range []struct {
		name    string
		run     func(ctx context.Context) error
		wantErr string // "" if the runnable is finished
	}{
		{
			name: "done then nil is finished",
			run:  func(ctx context.Context) error { Signal(ctx, Done); return nil },
		},
		{
			name: "healthy, done, nil is finished",
			run:  func(ctx context.Context) error { Signal(ctx, Healthy); Signal(ctx, Done); return nil },
		},
		{
			name:    "nil without done fails",
			run:     func(ctx context.Context) error { return nil },
			wantErr: ErrReturnedWithoutDone.Error(),
		},
		{
			name:    "healthy then nil fails",
			run:     func(ctx context.Context) error { Signal(ctx, Healthy); return nil },
			wantErr: ErrReturnedWithoutDone.Error(),
		},
		{
			name:    "error fails",
			run:     func(ctx context.Context) error { return errors.New("boom") },
			wantErr: "boom",
		},
		{
			name:    "error after done fails",
			run:     func(ctx context.Context) error { Signal(ctx, Done); return errors.New("boom") },
			wantErr: "boom",
		},
		{
			name:    "panic fails",
			run:     func(ctx context.Context) error { panic("boom") },
			wantErr: "panic: boom",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var runs atomic.Int32
			s, clock, _ := startTree(t, parentOf(map[string]Runnable{
				"a": func(ctx context.Context) error {
					runs.Add(1)
					return tc.run(ctx)
				},
			}))

			if tc.wantErr == "" {
				testenv.WaitUntil(t, testDeadline, "root.a to run and leave the tree", func() bool {
					_, ok := s.State("root.a")
					return runs.Load() == 1 && !ok
				})
				// The node leaves the tree only after the decision not to
				// restart it, so no timer can still come.
				clock.noTimer(t)
			} else {
				ft := clock.nextTimer(t)
				if ft.d != testInitial {
					t.Errorf("first backoff = %v, want %v", ft.d, testInitial)
				}
				st, ok := s.State("root.a")
				if !ok {
					t.Fatal("failed root.a is not in the tree")
				}
				want := view{Name: "root.a", State: StateFailed, Backoff: testInitial, Err: tc.wantErr}
				if diff := cmp.Diff(want, viewOf(st)); diff != "" {
					t.Errorf("state of root.a (-want +got):\n%s", diff)
				}
			}
			if got := runs.Load(); got != 1 {
				t.Errorf("root.a ran %d times, want 1", got)
			}
		})
	}
}

// TestRestart checks that a failed runnable comes back, and that the state
// records why it was restarted.
func TestRestart(t *testing.T) {
	for _, tc := range []struct {
		name    string
		fail    func(ctx context.Context) error
		wantErr string
	}{
		{"after error", func(ctx context.Context) error { return errors.New("boom") }, "boom"},
		{"after panic", func(ctx context.Context) error { panic("boom") }, "panic: boom"},
		{"after nil without done", func(ctx context.Context) error { return nil }, ErrReturnedWithoutDone.Error()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var runs atomic.Int32
			s, clock, _ := startTree(t, parentOf(map[string]Runnable{
				"a": func(ctx context.Context) error {
					if runs.Add(1) == 1 {
						return tc.fail(ctx)
					}
					return blockUntilCancelled(ctx)
				},
			}))

			clock.nextTimer(t).fire()
			testenv.WaitUntil(t, testDeadline, "root.a healthy again", allHealthy(s, "root", "root.a"))

			st, _ := s.State("root.a")
			want := view{Name: "root.a", State: StateHealthy, Restarts: 1, Backoff: testInitial, Err: tc.wantErr}
			if diff := cmp.Diff(want, viewOf(st)); diff != "" {
				t.Errorf("state of root.a (-want +got):\n%s", diff)
			}
			if got := runs.Load(); got != 2 {
				t.Errorf("root.a ran %d times, want 2", got)
			}
		})
	}
}

// TestFailureRestartsSubtreeOnly kills a runnable with children and a
// grandchild, and checks that its whole subtree stopped before it was
// restarted, while its sibling and its parent went on untouched.
//
//	root ─┬─ parent ─┬─ c1
//	      │          └─ c2 ── g
//	      └─ sibling
func TestFailureRestartsSubtreeOnly(t *testing.T) {
	started, returned := newCounter(), newCounter()
	leaf := func(ctx context.Context) error {
		started.inc(Name(ctx))
		defer returned.inc(Name(ctx))
		return blockUntilCancelled(ctx)
	}
	kill := make(chan struct{})
	var parentRuns atomic.Int32
	siblingCtx := make(chan context.Context, 1)

	root := func(ctx context.Context) error {
		started.inc(Name(ctx))
		err := RunGroup(ctx, map[string]Runnable{
			"parent": func(ctx context.Context) error {
				started.inc(Name(ctx))
				first := parentRuns.Add(1) == 1
				err := RunGroup(ctx, map[string]Runnable{
					"c1": leaf,
					"c2": func(ctx context.Context) error {
						started.inc(Name(ctx))
						defer returned.inc(Name(ctx))
						if err := Run(ctx, "g", leaf); err != nil {
							return err
						}
						Signal(ctx, Healthy)
						<-ctx.Done()
						return ctx.Err()
					},
				})
				if err != nil {
					return err
				}
				Signal(ctx, Healthy)
				if first {
					select {
					case <-kill:
						return errors.New("killed")
					case <-ctx.Done():
						return ctx.Err()
					}
				}
				<-ctx.Done()
				return ctx.Err()
			},
			"sibling": func(ctx context.Context) error {
				started.inc(Name(ctx))
				siblingCtx <- ctx
				return blockUntilCancelled(ctx)
			},
		})
		if err != nil {
			return err
		}
		Signal(ctx, Healthy)
		<-ctx.Done()
		return ctx.Err()
	}
	s, clock, _ := startTree(t, root)
	everyone := []string{"root", "root.parent", "root.parent.c1", "root.parent.c2", "root.parent.c2.g", "root.sibling"}
	testenv.WaitUntil(t, testDeadline, "the whole tree healthy", allHealthy(s, everyone...))
	sibCtx := recv(t, siblingCtx, "sibling's context")

	close(kill)
	// The backoff starts only once the subtree has stopped.
	ft := clock.nextTimer(t)
	wantReturned := map[string]int{"root.parent.c1": 1, "root.parent.c2": 1, "root.parent.c2.g": 1}
	if diff := cmp.Diff(wantReturned, returned.get()); diff != "" {
		t.Errorf("runnables returned when the backoff started (-want +got):\n%s", diff)
	}
	wantTree := []view{
		{Name: "root", State: StateHealthy},
		{Name: "root.parent", State: StateFailed, Backoff: testInitial, Err: "killed"},
		{Name: "root.sibling", State: StateHealthy},
	}
	if diff := cmp.Diff(wantTree, views(s.Snapshot())); diff != "" {
		t.Errorf("tree during backoff (-want +got):\n%s", diff)
	}

	ft.fire()
	testenv.WaitUntil(t, testDeadline, "the whole tree healthy again", allHealthy(s, everyone...))

	wantStarted := map[string]int{
		"root":             1,
		"root.sibling":     1,
		"root.parent":      2,
		"root.parent.c1":   2,
		"root.parent.c2":   2,
		"root.parent.c2.g": 2,
	}
	if diff := cmp.Diff(wantStarted, started.get()); diff != "" {
		t.Errorf("runnables started (-want +got):\n%s", diff)
	}
	if err := sibCtx.Err(); err != nil {
		t.Errorf("sibling's context was cancelled: %v", err)
	}
}

// TestBackoff checks that consecutive failures double the wait up to the
// maximum, and that having been healthy for the reset period (but not less)
// brings it back to the initial wait.
func TestBackoff(t *testing.T) {
	type step struct {
		healthyFor time.Duration // 0: fail at once, without signalling Healthy
	}
	steps := make(chan step)
	healthy := make(chan struct{})
	fail := make(chan struct{})
	child := func(ctx context.Context) error {
		select {
		case st := <-steps:
			if st.healthyFor > 0 {
				Signal(ctx, Healthy)
				healthy <- struct{}{}
				<-fail
			}
			return errors.New("boom")
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	_, clock, _ := startTree(t, parentOf(map[string]Runnable{"a": child}))

	var got []time.Duration
	run := func(healthyFor time.Duration) {
		t.Helper()
		send(t, steps, step{healthyFor}, "a step")
		if healthyFor > 0 {
			recv(t, healthy, "root.a healthy")
			clock.Advance(healthyFor)
			send(t, fail, struct{}{}, "a failure")
		}
		ft := clock.nextTimer(t)
		got = append(got, ft.d)
		ft.fire()
	}
	for _, healthyFor := range []time.Duration{
		0, 0, 0, 0, 0, 0, // grows to the maximum and stays there
		testReset,                    // healthy long enough: reset
		0,                            // grows again
		testReset - time.Millisecond, // healthy, but not long enough
		testReset,                    // reset again
	} {
		run(healthyFor)
	}

	ms := time.Millisecond
	want := []time.Duration{100 * ms, 200 * ms, 400 * ms, 800 * ms, time.Second, time.Second, 100 * ms, 200 * ms, 400 * ms, 100 * ms}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("backoff waits (-want +got):\n%s", diff)
	}
}

// TestJitterShortensWaits checks that the supervisor applies jitter within its
// bounds.
func TestJitterShortensWaits(t *testing.T) {
	_, clock, _ := startTree(t, parentOf(map[string]Runnable{
		"a": func(ctx context.Context) error { return errors.New("boom") },
	}), WithJitter(0.5), WithBackoff(time.Second, time.Second))
	for range 20 {
		ft := clock.nextTimer(t)
		if ft.d < 500*time.Millisecond || ft.d > time.Second {
			t.Fatalf("wait %v outside [500ms, 1s]", ft.d)
		}
		ft.fire()
	}
}

// TestNamesAndLoggers checks dotted names, and that each runnable's logger is
// named by them.
func TestNamesAndLoggers(t *testing.T) {
	core, logs := observer.New(zap.DebugLevel)
	seen := make(chan [2]string, 3)
	report := func(ctx context.Context) {
		Logger(ctx).Info("hello")
		seen <- [2]string{Name(ctx), Logger(ctx).Name()}
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := New(ctx, func(ctx context.Context) error {
		report(ctx)
		err := Run(ctx, "a", func(ctx context.Context) error {
			report(ctx)
			err := Run(ctx, "b", func(ctx context.Context) error {
				report(ctx)
				return blockUntilCancelled(ctx)
			})
			if err != nil {
				return err
			}
			return blockUntilCancelled(ctx)
		})
		if err != nil {
			return err
		}
		return blockUntilCancelled(ctx)
	}, WithLogger(zap.New(core)))
	t.Cleanup(func() { cancel(); s.Wait() })

	got := map[string]string{}
	for range 3 {
		pair := recv(t, seen, "a runnable's name")
		got[pair[0]] = pair[1]
	}
	want := map[string]string{"root": "root", "root.a": "root.a", "root.a.b": "root.a.b"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Name -> Logger().Name() (-want +got):\n%s", diff)
	}
	loggedBy := map[string]bool{}
	for _, e := range logs.FilterMessage("hello").All() {
		loggedBy[e.LoggerName] = true
	}
	if diff := cmp.Diff(map[string]bool{"root": true, "root.a": true, "root.a.b": true}, loggedBy); diff != "" {
		t.Errorf("logger names on entries (-want +got):\n%s", diff)
	}

	if got := Name(context.Background()); got != "" {
		t.Errorf("Name of an unsupervised context = %q, want empty", got)
	}
	if Logger(context.Background()).Core().Enabled(zap.ErrorLevel) {
		t.Error("Logger of an unsupervised context logs; want a no-op logger")
	}
}

// TestRunRefuses checks every reason Run and RunGroup refuse to start a
// child, and that a refused group starts nothing.
func TestRunRefuses(t *testing.T) {
	rootCtx := make(chan context.Context, 1)
	finishedCtx := make(chan context.Context, 1)
	var extraRuns atomic.Int32
	extra := func(ctx context.Context) error {
		extraRuns.Add(1)
		return blockUntilCancelled(ctx)
	}
	s, _, _ := startTree(t, func(ctx context.Context) error {
		err := RunGroup(ctx, map[string]Runnable{
			"taken": blockUntilCancelled,
			"finisher": func(ctx context.Context) error {
				finishedCtx <- ctx
				Signal(ctx, Done)
				return nil
			},
		})
		if err != nil {
			return err
		}
		rootCtx <- ctx
		return blockUntilCancelled(ctx)
	})
	ctx := recv(t, rootCtx, "root's context")
	fctx := recv(t, finishedCtx, "finisher's context")
	testenv.WaitUntil(t, testDeadline, "finisher to leave the tree", allHealthy(s, "root", "root.taken"))

	for _, tc := range []struct {
		name  string
		start func() error
		want  error
	}{
		{"empty name", func() error { return Run(ctx, "", extra) }, ErrInvalidName},
		{"dotted name", func() error { return Run(ctx, "a.b", extra) }, ErrInvalidName},
		{"live sibling's name", func() error { return Run(ctx, "taken", extra) }, ErrDuplicateName},
		{"group with a bad name", func() error {
			return RunGroup(ctx, map[string]Runnable{"fresh": extra, "bad.name": extra})
		}, ErrInvalidName},
		{"group with a taken name", func() error {
			return RunGroup(ctx, map[string]Runnable{"fresh": extra, "taken": extra})
		}, ErrDuplicateName},
		{"unsupervised context", func() error { return Run(context.Background(), "fresh", extra) }, ErrNotSupervised},
		{"context of a finished runnable", func() error { return Run(fctx, "fresh", extra) }, ErrNotRunning},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.start(); !errors.Is(err, tc.want) {
				t.Errorf("got error %v, want %v", err, tc.want)
			}
		})
	}
	if err := Run(ctx, "fresh", nil); err == nil {
		t.Error("Run with a nil runnable: got no error")
	}
	if got := extraRuns.Load(); got != 0 {
		t.Errorf("refused runnables ran %d times, want 0", got)
	}
	if diff := cmp.Diff([]string{"root", "root.taken"}, names(s)); diff != "" {
		t.Errorf("tree after refusals (-want +got):\n%s", diff)
	}

	// A finished sibling's name is free again; a good group starts whole.
	if err := RunGroup(ctx, map[string]Runnable{"finisher": extra, "fresh": extra}); err != nil {
		t.Fatalf("RunGroup: %v", err)
	}
	testenv.WaitUntil(t, testDeadline, "the new children healthy", allHealthy(s, "root", "root.taken", "root.finisher", "root.fresh"))
}

func names(s *Supervisor) []string {
	var out []string
	for _, st := range s.Snapshot() {
		out = append(out, st.Name)
	}
	return out
}

// TestSignalMisuse checks that a signal from outside the tree panics and one
// from a run that has returned is ignored.
func TestSignalMisuse(t *testing.T) {
	func() {
		defer func() {
			if recover() == nil {
				t.Error("Signal with an unsupervised context did not panic")
			}
		}()
		Signal(context.Background(), Healthy)
	}()

	var runs atomic.Int32
	stale := make(chan context.Context, 1)
	s, clock, _ := startTree(t, parentOf(map[string]Runnable{
		"a": func(ctx context.Context) error {
			if runs.Add(1) == 1 {
				stale <- ctx
				return errors.New("boom")
			}
			<-ctx.Done()
			return ctx.Err()
		},
	}))
	old := recv(t, stale, "first run's context")
	clock.nextTimer(t).fire()
	testenv.WaitUntil(t, testDeadline, "second run", func() bool { return runs.Load() == 2 })
	Signal(old, Healthy)
	Signal(old, Done)
	if st, _ := s.State("root.a"); st.State != StateStarting {
		t.Errorf("after signals from a stale run, root.a is %v, want %v", st.State, StateStarting)
	}
}

// TestCancelStopsEverything checks that cancelling New's context stops every
// runnable, and that the supervisor reports stopped only after the slowest
// one has returned.
func TestCancelStopsEverything(t *testing.T) {
	started, returned := newCounter(), newCounter()
	track := func(r Runnable) Runnable {
		return func(ctx context.Context) error {
			started.inc(Name(ctx))
			defer returned.inc(Name(ctx))
			return r(ctx)
		}
	}
	stopping := make(chan struct{})
	release := make(chan struct{})
	slow := func(ctx context.Context) error {
		Signal(ctx, Healthy)
		<-ctx.Done()
		close(stopping)
		<-release
		return ctx.Err()
	}
	s, _, cancel := startTree(t, track(parentOf(map[string]Runnable{
		"a": track(parentOf(map[string]Runnable{"slow": track(slow)})),
		"b": track(blockUntilCancelled),
	})))
	testenv.WaitUntil(t, testDeadline, "the tree healthy", allHealthy(s, "root", "root.a", "root.a.slow", "root.b"))

	cancel()
	recv(t, stopping, "root.a.slow to see the cancellation")
	select {
	case <-s.Done():
		t.Fatal("supervisor reported stopped while root.a.slow is still running")
	default:
	}
	close(release)
	recv(t, s.Done(), "the supervisor to stop")
	s.Wait()

	want := map[string]int{"root": 1, "root.a": 1, "root.a.slow": 1, "root.b": 1}
	if diff := cmp.Diff(want, started.get()); diff != "" {
		t.Errorf("started (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(want, returned.get()); diff != "" {
		t.Errorf("returned (-want +got):\n%s", diff)
	}
	if snap := s.Snapshot(); len(snap) != 0 {
		t.Errorf("tree not empty after stop: %v", views(snap))
	}
}

// TestDoneRootKeepsChildren checks that a finished runnable's children keep
// running, and that the tree stops by itself once everything has finished.
func TestDoneRootKeepsChildren(t *testing.T) {
	release := make(chan struct{})
	s, _, _ := startTree(t, func(ctx context.Context) error {
		err := Run(ctx, "c", func(ctx context.Context) error {
			Signal(ctx, Healthy)
			select {
			case <-release:
			case <-ctx.Done():
				return ctx.Err()
			}
			Signal(ctx, Done)
			return nil
		})
		if err != nil {
			return err
		}
		Signal(ctx, Done)
		return nil
	})
	testenv.WaitUntil(t, testDeadline, "root done with a healthy child", func() bool {
		root, _ := s.State("root")
		c, _ := s.State("root.c")
		return root.State == StateDone && c.State == StateHealthy
	})
	select {
	case <-s.Done():
		t.Fatal("supervisor stopped while root.c is running")
	default:
	}
	close(release)
	recv(t, s.Done(), "the supervisor to stop by itself")
}

func TestHarnessRunsAndStops(t *testing.T) {
	names := make(chan string, 1)
	returned := make(chan struct{})
	stop, logger := TestHarness(t, func(ctx context.Context) error {
		defer close(returned)
		names <- Name(ctx)
		Logger(ctx).Info("running under the harness")
		return blockUntilCancelled(ctx)
	})
	logger.Info("harness started")
	if got := recv(t, names, "the runnable's name"); got != "root.main" {
		t.Errorf("Name = %q, want %q", got, "root.main")
	}
	stop()
	select {
	case <-returned:
	default:
		t.Error("stop returned before the runnable did")
	}
	stop() // a second call is harmless
}

// TestHarnessRestartsWithRealClock checks restarts through the real clock,
// with a backoff short enough not to slow the test.
func TestHarnessRestartsWithRealClock(t *testing.T) {
	var runs atomic.Int32
	healthy := make(chan struct{})
	TestHarness(t, func(ctx context.Context) error {
		if runs.Add(1) < 3 {
			return errors.New("boom")
		}
		close(healthy)
		return blockUntilCancelled(ctx)
	}, WithBackoff(time.Millisecond, 2*time.Millisecond))
	recv(t, healthy, "the third run")
}

func TestStrings(t *testing.T) {
	got := []string{
		StateStarting.String(), StateHealthy.String(), StateDone.String(),
		StateFailed.String(), StateStopping.String(), State(42).String(),
		Healthy.String(), Done.String(), SignalType(42).String(),
	}
	want := []string{"starting", "healthy", "done", "failed", "stopping", "State(42)", "healthy", "done", "SignalType(42)"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("strings (-want +got):\n%s", diff)
	}
}

const panicChildEnv = "SUPERVISOR_TEST_PANIC_CHILD"

// TestHarnessPropagatesPanic runs the test binary again as a child that
// panics under the harness, and checks that the panic crashed it.
func TestHarnessPropagatesPanic(t *testing.T) {
	if os.Getenv(panicChildEnv) != "" {
		TestHarness(t, func(ctx context.Context) error { panic("propagated boom") })
		<-time.After(testDeadline)
		t.Fatal("the panic did not crash the process")
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestHarnessPropagatesPanic$", "-test.count=1")
	cmd.Env = append(os.Environ(), panicChildEnv+"=1")
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("child exited cleanly, want a crash; output:\n%s", out)
	}
	if !strings.Contains(string(out), "panic: propagated boom") {
		t.Errorf("child output lacks the panic:\n%s", out)
	}
}
