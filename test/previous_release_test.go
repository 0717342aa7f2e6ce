package e2e

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/curatorproject/curator/internal/testenv"
)

// TestPreviousReleaseBinary: the previous release's curator, which the
// upgrade tests start a cluster on, builds from git history and runs. Its
// first run builds it (a minute or so); later runs take it from the cache.
// It does not call t.Parallel: the build takes both cores, which the
// parallel tests' elections need, so it runs before them, alone.
func TestPreviousReleaseBinary(t *testing.T) {
	bin, commit := testenv.PreviousRelease(t)
	out, err := exec.Command(bin, "version").CombinedOutput()
	if err != nil {
		t.Fatalf("%s version: %v\n%s", bin, err, out)
	}
	// The previous release says which release it is, and it is not this
	// checkout's binary.
	got := strings.TrimSpace(string(out))
	if !strings.HasPrefix(got, "curator v") {
		t.Errorf("%s version = %q, want curator v<release>", bin, got)
	}
	now, err := exec.Command(binary, "version").CombinedOutput()
	if err != nil {
		t.Fatalf("%s version: %v\n%s", binary, err, now)
	}
	if string(now) == string(out) {
		t.Errorf("the previous release (%.12s) and this checkout's binary both say %q", commit, got)
	}
	t.Logf("previous release %.12s: %s", commit, got)
}
