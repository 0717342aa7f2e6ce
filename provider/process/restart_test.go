//go:build linux || darwin || dragonfly || freebsd || netbsd || openbsd

package process

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/curatorproject/curator/internal/testenv"
	"github.com/curatorproject/curator/provider"
	"github.com/curatorproject/curator/provider/providertest"
)

// A stopped instance keeps its dir, data and address; Start runs it again
// there with new args.
func TestStopStart(t *testing.T) {
	dir := t.TempDir()
	p := newTestProvider(t, dir, testAddrs[:2], 0)
	ctx := context.Background()

	in := providertest.Provision(t, p, sleeperSpec("managers"))
	readReport(t, p, in.ID)
	pid := pidOf(t, p, in.ID)
	if err := p.Stop(ctx, in.ID); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	testenv.WaitUntil(t, testDeadline, "the stopped process to be gone", func() bool { return processGone(pid) })
	if got := providertest.List(t, p, nil); len(got) != 0 {
		t.Errorf("List after Stop = %v, want none", got)
	}
	stopped, err := p.ListStopped(ctx, map[string]string{provider.LabelGroup: "managers"})
	if err != nil {
		t.Fatalf("ListStopped: %v", err)
	}
	if diff := cmp.Diff([]provider.Instance{in}, stopped); diff != "" {
		t.Errorf("ListStopped (-want +got):\n%s", diff)
	}
	if pruned, err := p.Prune(ctx); err != nil || len(pruned) != 0 {
		t.Errorf("Prune = %v, %v; want a stopped instance kept", pruned, err)
	}
	// Its address stays its own.
	other := providertest.Provision(t, p, sleeperSpec("workers"))
	if other.Address == in.Address {
		t.Errorf("Provision handed out %s, the address of a stopped instance", other.Address)
	}
	if _, err := p.Provision(ctx, sleeperSpec("workers")); !errors.Is(err, ErrPoolExhausted) {
		t.Errorf("Provision with one address live and one stopped = %v, want ErrPoolExhausted", err)
	}
	if err := p.Stop(ctx, in.ID); err != nil {
		t.Errorf("Stop of a stopped instance: %v", err)
	}

	out := filepath.Join(p.DataDir(in.ID), "out.json")
	if err := os.Remove(out); err != nil {
		t.Fatal(err)
	}
	args := []string{"-out", "{{data-dir}}/out.json", "-listen", "{{address}}", "again"}
	got, err := p.Start(ctx, in.ID, args, map[string]string{"SLEEPER_ENV": "restarted"})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	if diff := cmp.Diff(in, got); diff != "" {
		t.Errorf("Start (-want +got):\n%s", diff)
	}
	want := report{Args: []string{"-out", out, "-listen", in.Address, "again"}, Env: "restarted"}
	if diff := cmp.Diff(want, readReport(t, p, in.ID)); diff != "" {
		t.Errorf("the restarted process was started with (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]provider.Instance{in}, providertest.List(t, p, map[string]string{provider.LabelGroup: "managers"})); diff != "" {
		t.Errorf("List after Start (-want +got):\n%s", diff)
	}
	if s, err := p.ListStopped(ctx, nil); err != nil || len(s) != 0 {
		t.Errorf("ListStopped after Start = %v, %v; want none", s, err)
	}
	pid = pidOf(t, p, in.ID)
	if _, err := p.Start(ctx, in.ID, args, nil); err != nil {
		t.Errorf("Start of a running instance: %v", err)
	}
	if again := pidOf(t, p, in.ID); again != pid {
		t.Errorf("Start of a running instance started another process (pid %d, was %d)", again, pid)
	}
}

// A dead instance (not stopped) keeps its address and can be started
// again, unless another record holds its address.
func TestStartDead(t *testing.T) {
	p := newTestProvider(t, t.TempDir(), testAddrs[:1], 0)
	ctx := context.Background()

	dead := providertest.Provision(t, p, sleeperSpec("workers"))
	readReport(t, p, dead.ID)
	pid := pidOf(t, p, dead.ID)
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	testenv.WaitUntil(t, testDeadline, "List to drop the killed instance", func() bool { return len(providertest.List(t, p, nil)) == 0 })
	stopped, err := p.ListStopped(ctx, nil)
	if err != nil || len(stopped) != 1 || stopped[0].ID != dead.ID {
		t.Fatalf("ListStopped = %v, %v; want the dead instance", stopped, err)
	}

	// It keeps its address: no Provision takes it.
	if _, err := p.Provision(ctx, sleeperSpec("workers")); !errors.Is(err, ErrPoolExhausted) {
		t.Fatalf("Provision with a dead instance holding the one address = %v, want ErrPoolExhausted", err)
	}
	// A record made before dead instances kept their addresses may hold
	// it: Start says so.
	taker := record{ID: "proc-0000beef", Address: dead.Address, Stopped: true}
	if err := os.MkdirAll(p.DataDir(taker.ID), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := p.recordSave(taker); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Start(ctx, dead.ID, sleeperSpec("workers").Args, nil); !errors.Is(err, ErrAddressTaken) {
		t.Fatalf("Start of a dead instance whose address is taken = %v, want ErrAddressTaken", err)
	}
	if err := p.Destroy(ctx, taker.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Start(ctx, dead.ID, sleeperSpec("workers").Args, nil); err != nil {
		t.Fatalf("Start of a dead instance: %v", err)
	}
	if got := providertest.List(t, p, nil); len(got) != 1 || got[0].ID != dead.ID {
		t.Errorf("List after Start = %v, want the restarted instance", got)
	}

	for _, id := range []string{"", "../x"} {
		if _, err := p.Start(ctx, id, nil, nil); !errors.Is(err, ErrInvalidID) {
			t.Errorf("Start(%q) = %v, want ErrInvalidID", id, err)
		}
		if err := p.Stop(ctx, id); !errors.Is(err, ErrInvalidID) {
			t.Errorf("Stop(%q) = %v, want ErrInvalidID", id, err)
		}
	}
	if _, err := p.Start(ctx, "proc-00000000", nil, nil); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Start of an unknown instance = %v, want ErrNotExist", err)
	}
}

// The parent the StopWithParent test kills: the test binary run again with
// these variables set provisions one sleeper, prints its pid and waits to
// be killed.
const (
	parentDirEnv     = "PROCESS_TEST_PARENT_DIR"
	parentSleeperEnv = "PROCESS_TEST_PARENT_SLEEPER"
	parentFollowEnv  = "PROCESS_TEST_PARENT_FOLLOW"
)

func runParent(dir string) int {
	p, err := New(Config{
		Dir:            dir,
		Binary:         os.Getenv(parentSleeperEnv),
		Addresses:      testAddrs[:1],
		StopWithParent: os.Getenv(parentFollowEnv) == "1",
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	in, err := p.Provision(context.Background(), sleeperSpec("workers"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	r, err := p.recordLoad(in.ID)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Println(r.PID)
	select {}
}
