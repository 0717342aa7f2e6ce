//go:build linux || darwin || dragonfly || freebsd || netbsd || openbsd

package process

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/zap/zaptest"

	"github.com/curatorproject/curator/internal/testenv"
	"github.com/curatorproject/curator/provider"
	"github.com/curatorproject/curator/provider/providertest"
)

// testDeadline bounds every wait for a condition.
const testDeadline = 10 * time.Second

var testAddrs = []string{"127.0.100.10:7000", "127.0.100.11:7000", "127.0.100.12:7000"}

// newTestProvider returns a Provider on dir running the sleeper, and
// destroys whatever is left of its instances when the test ends.
func newTestProvider(t *testing.T, dir string, addrs []string, stopTimeout time.Duration) *Provider {
	t.Helper()
	return newProviderOf(t, Config{Dir: dir, Binary: sleeperBin, Addresses: addrs, StopTimeout: stopTimeout, Logger: zaptest.NewLogger(t)})
}

// newProviderOf is a provider of cfg whose instances are destroyed when
// the test ends.
func newProviderOf(t *testing.T, cfg Config) *Provider {
	t.Helper()
	p, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() {
		insts, _ := p.List(context.Background(), nil)
		for _, in := range insts {
			p.Destroy(context.Background(), in.ID)
		}
	})
	return p
}

func sleeperSpec(group string, extraArgs ...string) provider.Spec {
	return provider.Spec{
		Labels: map[string]string{provider.LabelCluster: "c1", provider.LabelGroup: group, provider.LabelConfigSHA: "sha1"},
		Args:   append([]string{"-out", "{{data-dir}}/out.json", "-listen", "{{address}}"}, extraArgs...),
		Env:    map[string]string{"SLEEPER_ENV": "token-" + group},
	}
}

type report struct {
	Args []string `json:"args"`
	Env  string   `json:"env"`
}

// readReport waits for the sleeper of instance id to say how it was
// started.
func readReport(t *testing.T, p *Provider, id string) report {
	t.Helper()
	path := filepath.Join(p.DataDir(id), "out.json")
	var b []byte
	testenv.WaitUntil(t, testDeadline, "the sleeper's report "+path, func() bool {
		var err error
		b, err = os.ReadFile(path)
		return err == nil
	})
	var r report
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatalf("report %s: %v", path, err)
	}
	return r
}

func pidOf(t *testing.T, p *Provider, id string) int {
	t.Helper()
	r, err := p.recordLoad(id)
	if err != nil {
		t.Fatalf("record of %s: %v", id, err)
	}
	if r.PID <= 0 {
		t.Fatalf("record of %s has pid %d", id, r.PID)
	}
	return r.PID
}

// processGone says whether pid no longer exists (it has exited and been
// reaped).
func processGone(pid int) bool {
	return errors.Is(syscall.Kill(pid, 0), syscall.ESRCH)
}

func TestProvisionListDestroy(t *testing.T) {
	dir := t.TempDir()
	p := newTestProvider(t, dir, testAddrs, 0)
	ctx := context.Background()

	start := time.Now()
	in := providertest.Provision(t, p, sleeperSpec("workers"))
	if !strings.HasPrefix(in.ID, "proc-") {
		t.Errorf("ID = %q, want proc-...", in.ID)
	}
	wantInst := provider.Instance{ID: in.ID, Labels: sleeperSpec("workers").Labels, Address: testAddrs[0]}
	if diff := cmp.Diff(wantInst, in, providertest.IgnoreCreated); diff != "" {
		t.Errorf("Provision (-want +got):\n%s", diff)
	}
	providertest.CheckCreated(t, in, start)

	// The placeholders are replaced and the env is passed.
	dataDir := filepath.Join(dir, "instances", in.ID, "data")
	wantReport := report{Args: []string{"-out", dataDir + "/out.json", "-listen", testAddrs[0]}, Env: "token-workers"}
	if diff := cmp.Diff(wantReport, readReport(t, p, in.ID)); diff != "" {
		t.Errorf("the process was started with (-want +got):\n%s", diff)
	}

	for _, tc := range []struct {
		name     string
		selector map[string]string
		want     []provider.Instance
	}{
		{"all", nil, []provider.Instance{wantInst}},
		{"its group", map[string]string{provider.LabelGroup: "workers"}, []provider.Instance{wantInst}},
		{"other group", map[string]string{provider.LabelGroup: "managers"}, nil},
		{"other sha", map[string]string{provider.LabelGroup: "workers", provider.LabelConfigSHA: "sha2"}, nil},
	} {
		if diff := cmp.Diff(tc.want, providertest.List(t, p, tc.selector), providertest.IgnoreCreated); diff != "" {
			t.Errorf("List %s (-want +got):\n%s", tc.name, diff)
		}
	}

	// A new leader, with a Provider of its own on the same dir, finds it,
	// and can destroy it.
	p2 := newTestProvider(t, dir, testAddrs, 0)
	if diff := cmp.Diff([]provider.Instance{wantInst}, providertest.List(t, p2, nil), providertest.IgnoreCreated); diff != "" {
		t.Errorf("List by a new provider (-want +got):\n%s", diff)
	}
	pid := pidOf(t, p, in.ID)
	if err := p2.Destroy(ctx, in.ID); err != nil {
		t.Fatalf("Destroy: %v", err)
	}
	testenv.WaitUntil(t, testDeadline, "the destroyed process to be gone", func() bool { return processGone(pid) })
	if _, err := os.Stat(filepath.Join(dir, "instances", in.ID)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("instance dir after Destroy: %v, want it gone", err)
	}
	if got := providertest.List(t, p, nil); len(got) != 0 {
		t.Errorf("List after Destroy = %v, want none", got)
	}

	// Destroy is idempotent, and unknown IDs are already destroyed.
	for _, id := range []string{in.ID, "proc-00000000"} {
		if err := p.Destroy(ctx, id); err != nil {
			t.Errorf("Destroy(%q) again: %v", id, err)
		}
	}
	for _, id := range []string{"", "..", "../x", "a/b", ".hidden"} {
		if err := p.Destroy(ctx, id); !errors.Is(err, ErrInvalidID) {
			t.Errorf("Destroy(%q) = %v, want ErrInvalidID", id, err)
		}
	}
}

func TestAddresses(t *testing.T) {
	p := newTestProvider(t, t.TempDir(), testAddrs[:2], 0)
	ctx := context.Background()

	a := providertest.Provision(t, p, sleeperSpec("workers"))
	b := providertest.Provision(t, p, sleeperSpec("workers"))
	if a.Address == b.Address {
		t.Fatalf("two live instances share address %s", a.Address)
	}
	if a.ID == b.ID {
		t.Fatalf("two instances share ID %s", a.ID)
	}
	_, err := p.Provision(ctx, sleeperSpec("workers"))
	if !errors.Is(err, ErrPoolExhausted) {
		t.Fatalf("Provision with the pool used up = %v, want ErrPoolExhausted", err)
	}
	if !strings.Contains(err.Error(), "all 2 addresses in use") {
		t.Errorf("exhaustion error %q does not say how many addresses are in use", err)
	}

	if err := p.Destroy(ctx, a.ID); err != nil {
		t.Fatalf("Destroy: %v", err)
	}
	c := providertest.Provision(t, p, sleeperSpec("workers"))
	if c.Address != a.Address {
		t.Errorf("after Destroy, Provision got %s, want the freed %s", c.Address, a.Address)
	}
	readReport(t, p, c.ID) // it did start
}

// An address some other process listens on is not handed out: the node
// made there would exit at once.
func TestAddressHeldByAnother(t *testing.T) {
	p := newTestProvider(t, t.TempDir(), testAddrs[:2], 0)
	ctx := context.Background()
	// The HTTP port, PORT+3: a worker listens on that one alone.
	ln, err := net.Listen("tcp", strings.Replace(testAddrs[0], ":7000", ":7003", 1))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()

	a := providertest.Provision(t, p, sleeperSpec("workers"))
	if a.Address != testAddrs[1] {
		t.Errorf("Provision got %s, which another process listens on; want %s", a.Address, testAddrs[1])
	}
	_, err = p.Provision(ctx, sleeperSpec("workers"))
	if !errors.Is(err, ErrPoolExhausted) || !strings.Contains(err.Error(), "1 of them ("+testAddrs[0]+") by processes that are not this provider's") {
		t.Errorf("Provision with the rest of the pool held by another process = %v; want ErrPoolExhausted naming %s", err, testAddrs[0])
	}
	ln.Close()
	if b := providertest.Provision(t, p, sleeperSpec("workers")); b.Address != testAddrs[0] {
		t.Errorf("after the other process let go, Provision got %s, want %s", b.Address, testAddrs[0])
	}
}

// Leaders racing on one host (two Providers on one dir) never hand out one
// address twice.
func TestConcurrentProvision(t *testing.T) {
	dir := t.TempDir()
	ps := []*Provider{newTestProvider(t, dir, testAddrs, 0), newTestProvider(t, dir, testAddrs, 0)}
	var wg sync.WaitGroup
	got := make([]provider.Instance, len(testAddrs))
	errs := make([]error, len(testAddrs))
	for i := range testAddrs {
		wg.Go(func() {
			got[i], errs[i] = ps[i%2].Provision(context.Background(), sleeperSpec("workers"))
		})
	}
	wg.Wait()
	seen := map[string]bool{}
	for i, in := range got {
		if errs[i] != nil {
			t.Fatalf("Provision %d: %v", i, errs[i])
		}
		if seen[in.Address] {
			t.Errorf("address %s handed out twice", in.Address)
		}
		seen[in.Address] = true
	}
	if n := len(providertest.List(t, ps[0], nil)); n != len(testAddrs) {
		t.Errorf("List = %d instances, want %d", n, len(testAddrs))
	}
}

func TestProvisionBadBinary(t *testing.T) {
	dir := t.TempDir()
	p, err := New(Config{Dir: dir, Binary: filepath.Join(dir, "no-such-binary"), Addresses: testAddrs[:1]})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	if _, err := p.Provision(context.Background(), sleeperSpec("workers")); err == nil {
		t.Fatal("Provision of a missing binary succeeded")
	}
	ids, err := p.recordIDs()
	if err != nil || len(ids) != 0 {
		t.Errorf("instance dirs after a failed Provision = %v, %v; want none", ids, err)
	}
}

// TestPrune: Prune removes what crashed Provisions left (a dir with no
// record, a record with no pid) and nothing else; an instance that ran and
// died behind the provider's back (a kill, a power loss) keeps its dir and
// its address, is listed by ListDead, and goes only by ClearDead, which
// keeps its log and refuses an instance that runs or was stopped.
func TestPrune(t *testing.T) {
	dir := t.TempDir()
	p := newTestProvider(t, dir, testAddrs, 0)
	ctx := context.Background()

	dead := providertest.Provision(t, p, sleeperSpec("workers"))
	live := providertest.Provision(t, p, sleeperSpec("workers"))
	readReport(t, p, dead.ID)
	// Left by Provisions that crashed: a dir with no record, and a record
	// with no pid.
	if err := os.MkdirAll(filepath.Join(dir, "instances", "proc-00000001", "data"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "instances", "proc-00000002"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := p.recordSave(record{ID: "proc-00000002", Address: testAddrs[2]}); err != nil {
		t.Fatal(err)
	}

	// Killed behind the provider's back.
	pid := pidOf(t, p, dead.ID)
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	testenv.WaitUntil(t, testDeadline, "List to drop the killed instance", func() bool {
		insts := providertest.List(t, p, nil)
		return len(insts) == 1 && insts[0].ID == live.ID
	})
	// Something the node wrote, which a restart would find again.
	kept := filepath.Join(p.DataDir(dead.ID), "state")
	if err := os.WriteFile(kept, []byte("the node's data"), 0o600); err != nil {
		t.Fatal(err)
	}

	// What the dead instance wrote last is its last words, in its dir
	// and, once cleared, in the pruned logs.
	f, err := os.OpenFile(p.LogFile(dead.ID), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(f, "some line\nError: listen 127.0.0.1:7000: address in use\n\n")
	f.Close()
	const lastWords = "Error: listen 127.0.0.1:7000: address in use"
	if got, err := p.LastWords(ctx, dead.ID); err != nil || got != lastWords {
		t.Errorf("LastWords before ClearDead = %q, %v; want %q", got, err, lastWords)
	}

	pruned, err := p.Prune(ctx)
	if err != nil {
		t.Fatalf("Prune: %v", err)
	}
	if diff := cmp.Diff([]string{"proc-00000001", "proc-00000002"}, pruned); diff != "" {
		t.Errorf("Prune (-want +got):\n%s", diff)
	}
	ids, err := p.recordIDs()
	if err != nil {
		t.Fatal(err)
	}
	want := []string{dead.ID, live.ID}
	slices.Sort(want)
	if diff := cmp.Diff(want, ids); diff != "" {
		t.Errorf("instance dirs after Prune (-want +got):\n%s", diff)
	}
	if b, err := os.ReadFile(kept); err != nil || string(b) != "the node's data" {
		t.Errorf("the dead instance's data after Prune: %q, %v; want it kept", b, err)
	}
	if pruned, err := p.Prune(ctx); err != nil || len(pruned) != 0 {
		t.Errorf("Prune again = %v, %v; want nothing", pruned, err)
	}
	deadList, err := p.ListDead(ctx, map[string]string{provider.LabelGroup: "workers"})
	if err != nil || len(deadList) != 1 || deadList[0].ID != dead.ID {
		t.Errorf("ListDead = %v, %v; want the dead instance", deadList, err)
	}
	// The dead instance keeps its address: the crashed Provision's is
	// free again, and then the pool is full.
	third := providertest.Provision(t, p, sleeperSpec("workers"))
	if third.Address != testAddrs[2] {
		t.Errorf("new instance at %s, want %s (the dead instance keeps %s)", third.Address, testAddrs[2], dead.Address)
	}
	if _, err := p.Provision(ctx, sleeperSpec("workers")); !errors.Is(err, ErrPoolExhausted) {
		t.Errorf("Provision with the dead instance's address the only one left = %v, want ErrPoolExhausted", err)
	}

	// ClearDead refuses what runs and what was stopped.
	if err := p.ClearDead(ctx, live.ID); !errors.Is(err, ErrNotDead) {
		t.Errorf("ClearDead of a running instance = %v, want ErrNotDead", err)
	}
	if err := p.Stop(ctx, third.ID); err != nil {
		t.Fatal(err)
	}
	if err := p.ClearDead(ctx, third.ID); !errors.Is(err, ErrNotDead) {
		t.Errorf("ClearDead of a stopped instance = %v, want ErrNotDead", err)
	}

	// Logs of instances cleared before, older than the dead one's: the
	// oldest goes to make room.
	if err := os.MkdirAll(p.PrunedLogDir(), 0o700); err != nil {
		t.Fatal(err)
	}
	for i := range KeptLogs {
		f := filepath.Join(p.PrunedLogDir(), fmt.Sprintf("proc-1%07d.log", i))
		if err := os.WriteFile(f, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		old := time.Now().Add(-time.Hour + time.Duration(i)*time.Second)
		if err := os.Chtimes(f, old, old); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.ClearDead(ctx, dead.ID); err != nil {
		t.Fatalf("ClearDead: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "instances", dead.ID)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the dead instance's dir after ClearDead: %v, want it gone", err)
	}
	keptLogs, err := os.ReadDir(p.PrunedLogDir())
	if err != nil {
		t.Fatal(err)
	}
	var keptNames []string
	for _, e := range keptLogs {
		keptNames = append(keptNames, e.Name())
	}
	if len(keptNames) != KeptLogs || !slices.Contains(keptNames, dead.ID+".log") || slices.Contains(keptNames, "proc-10000000.log") {
		t.Errorf("pruned logs kept: %v; want %d, the dead instance's (%s.log) among them and the oldest (proc-10000000.log) gone", keptNames, KeptLogs, dead.ID)
	}
	if err := p.ClearDead(ctx, dead.ID); err != nil {
		t.Errorf("ClearDead again = %v, want nothing to do", err)
	}
	if got, err := p.LastWords(ctx, dead.ID); err != nil || got != lastWords {
		t.Errorf("LastWords after ClearDead = %q, %v; want %q", got, err, lastWords)
	}
	// Its address is free now.
	if in := providertest.Provision(t, p, sleeperSpec("workers")); in.Address != dead.Address {
		t.Errorf("new instance at %s, want the cleared instance's %s", in.Address, dead.Address)
	}
	if got, err := p.LastWords(ctx, "proc-ffffffff"); err != nil || got != "" {
		t.Errorf("LastWords of an instance never made = %q, %v; want nothing", got, err)
	}
	if _, err := p.LastWords(ctx, "../etc"); err == nil {
		t.Error("LastWords of a bad ID: no error")
	}
	if err := p.ClearDead(ctx, "../etc"); !errors.Is(err, ErrInvalidID) {
		t.Errorf("ClearDead of a bad ID = %v, want ErrInvalidID", err)
	}
}

func TestDestroyKillsAfterStopTimeout(t *testing.T) {
	p := newTestProvider(t, t.TempDir(), testAddrs, 200*time.Millisecond)
	in := providertest.Provision(t, p, sleeperSpec("workers", "-ignore-term"))
	readReport(t, p, in.ID) // SIGTERM is ignored from here on
	pid := pidOf(t, p, in.ID)

	start := time.Now()
	if err := p.Destroy(context.Background(), in.ID); err != nil {
		t.Fatalf("Destroy: %v", err)
	}
	if d := time.Since(start); d < 200*time.Millisecond || d > 5*time.Second {
		t.Errorf("Destroy took %v, want the 200ms stop timeout and a little", d)
	}
	testenv.WaitUntil(t, testDeadline, "the killed process to be gone", func() bool { return processGone(pid) })
}

func TestConfig(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name    string
		cfg     Config
		wantErr string
	}{
		{"valid", Config{Dir: dir, Addresses: testAddrs}, ""},
		{"no dir", Config{Addresses: testAddrs}, "dir is required"},
		{"no addresses", Config{Dir: dir}, "the pool is empty"},
		{"no port", Config{Dir: dir, Addresses: []string{"127.0.0.1"}}, "not IP:PORT"},
		{"host name", Config{Dir: dir, Addresses: []string{"localhost:7000"}}, "not an IP address"},
		{"port 0", Config{Dir: dir, Addresses: []string{"127.0.0.1:0"}}, "not in 1..65532"},
		{"port too high for PORT+3", Config{Dir: dir, Addresses: []string{"127.0.0.1:65534"}}, "not in 1..65532"},
		{"duplicate", Config{Dir: dir, Addresses: []string{"127.0.0.1:7000", "127.0.0.1:7000"}}, "in the pool twice"},
		{"negative stop timeout", Config{Dir: dir, Addresses: testAddrs, StopTimeout: -time.Second}, "negative"},
		{"domains", Config{Dir: dir, Domains: map[string][]string{"a": testAddrs[:1], "b": testAddrs[1:]}}, ""},
		{"addresses and domains", Config{Dir: dir, Addresses: testAddrs[:1], Domains: map[string][]string{"a": testAddrs[1:]}}, "not both"},
		{"a domain's empty pool", Config{Dir: dir, Domains: map[string][]string{"a": testAddrs, "b": nil}}, `domain "b": the pool is empty`},
		{"an address in two domains", Config{Dir: dir, Domains: map[string][]string{"a": testAddrs[:2], "b": testAddrs[1:]}}, `domains: domain "b": "` + testAddrs[1] + `" is in domain "a"'s pool too`},
		{"a domain's bad address", Config{Dir: dir, Domains: map[string][]string{"a": {"localhost:7000"}}}, `domain "a": "localhost:7000": "localhost" is not an IP address`},
		{"a domain of no name", Config{Dir: dir, Domains: map[string][]string{"": testAddrs}}, `"" is not a domain name`},
		{"a domain name with a space", Config{Dir: dir, Domains: map[string][]string{"a b": testAddrs}}, `"a b" is not a domain name`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for what, err := range map[string]error{"Validate": tc.cfg.Validate(), "New": newErr(tc.cfg)} {
				switch {
				case tc.wantErr == "" && err != nil:
					t.Errorf("%s: %v", what, err)
				case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
					t.Errorf("%s = %v, want an error containing %q", what, err, tc.wantErr)
				}
			}
		})
	}
}

func newErr(cfg Config) error {
	_, err := New(cfg)
	return err
}
