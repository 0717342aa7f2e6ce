package curator

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	pb "github.com/curatorproject/curator/proto"
)

func TestDecideGroup(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	const (
		ready = pb.NodeStatus_NODE_STATUS_READY
		down  = pb.NodeStatus_NODE_STATUS_DOWN
		unk   = pb.NodeStatus_NODE_STATUS_UNKNOWN
	)
	m := func(id string, age time.Duration) groupMachine { return groupMachine{ID: id, Created: now.Add(-age)} }
	n := func(id, inst string, st pb.NodeStatus, since time.Duration) groupNode {
		return groupNode{ID: id, InstanceID: inst, Status: st, Since: now.Add(-since)}
	}
	voter := func(g groupNode) groupNode { g.Consensus = true; return g }
	leader := func(g groupNode) groupNode { g.Leader = true; return g }
	base := func(size int, ms []groupMachine, ns []groupNode) groupSnapshot {
		return groupSnapshot{Name: "g", Size: size, ReplaceAfter: time.Minute, JoinTimeout: 3 * time.Minute,
			Machines: ms, Nodes: ns, Voters: 3, HealthyVoters: 3, Now: now}
	}
	for _, tc := range []struct {
		name string
		s    groupSnapshot
		want *groupAction
	}{
		{"steady", base(2, []groupMachine{m("a", time.Hour), m("b", time.Hour)},
			[]groupNode{n("A", "a", ready, time.Hour), n("B", "b", ready, time.Hour)}), nil},
		{"missing", base(3, []groupMachine{m("a", time.Hour), m("b", time.Hour)},
			[]groupNode{n("A", "a", ready, time.Hour), n("B", "b", ready, time.Hour)}),
			&groupAction{Kind: groupProvision, Reason: "group g has 2 of 3 machines"}},
		{"empty group starts", base(1, nil, nil),
			&groupAction{Kind: groupProvision, Reason: "group g has 0 of 1 machines"}},
		{"down, not yet past replace_after", base(2, []groupMachine{m("a", time.Hour), m("b", time.Hour)},
			[]groupNode{n("A", "a", ready, time.Hour), n("B", "b", down, 59*time.Second)}), nil},
		{"dead: replace its machine", base(2, []groupMachine{m("a", time.Hour), m("b", time.Hour)},
			[]groupNode{n("A", "a", ready, time.Hour), n("B", "b", down, 61*time.Second)}),
			&groupAction{Kind: groupDestroyMachine, Machine: "b", Node: "B", Reason: "node B has been down for 1m1s (replace_after 1m0s): replacing its machine"}},
		{"record of a gone machine goes before a new machine comes", base(2, []groupMachine{m("a", time.Hour)},
			[]groupNode{n("A", "a", ready, time.Hour), n("B", "b", down, 2*time.Minute)}),
			&groupAction{Kind: groupRemoveNode, Node: "B", Machine: "b", Reason: "node B is down and its machine b is gone"}},
		{"a ready node whose machine is gone is left alone", base(2, []groupMachine{m("a", time.Hour), m("c", time.Minute)},
			[]groupNode{n("A", "a", ready, time.Hour), n("B", "b", ready, time.Hour), n("C", "c", unk, time.Minute)}), nil},
		{"a ready node whose machine is gone holds its place", base(2, []groupMachine{m("a", time.Hour)},
			[]groupNode{n("A", "a", ready, time.Hour), n("B", "b", ready, time.Hour)}), nil},
		{"dead voter's record: removed while a majority stays", func() groupSnapshot {
			s := base(3, []groupMachine{m("a", time.Hour), m("b", time.Hour)},
				[]groupNode{voter(n("A", "a", ready, time.Hour)), voter(n("B", "b", ready, time.Hour)), voter(n("C", "c", down, time.Hour))})
			s.HealthyVoters = 2
			return s
		}(), &groupAction{Kind: groupRemoveNode, Node: "C", Machine: "c", Reason: "node C is down and its machine c is gone"}},
		{"dead voter's record: never the last voter", func() groupSnapshot {
			s := base(1, nil, []groupNode{voter(n("C", "c", down, time.Hour))})
			s.Voters, s.HealthyVoters = 1, 0
			return s
		}(), &groupAction{Kind: groupRefuse, Node: "C", Reason: "node C's machine is gone, but removing its etcd member would leave 0 healthy of 0 voters, short of a majority: bring voters back first"}},
		{"never joined, within join_timeout", base(1, []groupMachine{m("a", 2*time.Minute)}, nil), nil},
		{"never joined: destroyed", base(1, []groupMachine{m("a", 3*time.Minute)}, nil),
			&groupAction{Kind: groupDestroyMachine, Machine: "a", Reason: "machine a was made 3m0s ago and its node never joined (join_timeout 3m0s)"}},
		{"extra: a worker before a voter, not the leader", base(2,
			[]groupMachine{m("a", time.Hour), m("b", time.Hour), m("c", time.Hour)},
			[]groupNode{leader(voter(n("A", "a", ready, time.Hour))), voter(n("B", "b", ready, time.Hour)), n("C", "c", ready, time.Hour)}),
			&groupAction{Kind: groupDestroyMachine, Machine: "c", Node: "C", Reason: "group g has 3 machines, wants 2"}},
		{"extra: a not-ready node before a ready one", base(1,
			[]groupMachine{m("a", time.Hour), m("b", time.Hour)},
			[]groupNode{n("A", "a", ready, time.Hour), n("B", "b", down, time.Second)}),
			&groupAction{Kind: groupDestroyMachine, Machine: "b", Node: "B", Reason: "group g has 2 machines, wants 1"}},
		{"extra voter: demoted first", base(2,
			[]groupMachine{m("a", time.Hour), m("b", time.Hour), m("c", time.Hour)},
			[]groupNode{leader(voter(n("A", "a", ready, time.Hour))), voter(n("B", "b", ready, time.Hour)), voter(n("C", "c", ready, time.Hour))}),
			&groupAction{Kind: groupDemote, Node: "B", Machine: "b", Reason: "group g has 3 machines, wants 2: demoting node B before its machine goes"}},
		{"extra voter: refused below a healthy majority", func() groupSnapshot {
			s := base(1, []groupMachine{m("a", time.Hour), m("b", time.Hour)},
				[]groupNode{leader(voter(n("A", "a", ready, time.Hour))), voter(n("B", "b", ready, time.Hour))})
			s.Voters, s.HealthyVoters = 3, 2
			return s
		}(), &groupAction{Kind: groupRefuse, Node: "B", Machine: "b", Reason: "group g has 2 machines, wants 1, but demoting node B would leave 1 healthy voters of 2, short of a majority: bring voters back, or add a consensus node first"}},
		{"destroying: the leader's node last", func() groupSnapshot {
			s := base(3, []groupMachine{m("a", time.Hour), m("b", time.Hour)},
				[]groupNode{leader(voter(n("A", "a", ready, time.Hour))), voter(n("B", "b", ready, time.Hour))})
			s.Destroying, s.Voters, s.HealthyVoters = true, 5, 5
			return s
		}(), &groupAction{Kind: groupDemote, Node: "B", Machine: "b", Reason: "group g is being destroyed (2 machines left): demoting node B before its machine goes"}},
		{"destroying: the leader's node when it is the last", func() groupSnapshot {
			s := base(3, []groupMachine{m("a", time.Hour)}, []groupNode{leader(voter(n("A", "a", ready, time.Hour)))})
			s.Destroying, s.Voters, s.HealthyVoters = true, 4, 4
			return s
		}(), &groupAction{Kind: groupDemote, Node: "A", Machine: "a", Reason: "group g is being destroyed (1 machines left): demoting node A before its machine goes"}},
		{"destroying: a demoted node's machine goes", func() groupSnapshot {
			s := base(3, []groupMachine{m("a", time.Hour)}, []groupNode{n("A", "a", ready, time.Hour)})
			s.Destroying = true
			return s
		}(), &groupAction{Kind: groupDestroyMachine, Machine: "a", Node: "A", Reason: "group g is being destroyed (1 machines left)"}},
		{"destroyed: the record goes", func() groupSnapshot {
			s := base(3, nil, nil)
			s.Destroying = true
			return s
		}(), &groupAction{Kind: groupDelete, Reason: "group g is destroyed: no machine and no node left"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := tc.s
			before := cmp.Diff(nil, in)
			got := decideGroup(tc.s)
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("decideGroup (-want +got):\n%s", d)
			}
			if after := cmp.Diff(nil, tc.s); after != before {
				t.Error("decideGroup changed its input")
			}
		})
	}
}
