package curator

import (
	"os"
	"testing"

	"github.com/curatorproject/curator/internal/testenv"
)

// TestMain checks that the package's tests leave no goroutines behind: the
// curators, their gRPC servers, forwarders and heartbeat streams all end
// with their supervisor trees (etcd's own connections may take a few
// seconds to close after the member stops: testenv.CheckLeaks waits).
func TestMain(m *testing.M) {
	os.Exit(testenv.CheckLeaks(m.Run()))
}
