package curator

import (
	"fmt"
	"os"
	"testing"

	"github.com/curatorproject/curator/internal/testenv"
	"github.com/curatorproject/curator/provider/plugin"
)

// TestMain checks that the package's tests leave no goroutines behind: the
// curators, their gRPC servers, forwarders and heartbeat streams all end
// with their supervisor trees (etcd's own connections may take a few
// seconds to close after the member stops: testenv.CheckLeaks waits).
//
// Started as a provider plugin (a group's provider.plugin.path names the
// test binary), it serves testPlugin.
//
// A process provider of a group with no binary set starts machines with
// this test binary: each would run every test of the package again, and
// those that make machines would make more. Such a machine exits at once.
func TestMain(m *testing.M) {
	if os.Getenv(plugin.Handshake.MagicCookieKey) == plugin.Handshake.MagicCookieValue {
		// Started as a provider plugin by a test's leader.
		plugin.Serve(newTestPlugin)
		os.Exit(0)
	}
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
