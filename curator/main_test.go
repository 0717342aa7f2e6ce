package curator

import (
	"fmt"
	"os"
	"testing"

	"github.com/curatorproject/curator/internal/testenv"
)

// TestMain checks that the package's tests leave no goroutines behind: the
// curators, their gRPC servers, forwarders and heartbeat streams all end
// with their supervisor trees (etcd's own connections may take a few
// seconds to close after the member stops: testenv.CheckLeaks waits).
//
// A process provider of a group with no binary set starts machines with
// this test binary: each would run every test of the package again, and
// those that make machines would make more. Such a machine exits at once.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == "agent" {
		fmt.Fprintln(os.Stderr, "this is the curator package's test binary, not an agent: a test made a machine of a group without a binary")
		os.Exit(2)
	}
	stop, err := testenv.BusyNeighbours()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	code := m.Run()
	stop()
	os.Exit(testenv.CheckLeaks(code))
}
