package store

import (
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/tests/v3/framework/integration"

	pb "github.com/curatorproject/curator/proto"
)

// TestNodeDestroyWritesItsEvents: the events that explain a node's removal
// are written in the removal's own transaction (same revision), so a
// leader that dies right after it loses none.
func TestNodeDestroyWritesItsEvents(t *testing.T) {
	integration.BeforeTest(t)
	clus := integration.NewCluster(t, &integration.ClusterConfig{Size: 1})
	t.Cleanup(func() { clus.Terminate(t) })
	cli := clus.Client(0)
	put, err := cli.Put(callCtx(t), "/test/election", "leader")
	if err != nil {
		t.Fatal(err)
	}
	fence := NewFence(cli, "node-0", "/test/election", put.Header.Revision, nil)
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
