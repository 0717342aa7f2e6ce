package e2e

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/curatorproject/curator/internal/testenv"
)

// TestDevNohupAndLock: `nohup curator dev ... &` outlives the shell that
// started it (and so do its nodes), and a second dev on the same dir is
// refused, naming the process that holds it, while the first runs on.
func TestDevNohupAndLock(t *testing.T) {
	parallel(t) // its own addresses and dirs
	dir := t.TempDir()
	const addresses = "127.0.188.10-127.0.188.30"
	t.Cleanup(func() { stopDevNodes(t, dir) })
	logPath := filepath.Join(dir, "dev.log")
	// The shell starts dev under nohup and exits once dev runs: before,
	// dev got SIGTERM as its parent died, and stopped every node.
	sh := exec.Command("bash", "-c", `nohup "$0" dev --dir "$1" --managers 1 --workers 1 --addresses "$2" >"$3" 2>&1 &
		for i in $(seq 300); do [ -e "$1/config.yaml" ] && break; sleep 0.1; done; sleep 1; echo $!`,
		binary, dir, addresses, logPath)
	out, err := sh.Output()
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(out)))
	if err != nil {
		t.Fatalf("the shell printed %q, not dev's pid", out)
	}
	alive := func() bool { return syscall.Kill(pid, 0) == nil }
	t.Cleanup(func() {
		_ = syscall.Kill(pid, syscall.SIGTERM)
		testenv.Eventually(t, 30*time.Second, "dev stops", func() error {
			if alive() {
				return errors.New("still running")
			}
			return nil
		})
	})
	config := filepath.Join(dir, "config.yaml")
	testenv.Eventually(t, 2*time.Minute, "dev's two nodes ready, its shell gone", func() error {
		if !alive() {
			t.Fatalf("dev exited after its shell did:\n%s", readFile(t, logPath))
		}
		nodes, err := nodeLs(t, config)
		if err != nil {
			return err
		}
		if len(nodes) != 2 {
			return errors.New("not two nodes yet")
		}
		return allReady(nodes, nodeNames(nodes)...)
	})
	if got := strings.TrimSpace(readFile(t, filepath.Join(dir, "dev.lock"))); got != strconv.Itoa(pid) {
		t.Errorf("dev.lock holds %q, want dev's pid %d", got, pid)
	}

	// A second dev on the dir is refused at once, saying who holds it; the
	// first one's nodes run on.
	_, stderr, err := cli(t, "dev", "--dir", dir, "--managers", "1", "--workers", "1", "--addresses", addresses)
	want := "is in use by another curator dev: process " + strconv.Itoa(pid) + " holds " + filepath.Join(dir, "dev.lock")
	if err == nil || !strings.Contains(stderr, want) {
		t.Errorf("second dev: %v, stderr %q; want a refusal with %q", err, stderr, want)
	}
	time.Sleep(time.Second)
	nodes, err := nodeLs(t, config)
	if err != nil {
		t.Fatalf("after the second dev was refused: %v", err)
	}
	if err := allReady(nodes, nodeNames(nodes)...); err != nil || !alive() {
		t.Errorf("after the second dev was refused: %v (first dev alive: %v)", err, alive())
	}

	// SIGTERM stops dev; the lock file stays (the kernel dropped the lock).
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 30*time.Second, "dev stops on SIGTERM", func() error {
		if alive() {
			return errors.New("still running")
		}
		return nil
	})
	if _, err := os.Stat(filepath.Join(dir, "dev.lock")); err != nil {
		t.Fatal(err)
	}
}
