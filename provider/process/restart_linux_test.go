package process

import (
	"bufio"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/curatorproject/curator/internal/testenv"
)

// With StopWithParent, a killed parent takes its instances with it;
// without, they outlive it.
func TestStopWithParent(t *testing.T) {
	for _, follow := range []bool{true, false} {
		t.Run("follow="+strconv.FormatBool(follow), func(t *testing.T) {
			dir := t.TempDir()
			parent := exec.Command(os.Args[0], "-test.run=^$")
			parent.Env = append(os.Environ(), parentDirEnv+"="+dir, parentSleeperEnv+"="+sleeperBin)
			if follow {
				parent.Env = append(parent.Env, parentFollowEnv+"=1")
			}
			parent.Stderr = os.Stderr
			out, err := parent.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := parent.Start(); err != nil {
				t.Fatal(err)
			}
			line, err := bufio.NewReader(out).ReadString('\n')
			if err != nil {
				parent.Process.Kill()
				parent.Wait()
				t.Fatalf("the parent said no pid: %v", err)
			}
			pid, err := strconv.Atoi(strings.TrimSpace(line))
			if err != nil {
				t.Fatal(err)
			}
			// Whatever the outcome, the sleeper goes with the test.
			t.Cleanup(func() { syscall.Kill(-pid, syscall.SIGKILL) })
			if err := parent.Process.Kill(); err != nil {
				t.Fatal(err)
			}
			parent.Wait()
			if follow {
				// Orphaned, the sleeper is reaped by whoever adopted it,
				// or not: a zombie counts as stopped.
				testenv.WaitUntil(t, testDeadline, "the instance to stop with its parent", func() bool { return !sameProcess(pid, 0) })
				return
			}
			time.Sleep(500 * time.Millisecond)
			if !sameProcess(pid, 0) {
				t.Error("the instance stopped with its parent without StopWithParent")
			}
		})
	}
}
