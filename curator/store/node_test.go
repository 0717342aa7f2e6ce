package store

import (
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"

	pb "github.com/curatorproject/curator/proto"
)

// TestNodeDestroyWritesItsEvents: the events that explain a node's removal
// are written in the removal's own transaction (same revision), so a
// leader that dies right after it loses none.
func TestNodeDestroyWritesItsEvents(t *testing.T) {
	cli := testEtcd(t)
	fence := testLeader(t, cli, nil)
	if err := NodeCreate(callCtx(t), fence, &pb.Node{Id: "w1", Name: "w1"}); err != nil {
		t.Fatal(err)
	}
	ev := &pb.Event{Loop: "reaper", Action: "reap", NodeId: "w1", Reason: "down for long enough"}
	if err := NodeDestroy(callCtx(t), fence, "w1", ev); err != nil {
		t.Fatal(err)
	}
	resp, err := cli.Get(callCtx(t), eventPrefix, clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Kvs) != 1 {
		t.Fatalf("%d events in etcd after the removal, want its one", len(resp.Kvs))
	}
	rev := resp.Kvs[0].CreateRevision
	for _, c := range []struct {
		rev  int64
		want bool
	}{{rev - 1, true}, {rev, false}} {
		got, err := cli.Get(callCtx(t), nodeKey("w1"), clientv3.WithRev(c.rev))
		if err != nil {
			t.Fatal(err)
		}
		if had := len(got.Kvs) == 1; had != c.want {
			t.Errorf("at revision %d (the event's is %d) the node's record exists: %v, want %v", c.rev, rev, had, c.want)
		}
	}
}

// TestDelayedNodeWriteChangesNothing: a node write whose transaction
// applies long after it was made (a proposal held in an etcd member that
// was frozen, forwarded to the raft leader when it runs again; the fence
// still holds, as the same leader leads) must not undo the writes made
// to the node in between. The chaos suite's history checker found a
// health loop's mark-down, timed out during a freeze, bring a node's
// labels back to what they were 25 s before (test/history/README.md).
func TestDelayedNodeWriteChangesNothing(t *testing.T) {
	cli := testEtcd(t)
	reg := startRegistry(t, cli)
	fence := testLeader(t, cli, reg)
	n := &pb.Node{Id: "n1", Name: "n1", Labels: map[string]string{"history": "old"}}
	if err := NodeCreate(callCtx(t), fence, n); err != nil {
		t.Fatal(err)
	}

	// The write made first, and delayed: its transaction as it was made.
	late := CloneNode(reg.Node("n1"))
	late.Status = pb.NodeStatus_NODE_STATUS_DOWN
	cmps, ops, err := fence.nodeWrites([]*pb.Node{late}, true)
	if err != nil {
		t.Fatal(err)
	}
	// A write made after it, acknowledged.
	newer := CloneNode(reg.Node("n1"))
	newer.Labels = map[string]string{"history": "new"}
	if err := NodeSave(callCtx(t), fence, newer); err != nil {
		t.Fatal(err)
	}
	// The first one lands now.
	resp, err := cli.Txn(callCtx(t)).If(append([]clientv3.Cmp{fence.fence()}, cmps...)...).Then(ops...).Commit()
	if err != nil {
		t.Fatal(err)
	}
	if resp.Succeeded {
		t.Errorf("the delayed write applied over a newer one")
	}
	got, err := NodeLoad(callCtx(t), cli, "n1")
	if err != nil {
		t.Fatal(err)
	}
	if v := got.GetLabels()["history"]; v != "new" {
		t.Errorf("label history = %q after the delayed write, want %q (the acknowledged write undone)", v, "new")
	}
}
