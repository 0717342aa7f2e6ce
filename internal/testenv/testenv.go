// Package testenv is what the tests of several packages need from the host
// they run on: loopback addresses and free ports of their own, waiting for
// a condition with a deadline, the check for leaked goroutines after a
// package's tests, a build of one of this module's commands, and the
// previous release's curator, built from git history. It is for tests only.
package testenv

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// Polling bounds of Eventually: the first check comes again after
// pollFirst, and the pause doubles up to pollMax, so that a condition that
// holds soon is seen soon and a slow one is not checked in a busy loop.
const (
	pollFirst = time.Millisecond
	pollMax   = 100 * time.Millisecond
)

// LeakPatience is how long CheckLeaks waits for goroutines to end before it
// calls them leaks: etcd's peer connections between members of one process
// can outlive the members by up to etcd's connection read timeout (5s), a
// server-side read whose deadline etcd keeps pushing forward.
const LeakPatience = 20 * time.Second

// CheckLeaks is for TestMain: given m.Run's exit code, it checks that the
// package's tests left no goroutines behind, waiting up to LeakPatience for
// them to end, and returns the code to exit with.
//
//	func TestMain(m *testing.M) { os.Exit(testenv.CheckLeaks(m.Run())) }
func CheckLeaks(code int) int {
	if code != 0 {
		return code
	}
	start := time.Now()
	err := goleak.Find()
	for err != nil && time.Since(start) < LeakPatience {
		time.Sleep(250 * time.Millisecond)
		err = goleak.Find()
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "goleak: %v\n", err)
		return 1
	}
	if d := time.Since(start); d > time.Second {
		fmt.Fprintf(os.Stderr, "goleak: no leaks, after waiting %v for goroutines to end\n", d.Round(time.Millisecond))
	}
	return 0
}

// Eventually calls check until it returns nil, failing the test with the
// last error if timeout passes first.
func Eventually(t testing.TB, timeout time.Duration, what string, check func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	pause := pollFirst
	for {
		err := check()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s (last: %v)", timeout, what, err)
		}
		time.Sleep(pause)
		pause = min(2*pause, pollMax)
	}
}

// WaitUntil is Eventually for a condition that holds or not.
func WaitUntil(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	Eventually(t, timeout, what, func() error {
		if cond() {
			return nil
		}
		return errors.New("not yet")
	})
}

// Loopback hands out the addresses of 127.0.N.1 and up, one at a time, so
// that the nodes of one package's tests never share an address; distinct
// packages start at distinct N.
type Loopback struct {
	first, blocks int
	n             atomic.Int32
}

// NewLoopback returns a Loopback of 127.0.first.1 to 127.0.(first+blocks-1).254.
func NewLoopback(first, blocks int) *Loopback {
	return &Loopback{first: first, blocks: blocks}
}

// Next returns the next address, failing the test when there are no more.
func (l *Loopback) Next(t testing.TB) string {
	t.Helper()
	n := int(l.n.Add(1))
	if n > l.blocks*254 {
		t.Fatalf("out of test addresses in 127.0.%d.0/24 and the %d after", l.first, l.blocks-1)
	}
	return fmt.Sprintf("127.0.%d.%d", l.first+(n-1)/254, 1+(n-1)%254)
}

// FreePorts returns a port P on ip such that P to P+n-1 are free right now.
func FreePorts(t testing.TB, ip string, n int) int {
	t.Helper()
	for range 100 {
		l, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
		if err != nil {
			t.Fatal(err)
		}
		p := l.Addr().(*net.TCPAddr).Port
		l.Close()
		if p+n-1 <= 65535 && portsFree(ip, p, n) {
			return p
		}
	}
	t.Fatalf("no %d free ports in a row on %s", n, ip)
	return 0
}

func portsFree(ip string, first, n int) bool {
	for p := first; p < first+n; p++ {
		l, err := net.Listen("tcp", net.JoinHostPort(ip, strconv.Itoa(p)))
		if err != nil {
			return false
		}
		l.Close()
	}
	return true
}

// Occupy listens on addr until the test ends, as another process would.
func Occupy(t testing.TB, addr string) {
	t.Helper()
	l, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
}

// DirNames is the names in dir, nil if it does not exist.
func DirNames(t testing.TB, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

// GoBuild builds pkg (a path like ./cmd/curator, from the root of the
// module the working directory is in) into out, with flags (like "-tags",
// "faults") before the package.
func GoBuild(out, pkg string, flags ...string) error {
	return GoBuildEnv(nil, out, pkg, flags...)
}

// GoBuildStatic is GoBuild of a static binary (CGO_ENABLED=0), as an
// image FROM scratch runs: set for the build alone, so that a parallel
// test may ask for it (t.Setenv may not be used there).
func GoBuildStatic(out, pkg string, flags ...string) error {
	return GoBuildEnv([]string{"CGO_ENABLED=0"}, out, pkg, flags...)
}

// GoBuildEnv is GoBuild with env added to the build's environment.
func GoBuildEnv(env []string, out, pkg string, flags ...string) error {
	gomod, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return fmt.Errorf("go env GOMOD: %w", err)
	}
	args := append([]string{"build"}, flags...)
	build := exec.Command("go", append(args, "-o", out, pkg)...)
	build.Dir = filepath.Dir(strings.TrimSpace(string(gomod)))
	build.Env = append(os.Environ(), env...)
	if b, err := build.CombinedOutput(); err != nil {
		return fmt.Errorf("go %s: %w\n%s", strings.Join(build.Args[1:], " "), err, b)
	}
	return nil
}

// RunWithCurator is a TestMain's body for tests that run the real binary:
// it builds ./cmd/curator (with flags, like "-tags", "faults") into a new
// temporary dir (named by prefix),
// sets *binary to its path, runs m (beside the busy neighbours BusyEnv
// asks for) and removes the dir. It returns the exit code.
func RunWithCurator(m *testing.M, prefix string, binary *string, flags ...string) int {
	tmp, err := os.MkdirTemp("", prefix)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(tmp)
	*binary = filepath.Join(tmp, "curator")
	if err := GoBuild(*binary, "./cmd/curator", flags...); err != nil {
		fmt.Fprintf(os.Stderr, "build curator: %v\n", err)
		return 1
	}
	stop, err := BusyNeighbours()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer stop()
	return m.Run()
}
