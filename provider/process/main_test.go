//go:build linux || darwin || dragonfly || freebsd || netbsd || openbsd

package process

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/curatorproject/curator/internal/testenv"
)

// sleeperBin is the stand-in agent the tests run: testdata/sleeper, built
// once by TestMain.
var sleeperBin string

func TestMain(m *testing.M) {
	if dir := os.Getenv(parentDirEnv); dir != "" {
		os.Exit(runParent(dir))
	}
	os.Exit(run(m))
}

func run(m *testing.M) int {
	dir, err := os.MkdirTemp("", "process-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	sleeperBin = filepath.Join(dir, "sleeper")
	if err := testenv.GoBuild(sleeperBin, "./provider/process/testdata/sleeper"); err != nil {
		fmt.Fprintf(os.Stderr, "build sleeper: %v\n", err)
		return 1
	}
	return testenv.CheckLeaks(m.Run())
}
