//go:build faults

package faults

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// childEnv marks the test binary run again as a child with the fault
// variables set: they are read when the process starts.
const childEnv = "FAULTS_TEST_CHILD"

// TestChild is what the child runs: it passes a delayed point and
// reads the clock, and prints what it saw.
func TestChild(t *testing.T) {
	if os.Getenv(childEnv) == "" {
		t.Skip("run by TestDelayAndSkewFromEnv")
	}
	began := time.Now()
	Point(APIBeforeReply)
	slept := time.Since(began)
	Pause(BeforeMemberRemove)
	paused := time.Since(began) - slept
	skewed := time.Until(Now())
	fmt.Printf("slept=%s paused=%s skew=%s\n", slept, paused, skewed.Round(100*time.Millisecond))
}

// runChild runs TestChild with env added, and returns its output.
func runChild(t *testing.T, env ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run", "^TestChild$", "-test.v")
	cmd.Env = append(os.Environ(), append([]string{childEnv + "=1"}, env...)...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func TestDelayAndSkewFromEnv(t *testing.T) {
	out, err := runChild(t, DelayEnv+"=api/before-reply=300ms,membership/before-member-remove=200ms", ClockSkewEnv+"=+3s")
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	var slept, paused, skew time.Duration
	for _, f := range strings.Fields(out[strings.Index(out, "slept="):]) {
		k, v, _ := strings.Cut(f, "=")
		d, _ := time.ParseDuration(v)
		switch k {
		case "slept":
			slept = d
		case "paused":
			paused = d
		case "skew":
			skew = d
		}
	}
	if slept < 300*time.Millisecond || paused < 200*time.Millisecond || skew != 3*time.Second {
		t.Errorf("the point slept %s (want 300ms), the pause point %s (want 200ms), the clock is off by %s (want +3s):\n%s", slept, paused, skew, out)
	}
	if !strings.Contains(out, DelayEnv+": api/before-reply delayed 300ms") {
		t.Errorf("the delay was not said:\n%s", out)
	}

	out, err = runChild(t)
	if err != nil || !strings.Contains(out, "slept=") || strings.Contains(out, "delayed") || !strings.Contains(out, "skew=0s") {
		t.Errorf("with nothing set, a delay or a skew: %v\n%s", err, out)
	}
}

// A bad value ends the process at its start, saying why, before it does
// anything.
func TestBadFaultEnvRefused(t *testing.T) {
	for _, env := range []string{DelayEnv + "=api/before-reply=soon", DelayEnv + "=no/such-point=1s", ClockSkewEnv + "=ahead"} {
		out, err := runChild(t, env)
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != 2 || strings.Contains(out, "slept=") || !strings.Contains(out, strings.Split(env, "=")[0]) {
			t.Errorf("%s: %v, want exit status 2 naming the variable, before the test ran:\n%s", env, err, out)
		}
	}
}

// TestChildDir is what the child of TestDelayDirArmsARunningProcess
// runs: it passes a point until the point delays it (its file armed by
// the parent meanwhile), and says how long.
func TestChildDir(t *testing.T) {
	if os.Getenv(childEnv) == "" {
		t.Skip("run by TestDelayDirArmsARunningProcess")
	}
	for end := time.Now().Add(5 * time.Second); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		began := time.Now()
		Point(WatchBeforeSend)
		if slept := time.Since(began); slept >= 100*time.Millisecond {
			fmt.Printf("slept=%s\n", slept.Round(100*time.Millisecond))
			return
		}
	}
	fmt.Println("never delayed")
}

// A running process is armed through its file in DelayDirEnv, named by
// its pid.
func TestDelayDirArmsARunningProcess(t *testing.T) {
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run", "^TestChildDir$", "-test.v")
	cmd.Env = append(os.Environ(), childEnv+"=1", DelayDirEnv+"="+dir)
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond) // undelayed meanwhile
	if err := os.WriteFile(filepath.Join(dir, strconv.Itoa(cmd.Process.Pid)), []byte("watch/before-send=400ms\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("child: %v\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "slept=400ms") || !strings.Contains(out.String(), "watch/before-send delayed 400ms") {
		t.Errorf("the armed process was not delayed 400ms:\n%s", out.String())
	}
}
