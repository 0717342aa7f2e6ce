package e2e

import (
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"math"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// How the package's tests share the machine: every test that starts a
// cluster joins one of three queues, and the queues run side by side.
//
//   - the pool (parallel): tests on loopback addresses of their own (a
//     127.0.N. range no other test uses) and in dirs of their own;
//     parallelDefault of them (or -parallel N) run at once.
//   - the partition chain (partitionChain): the partition tests, one at
//     a time, each also in two places of the pool (ahead of the pool's
//     own tests). Their uids and nftables tables are their own (by
//     subnet); they check that no live node is ever marked down while a
//     fault lasts (down after 1 s), which a CPU shared by more clusters
//     makes a check of the CPU: beside the pool's three and the engine
//     chain, nodes went unheard for over a second under load, and with
//     one place of the pool, once in five runs a node whose session the
//     leader moved to another manager (TestPartitionFrozenLeader).
//   - the engine chain (engineChain): the tests that start Docker
//     engines (a Swarm, failure domains) or use the host's, one at a time.
//
// The package takes about as long as its longest queue, rather than the
// chains' sum plus the pool's. go test bounds its parallel tests with one
// count (-parallel): TestMain lifts it, and the queues bound themselves,
// so that a test waiting for its chain holds no place in the pool.

// parallelDefault is the pool's size when -parallel is not given. Their
// clusters mostly wait on timers (elections, downs, rollouts), so three
// fit on two cores beside the two chains.
const parallelDefault = 3

// goParallel is what TestMain sets go test's -parallel to: more than the
// package's tests, so that only the queues bound them.
const goParallel = 1000

var (
	// pool is set by setPoolSize, before any test runs.
	pool           *queue
	partitionChain = &queue{name: "the partition chain", free: 1, opened: true, poolPlaces: 2}
	engineChain    = &queue{name: "the engine chain", free: 1, opened: true}
)

// setPoolSize sizes the pool from -parallel (parallelDefault if it is
// not given), and lifts go test's own bound. TestMain calls it after
// flag.Parse.
func setPoolSize() error {
	size, given := parallelDefault, false
	flag.Visit(func(f *flag.Flag) {
		if f.Name == "test.parallel" {
			given = true
		}
	})
	if given {
		n, err := strconv.Atoi(flag.Lookup("test.parallel").Value.String())
		if err != nil || n < 1 {
			return fmt.Errorf("-parallel %s: want a count of at least 1", flag.Lookup("test.parallel").Value)
		}
		size = n
	}
	pool = newQueue("the pool", size)
	return flag.Set("test.parallel", strconv.Itoa(goParallel))
}

// parallel runs t in the pool: see the queues above.
func parallel(t *testing.T) {
	t.Helper()
	t.Parallel()
	pool.join(t)
}

// inChain runs t in the chain q, after the tests of q before it, and, if
// q's tests count in the pool, in places of the pool as well: before
// any test of the pool's own, so that the chain is not left for last.
func inChain(t *testing.T, q *queue) {
	t.Helper()
	t.Parallel()
	q.join(t)
	for range min(q.poolPlaces, pool.size) {
		pool.joinFirst(t)
	}
}

// slowTests are the package's slowest tests by name (a subtest by its
// test's), with about how many seconds each took on two cores. A queue
// hands its free places to the slowest test waiting first, so that the
// pool does not end with one of them running alone.
var slowTests = map[string]int{
	"TestUpgradeAcrossReleases":      150,
	"TestExecPluginGroup":            80,
	"TestAgentUnderSystemd":          55,
	"TestRolloutUndoRestart":         50,
	"TestForceNewClusterGroups":      50,
	"TestRolloutBadTemplate":         45,
	"TestRolloutDeadlineFrozenSurge": 45,
	"TestRolloutPauseInSurge":        40,
	"TestRolloutFaults":              35,
	"TestCertRenewal":                35,
	"TestRolloutManagers":            35,
}

// openAfter is how long the pool waits, after its first test comes,
// before it hands out places: go test releases the parallel tests all at
// once, and the pool chooses among all of them rather than the first to
// come. A chain opens at once: its order does not change its length.
const openAfter = 200 * time.Millisecond

// queue is a number of places; a test holds one from when it gets it to
// the end of its cleanup.
type queue struct {
	name string
	// poolPlaces: each test of the chain holds this many places in the
	// pool too (the whole pool, if it is smaller).
	poolPlaces int
	// size is the pool's places (0 for a chain).
	size int

	mu      sync.Mutex
	free    int
	opened  bool
	opening bool
	waiting []*waiter
	arrived int
}

// waiter is a test waiting for a place.
type waiter struct {
	seconds int // slowTests' figure, 0 if the test is not there
	arrived int
	granted chan struct{}
}

func newQueue(name string, size int) *queue {
	return &queue{name: name, free: size, size: size}
}

// take waits for a place, for a test of about seconds, and returns the
// function that gives it back.
func (q *queue) take(seconds int) (release func()) {
	w := &waiter{seconds: seconds, granted: make(chan struct{})}
	q.mu.Lock()
	w.arrived = q.arrived
	q.arrived++
	q.waiting = append(q.waiting, w)
	if !q.opened && !q.opening {
		q.opening = true
		time.AfterFunc(openAfter, func() {
			q.mu.Lock()
			defer q.mu.Unlock()
			q.opened = true
			q.grant()
		})
	}
	q.grant()
	q.mu.Unlock()
	<-w.granted
	return func() {
		q.mu.Lock()
		defer q.mu.Unlock()
		q.free++
		q.grant()
	}
}

// grant hands the free places to the slowest tests waiting, and among
// tests as slow to the first to come. q.mu is held.
func (q *queue) grant() {
	for q.opened && q.free > 0 && len(q.waiting) > 0 {
		next := 0
		for i, w := range q.waiting {
			if w.seconds > q.waiting[next].seconds {
				next = i
			}
		}
		close(q.waiting[next].granted)
		q.waiting = slices.Delete(q.waiting, next, next+1)
		q.free--
	}
}

// join waits for a place in q and holds it until t's cleanup is done:
// the release is the first cleanup registered, so it runs last, after
// t's processes are killed.
func (q *queue) join(t *testing.T) {
	t.Helper()
	name, _, _ := strings.Cut(t.Name(), "/")
	q.joinAs(t, slowTests[name])
}

// joinFirst is join ahead of every test that is not itself first.
func (q *queue) joinFirst(t *testing.T) {
	t.Helper()
	q.joinAs(t, math.MaxInt)
}

// joinAs is join for a test of about seconds.
func (q *queue) joinAs(t *testing.T, seconds int) {
	t.Helper()
	start := time.Now()
	t.Cleanup(q.take(seconds))
	if waited := time.Since(start); waited >= time.Second {
		t.Logf("waited %s for a place in %s", waited.Round(time.Second), q.name)
	}
}

// TestQueueSlowestFirst: a queue opens after openAfter, hands its places
// to the slowest tests waiting first, then in order of coming, and a
// place given back goes to the next.
func TestQueueSlowestFirst(t *testing.T) {
	q := newQueue("a queue of two", 2)
	type holder struct {
		name    string
		release func()
	}
	granted := make(chan holder)
	for i, seconds := range []int{0, 10, 0, 50, 30} {
		go func() {
			release := q.take(seconds)
			granted <- holder{fmt.Sprintf("%d:%d", i, seconds), release}
		}()
		time.Sleep(10 * time.Millisecond) // come in this order
	}
	next := func() holder {
		t.Helper()
		select {
		case h := <-granted:
			return h
		case <-time.After(5 * time.Second):
			t.Fatal("no place handed out")
			return holder{}
		}
	}
	// Once the queue opens, its two places go to the two slowest.
	first, second := next(), next()
	held := map[string]func(){first.name: first.release, second.name: second.release}
	if _, ok := held["3:50"]; !ok || held["4:30"] == nil {
		t.Fatalf("first places to %s and %s, want 3:50 and 4:30", first.name, second.name)
	}
	select {
	case h := <-granted:
		t.Fatalf("a third place, to %s, in a queue of two", h.name)
	case <-time.After(50 * time.Millisecond):
	}
	// Each place given back goes to the slowest waiting, then the first.
	for _, step := range []struct{ release, want string }{{"3:50", "1:10"}, {"4:30", "0:0"}, {"1:10", "2:0"}} {
		held[step.release]()
		h := next()
		if h.name != step.want {
			t.Errorf("after %s gave its place back, it went to %s, want %s", step.release, h.name, step.want)
		}
		held[h.name] = h.release
	}
}

// sequential are the tests that run before every queue, alone, and why.
var sequential = map[string]string{
	"TestPreviousReleaseBinary":       "its first run builds the previous release, which takes both cores",
	"TestParallelTestsOwnTheirRanges": "reads the source",
	"TestEveryTestHasAQueue":          "reads the source",
	"TestQueueSlowestFirst":           "no cluster",
}

// TestEveryTestHasAQueue: the rule of the queues, checked on the source:
// every test of the package starts by joining the pool or a chain (or, if
// its subtests do, by t.Parallel), unless sequential says why it runs
// alone first. A test that forgets runs alone before the queues, and the
// package takes that much longer.
func TestEveryTestHasAQueue(t *testing.T) {
	files, err := filepath.Glob("*_test.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	tests := 0
	for _, name := range files {
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Recv != nil || !strings.HasPrefix(fn.Name.Name, "Test") || fn.Name.Name == "TestMain" {
				continue
			}
			tests++
			if _, ok := sequential[fn.Name.Name]; ok {
				continue
			}
			switch first := firstCall(fn.Body); first {
			case "parallel", "inChain":
			case "t.Parallel":
				if !callsIn(fn.Body, "parallel") {
					t.Errorf("%s: %s calls t.Parallel and no subtest of it joins the pool: call parallel(t) or inChain(t, ...) instead", fset.Position(fn.Pos()), fn.Name.Name)
				}
			default:
				t.Errorf("%s: %s does not start with parallel(t) or inChain(t, ...) (first call: %q)", fset.Position(fn.Pos()), fn.Name.Name, first)
			}
		}
	}
	if tests < 10 {
		t.Fatalf("found %d tests in the package's source: the check reads nothing", tests)
	}
}

// firstCall is the function the first statement of body calls ("" if it
// is no call): "parallel", "inChain" or "t.Parallel".
func firstCall(body *ast.BlockStmt) string {
	if body == nil || len(body.List) == 0 {
		return ""
	}
	stmt, ok := body.List[0].(*ast.ExprStmt)
	if !ok {
		return ""
	}
	call, ok := stmt.X.(*ast.CallExpr)
	if !ok {
		return ""
	}
	return callName(call)
}

// callsIn says whether body calls the function name anywhere (a
// subtest's func literal included).
func callsIn(body *ast.BlockStmt, name string) bool {
	found := false
	ast.Inspect(body, func(n ast.Node) bool {
		if call, ok := n.(*ast.CallExpr); ok && callName(call) == name {
			found = true
		}
		return !found
	})
	return found
}

func callName(call *ast.CallExpr) string {
	switch fun := call.Fun.(type) {
	case *ast.Ident:
		return fun.Name
	case *ast.SelectorExpr:
		if x, ok := fun.X.(*ast.Ident); ok {
			return x.Name + "." + fun.Sel.Name
		}
	}
	return ""
}
