package curator

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/curatorproject/curator/curator/spec"
	"github.com/curatorproject/curator/curator/store"
	pb "github.com/curatorproject/curator/proto"
)

// TestRecover runs Recover against a real one-member etcd (the first
// node's) that holds the records of a cluster as it was before a quorum
// was lost: the first node, two managers whose etcd members are gone, a
// worker, and the election keys of two curators. Each case says what
// becomes of every record, run once or twice (a recovery cut short is run
// again), or what Recover refuses, in which case nothing is written.
func TestRecover(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	now := func() time.Time { return at }
	// restored is the record `agent restore` makes for the node it
	// restores on: its ID is the etcd member's (the first node's here),
	// its address an old manager's.
	restored := func(c *testCluster, address string) *pb.Node {
		return &pb.Node{
			Id: c.first.id, Name: "restored", Address: address,
			Roles:    []pb.Role{pb.Role_ROLE_CONSENSUS, pb.Role_ROLE_WORKER},
			JoinedAs: "manager",
		}
	}
	const (
		kept    = "kept"
		refused = "refused"
		gone    = "gone"
		written = "written"
	)
	for _, tc := range []struct {
		name string
		// runs is how many times Recover runs (1 if 0).
		runs int
		// params are Recover's, given the cluster and the records' IDs
		// by name.
		params func(c *testCluster, ids map[string]string, addrs map[string]string) store.RecoverParams
		// otherMember adds a second etcd member (a learner that never
		// starts) before Recover runs.
		otherMember bool
		// want is what becomes of each record, by name; wantErr a
		// refusal (nothing written).
		want    map[string]string
		wantErr error
	}{
		{
			name: "forced new cluster",
			params: func(c *testCluster, ids, _ map[string]string) store.RecoverParams {
				return store.RecoverParams{NodeID: c.first.id, How: "a forced new cluster", Now: now}
			},
			want: map[string]string{"first": kept, "manager-2": refused, "manager-3": refused, "worker": kept},
		},
		{
			name: "forced new cluster, run twice",
			runs: 2,
			params: func(c *testCluster, ids, _ map[string]string) store.RecoverParams {
				return store.RecoverParams{NodeID: c.first.id, How: "a forced new cluster", Now: now}
			},
			want: map[string]string{"first": kept, "manager-2": refused, "manager-3": refused, "worker": kept},
		},
		{
			name: "restore at an old manager's address",
			params: func(c *testCluster, ids, addrs map[string]string) store.RecoverParams {
				return store.RecoverParams{NodeID: c.first.id, Self: restored(c, addrs["manager-2"]), How: "a restore from a backup", Now: now}
			},
			// The restored node's record replaces the first's (the same
			// ID: the etcd member's); manager-2's goes, its address taken.
			want: map[string]string{"first": written, "manager-2": gone, "manager-3": refused, "worker": kept},
		},
		{
			name: "restore, run twice",
			runs: 2,
			params: func(c *testCluster, ids, addrs map[string]string) store.RecoverParams {
				return store.RecoverParams{NodeID: c.first.id, Self: restored(c, addrs["manager-2"]), How: "a restore from a backup", Now: now}
			},
			want: map[string]string{"first": written, "manager-2": gone, "manager-3": refused, "worker": kept},
		},
		{
			name: "refused: another etcd member",
			params: func(c *testCluster, ids, _ map[string]string) store.RecoverParams {
				return store.RecoverParams{NodeID: c.first.id, How: "a forced new cluster", Now: now}
			},
			otherMember: true,
			wantErr:     spec.ErrPrecondition,
		},
		{
			name: "refused: not the etcd member",
			params: func(c *testCluster, ids, _ map[string]string) store.RecoverParams {
				return store.RecoverParams{NodeID: ids["manager-2"], How: "a forced new cluster", Now: now}
			},
			wantErr: spec.ErrPrecondition,
		},
		{
			name: "refused: forced on a node with no record",
			params: func(c *testCluster, ids, _ map[string]string) store.RecoverParams {
				// The first node's record is deleted below for this case.
				return store.RecoverParams{NodeID: c.first.id, How: "a forced new cluster", Now: now}
			},
			wantErr: spec.ErrPrecondition,
		},
		{
			name: "refused: a restored record of another node",
			params: func(c *testCluster, ids, addrs map[string]string) store.RecoverParams {
				self := restored(c, addrs["manager-2"])
				self.Id = ids["worker"]
				return store.RecoverParams{NodeID: c.first.id, Self: self, How: "a restore from a backup", Now: now}
			},
			wantErr: spec.ErrInvalid,
		},
		{
			name: "refused: no node ID",
			params: func(c *testCluster, ids, _ map[string]string) store.RecoverParams {
				return store.RecoverParams{How: "a forced new cluster", Now: now}
			},
			wantErr: spec.ErrInvalid,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newTestCluster(t)
			ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
			defer cancel()
			ids, addrs := seedLostCluster(t, ctx, c)
			// The audit trail and a revoked operator certificate, which a
			// recovery keeps (the revocation must hold after it).
			audit := &pb.AuditEntry{Time: timestamppb.New(at), Name: "alice", Call: "DemoteNode", Outcome: "ok"}
			revokedCert := &pb.AdminCertificate{Name: "alice", Serial: "abc", Revoked: true}
			// A group, which a restore brings back suspended.
			group := &pb.Group{Spec: &pb.GroupSpec{Name: "workers", Size: 2}, ConfigSha: "s"}
			for key, m := range map[string]proto.Message{store.Keys.Audit(audit): audit, store.Keys.AdminCert(revokedCert.Serial): revokedCert, store.Keys.Group("workers"): group} {
				data, err := proto.Marshal(m)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := c.cli.Put(ctx, key, string(data)); err != nil {
					t.Fatal(err)
				}
			}
			if tc.name == "refused: forced on a node with no record" {
				if _, err := c.cli.Delete(ctx, store.Keys.Node(c.first.id)); err != nil {
					t.Fatal(err)
				}
			}
			if tc.otherMember {
				if _, err := c.cli.MemberAddAsLearner(ctx, []string{"https://" + nextIP(t) + ":2380"}); err != nil {
					t.Fatal(err)
				}
			}
			before := recordsByID(t, ctx, c.cli)
			p := tc.params(c, ids, addrs)

			var err error
			var after map[string]*pb.Node
			for run := range max(tc.runs, 1) {
				if err = store.Recover(ctx, c.cli, p); err != nil {
					break
				}
				got := recordsByID(t, ctx, c.cli)
				if run > 0 {
					if diff := cmp.Diff(after, got, protocmp.Transform()); diff != "" {
						t.Errorf("run %d changed the records (-first run +this run):\n%s", run+1, diff)
					}
				}
				after = got
			}
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("Recover: %v, want %v", err, tc.wantErr)
				}
				if diff := cmp.Diff(before, recordsByID(t, ctx, c.cli), protocmp.Transform()); diff != "" {
					t.Errorf("a refused Recover changed the records (-before +after):\n%s", diff)
				}
				if n := countKeys(t, ctx, c.cli, store.Keys.Election()+"/"); n != 2 {
					t.Errorf("a refused Recover left %d election keys, want the 2 there were", n)
				}
				if evs := recoveryEvents(t, ctx, c.cli); len(evs) != 0 {
					t.Errorf("a refused Recover recorded %v", evs)
				}
				return
			}
			if err != nil {
				t.Fatalf("Recover: %v", err)
			}
			g, err := store.GroupLoad(ctx, c.cli, "workers")
			if err != nil || g == nil {
				t.Fatalf("after the recovery the group is %v, %v", g, err)
			}
			switch wantSuspended := "restored by a restore from a backup at " + at.Format(time.RFC3339); {
			case p.Self != nil && g.Suspended != wantSuspended:
				t.Errorf("after a restore the group is suspended %q, want %q", g.Suspended, wantSuspended)
			case p.Self == nil && g.Suspended != "":
				t.Errorf("after a forced new cluster the group is suspended %q, want it running", g.Suspended)
			case g.Spec.GetSize() != 2 || g.ConfigSha != "s":
				t.Errorf("the recovery changed the group's spec: %v", g)
			}
			if evs := recoveryEvents(t, ctx, c.cli); p.Self != nil && (len(evs) == 0 || !strings.Contains(evs[len(evs)-1].Reason, "curator group resume --all")) {
				t.Errorf("the restore's event does not name the resume command: %v", evs)
			}
			if entries, _, err := store.AuditList(ctx, c.cli, 0, 0); err != nil || len(entries) != 1 || entries[0].Name != "alice" {
				t.Errorf("after the recovery the audit trail is %v, %v; want alice's entry", entries, err)
			}
			if revoked, err := store.AdminCertRevoked(ctx, c.cli, "abc"); err != nil || !revoked {
				t.Errorf("after the recovery the revoked certificate is revoked %v (%v)", revoked, err)
			}

			got := map[string]string{}
			for name, id := range ids {
				n, ok := after[id]
				old := before[id]
				switch {
				case !ok:
					got[name] = gone
				case p.Self != nil && id == p.Self.Id:
					got[name] = written
					want := proto.Clone(p.Self).(*pb.Node)
					want.State = pb.NodeState_NODE_STATE_UP
					want.Status = pb.NodeStatus_NODE_STATUS_UNKNOWN
					want.Labels = map[string]string{}
					want.Created, want.Updated, want.StatusChanged = n.Created, n.Updated, n.StatusChanged
					if diff := cmp.Diff(want, n, protocmp.Transform()); diff != "" {
						t.Errorf("the restored record (-want +got):\n%s", diff)
					}
					if !n.Created.AsTime().Equal(at) {
						t.Errorf("the restored record was created %v, want %v", n.Created.AsTime(), at)
					}
				case n.Refused != "":
					got[name] = refused
					if !strings.Contains(n.Refused, p.How) || !strings.Contains(n.Refused, "curator agent join") || !strings.Contains(n.Refused, at.Format(time.RFC3339)) {
						t.Errorf("%s is refused with %q: want how (%q), when, and what to do", name, n.Refused, p.How)
					}
					// Only the refusal and its time change: the sync
					// loop clears the role, as etcd membership says.
					want := proto.Clone(old).(*pb.Node)
					want.Refused, want.Updated = n.Refused, n.Updated
					if diff := cmp.Diff(want, n, protocmp.Transform()); diff != "" {
						t.Errorf("%s's record changed beyond its refusal (-want +got):\n%s", name, diff)
					}
				case proto.Equal(n, old):
					got[name] = kept
				default:
					got[name] = "changed"
					t.Errorf("%s's record changed (-before +after):\n%s", name, cmp.Diff(old, n, protocmp.Transform()))
				}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("records (-want +got):\n%s", diff)
			}
			if n := countKeys(t, ctx, c.cli, store.Keys.Election()+"/"); n != 0 {
				t.Errorf("%d election keys left, want none", n)
			}
			evs := recoveryEvents(t, ctx, c.cli)
			if len(evs) != max(tc.runs, 1) {
				t.Fatalf("recovery events %v, want one a run", evs)
			}
			for _, ev := range evs {
				if ev.Action != "recover" || ev.NodeId != c.first.id || !strings.Contains(ev.Reason, p.How) || !strings.Contains(ev.Reason, ids["manager-3"]) {
					t.Errorf("event %v: want the recovery, how (%q), and the refused managers", ev, p.How)
				}
			}
		})
	}
}

// seedLostCluster adds to c's records what a cluster that lost its quorum
// leaves in the survivor's etcd: two managers (consensus role, no etcd
// member), a worker, and two curators' election keys. It returns the
// records' IDs and addresses by name (the first node's too).
func seedLostCluster(t *testing.T, ctx context.Context, c *testCluster) (ids, addrs map[string]string) {
	t.Helper()
	ids = map[string]string{"first": c.first.id}
	addrs = map[string]string{"first": c.first.address}
	ts := timestamppb.New(time.Date(2025, 6, 1, 0, 0, 0, 0, time.UTC))
	for i, n := range []struct {
		name  string
		roles []pb.Role
	}{
		{"manager-2", []pb.Role{pb.Role_ROLE_CONSENSUS, pb.Role_ROLE_WORKER}},
		{"manager-3", []pb.Role{pb.Role_ROLE_CONSENSUS}},
		{"worker", []pb.Role{pb.Role_ROLE_WORKER}},
	} {
		_, id := newKey(t)
		rec := &pb.Node{
			Id: id, Name: n.name, Address: fmt.Sprintf("127.0.0.%d:7000", 2+i),
			Roles: n.roles, State: pb.NodeState_NODE_STATE_UP, Status: pb.NodeStatus_NODE_STATUS_READY,
			Availability: pb.Availability_AVAILABILITY_ACTIVE, Labels: map[string]string{"k": "v"},
			Created: ts, Updated: ts, StatusChanged: ts, Group: "managers", InstanceId: "proc-" + n.name,
		}
		data, err := proto.Marshal(rec)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.cli.Put(ctx, store.Keys.Node(id), string(data)); err != nil {
			t.Fatal(err)
		}
		ids[n.name], addrs[n.name] = id, rec.Address
	}
	for _, k := range []string{"/694d1a2b3c4d5e01", "/694d1a2b3c4d5e02"} {
		if _, err := c.cli.Put(ctx, store.Keys.Election()+k, ids["manager-2"]); err != nil {
			t.Fatal(err)
		}
	}
	return ids, addrs
}

// recordsByID reads every node record straight from etcd.
func recordsByID(t *testing.T, ctx context.Context, cli *clientv3.Client) map[string]*pb.Node {
	t.Helper()
	nodes, err := store.NodeList(ctx, cli)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*pb.Node{}
	for _, n := range nodes {
		out[n.Id] = n
	}
	return out
}

func countKeys(t *testing.T, ctx context.Context, cli *clientv3.Client, prefix string) int64 {
	t.Helper()
	resp, err := cli.Get(ctx, prefix, clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		t.Fatal(err)
	}
	return resp.Count
}

// recoveryEvents are the events Recover recorded.
func recoveryEvents(t *testing.T, ctx context.Context, cli *clientv3.Client) []*pb.Event {
	t.Helper()
	evs, err := store.EventList(ctx, cli, 0)
	if err != nil {
		t.Fatal(err)
	}
	var out []*pb.Event
	for _, ev := range evs {
		if ev.Loop == "recovery" {
			out = append(out, ev)
		}
	}
	return out
}
