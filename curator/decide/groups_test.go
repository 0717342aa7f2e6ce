package decide

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
	m := func(id string, age time.Duration) GroupMachine { return GroupMachine{ID: id, Created: now.Add(-age)} }
	n := func(id, inst string, st pb.NodeStatus, since time.Duration) GroupNode {
		return GroupNode{ID: id, InstanceID: inst, Status: st, Since: now.Add(-since)}
	}
	// A voter is healthy as the membership judges it: ready (none of these
	// is the leader's own unless marked so).
	voter := func(g GroupNode) GroupNode {
		g.Consensus, g.HealthyVoter = true, g.Status == pb.NodeStatus_NODE_STATUS_READY || g.Leader
		return g
	}
	leader := func(g GroupNode) GroupNode { g.Leader = true; return g }
	base := func(size int, ms []GroupMachine, ns []GroupNode) GroupSnapshot {
		return GroupSnapshot{Name: "g", Size: size, ReplaceAfter: time.Minute, JoinTimeout: 3 * time.Minute,
			Machines: ms, Nodes: ns, Voters: 3, HealthyVoters: 3, Now: now,
			MaxUnhealthy: size, MaxUnhealthySpec: "100%", MaxReplacements: 100, ReplacementWindow: 10 * time.Minute}
	}
	for _, tc := range []struct {
		name string
		s    GroupSnapshot
		want *GroupAction
	}{
		{"steady", base(2, []GroupMachine{m("a", time.Hour), m("b", time.Hour)},
			[]GroupNode{n("A", "a", ready, time.Hour), n("B", "b", ready, time.Hour)}), nil},
		{"missing", base(3, []GroupMachine{m("a", time.Hour), m("b", time.Hour)},
			[]GroupNode{n("A", "a", ready, time.Hour), n("B", "b", ready, time.Hour)}),
			&GroupAction{Kind: GroupProvision, Reason: "group g has 2 of 3 machines"}},
		{"empty group starts", base(1, nil, nil),
			&GroupAction{Kind: GroupProvision, Reason: "group g has 0 of 1 machines"}},
		{"down, not yet past replace_after", base(2, []GroupMachine{m("a", time.Hour), m("b", time.Hour)},
			[]GroupNode{n("A", "a", ready, time.Hour), n("B", "b", down, 59*time.Second)}), nil},
		{"dead: replace its machine", base(2, []GroupMachine{m("a", time.Hour), m("b", time.Hour)},
			[]GroupNode{n("A", "a", ready, time.Hour), n("B", "b", down, 61*time.Second)}),
			&GroupAction{Kind: GroupDestroyMachine, Machine: "b", Node: "B", Repair: true, Reason: "node B has been down for 1m1s (replace_after 1m0s): replacing its machine"}},
		{"record of a gone machine goes before a new machine comes", base(2, []GroupMachine{m("a", time.Hour)},
			[]GroupNode{n("A", "a", ready, time.Hour), n("B", "b", down, 2*time.Minute)}),
			&GroupAction{Kind: GroupRemoveNode, Node: "B", Machine: "b", Reason: "node B is down and its machine b is gone"}},
		{"a ready node whose machine is gone is left alone", base(2, []GroupMachine{m("a", time.Hour), m("c", time.Minute)},
			[]GroupNode{n("A", "a", ready, time.Hour), n("B", "b", ready, time.Hour), n("C", "c", unk, time.Minute)}), nil},
		{"a ready node whose machine is gone holds its place", base(2, []GroupMachine{m("a", time.Hour)},
			[]GroupNode{n("A", "a", ready, time.Hour), n("B", "b", ready, time.Hour)}), nil},
		{"dead voter's record: removed while a majority stays", func() GroupSnapshot {
			s := base(3, []GroupMachine{m("a", time.Hour), m("b", time.Hour)},
				[]GroupNode{voter(n("A", "a", ready, time.Hour)), voter(n("B", "b", ready, time.Hour)), voter(n("C", "c", down, time.Hour))})
			s.HealthyVoters = 2
			return s
		}(), &GroupAction{Kind: GroupRemoveNode, Node: "C", Machine: "c", Reason: "node C is down and its machine c is gone"}},
		{"dead voter's record: never the last voter", func() GroupSnapshot {
			s := base(1, nil, []GroupNode{voter(n("C", "c", down, time.Hour))})
			s.Voters, s.HealthyVoters = 1, 0
			return s
		}(), &GroupAction{Kind: GroupRefuse, Node: "C", Reason: "node C's machine is gone, but removing its etcd member would leave 0 healthy of 0 voters, short of a majority: bring voters back first"}},
		{"never joined, within join_timeout", base(1, []GroupMachine{m("a", 2*time.Minute)}, nil), nil},
		{"never joined: destroyed", base(1, []GroupMachine{m("a", 3*time.Minute)}, nil),
			&GroupAction{Kind: GroupDestroyMachine, Machine: "a", Repair: true, Reason: "machine a was made 3m0s ago and its node never joined (join_timeout 3m0s)"}},
		{"extra: a worker before a voter, not the leader", base(2,
			[]GroupMachine{m("a", time.Hour), m("b", time.Hour), m("c", time.Hour)},
			[]GroupNode{leader(voter(n("A", "a", ready, time.Hour))), voter(n("B", "b", ready, time.Hour)), n("C", "c", ready, time.Hour)}),
			&GroupAction{Kind: GroupDestroyMachine, Machine: "c", Node: "C", Reason: "group g has 3 machines, wants 2"}},
		{"extra: a not-ready node before a ready one", base(1,
			[]GroupMachine{m("a", time.Hour), m("b", time.Hour)},
			[]GroupNode{n("A", "a", ready, time.Hour), n("B", "b", down, time.Second)}),
			&GroupAction{Kind: GroupDestroyMachine, Machine: "b", Node: "B", Reason: "group g has 2 machines, wants 1"}},
		{"extra voter: demoted first", base(2,
			[]GroupMachine{m("a", time.Hour), m("b", time.Hour), m("c", time.Hour)},
			[]GroupNode{leader(voter(n("A", "a", ready, time.Hour))), voter(n("B", "b", ready, time.Hour)), voter(n("C", "c", ready, time.Hour))}),
			&GroupAction{Kind: GroupDemote, Node: "B", Machine: "b", Reason: "group g has 3 machines, wants 2: demoting node B before its machine goes"}},
		{"extra voter: refused below a healthy majority", func() GroupSnapshot {
			s := base(1, []GroupMachine{m("a", time.Hour), m("b", time.Hour)},
				[]GroupNode{leader(voter(n("A", "a", ready, time.Hour))), voter(n("B", "b", ready, time.Hour))})
			s.Voters, s.HealthyVoters = 3, 2
			return s
		}(), &GroupAction{Kind: GroupRefuse, Node: "B", Machine: "b", Reason: "group g has 2 machines, wants 1, but demoting node B would leave 1 healthy voters of 2, short of a majority: bring voters back, or add a consensus node first"}},
		{"destroying: the leader's node last", func() GroupSnapshot {
			s := base(3, []GroupMachine{m("a", time.Hour), m("b", time.Hour)},
				[]GroupNode{leader(voter(n("A", "a", ready, time.Hour))), voter(n("B", "b", ready, time.Hour))})
			s.Destroying, s.Voters, s.HealthyVoters = true, 5, 5
			return s
		}(), &GroupAction{Kind: GroupDemote, Node: "B", Machine: "b", Reason: "group g is being destroyed (2 machines left): demoting node B before its machine goes"}},
		{"destroying: the leader's node when it is the last", func() GroupSnapshot {
			s := base(3, []GroupMachine{m("a", time.Hour)}, []GroupNode{leader(voter(n("A", "a", ready, time.Hour)))})
			s.Destroying, s.Voters, s.HealthyVoters = true, 4, 4
			return s
		}(), &GroupAction{Kind: GroupDemote, Node: "A", Machine: "a", Reason: "group g is being destroyed (1 machines left): demoting node A before its machine goes"}},
		{"destroying: a demoted node's machine goes", func() GroupSnapshot {
			s := base(3, []GroupMachine{m("a", time.Hour)}, []GroupNode{n("A", "a", ready, time.Hour)})
			s.Destroying = true
			return s
		}(), &GroupAction{Kind: GroupDestroyMachine, Machine: "a", Node: "A", Reason: "group g is being destroyed (1 machines left)"}},
		{"destroyed: the record goes", func() GroupSnapshot {
			s := base(3, nil, nil)
			s.Destroying = true
			return s
		}(), &GroupAction{Kind: GroupDelete, Reason: "group g is destroyed: no machine and no node left"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := tc.s
			before := cmp.Diff(nil, in)
			got := Group(tc.s)
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("Group (-want +got):\n%s", d)
			}
			if after := cmp.Diff(nil, tc.s); after != before {
				t.Error("Group changed its input")
			}
		})
	}
}

// TestDecideGroupBrakes: the repair ceiling, the repair budget and a
// suspended group.
func TestDecideGroupBrakes(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	const (
		ready = pb.NodeStatus_NODE_STATUS_READY
		down  = pb.NodeStatus_NODE_STATUS_DOWN
		unk   = pb.NodeStatus_NODE_STATUS_UNKNOWN
	)
	// five machines a..e, the first downs of them down for 2m.
	group := func(downs int, st pb.NodeStatus) GroupSnapshot {
		s := GroupSnapshot{Name: "w", Size: 5, ReplaceAfter: time.Minute, JoinTimeout: 3 * time.Minute, Voters: 3, HealthyVoters: 3, Now: now,
			MaxUnhealthy: 2, MaxUnhealthySpec: "40%", MaxReplacements: 3, ReplacementWindow: 10 * time.Minute}
		for i, id := range []string{"a", "b", "c", "d", "e"} {
			s.Machines = append(s.Machines, GroupMachine{ID: id, Created: now.Add(-time.Hour)})
			n := GroupNode{ID: "N" + id, InstanceID: id, Status: ready, Since: now.Add(-time.Hour)}
			if i < downs {
				n.Status, n.Since = st, now.Add(-2*time.Minute)
			}
			s.Nodes = append(s.Nodes, n)
		}
		return s
	}
	with := func(s GroupSnapshot, f func(*GroupSnapshot)) GroupSnapshot { f(&s); return s }
	destroyA := &GroupAction{Kind: GroupDestroyMachine, Machine: "a", Node: "Na", Repair: true, Reason: "node Na has been down for 2m0s (replace_after 1m0s): replacing its machine"}
	ceiling := "group w: 3 of its 5 machines are unhealthy (node Na, node Nb, node Nc), more than max_unhealthy 40% (2 of size 5): replacing and destroying none of them until the group recovers (a partition or a switch, more likely than so many machines; it would destroy-machine: node Na has been down for 2m0s (replace_after 1m0s): replacing its machine)"
	for _, tc := range []struct {
		name string
		s    GroupSnapshot
		want *GroupAction
	}{
		{"within the ceiling: replaced", group(2, down), destroyA},
		{"past the ceiling: held, said once", group(3, down), &GroupAction{Kind: GroupRepairHold, Machine: "a", Node: "Na", Reason: ceiling}},
		{"past the ceiling, said already: waits", with(group(3, down), func(s *GroupSnapshot) { s.RepairHeld = ceiling }),
			&GroupAction{Kind: GroupWait, Machine: "a", Node: "Na", Reason: ceiling}},
		{"nodes not heard from count as unhealthy", with(group(3, unk), func(s *GroupSnapshot) { s.Nodes[0].Status = down }),
			&GroupAction{Kind: GroupRepairHold, Machine: "a", Node: "Na", Reason: ceiling}},
		{"machines that never joined count too", with(group(2, down), func(s *GroupSnapshot) {
			s.Machines = append(s.Machines, GroupMachine{ID: "f", Created: now.Add(-time.Hour)})
		}), &GroupAction{Kind: GroupRepairHold, Machine: "a", Node: "Na",
			Reason: "group w: 3 of its 6 machines are unhealthy (machine f, node Na, node Nb), more than max_unhealthy 40% (2 of size 5): replacing and destroying none of them until the group recovers (a partition or a switch, more likely than so many machines; it would destroy-machine: node Na has been down for 2m0s (replace_after 1m0s): replacing its machine)"}},
		{"recovered: the hold is lifted, said", with(group(0, down), func(s *GroupSnapshot) { s.RepairHeld = ceiling }),
			&GroupAction{Kind: GroupRepairResume, Reason: "the repairs of group w go on: 0 of its 5 machines unhealthy (max_unhealthy 40%: 2), 0 of max_replacements 3 replaced in the last 10m0s; it was held: " + ceiling}},
		{"partly recovered: lifted before the repair", with(group(1, down), func(s *GroupSnapshot) { s.RepairHeld = ceiling }),
			&GroupAction{Kind: GroupRepairResume, Reason: "the repairs of group w go on: 1 of its 5 machines unhealthy (max_unhealthy 40%: 2), 0 of max_replacements 3 replaced in the last 10m0s; it was held: " + ceiling}},
		{"lifted: the repair goes on", group(1, down), destroyA},
		{"lifted a moment ago: the stragglers have replace_after again", with(group(1, down), func(s *GroupSnapshot) { s.RepairResumed = now.Add(-59 * time.Second) }), nil},
		{"lifted replace_after ago: replaced", with(group(1, down), func(s *GroupSnapshot) { s.RepairResumed = now.Add(-61 * time.Second) }),
			&GroupAction{Kind: GroupDestroyMachine, Machine: "a", Node: "Na", Repair: true, Reason: "node Na has been down for 1m1s (replace_after 1m0s): replacing its machine"}},
		{"budget spent: held until the oldest leaves the window", with(group(1, down), func(s *GroupSnapshot) {
			s.Replacements = []time.Time{now.Add(-9 * time.Minute), now.Add(-time.Minute), now.Add(-5 * time.Minute)}
		}), &GroupAction{Kind: GroupRepairHold, Machine: "a", Node: "Na",
			Reason: "group w replaced 3 machines in the last 10m0s, its budget (max_replacements 3 per replacement_window 10m0s): replacing none until 2026-12-01T12:01:00Z (it would destroy-machine: node Na has been down for 2m0s (replace_after 1m0s): replacing its machine)"}},
		{"budget: replacements out of the window do not count", with(group(1, down), func(s *GroupSnapshot) {
			s.Replacements = []time.Time{now.Add(-11 * time.Minute), now.Add(-time.Minute), now.Add(-5 * time.Minute)}
		}), destroyA},
		{"a machine that never joined is a repair", with(group(0, down), func(s *GroupSnapshot) {
			s.Machines = append(s.Machines, GroupMachine{ID: "f", Created: now.Add(-time.Hour)})
			s.Replacements = []time.Time{now, now, now}
		}), &GroupAction{Kind: GroupRepairHold, Machine: "f",
			Reason: "group w replaced 3 machines in the last 10m0s, its budget (max_replacements 3 per replacement_window 10m0s): replacing none until 2026-12-01T12:10:00Z (it would destroy-machine: machine f was made 1h0m0s ago and its node never joined (join_timeout 3m0s))"}},
		{"shrinking is not a repair: the ceiling does not hold it", with(group(3, down), func(s *GroupSnapshot) {
			s.Size = 2
			s.MaxUnhealthy = 1
			for i := range s.Nodes[:3] {
				s.Nodes[i].Since = now.Add(-30 * time.Second)
			}
		}), &GroupAction{Kind: GroupDestroyMachine, Machine: "a", Node: "Na", Reason: "group w has 5 machines, wants 2"}},
		{"being destroyed: not held", with(group(3, down), func(s *GroupSnapshot) { s.Destroying = true }),
			&GroupAction{Kind: GroupDestroyMachine, Machine: "a", Node: "Na", Repair: true, Reason: "node Na has been down for 2m0s (replace_after 1m0s): replacing its machine"}},
		{"suspended: nothing to do", with(group(0, down), func(s *GroupSnapshot) { s.Suspended = "restored from a backup" }), nil},
		{"suspended: no repair", with(group(1, down), func(s *GroupSnapshot) { s.Suspended = "restored from a backup" }),
			&GroupAction{Kind: GroupWait, Machine: "a", Node: "Na", Reason: "group w is suspended (restored from a backup): it makes and destroys nothing until `curator group resume w`; it would destroy-machine: node Na has been down for 2m0s (replace_after 1m0s): replacing its machine"}},
		{"suspended: no new machine", with(group(0, down), func(s *GroupSnapshot) { s.Size = 6; s.Suspended = "restored from a backup" }),
			&GroupAction{Kind: GroupWait, Reason: "group w is suspended (restored from a backup): it makes and destroys nothing until `curator group resume w`; it would provision: group w has 5 of 6 machines"}},
		{"suspended: not even destroyed", with(group(0, down), func(s *GroupSnapshot) { s.Destroying = true; s.Suspended = "x" }),
			&GroupAction{Kind: GroupWait, Machine: "a", Node: "Na", Reason: "group w is suspended (x): it makes and destroys nothing until `curator group resume w`; it would destroy-machine: group w is being destroyed (5 machines left)"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if d := cmp.Diff(tc.want, Group(tc.s)); d != "" {
				t.Errorf("Group (-want +got):\n%s", d)
			}
		})
	}
}
