package spec

import (
	"testing"

	"github.com/curatorproject/curator/internal/layercheck"
)

// TestLayers: the rules an operator's input is checked by are pure, so
// that the client, the CLI and the agent link them without the leader.
func TestLayers(t *testing.T) {
	layercheck.Check(t, ".", "curator/spec is pure: the client links it", layercheck.Rules{
		Imports: []string{"go.etcd.io/", "github.com/moby/", "google.golang.org/grpc", "github.com/curatorproject/curator/consensus", "github.com/curatorproject/curator/curator/"},
	})
}
