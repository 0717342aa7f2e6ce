package decide

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/moby/moby/api/types/swarm"
)

func TestDecideSwarm(t *testing.T) {
	// Curator Nodes: a, b, c are consensus nodes (Swarm managers A, B, C);
	// w is a worker (Swarm worker W). Options change one.
	type nopt func(*SwarmCuratorNode)
	type sopt func(*SwarmNode)
	var (
		noRole    nopt = func(n *SwarmCuratorNode) { n.Consensus = false }
		role      nopt = func(n *SwarmCuratorNode) { n.Consensus = true }
		demoting  nopt = func(n *SwarmCuratorNode) { n.Demoting = true }
		down      nopt = func(n *SwarmCuratorNode) { n.Ready = false }
		refused   nopt = func(n *SwarmCuratorNode) { n.Refused = true }
		requested nopt = func(n *SwarmCuratorNode) { n.JoinRequested = true }
		leaving   nopt = func(n *SwarmCuratorNode) { n.Leaving = true }
		notJoined nopt = func(n *SwarmCuratorNode) { n.SwarmID = "" }
		inSwarm        = func(id string) nopt { return func(n *SwarmCuratorNode) { n.SwarmID = id } }
		drained   nopt = func(n *SwarmCuratorNode) { n.Availability = swarm.NodeAvailabilityDrain }
		noAvail   nopt = func(n *SwarmCuratorNode) { n.Availability = "" }

		worker      sopt = func(s *SwarmNode) { s.Manager, s.Leader, s.Reachability = false, false, "" }
		manager     sopt = func(s *SwarmNode) { s.Manager, s.Reachability = true, swarm.ReachabilityReachable }
		leads       sopt = func(s *SwarmNode) { s.Leader = true }
		follows     sopt = func(s *SwarmNode) { s.Leader = false }
		sDown       sopt = func(s *SwarmNode) { s.State = swarm.NodeStateDown }
		unreachable sopt = func(s *SwarmNode) { s.Reachability = swarm.ReachabilityUnreachable }
		noStatus    sopt = func(s *SwarmNode) { s.Reachability = "" }
		sPaused     sopt = func(s *SwarmNode) { s.Availability = swarm.NodeAvailabilityPause }
	)
	cn := func(id string, opts ...nopt) SwarmCuratorNode {
		n := SwarmCuratorNode{ID: id, Consensus: id != "w", Ready: true, SwarmID: "S" + id, Availability: swarm.NodeAvailabilityActive}
		for _, o := range opts {
			o(&n)
		}
		return n
	}
	sn := func(id string, opts ...sopt) SwarmNode {
		n := SwarmNode{ID: id, Hostname: "host-" + id, State: swarm.NodeStateReady, Availability: swarm.NodeAvailabilityActive}
		if id != "Sw" && id != "Sx" {
			manager(&n)
		}
		if id == "Sa" {
			n.Leader = true
		}
		for _, o := range opts {
			o(&n)
		}
		return n
	}
	consistent := []SwarmCuratorNode{cn("a"), cn("b"), cn("c"), cn("w")}
	swarm3 := []SwarmNode{sn("Sa"), sn("Sb"), sn("Sc"), sn("Sw")}
	with := func(base []SwarmNode, extra ...SwarmNode) []SwarmNode {
		return append(append([]SwarmNode(nil), base...), extra...)
	}

	tests := []struct {
		name  string
		Nodes []SwarmCuratorNode
		Swarm []SwarmNode
		max   int
		// Held are changes held back after failed Swarm calls.
		Held []*SwarmAction
		want *SwarmAction // reason is not compared
	}{
		// Consistent states.
		{name: "roles match the Swarm's managers: nothing to do", Nodes: consistent, Swarm: swarm3},
		{name: "a demoting Swarm worker is left to the demotions loop",
			Nodes: []SwarmCuratorNode{cn("a"), cn("b"), cn("c"), cn("w", role, demoting)}, Swarm: swarm3},
		{name: "a live Swarm node of no node is left alone (a machine joining)",
			Nodes: consistent, Swarm: with(swarm3, sn("Sx"))},

		// Refusals that block every change.
		{name: "no Swarm leader (quorum lost or electing): refuse",
			Nodes: []SwarmCuratorNode{cn("a"), cn("b"), cn("c"), cn("w", role)}, Swarm: []SwarmNode{sn("Sa", follows), sn("Sb"), sn("Sc"), sn("Sw")},
			want: &SwarmAction{Kind: SwarmRefuse}},
		{name: "no node in the Swarm at all (a wrong Swarm): refuse, even with orphans down",
			Nodes: []SwarmCuratorNode{cn("a", inSwarm("Q1")), cn("b", inSwarm("Q2"))}, Swarm: []SwarmNode{sn("Sa"), sn("Sw", sDown)},
			want: &SwarmAction{Kind: SwarmRefuse}},

		// Orphans: a Swarm node of no node (a dead machine's).
		{name: "a down Swarm worker of no node is removed",
			Nodes: consistent, Swarm: with(swarm3, sn("Sx", sDown)),
			want: &SwarmAction{Kind: SwarmRemoveNode, SwarmID: "Sx"}},
		{name: "a down Swarm manager of no node is demoted first",
			Nodes: consistent, Swarm: with(swarm3, sn("Sd", sDown, unreachable)),
			want: &SwarmAction{Kind: SwarmDemote, SwarmID: "Sd"}},
		{name: "a down manager of no node that never joined the Swarm's Raft (no manager status) is removed as it is",
			Nodes: consistent, Swarm: with(swarm3, sn("Sd", sDown, noStatus)),
			want: &SwarmAction{Kind: SwarmRemoveNode, SwarmID: "Sd"}},
		{name: "a down orphan manager is demoted when that restores the Swarm's majority",
			Nodes: []SwarmCuratorNode{cn("a"), cn("b"), cn("w")}, Swarm: []SwarmNode{sn("Sa"), sn("Sb"), sn("Sc", sDown, unreachable), sn("Sd", sDown, unreachable), sn("Sw")},
			want: &SwarmAction{Kind: SwarmDemote, SwarmID: "Sc"}},
		{name: "orphans go before role changes",
			Nodes: []SwarmCuratorNode{cn("a"), cn("b"), cn("c", demoting), cn("w")}, Swarm: with(swarm3, sn("Sx", sDown)),
			want: &SwarmAction{Kind: SwarmRemoveNode, SwarmID: "Sx"}},

		// Demotions: demoting and a Swarm manager.
		{name: "a demoting Swarm manager is demoted in Swarm",
			Nodes: []SwarmCuratorNode{cn("a"), cn("b"), cn("c", demoting), cn("w")}, Swarm: swarm3,
			want: &SwarmAction{Kind: SwarmDemote, NodeID: "c", SwarmID: "Sc"}},
		{name: "the Swarm's leader is demoted last",
			Nodes: []SwarmCuratorNode{cn("a", demoting), cn("b", demoting), cn("c"), cn("w")}, Swarm: swarm3,
			want: &SwarmAction{Kind: SwarmDemote, NodeID: "b", SwarmID: "Sb"}},
		{name: "a demoting Swarm leader goes after the other demoting managers",
			Nodes: []SwarmCuratorNode{cn("a"), cn("b", demoting), cn("c", demoting), cn("w")}, Swarm: []SwarmNode{sn("Sa", follows), sn("Sb", leads), sn("Sc"), sn("Sw")},
			want: &SwarmAction{Kind: SwarmDemote, NodeID: "c", SwarmID: "Sc"}},
		{name: "the Swarm's leader is demoted when it is the only one",
			Nodes: []SwarmCuratorNode{cn("a", demoting), cn("b"), cn("c"), cn("w")}, Swarm: swarm3,
			want: &SwarmAction{Kind: SwarmDemote, NodeID: "a", SwarmID: "Sa"}},
		{name: "a demotion that would leave no reachable majority: refuse",
			Nodes: []SwarmCuratorNode{cn("a"), cn("b", demoting), cn("c"), cn("w")}, Swarm: []SwarmNode{sn("Sa"), sn("Sb"), sn("Sc", unreachable), sn("Sw")},
			want: &SwarmAction{Kind: SwarmRefuse, NodeID: "b", SwarmID: "Sb"}},
		{name: "the Swarm's last manager is never demoted: refuse",
			Nodes: []SwarmCuratorNode{cn("a", demoting), cn("w")}, Swarm: []SwarmNode{sn("Sa"), sn("Sw")},
			want: &SwarmAction{Kind: SwarmRefuse, NodeID: "a", SwarmID: "Sa"}},
		{name: "a refusal does not block a change behind it",
			Nodes: []SwarmCuratorNode{cn("a"), cn("b", demoting), cn("c"), cn("w", role)}, Swarm: []SwarmNode{sn("Sa"), sn("Sb"), sn("Sc", unreachable), sn("Sw")},
			want: &SwarmAction{Kind: SwarmPromote, NodeID: "w", SwarmID: "Sw"}},

		// A Swarm manager whose node lacks the role.
		{name: "a Swarm manager without the role gets it (a promotion cut short after its Swarm step)",
			Nodes: []SwarmCuratorNode{cn("a"), cn("b"), cn("c"), cn("w")}, Swarm: []SwarmNode{sn("Sa"), sn("Sb"), sn("Sc"), sn("Sw", manager)},
			want: &SwarmAction{Kind: SwarmGrantRole, NodeID: "w", SwarmID: "Sw"}},
		{name: "a Swarm manager without the role that is down: wait (refuse)",
			Nodes: []SwarmCuratorNode{cn("a"), cn("b"), cn("c"), cn("w", down)}, Swarm: []SwarmNode{sn("Sa"), sn("Sb"), sn("Sc"), sn("Sw", manager)},
			want: &SwarmAction{Kind: SwarmRefuse, NodeID: "w", SwarmID: "Sw"}},
		{name: "a refused node's Swarm manager is demoted",
			Nodes: []SwarmCuratorNode{cn("a"), cn("b"), cn("c", noRole, refused, down), cn("w")}, Swarm: []SwarmNode{sn("Sa"), sn("Sb"), sn("Sc", sDown, unreachable), sn("Sw")},
			want: &SwarmAction{Kind: SwarmDemote, NodeID: "c", SwarmID: "Sc"}},
		{name: "a Swarm manager beyond the voter limit is demoted",
			Nodes: consistent, Swarm: []SwarmNode{sn("Sa"), sn("Sb"), sn("Sc"), sn("Sw", manager)}, max: 3,
			want: &SwarmAction{Kind: SwarmDemote, NodeID: "w", SwarmID: "Sw"}},
		{name: "a Swarm manager within the voter limit gets the role",
			Nodes: consistent, Swarm: []SwarmNode{sn("Sa"), sn("Sb"), sn("Sc"), sn("Sw", manager)}, max: 5,
			want: &SwarmAction{Kind: SwarmGrantRole, NodeID: "w", SwarmID: "Sw"}},

		// The role without a Swarm manager.
		{name: "a node with the role that is a Swarm worker is promoted in Swarm",
			Nodes: []SwarmCuratorNode{cn("a"), cn("b"), cn("c"), cn("w", role)}, Swarm: swarm3,
			want: &SwarmAction{Kind: SwarmPromote, NodeID: "w", SwarmID: "Sw"}},
		{name: "a node with the role whose Swarm node is down, its join requested: wait (refuse)",
			Nodes: []SwarmCuratorNode{cn("a"), cn("b"), cn("c"), cn("w", role, requested)}, Swarm: []SwarmNode{sn("Sa"), sn("Sb"), sn("Sc"), sn("Sw", sDown)},
			want: &SwarmAction{Kind: SwarmRefuse, NodeID: "w", SwarmID: "Sw"}},
		{name: "a promotion where a majority is not reachable already: refuse",
			Nodes: []SwarmCuratorNode{cn("a"), cn("b"), cn("c"), cn("d"), cn("w", role)},
			Swarm: []SwarmNode{sn("Sa"), sn("Sb", unreachable), sn("Sc", unreachable), sn("Sd", unreachable), sn("Sw")},
			want:  &SwarmAction{Kind: SwarmRefuse, NodeID: "w", SwarmID: "Sw"}},

		// Nodes not in the Swarm.
		{name: "a node that never joined is asked to join",
			Nodes: []SwarmCuratorNode{cn("a"), cn("b"), cn("c"), cn("w", notJoined)}, Swarm: swarm3[:3],
			want: &SwarmAction{Kind: SwarmJoin, NodeID: "w"}},
		{name: "a node that left the Swarm is asked to join again",
			Nodes: []SwarmCuratorNode{cn("a"), cn("b"), cn("c"), cn("w")}, Swarm: swarm3[:3],
			want: &SwarmAction{Kind: SwarmJoin, NodeID: "w", SwarmID: "Sw"}},
		{name: "a manager that left the Swarm is asked to join again (as a worker)",
			Nodes: consistent, Swarm: []SwarmNode{sn("Sa"), sn("Sb"), sn("Sw")},
			want: &SwarmAction{Kind: SwarmJoin, NodeID: "c", SwarmID: "Sc"}},
		{name: "a ready node whose Swarm node is down (its engine left the Swarm) is asked to join again",
			Nodes: consistent, Swarm: []SwarmNode{sn("Sa"), sn("Sb"), sn("Sc"), sn("Sw", sDown)},
			want: &SwarmAction{Kind: SwarmJoin, NodeID: "w", SwarmID: "Sw"}},
		{name: "a node that is down whose Swarm node is down is not asked to join (the machine is gone)",
			Nodes: []SwarmCuratorNode{cn("a"), cn("b"), cn("c"), cn("w", down)}, Swarm: []SwarmNode{sn("Sa"), sn("Sb"), sn("Sc"), sn("Sw", sDown)}},
		{name: "a down Swarm node whose join is requested already is not asked again",
			Nodes: []SwarmCuratorNode{cn("a"), cn("b"), cn("c"), cn("w", requested)}, Swarm: []SwarmNode{sn("Sa"), sn("Sb"), sn("Sc"), sn("Sw", sDown)}},
		{name: "a join already requested is not requested again",
			Nodes: []SwarmCuratorNode{cn("a"), cn("b"), cn("c"), cn("w", requested)}, Swarm: swarm3[:3]},
		{name: "a down node is not asked to join",
			Nodes: []SwarmCuratorNode{cn("a"), cn("b"), cn("c"), cn("w", down)}, Swarm: swarm3[:3]},
		{name: "a refused node is not asked to join",
			Nodes: []SwarmCuratorNode{cn("a"), cn("b"), cn("c"), cn("w", refused)}, Swarm: swarm3[:3]},
		{name: "a node asked to leave the Swarm (its machine is going) is not asked to join again",
			Nodes: []SwarmCuratorNode{cn("a"), cn("b"), cn("c"), cn("w", leaving)}, Swarm: []SwarmNode{sn("Sa"), sn("Sb"), sn("Sc"), sn("Sw", sDown)}},
		{name: "a node with the role asked to leave the Swarm is not promoted in it",
			Nodes: []SwarmCuratorNode{cn("a"), cn("b"), cn("c"), cn("w", role, leaving)}, Swarm: swarm3},

		// Availability: the node's is the Swarm node's.
		{name: "a drained node's Swarm node is drained",
			Nodes: []SwarmCuratorNode{cn("a"), cn("b"), cn("c"), cn("w", drained)}, Swarm: swarm3,
			want: &SwarmAction{Kind: SwarmAvailability, NodeID: "w", SwarmID: "Sw", Availability: swarm.NodeAvailabilityDrain}},
		{name: "a Swarm node paused by hand is set back to its node's active",
			Nodes: consistent, Swarm: []SwarmNode{sn("Sa"), sn("Sb", sPaused), sn("Sc"), sn("Sw")},
			want: &SwarmAction{Kind: SwarmAvailability, NodeID: "b", SwarmID: "Sb", Availability: swarm.NodeAvailabilityActive}},
		{name: "a node with no availability set leaves its Swarm node's alone",
			Nodes: []SwarmCuratorNode{cn("a"), cn("b", noAvail), cn("c"), cn("w")}, Swarm: []SwarmNode{sn("Sa"), sn("Sb", sPaused), sn("Sc"), sn("Sw")}},
		{name: "a node leaving the Swarm keeps its Swarm node's availability",
			Nodes: []SwarmCuratorNode{cn("a"), cn("b"), cn("c"), cn("w", drained, leaving)}, Swarm: swarm3},
		{name: "availability goes after joins",
			Nodes: []SwarmCuratorNode{cn("a"), cn("b"), cn("c", drained), cn("w", notJoined)}, Swarm: swarm3[:3],
			want: &SwarmAction{Kind: SwarmJoin, NodeID: "w"}},

		// One change per tick, in order.
		{name: "demotions go before grants, grants before promotions, promotions before joins",
			Nodes: []SwarmCuratorNode{cn("a"), cn("b", demoting), cn("c"), cn("d", noRole), cn("e", role), cn("w", notJoined)},
			Swarm: []SwarmNode{sn("Sa"), sn("Sb"), sn("Sc"), sn("Sd"), sn("Se", worker)},
			want:  &SwarmAction{Kind: SwarmDemote, NodeID: "b", SwarmID: "Sb"}},
		{name: "grants before promotions",
			Nodes: []SwarmCuratorNode{cn("a"), cn("c"), cn("d", noRole), cn("e", role), cn("w", notJoined)},
			Swarm: []SwarmNode{sn("Sa"), sn("Sc"), sn("Sd"), sn("Se", worker)},
			want:  &SwarmAction{Kind: SwarmGrantRole, NodeID: "d", SwarmID: "Sd"}},
		{name: "promotions before joins",
			Nodes: []SwarmCuratorNode{cn("a"), cn("c"), cn("e", role), cn("w", notJoined)},
			Swarm: []SwarmNode{sn("Sa"), sn("Sc"), sn("Se", worker)},
			want:  &SwarmAction{Kind: SwarmPromote, NodeID: "e", SwarmID: "Se"}},

		// Changes held back after failed Swarm calls.
		{name: "a held-back demotion: the promotion behind it goes on",
			Nodes: []SwarmCuratorNode{cn("a"), cn("b"), cn("c", demoting), cn("w", role)}, Swarm: swarm3,
			Held: []*SwarmAction{{Kind: SwarmDemote, NodeID: "c", SwarmID: "Sc"}},
			want: &SwarmAction{Kind: SwarmPromote, NodeID: "w", SwarmID: "Sw"}},
		{name: "a held-back change with nothing behind it: refuse, naming it",
			Nodes: []SwarmCuratorNode{cn("a"), cn("b"), cn("c", demoting), cn("w")}, Swarm: swarm3,
			Held: []*SwarmAction{{Kind: SwarmDemote, NodeID: "c", SwarmID: "Sc"}},
			want: &SwarmAction{Kind: SwarmRefuse, NodeID: "c", SwarmID: "Sc"}},
		{name: "a held-back orphan removal: the next orphan is removed",
			Nodes: consistent, Swarm: with(swarm3, sn("Sx", sDown), sn("Sy", worker, sDown)),
			Held: []*SwarmAction{{Kind: SwarmRemoveNode, SwarmID: "Sx"}},
			want: &SwarmAction{Kind: SwarmRemoveNode, SwarmID: "Sy"}},
		{name: "the Swarm's leader waits for a held-back demotion of another manager",
			Nodes: []SwarmCuratorNode{cn("a", demoting), cn("b", demoting), cn("c"), cn("w")}, Swarm: swarm3,
			Held: []*SwarmAction{{Kind: SwarmDemote, NodeID: "b", SwarmID: "Sb"}},
			want: &SwarmAction{Kind: SwarmRefuse, NodeID: "b", SwarmID: "Sb"}},
		{name: "a held-back grant: the join behind it goes on",
			Nodes: []SwarmCuratorNode{cn("a"), cn("b"), cn("c"), cn("d", noRole), cn("w", notJoined)}, Swarm: []SwarmNode{sn("Sa"), sn("Sb"), sn("Sc"), sn("Sd")},
			Held: []*SwarmAction{{Kind: SwarmGrantRole, NodeID: "d", SwarmID: "Sd"}},
			want: &SwarmAction{Kind: SwarmJoin, NodeID: "w"}},
		{name: "a held-back availability of another value does not hold this one",
			Nodes: []SwarmCuratorNode{cn("a"), cn("b"), cn("c"), cn("w", drained)}, Swarm: swarm3,
			Held: []*SwarmAction{{Kind: SwarmAvailability, NodeID: "w", SwarmID: "Sw", Availability: swarm.NodeAvailabilityPause}},
			want: &SwarmAction{Kind: SwarmAvailability, NodeID: "w", SwarmID: "Sw", Availability: swarm.NodeAvailabilityDrain}},
		{name: "a held-back Availability: the next node's goes on",
			Nodes: []SwarmCuratorNode{cn("a"), cn("b", drained), cn("c"), cn("w", drained)}, Swarm: swarm3,
			Held: []*SwarmAction{{Kind: SwarmAvailability, NodeID: "b", SwarmID: "Sb", Availability: swarm.NodeAvailabilityDrain}},
			want: &SwarmAction{Kind: SwarmAvailability, NodeID: "w", SwarmID: "Sw", Availability: swarm.NodeAvailabilityDrain}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			snap := SwarmSnapshot{Nodes: tt.Nodes, Swarm: tt.Swarm, MaxVoters: tt.max}
			for _, a := range tt.Held {
				if snap.Held == nil {
					snap.Held = map[string]string{}
				}
				snap.Held[a.Key()] = "its Swarm call failed"
			}
			nodesBefore, swarmBefore := append([]SwarmCuratorNode(nil), tt.Nodes...), append([]SwarmNode(nil), tt.Swarm...)
			got := Swarm(snap)
			if got != nil && got.Reason == "" {
				t.Errorf("action %v has no reason", got.Kind)
			}
			if got != nil {
				t.Logf("%v", got)
			}
			if diff := cmp.Diff(nodesBefore, tt.Nodes, cmp.AllowUnexported(SwarmCuratorNode{})); diff != "" {
				t.Errorf("Swarm changed its snapshot's nodes:\n%s", diff)
			}
			if diff := cmp.Diff(swarmBefore, tt.Swarm, cmp.AllowUnexported(SwarmNode{})); diff != "" {
				t.Errorf("Swarm changed its snapshot's Swarm nodes:\n%s", diff)
			}
			if diff := cmp.Diff(tt.want, got, cmpopts.IgnoreFields(SwarmAction{}, "Reason")); diff != "" {
				t.Errorf("Swarm (-want +got):\n%s", diff)
			}
		})
	}
}

func TestSwarmQuorumAfter(t *testing.T) {
	v := NewSwarmView(SwarmSnapshot{Swarm: []SwarmNode{
		{ID: "A", Manager: true, Leader: true, Reachability: swarm.ReachabilityReachable},
		{ID: "B", Manager: true, Reachability: swarm.ReachabilityReachable},
		{ID: "C", Manager: true, Reachability: swarm.ReachabilityUnreachable},
		{ID: "W"},
	}})
	for _, tt := range []struct {
		demote, promote string
		want            SwarmQuorum
		ok              bool
	}{
		{"", "", SwarmQuorum{3, 2}, true},
		{"C", "", SwarmQuorum{2, 2}, true},
		{"B", "", SwarmQuorum{2, 1}, false},
		{"", "W", SwarmQuorum{4, 3}, true},
		{"", "A", SwarmQuorum{3, 2}, true}, // promoting a manager changes nothing
		{"W", "", SwarmQuorum{3, 2}, true}, // demoting a worker changes nothing
	} {
		got := v.SwarmQuorumAfter(tt.demote, tt.promote)
		if got != tt.want || got.ok() != tt.ok {
			t.Errorf("swarmQuorumAfter(%q, %q) = %v (ok %v), want %v (ok %v)", tt.demote, tt.promote, got, got.ok(), tt.want, tt.ok)
		}
	}
}
