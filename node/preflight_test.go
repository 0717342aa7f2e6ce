package node

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/curatorproject/curator/internal/testenv"
	"github.com/curatorproject/curator/pki"
)

// What init, join and run check before they write or start anything: the
// data dir, the name and the four ports. Each refusal says why and leaves
// the data dir as it was.

// testHost is where these tests listen.
const testHost = "127.0.0.9"

// freeBase returns a base port on testHost whose four ports are free now.
func freeBase(t *testing.T) int { return testenv.FreePorts(t, testHost, 4) }

// occupy listens on testHost:port until the test ends.
func occupy(t *testing.T, port int) {
	testenv.Occupy(t, net.JoinHostPort(testHost, strconv.Itoa(port)))
}

func TestCheckPorts(t *testing.T) {
	for off, what := range []string{"gRPC, PORT", "etcd peer, PORT+1", "etcd client, PORT+2", "HTTP, PORT+3"} {
		base := freeBase(t)
		occupy(t, base+off)
		addr := net.JoinHostPort("127.0.0.9", strconv.Itoa(base))
		err := CheckPorts(addr)
		want := net.JoinHostPort("127.0.0.9", strconv.Itoa(base+off)) + " (" + what + ") is in use"
		if !errors.Is(err, ErrPortInUse) || !strings.Contains(err.Error(), want) {
			t.Errorf("CheckPorts(%s) with port %d taken = %v, want ErrPortInUse saying %q", addr, base+off, err, want)
		}
	}
	if err := CheckPorts(net.JoinHostPort("127.0.0.9", strconv.Itoa(freeBase(t)))); err != nil {
		t.Errorf("CheckPorts of free ports: %v", err)
	}
	if err := CheckPorts("192.0.2.1:7000"); err == nil || !strings.Contains(err.Error(), "an address of this machine") {
		t.Errorf("CheckPorts of a foreign IP = %v, want it to say the IP is not this machine's", err)
	}
}

func TestInitChecksFirst(t *testing.T) {
	t.Run("a port in use", func(t *testing.T) {
		base := freeBase(t)
		occupy(t, base+1)
		dir := filepath.Join(t.TempDir(), "n")
		_, err := Init(InitConfig{DataDir: dir, Address: net.JoinHostPort("127.0.0.9", strconv.Itoa(base))})
		if !errors.Is(err, ErrPortInUse) || !strings.Contains(err.Error(), "etcd peer, PORT+1") || !strings.Contains(err.Error(), "--listen") {
			t.Fatalf("Init with the etcd peer port taken = %v, want ErrPortInUse naming the port and --listen", err)
		}
		if got := testenv.DirNames(t, dir); got != nil {
			t.Errorf("a refused init wrote %v", got)
		}
	})
	t.Run("a dir of other files", func(t *testing.T) {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("mine"), 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := Init(InitConfig{DataDir: dir, Address: net.JoinHostPort("127.0.0.9", strconv.Itoa(freeBase(t)))})
		if err == nil || !strings.Contains(err.Error(), "is not empty (it holds notes.txt)") {
			t.Fatalf("Init into a dir of other files = %v, want a refusal naming them", err)
		}
		if diff := cmp.Diff([]string{"notes.txt"}, testenv.DirNames(t, dir)); diff != "" {
			t.Errorf("a refused init changed the dir (-want +got):\n%s", diff)
		}
	})
	t.Run("a dir with only a log file", func(t *testing.T) {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "agent.log"), nil, 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := Init(InitConfig{DataDir: dir, Address: net.JoinHostPort("127.0.0.9", strconv.Itoa(freeBase(t)))}); err != nil {
			t.Fatalf("Init into a dir with only the agent's log: %v", err)
		}
	})
	t.Run("a dir that holds a node", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "n")
		res, err := Init(InitConfig{DataDir: dir, Address: "127.0.0.9:7000"})
		if err != nil {
			t.Fatal(err)
		}
		before := snapshot(t, dir)
		_, err = Init(InitConfig{DataDir: dir, Address: "127.0.0.9:7100", Name: "other"})
		if !errors.Is(err, ErrAlreadyInitialised) || !strings.Contains(err.Error(), res.NodeID) || !strings.Contains(err.Error(), "curator agent run --data-dir "+dir) {
			t.Fatalf("Init on a node's data dir = %v, want ErrAlreadyInitialised naming the node and `agent run`", err)
		}
		if diff := cmp.Diff(before, snapshot(t, dir)); diff != "" {
			t.Errorf("a refused init changed the data dir (-before +after):\n%s", diff)
		}
	})
	t.Run("a bad name", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "n")
		_, err := Init(InitConfig{DataDir: dir, Address: "127.0.0.9:7000", Name: "two\nlines"})
		if err == nil || !strings.Contains(err.Error(), `--name: node name "two\nlines"`) {
			t.Fatalf("Init with a name of two lines = %v, want a refusal of --name", err)
		}
		if got := testenv.DirNames(t, dir); got != nil {
			t.Errorf("a refused init wrote %v", got)
		}
	})
}

func TestJoinChecksFirstAndLeavesNothing(t *testing.T) {
	ca, err := pki.NewCA("test")
	if err != nil {
		t.Fatal(err)
	}
	tok, err := pki.NewToken(ca.Cert)
	if err != nil {
		t.Fatal(err)
	}
	// A manager address where nothing answers: the join fails after its
	// timeout, as one whose managers are all down does.
	l, err := net.Listen("tcp", "127.0.0.9:0")
	if err != nil {
		t.Fatal(err)
	}
	nobody := l.Addr().String()
	l.Close()
	cfg := func(dir string) JoinConfig {
		return JoinConfig{DataDir: dir, Address: net.JoinHostPort("127.0.0.9", strconv.Itoa(freeBase(t))),
			Token: tok.String(), Managers: []string{nobody}, Timeout: 500 * time.Millisecond}
	}

	t.Run("no manager answers", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "n")
		if _, _, err := Join(context.Background(), cfg(dir)); err == nil || !strings.Contains(err.Error(), "no manager answered") {
			t.Fatalf("Join = %v, want it to say no manager answered", err)
		}
		if got := testenv.DirNames(t, dir); got != nil {
			t.Errorf("a failed join left %v in its data dir", got)
		}
	})
	t.Run("into an existing dir", func(t *testing.T) {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "agent.log"), nil, 0o600); err != nil {
			t.Fatal(err)
		}
		if _, _, err := Join(context.Background(), cfg(dir)); err == nil {
			t.Fatal("Join succeeded with no manager")
		}
		if diff := cmp.Diff([]string{"agent.log"}, testenv.DirNames(t, dir)); diff != "" {
			t.Errorf("a failed join changed its data dir (-want +got):\n%s", diff)
		}
	})
	t.Run("a port in use", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "n")
		c := cfg(dir)
		_, port, _ := net.SplitHostPort(c.Address)
		p, _ := strconv.Atoi(port)
		occupy(t, p+3)
		began := time.Now()
		_, _, err := Join(context.Background(), c)
		if !errors.Is(err, ErrPortInUse) || !strings.Contains(err.Error(), "HTTP, PORT+3") {
			t.Fatalf("Join with the HTTP port taken = %v, want ErrPortInUse naming it", err)
		}
		if took := time.Since(began); took > c.Timeout {
			t.Errorf("refused after %v: the ports are checked before any manager is asked", took)
		}
		if got := testenv.DirNames(t, dir); got != nil {
			t.Errorf("a refused join wrote %v", got)
		}
	})
	t.Run("a bad name", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "n")
		c := cfg(dir)
		c.Name = strings.Repeat("n", 100<<10)
		_, _, err := Join(context.Background(), c)
		if err == nil || !strings.Contains(err.Error(), "--name: node name") || len(err.Error()) > 300 {
			t.Fatalf("Join with a 100 KB name = %.300v, want a short refusal of --name", err)
		}
		if got := testenv.DirNames(t, dir); got != nil {
			t.Errorf("a refused join wrote %v", got)
		}
	})
}

func TestRunChecksPorts(t *testing.T) {
	base := freeBase(t)
	addr := net.JoinHostPort("127.0.0.9", strconv.Itoa(base))
	dir := filepath.Join(t.TempDir(), "n")
	if _, err := Init(InitConfig{DataDir: dir, Address: addr}); err != nil {
		t.Fatal(err)
	}
	occupy(t, base+2)
	before := snapshot(t, dir)
	_, err := New(Config{DataDir: dir})
	if !errors.Is(err, ErrPortInUse) || !strings.Contains(err.Error(), "etcd client, PORT+2") || !strings.Contains(err.Error(), "running already") {
		t.Fatalf("New with the etcd client port taken = %v, want ErrPortInUse naming it", err)
	}
	if diff := cmp.Diff(before, snapshot(t, dir)); diff != "" {
		t.Errorf("a refused run changed the data dir (-before +after):\n%s", diff)
	}
}
