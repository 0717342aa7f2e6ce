package curator

import (
	"context"
	"errors"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/curatorproject/curator/curator/internal/leader"
	"github.com/curatorproject/curator/curator/spec"
	"github.com/curatorproject/curator/curator/store"
	pb "github.com/curatorproject/curator/proto"
)

// TestDeposedLeaderCannotWrite takes leadership away from a running leader
// and shows that writes through its old leadership are refused by the fence
// and change nothing in etcd.
func TestDeposedLeaderCannotWrite(t *testing.T) {
	c := newTestCluster(t)
	svc := c.startLeader()
	var deposed *leader.Leadership

	for _, tc := range []struct {
		name   string
		depose func(ctx context.Context, l *leader.Leadership) error
	}{
		{"election lease revoked", func(ctx context.Context, l *leader.Leadership) error {
			resp, err := c.cli.Get(ctx, l.Key())
			if err != nil {
				return err
			}
			if len(resp.Kvs) == 0 {
				return errors.New("election key is gone already")
			}
			_, err = c.cli.Revoke(ctx, clientv3.LeaseID(resp.Kvs[0].Lease))
			return err
		}},
		{"election key deleted", func(ctx context.Context, l *leader.Leadership) error {
			_, err := c.cli.Delete(ctx, l.Key())
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
			defer cancel()
			// Each case starts from a live leadership (the previous case
			// left a deposed one behind).
			waitFor(t, "the curator leads", func() bool {
				st := svc.currentLeader()
				return st != nil && st.Ctx.Err() == nil && st.Lead != deposed
			})
			old := svc.currentLeader().Lead
			defer func() { deposed = old }()

			// A write under the leadership works while it holds.
			n := c.loadNode(c.first.id)
			setLabel(n, "fenced", "before")
			if err := store.NodeSave(ctx, old.Fence, n); err != nil {
				t.Fatalf("write as leader: %v", err)
			}

			if err := tc.depose(ctx, old); err != nil {
				t.Fatal(err)
			}
			before, err := c.cli.Get(ctx, store.Keys.Nodes(), clientv3.WithPrefix())
			if err != nil {
				t.Fatal(err)
			}

			n = c.loadNode(c.first.id)
			setLabel(n, "fenced", "after")
			if err := store.NodeSave(ctx, old.Fence, n); !errors.Is(err, spec.ErrNotLeader) {
				t.Errorf("nodeSave through the old leadership = %v, want ErrNotLeader", err)
			}
			if err := store.NodeCreate(ctx, old.Fence, &pb.Node{Id: "intruder"}); !errors.Is(err, spec.ErrNotLeader) {
				t.Errorf("nodeCreate through the old leadership = %v, want ErrNotLeader", err)
			}
			if err := store.NodeDestroy(ctx, old.Fence, c.first.id); !errors.Is(err, spec.ErrNotLeader) {
				t.Errorf("nodeDestroy through the old leadership = %v, want ErrNotLeader", err)
			}
			cs, err := store.ClusterLoad(ctx, c.cli)
			if err != nil {
				t.Fatal(err)
			}
			cs.MaxVoters = 99
			if err := store.ClusterSave(ctx, old.Fence, cs); !errors.Is(err, spec.ErrNotLeader) {
				t.Errorf("clusterSave through the old leadership = %v, want ErrNotLeader", err)
			}
			if err := old.Check(ctx); !errors.Is(err, spec.ErrNotLeader) {
				t.Errorf("the fence's check through the old leadership = %v, want ErrNotLeader", err)
			}
			if err := old.RemoveMember(ctx, 1); !errors.Is(err, spec.ErrNotLeader) {
				t.Errorf("a membership change through the old leadership = %v, want ErrNotLeader", err)
			}

			// Nothing changed: the node records are byte for byte the same
			// (at the same revisions), and no other key appeared.
			after, err := c.cli.Get(ctx, store.Keys.Nodes(), clientv3.WithPrefix())
			if err != nil {
				t.Fatal(err)
			}
			if len(after.Kvs) != len(before.Kvs) {
				t.Fatalf("%d node records before, %d after", len(before.Kvs), len(after.Kvs))
			}
			for i := range before.Kvs {
				b, a := before.Kvs[i], after.Kvs[i]
				if string(b.Key) != string(a.Key) || b.ModRevision != a.ModRevision || string(b.Value) != string(a.Value) {
					// The new leader (if any) may write status
					// changes, but never our label.
					na, err := store.NodeUnmarshal(string(a.Key), a.Value)
					if err != nil {
						t.Fatal(err)
					}
					if na.Labels["fenced"] == "after" {
						t.Errorf("node %s carries the deposed leader's write", a.Key)
					}
				}
			}
			if got := c.loadNode(c.first.id).Labels["fenced"]; got != "before" {
				t.Errorf("label fenced = %q, want %q", got, "before")
			}
			cs2, err := store.ClusterLoad(ctx, c.cli)
			if err != nil {
				t.Fatal(err)
			}
			if cs2.MaxVoters == 99 {
				t.Error("the deposed leader changed the cluster record")
			}
			if resp, err := c.cli.Get(ctx, "/curator/test"); err != nil || len(resp.Kvs) != 0 {
				t.Errorf("get /curator/test = %v, %v; want nothing", resp, err)
			}
		})
	}

}

func setLabel(n *pb.Node, k, v string) {
	if n.Labels == nil {
		n.Labels = map[string]string{}
	}
	n.Labels[k] = v
}

// TestLeaderStepsDownWhenElectionKeyDeleted: a curator whose election key
// disappears (deleted by hand, or by a compaction of the election prefix)
// while its lease lives on is no longer the leader, and must notice.
func TestLeaderStepsDownWhenElectionKeyDeleted(t *testing.T) {
	c := newTestCluster(t)
	svc := c.startLeader()
	old := svc.currentLeader().Lead
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	if _, err := c.cli.Delete(ctx, old.Key()); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the curator leads under a new leadership", func() bool {
		st := svc.currentLeader()
		return st != nil && st.Lead != old
	})
	st := svc.currentLeader()
	n := c.loadNode(c.first.id)
	setLabel(n, "fenced", "new")
	if err := store.NodeSave(ctx, st.Lead.Fence, n); err != nil {
		t.Errorf("write under the new leadership: %v", err)
	}
}

// TestSaveDoesNotResurrect: a change decided on a node record that was
// removed meanwhile (a node that left while a loop marked it down) fails
// with ErrNodeGone and leaves the node removed.
func TestSaveDoesNotResurrect(t *testing.T) {
	c := newTestCluster(t)
	svc := c.startLeader()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	waitFor(t, "the curator leads", func() bool { return svc.currentLeader() != nil })
	l := svc.currentLeader().Lead
	n := &pb.Node{Id: "leaver", Name: "leaver", Address: "127.0.0.9:7000", State: pb.NodeState_NODE_STATE_UP}
	if err := store.NodeCreate(ctx, l.Fence, n); err != nil {
		t.Fatal(err)
	}
	stale := store.CloneNode(n)
	if err := store.NodeDestroy(ctx, l.Fence, n.Id); err != nil {
		t.Fatal(err)
	}
	stale.Status = pb.NodeStatus_NODE_STATUS_DOWN
	if err := store.NodeSave(ctx, l.Fence, stale); !errors.Is(err, spec.ErrNodeGone) {
		t.Errorf("save of a removed node = %v, want ErrNodeGone", err)
	}
	if err := store.NodeSaveAll(ctx, l.Fence, []*pb.Node{c.loadNode(c.first.id), stale}); !errors.Is(err, spec.ErrNodeGone) {
		t.Errorf("batch save with a removed node = %v, want ErrNodeGone", err)
	}
	resp, err := c.cli.Get(ctx, store.Keys.Node(n.Id))
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Kvs) != 0 {
		t.Errorf("the removed node is back: %s", resp.Kvs[0].Value)
	}
}
