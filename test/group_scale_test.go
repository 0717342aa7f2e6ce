package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/curatorproject/curator/internal/testenv"
)

// TestGroupScale: `group scale NAME N` changes a group's size and nothing
// else; size 0, by scale or by commit, is refused without --yes while the
// group has machines (nothing changes), and done with it.
func TestGroupScale(t *testing.T) {
	parallel(t) // its own addresses and dirs
	dir := t.TempDir()
	var stdout syncBuffer
	dev := start(t, "dev", filepath.Join(dir, "dev.log"), &stdout, "dev", "--managers", "1", "--workers", "1", "--dir", dir, "--addresses", "127.0.189.10-127.0.189.30")
	t.Cleanup(func() {
		_ = dev.cmd.Process.Signal(syscall.SIGTERM)
		<-dev.done
		stopDevNodes(t, dir)
	})
	waitDevUp(t, dev, &stdout, 2*time.Minute)
	config := filepath.Join(dir, "config.yaml")
	run := func(args ...string) (string, string, error) {
		return cli(t, append([]string{"--config", config}, args...)...)
	}
	describe := func() string {
		out, _, err := run("group", "describe", "workers")
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	waitWorkers := func(n int) {
		t.Helper()
		testenv.Eventually(t, time.Minute, fmt.Sprintf("%d ready workers", n), func() error {
			nodes, err := nodeLs(t, config)
			if err != nil {
				return err
			}
			var ready int
			for _, x := range nodes {
				if x.Group == "workers" && x.Status == "ready" {
					ready++
				}
			}
			if ready != n || len(nodes) != n+1 {
				return fmt.Errorf("%d ready workers of %d nodes", ready, len(nodes))
			}
			return nil
		})
	}
	before := describe()
	out, _, err := run("group", "scale", "workers", "2")
	if err != nil || !strings.Contains(out, "Scaled group workers from 1 to 2") {
		t.Fatalf("group scale workers 2: %v, %q", err, out)
	}
	// The size changed, and so the revision, by one.
	var rev int
	if _, err := fmt.Sscanf(before, "revision: %d\n", &rev); err != nil {
		t.Fatalf("describe has no revision first: %v\n%s", err, before)
	}
	want := strings.Replace(before, "size: 1\n", "size: 2\n", 1)
	want = strings.Replace(want, fmt.Sprintf("revision: %d\n", rev), fmt.Sprintf("revision: %d\n", rev+1), 1)
	if got := describe(); got != want {
		t.Errorf("after scale, describe:\n%s\nwant only the size and the revision changed:\n%s", got, want)
	}
	waitWorkers(2)

	// Size 0 without --yes: refused, by scale and by commit, nothing changed.
	_, stderr, err := run("group", "scale", "workers", "0")
	if err == nil || !strings.Contains(stderr, "size 0 takes all 2 machines of group workers away at once: pass --yes") {
		t.Errorf("group scale workers 0: %v, %q; want a refusal asking for --yes", err, stderr)
	}
	zero := filepath.Join(dir, "zero.yaml")
	if err := os.WriteFile(zero, []byte(strings.Replace(describe(), "size: 2\n", "size: 0\n", 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	_, stderr, err = run("group", "commit", zero)
	if err == nil || !strings.Contains(stderr, "pass --yes") {
		t.Errorf("group commit of size 0: %v, %q; want a refusal asking for --yes", err, stderr)
	}
	if got := describe(); !strings.Contains(got, "size: 2\n") {
		t.Errorf("a refused size 0 changed the group:\n%s", got)
	}
	_, stderr, err = run("group", "scale", "workers", "many")
	if err == nil || !strings.Contains(stderr, `size "many": want a whole number`) {
		t.Errorf("group scale workers many: %v, %q", err, stderr)
	}
	_, stderr, err = run("group", "scale", "nosuch", "2")
	if err == nil || !strings.Contains(stderr, "no group") {
		t.Errorf("group scale nosuch 2: %v, %q", err, stderr)
	}

	// With --yes it is done.
	if out, _, err := run("group", "commit", "--yes", zero); err != nil || !strings.Contains(out, "size 0") {
		t.Fatalf("group commit --yes of size 0: %v, %q", err, out)
	}
	waitWorkers(0)
}
