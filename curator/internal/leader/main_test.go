package leader

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/curatorproject/curator/internal/testenv"
	"github.com/curatorproject/curator/provider/plugin"
)

// TestMain checks that the package's tests leave no goroutines behind.
//
// A process provider given no binary starts machines with this test
// binary: such a machine exits at once.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == "agent" {
		fmt.Fprintln(os.Stderr, "this is the leader package's test binary, not an agent")
		os.Exit(2)
	}
	if os.Getenv(plugin.Handshake.MagicCookieKey) == plugin.Handshake.MagicCookieValue {
		// Started by a test as a provider plugin (releasePlugin): serve.
		plugin.Serve(newReleaseProvider)
		os.Exit(0)
	}
	os.Exit(testenv.CheckLeaks(m.Run()))
}

// testTimeout bounds each wait of a test.
const testTimeout = 30 * time.Second

// callCtx is a context for one test's calls, ended with the test.
func callCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	t.Cleanup(cancel)
	return ctx
}

// waitFor waits until cond holds, failing the test after testTimeout.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	testenv.WaitUntil(t, testTimeout, what, cond)
}
