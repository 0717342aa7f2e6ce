package plugin

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/curatorproject/curator/internal/testenv"
)

// execPlugin is the exec plugin (cmd/curator-provider-exec), built once
// by TestMain: the tests run the real executable, as a leader does.
var execPlugin string

func TestMain(m *testing.M) {
	if os.Getenv(Handshake.MagicCookieKey) == Handshake.MagicCookieValue {
		// Started by a test as a plugin (selfPlugin): serve.
		Serve(newFixed)
		os.Exit(0)
	}
	os.Exit(run(m))
}

func run(m *testing.M) int {
	dir, err := os.MkdirTemp("", "plugin-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	execPlugin = filepath.Join(dir, "curator-provider-exec")
	if err := testenv.GoBuild(execPlugin, "./cmd/curator-provider-exec"); err != nil {
		fmt.Fprintf(os.Stderr, "build the exec plugin: %v\n", err)
		return 1
	}
	return testenv.CheckLeaks(m.Run())
}
