package curator

import (
	"errors"
	"testing"
	"time"

	"github.com/curatorproject/curator/curator/spec"
	"github.com/curatorproject/curator/curator/store"
	pb "github.com/curatorproject/curator/proto"
)

// TestReaperRemovesADownWorker: a worker made by hand that goes down is
// removed once it has been down for ReapAfter, with a reap event; the
// leader's own node, down as well (the test's curator sends it no
// heartbeats), is never reaped. The reaper ticks on a node going down, and
// reads etcd only when a node is down.
func TestReaperRemovesADownWorker(t *testing.T) {
	c := newTestCluster(t)
	cfg := c.curatorConfig(c.first, c.cli)
	cfg.ReapAfter = 1500 * time.Millisecond
	cfg.GroupInterval = 300 * time.Millisecond
	c.leadWith(cfg)
	admin, anon := c.dialFirst()
	w, _ := c.register(anon, c.token(admin, "worker"), "w1")
	c.waitStatus(w.id, pb.NodeStatus_NODE_STATUS_DOWN)
	downAt := time.Now()
	waitFor(t, "the down worker is reaped", func() bool {
		_, err := store.NodeLoad(callCtx(t), c.cli, w.id)
		return errors.Is(err, spec.ErrNotFound)
	})
	if took := time.Since(downAt); took < cfg.ReapAfter-200*time.Millisecond {
		t.Errorf("reaped %v after it went down; reap-after is %v", took, cfg.ReapAfter)
	}
	// The event is written in the removal's transaction: there once the
	// record is gone.
	var reaped []string
	for _, ev := range eventsOf(t, pb.NewManagementClient(admin)) {
		if ev.Loop == "reaper" && ev.Action == "reap" {
			reaped = append(reaped, ev.NodeId)
		}
	}
	if len(reaped) != 1 || reaped[0] != w.id {
		t.Errorf("reap events for %v; want one, for %s", reaped, w.id)
	}
	if n := c.loadNode(c.first.id); n == nil || n.Status != pb.NodeStatus_NODE_STATUS_DOWN {
		t.Errorf("the leader's own node: %v; want it kept (down)", n)
	}
}
