package curator

import (
	"fmt"
	"os"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// TestMain checks that the package's tests leave no goroutines behind: the
// curators, their gRPC servers, forwarders and heartbeat streams all end
// with their supervisor trees. etcd's own connections may take a few
// seconds to close after the member stops, so the check waits for them a
// while before it calls them leaks.
func TestMain(m *testing.M) {
	code := m.Run()
	if code == 0 {
		start := time.Now()
		err := goleak.Find()
		for err != nil && time.Since(start) < 20*time.Second {
			time.Sleep(250 * time.Millisecond)
			err = goleak.Find()
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "goleak: %v\n", err)
			code = 1
		} else if d := time.Since(start); d > time.Second {
			fmt.Fprintf(os.Stderr, "goleak: no leaks, after waiting %v for etcd's connections to close\n", d.Round(time.Millisecond))
		}
	}
	os.Exit(code)
}
