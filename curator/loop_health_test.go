package curator

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/curatorproject/curator/curator/internal/leader"
	pb "github.com/curatorproject/curator/proto"
)

// TestHealthPausesAfterAChange: nodes whose first heartbeats come while
// the health loop pauses after a change (healthGap: a twentieth of the
// interval, 100 ms at a 2 s interval) are marked ready together, at the
// end of the pause: no two writes of the loop come closer than the pause.
// Without it, each first heartbeat kicks the loop, and nodes that arrive a
// few milliseconds apart are marked ready a few milliseconds apart, one
// write (and one read of the whole fleet) each.
func TestHealthPausesAfterAChange(t *testing.T) {
	c := newTestCluster(t)
	cfg := c.curatorConfig(c.first, c.cli)
	cfg.HeartbeatInterval = 2 * time.Second
	cfg.DownAfter = 10 * time.Second
	c.leadWith(cfg)
	gap := leader.HealthGap(cfg.HeartbeatInterval)
	if gap != 100*time.Millisecond {
		t.Fatalf("healthGap(%s) = %s, want 100ms", cfg.HeartbeatInterval, gap)
	}
	admin, anon := c.dialFirst()
	token := c.token(admin, "worker")
	var nodes []*testNode
	for i := range 6 {
		n, _ := c.register(anon, token, fmt.Sprintf("w%d", i))
		nodes = append(nodes, n)
	}
	// The nodes' sessions open one after another, as fast as they can.
	for _, n := range nodes {
		followSession(t, dial(t, c.first.address, n.tlsCert(), c.root.Cert))
	}
	var marked []time.Time
	for _, n := range nodes {
		c.waitStatus(n.id, pb.NodeStatus_NODE_STATUS_READY)
		at := c.loadNode(n.id).StatusChanged.AsTime()
		if !slices.ContainsFunc(marked, at.Equal) {
			marked = append(marked, at)
		}
	}
	slices.SortFunc(marked, time.Time.Compare)
	t.Logf("%d nodes marked ready in %d writes: %v", len(nodes), len(marked), marked)
	for i := 1; i < len(marked); i++ {
		if d := marked[i].Sub(marked[i-1]); d < gap {
			t.Errorf("the health loop changed statuses %s after its last change, want a pause of %s or more", d, gap)
		}
	}
}
