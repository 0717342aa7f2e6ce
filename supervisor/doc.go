// Package supervisor runs the long-lived parts of a curator process as a tree
// of named, restartable runnables, in the spirit of Erlang/OTP supervisors.
//
// # Runnables and names
//
// A [Runnable] is a function that runs until its context is cancelled or it
// has nothing more to do. [New] starts a tree whose root runnable is named
// "root". Every runnable may start children with [Run] or [RunGroup], passing
// the context the supervisor gave it (or one derived from it). A child's name
// is its parent's name, a dot, and the child's own name, so a runnable deep in
// the tree is known as, for example, "root.curator.leader.sync". [Name] returns
// that dotted name and [Logger] a zap logger named by it.
//
// A child's own name must be non-empty, must not contain a dot, and must not be
// taken by a live sibling. A sibling is live until it has returned for good and
// its own subtree has stopped; after that its name may be used again.
//
// # Signals
//
// A runnable tells the supervisor how it is doing with [Signal]:
//
//   - Healthy: it has started and is doing its job. Staying healthy long enough
//     (see [WithBackoffReset]) resets its restart backoff.
//   - Done: it has nothing more to do. Done implies Healthy. A runnable that
//     returns nil after signalling Done is finished: it is never restarted.
//     Its children keep running, under its still-open context, until they are
//     finished themselves or the finished runnable's parent stops them.
//
// # Failure and restart
//
// A runnable has failed when it returns an error, returns nil without having
// signalled Done, or panics (unless [WithPropagatePanic] is set, in which case
// the panic is left to crash the process, which is what tests want).
//
// When a runnable fails, the supervisor cancels its context, which cancels the
// contexts of all its descendants, and waits until every one of them has
// returned. Only then, after a backoff, is the runnable started again with a
// fresh context; it starts its children again itself, so a restarted runnable
// always begins with an empty subtree. The failed runnable's parent and
// siblings are not touched: their contexts stay open and they keep running.
//
// A runnable that returns while its parent's context is cancelled is stopping,
// not failing, whatever it returns: the supervisor waits for its subtree and
// does not restart it.
//
// # Backoff
//
// Each runnable keeps its own backoff. Its first failure waits the initial
// backoff; each further failure doubles the wait, up to the maximum (see
// [WithBackoff]). The wait is shortened by a random jitter of up to a fraction
// of it (see [WithJitter]) so that runnables that fail together do not restart
// in lockstep. A runnable that had been healthy for at least the reset period
// before it failed starts again from the initial backoff. The backoff is
// counted from the moment the failed runnable's subtree has fully stopped, and
// it is cut short when the parent stops.
//
// # Stopping
//
// Cancelling the context given to [New] cancels the whole tree.
// [Supervisor.Wait] and [Supervisor.Done] report when every runnable has
// returned. The tree also stops on its own when the root runnable finishes
// (returns nil after Done) and all of its descendants have finished.
//
// # Time and tests
//
// The supervisor reads time only through a [Clock] (see [WithClock]), so tests
// can drive backoff without sleeping. [TestHarness] runs a runnable inside a
// supervisor for another package's tests, with panics propagated and logs
// going to the test's log. [Supervisor.State] and [Supervisor.Snapshot] show
// the state of the tree.
package supervisor
