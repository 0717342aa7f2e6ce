package decide

import (
	"testing"

	"github.com/curatorproject/curator/internal/layercheck"
)

// TestLayers: the decisions are pure: no etcd, no Docker, no gRPC, no
// clock of their own (now comes in the snapshot).
func TestLayers(t *testing.T) {
	layercheck.Check(t, ".", "curator/decide is pure: it reads a snapshot and returns an action", layercheck.Rules{
		Imports: []string{"go.etcd.io/", "github.com/moby/moby/client", "google.golang.org/grpc", "github.com/curatorproject/curator/consensus\"", "github.com/curatorproject/curator/curator/store"},
		Calls:   []string{"time.Now", "time.Sleep"},
	})
}
