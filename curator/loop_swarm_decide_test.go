package curator

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/moby/moby/api/types/swarm"
)

func TestDecideSwarm(t *testing.T) {
	// Curator nodes: a, b, c are consensus nodes (Swarm managers A, B, C);
	// w is a worker (Swarm worker W). Options change one.
	type nopt func(*swarmCuratorNode)
	type sopt func(*swarmNode)
	var (
		noRole    nopt = func(n *swarmCuratorNode) { n.consensus = false }
		role      nopt = func(n *swarmCuratorNode) { n.consensus = true }
		demoting  nopt = func(n *swarmCuratorNode) { n.demoting = true }
		down      nopt = func(n *swarmCuratorNode) { n.ready = false }
		refused   nopt = func(n *swarmCuratorNode) { n.refused = true }
		requested nopt = func(n *swarmCuratorNode) { n.joinRequested = true }
		leaving   nopt = func(n *swarmCuratorNode) { n.leaving = true }
		notJoined nopt = func(n *swarmCuratorNode) { n.swarmID = "" }
		inSwarm        = func(id string) nopt { return func(n *swarmCuratorNode) { n.swarmID = id } }
		drained   nopt = func(n *swarmCuratorNode) { n.availability = swarm.NodeAvailabilityDrain }
		noAvail   nopt = func(n *swarmCuratorNode) { n.availability = "" }

		worker      sopt = func(s *swarmNode) { s.manager, s.leader, s.reachability = false, false, "" }
		manager     sopt = func(s *swarmNode) { s.manager, s.reachability = true, swarm.ReachabilityReachable }
		leads       sopt = func(s *swarmNode) { s.leader = true }
		follows     sopt = func(s *swarmNode) { s.leader = false }
		sDown       sopt = func(s *swarmNode) { s.state = swarm.NodeStateDown }
		unreachable sopt = func(s *swarmNode) { s.reachability = swarm.ReachabilityUnreachable }
		noStatus    sopt = func(s *swarmNode) { s.reachability = "" }
		sPaused     sopt = func(s *swarmNode) { s.availability = swarm.NodeAvailabilityPause }
	)
	cn := func(id string, opts ...nopt) swarmCuratorNode {
		n := swarmCuratorNode{id: id, consensus: id != "w", ready: true, swarmID: "S" + id, availability: swarm.NodeAvailabilityActive}
		for _, o := range opts {
			o(&n)
		}
		return n
	}
	sn := func(id string, opts ...sopt) swarmNode {
		n := swarmNode{id: id, hostname: "host-" + id, state: swarm.NodeStateReady, availability: swarm.NodeAvailabilityActive}
		if id != "Sw" && id != "Sx" {
			manager(&n)
		}
		if id == "Sa" {
			n.leader = true
		}
		for _, o := range opts {
			o(&n)
		}
		return n
	}
	consistent := []swarmCuratorNode{cn("a"), cn("b"), cn("c"), cn("w")}
	swarm3 := []swarmNode{sn("Sa"), sn("Sb"), sn("Sc"), sn("Sw")}
	with := func(base []swarmNode, extra ...swarmNode) []swarmNode {
		return append(append([]swarmNode(nil), base...), extra...)
	}

	tests := []struct {
		name  string
		nodes []swarmCuratorNode
		swarm []swarmNode
		max   int
		// held are changes held back after failed Swarm calls.
		held []*swarmAction
		want *swarmAction // reason is not compared
	}{
		// Consistent states.
		{name: "roles match the Swarm's managers: nothing to do", nodes: consistent, swarm: swarm3},
		{name: "a demoting Swarm worker is left to the demotions loop",
			nodes: []swarmCuratorNode{cn("a"), cn("b"), cn("c"), cn("w", role, demoting)}, swarm: swarm3},
		{name: "a live Swarm node of no node is left alone (a machine joining)",
			nodes: consistent, swarm: with(swarm3, sn("Sx"))},

		// Refusals that block every change.
		{name: "no Swarm leader (quorum lost or electing): refuse",
			nodes: []swarmCuratorNode{cn("a"), cn("b"), cn("c"), cn("w", role)}, swarm: []swarmNode{sn("Sa", follows), sn("Sb"), sn("Sc"), sn("Sw")},
			want: &swarmAction{kind: swarmRefuse}},
		{name: "no node in the Swarm at all (a wrong Swarm): refuse, even with orphans down",
			nodes: []swarmCuratorNode{cn("a", inSwarm("Q1")), cn("b", inSwarm("Q2"))}, swarm: []swarmNode{sn("Sa"), sn("Sw", sDown)},
			want: &swarmAction{kind: swarmRefuse}},

		// Orphans: a Swarm node of no node (a dead machine's).
		{name: "a down Swarm worker of no node is removed",
			nodes: consistent, swarm: with(swarm3, sn("Sx", sDown)),
			want: &swarmAction{kind: swarmRemoveNode, swarmID: "Sx"}},
		{name: "a down Swarm manager of no node is demoted first",
			nodes: consistent, swarm: with(swarm3, sn("Sd", sDown, unreachable)),
			want: &swarmAction{kind: swarmDemote, swarmID: "Sd"}},
		{name: "a down manager of no node that never joined the Swarm's Raft (no manager status) is removed as it is",
			nodes: consistent, swarm: with(swarm3, sn("Sd", sDown, noStatus)),
			want: &swarmAction{kind: swarmRemoveNode, swarmID: "Sd"}},
		{name: "a down orphan manager is demoted when that restores the Swarm's majority",
			nodes: []swarmCuratorNode{cn("a"), cn("b"), cn("w")}, swarm: []swarmNode{sn("Sa"), sn("Sb"), sn("Sc", sDown, unreachable), sn("Sd", sDown, unreachable), sn("Sw")},
			want: &swarmAction{kind: swarmDemote, swarmID: "Sc"}},
		{name: "orphans go before role changes",
			nodes: []swarmCuratorNode{cn("a"), cn("b"), cn("c", demoting), cn("w")}, swarm: with(swarm3, sn("Sx", sDown)),
			want: &swarmAction{kind: swarmRemoveNode, swarmID: "Sx"}},

		// Demotions: demoting and a Swarm manager.
		{name: "a demoting Swarm manager is demoted in Swarm",
			nodes: []swarmCuratorNode{cn("a"), cn("b"), cn("c", demoting), cn("w")}, swarm: swarm3,
			want: &swarmAction{kind: swarmDemote, nodeID: "c", swarmID: "Sc"}},
		{name: "the Swarm's leader is demoted last",
			nodes: []swarmCuratorNode{cn("a", demoting), cn("b", demoting), cn("c"), cn("w")}, swarm: swarm3,
			want: &swarmAction{kind: swarmDemote, nodeID: "b", swarmID: "Sb"}},
		{name: "a demoting Swarm leader goes after the other demoting managers",
			nodes: []swarmCuratorNode{cn("a"), cn("b", demoting), cn("c", demoting), cn("w")}, swarm: []swarmNode{sn("Sa", follows), sn("Sb", leads), sn("Sc"), sn("Sw")},
			want: &swarmAction{kind: swarmDemote, nodeID: "c", swarmID: "Sc"}},
		{name: "the Swarm's leader is demoted when it is the only one",
			nodes: []swarmCuratorNode{cn("a", demoting), cn("b"), cn("c"), cn("w")}, swarm: swarm3,
			want: &swarmAction{kind: swarmDemote, nodeID: "a", swarmID: "Sa"}},
		{name: "a demotion that would leave no reachable majority: refuse",
			nodes: []swarmCuratorNode{cn("a"), cn("b", demoting), cn("c"), cn("w")}, swarm: []swarmNode{sn("Sa"), sn("Sb"), sn("Sc", unreachable), sn("Sw")},
			want: &swarmAction{kind: swarmRefuse, nodeID: "b", swarmID: "Sb"}},
		{name: "the Swarm's last manager is never demoted: refuse",
			nodes: []swarmCuratorNode{cn("a", demoting), cn("w")}, swarm: []swarmNode{sn("Sa"), sn("Sw")},
			want: &swarmAction{kind: swarmRefuse, nodeID: "a", swarmID: "Sa"}},
		{name: "a refusal does not block a change behind it",
			nodes: []swarmCuratorNode{cn("a"), cn("b", demoting), cn("c"), cn("w", role)}, swarm: []swarmNode{sn("Sa"), sn("Sb"), sn("Sc", unreachable), sn("Sw")},
			want: &swarmAction{kind: swarmPromote, nodeID: "w", swarmID: "Sw"}},

		// A Swarm manager whose node lacks the role.
		{name: "a Swarm manager without the role gets it (a promotion cut short after its Swarm step)",
			nodes: []swarmCuratorNode{cn("a"), cn("b"), cn("c"), cn("w")}, swarm: []swarmNode{sn("Sa"), sn("Sb"), sn("Sc"), sn("Sw", manager)},
			want: &swarmAction{kind: swarmGrantRole, nodeID: "w", swarmID: "Sw"}},
		{name: "a Swarm manager without the role that is down: wait (refuse)",
			nodes: []swarmCuratorNode{cn("a"), cn("b"), cn("c"), cn("w", down)}, swarm: []swarmNode{sn("Sa"), sn("Sb"), sn("Sc"), sn("Sw", manager)},
			want: &swarmAction{kind: swarmRefuse, nodeID: "w", swarmID: "Sw"}},
		{name: "a refused node's Swarm manager is demoted",
			nodes: []swarmCuratorNode{cn("a"), cn("b"), cn("c", noRole, refused, down), cn("w")}, swarm: []swarmNode{sn("Sa"), sn("Sb"), sn("Sc", sDown, unreachable), sn("Sw")},
			want: &swarmAction{kind: swarmDemote, nodeID: "c", swarmID: "Sc"}},
		{name: "a Swarm manager beyond the voter limit is demoted",
			nodes: consistent, swarm: []swarmNode{sn("Sa"), sn("Sb"), sn("Sc"), sn("Sw", manager)}, max: 3,
			want: &swarmAction{kind: swarmDemote, nodeID: "w", swarmID: "Sw"}},
		{name: "a Swarm manager within the voter limit gets the role",
			nodes: consistent, swarm: []swarmNode{sn("Sa"), sn("Sb"), sn("Sc"), sn("Sw", manager)}, max: 5,
			want: &swarmAction{kind: swarmGrantRole, nodeID: "w", swarmID: "Sw"}},

		// The role without a Swarm manager.
		{name: "a node with the role that is a Swarm worker is promoted in Swarm",
			nodes: []swarmCuratorNode{cn("a"), cn("b"), cn("c"), cn("w", role)}, swarm: swarm3,
			want: &swarmAction{kind: swarmPromote, nodeID: "w", swarmID: "Sw"}},
		{name: "a node with the role whose Swarm node is down, its join requested: wait (refuse)",
			nodes: []swarmCuratorNode{cn("a"), cn("b"), cn("c"), cn("w", role, requested)}, swarm: []swarmNode{sn("Sa"), sn("Sb"), sn("Sc"), sn("Sw", sDown)},
			want: &swarmAction{kind: swarmRefuse, nodeID: "w", swarmID: "Sw"}},
		{name: "a promotion where a majority is not reachable already: refuse",
			nodes: []swarmCuratorNode{cn("a"), cn("b"), cn("c"), cn("d"), cn("w", role)},
			swarm: []swarmNode{sn("Sa"), sn("Sb", unreachable), sn("Sc", unreachable), sn("Sd", unreachable), sn("Sw")},
			want:  &swarmAction{kind: swarmRefuse, nodeID: "w", swarmID: "Sw"}},

		// Nodes not in the Swarm.
		{name: "a node that never joined is asked to join",
			nodes: []swarmCuratorNode{cn("a"), cn("b"), cn("c"), cn("w", notJoined)}, swarm: swarm3[:3],
			want: &swarmAction{kind: swarmJoin, nodeID: "w"}},
		{name: "a node that left the Swarm is asked to join again",
			nodes: []swarmCuratorNode{cn("a"), cn("b"), cn("c"), cn("w")}, swarm: swarm3[:3],
			want: &swarmAction{kind: swarmJoin, nodeID: "w", swarmID: "Sw"}},
		{name: "a manager that left the Swarm is asked to join again (as a worker)",
			nodes: consistent, swarm: []swarmNode{sn("Sa"), sn("Sb"), sn("Sw")},
			want: &swarmAction{kind: swarmJoin, nodeID: "c", swarmID: "Sc"}},
		{name: "a ready node whose Swarm node is down (its engine left the Swarm) is asked to join again",
			nodes: consistent, swarm: []swarmNode{sn("Sa"), sn("Sb"), sn("Sc"), sn("Sw", sDown)},
			want: &swarmAction{kind: swarmJoin, nodeID: "w", swarmID: "Sw"}},
		{name: "a node that is down whose Swarm node is down is not asked to join (the machine is gone)",
			nodes: []swarmCuratorNode{cn("a"), cn("b"), cn("c"), cn("w", down)}, swarm: []swarmNode{sn("Sa"), sn("Sb"), sn("Sc"), sn("Sw", sDown)}},
		{name: "a down Swarm node whose join is requested already is not asked again",
			nodes: []swarmCuratorNode{cn("a"), cn("b"), cn("c"), cn("w", requested)}, swarm: []swarmNode{sn("Sa"), sn("Sb"), sn("Sc"), sn("Sw", sDown)}},
		{name: "a join already requested is not requested again",
			nodes: []swarmCuratorNode{cn("a"), cn("b"), cn("c"), cn("w", requested)}, swarm: swarm3[:3]},
		{name: "a down node is not asked to join",
			nodes: []swarmCuratorNode{cn("a"), cn("b"), cn("c"), cn("w", down)}, swarm: swarm3[:3]},
		{name: "a refused node is not asked to join",
			nodes: []swarmCuratorNode{cn("a"), cn("b"), cn("c"), cn("w", refused)}, swarm: swarm3[:3]},
		{name: "a node asked to leave the Swarm (its machine is going) is not asked to join again",
			nodes: []swarmCuratorNode{cn("a"), cn("b"), cn("c"), cn("w", leaving)}, swarm: []swarmNode{sn("Sa"), sn("Sb"), sn("Sc"), sn("Sw", sDown)}},
		{name: "a node with the role asked to leave the Swarm is not promoted in it",
			nodes: []swarmCuratorNode{cn("a"), cn("b"), cn("c"), cn("w", role, leaving)}, swarm: swarm3},

		// Availability: the node's is the Swarm node's.
		{name: "a drained node's Swarm node is drained",
			nodes: []swarmCuratorNode{cn("a"), cn("b"), cn("c"), cn("w", drained)}, swarm: swarm3,
			want: &swarmAction{kind: swarmAvailability, nodeID: "w", swarmID: "Sw", availability: swarm.NodeAvailabilityDrain}},
		{name: "a Swarm node paused by hand is set back to its node's active",
			nodes: consistent, swarm: []swarmNode{sn("Sa"), sn("Sb", sPaused), sn("Sc"), sn("Sw")},
			want: &swarmAction{kind: swarmAvailability, nodeID: "b", swarmID: "Sb", availability: swarm.NodeAvailabilityActive}},
		{name: "a node with no availability set leaves its Swarm node's alone",
			nodes: []swarmCuratorNode{cn("a"), cn("b", noAvail), cn("c"), cn("w")}, swarm: []swarmNode{sn("Sa"), sn("Sb", sPaused), sn("Sc"), sn("Sw")}},
		{name: "a node leaving the Swarm keeps its Swarm node's availability",
			nodes: []swarmCuratorNode{cn("a"), cn("b"), cn("c"), cn("w", drained, leaving)}, swarm: swarm3},
		{name: "availability goes after joins",
			nodes: []swarmCuratorNode{cn("a"), cn("b"), cn("c", drained), cn("w", notJoined)}, swarm: swarm3[:3],
			want: &swarmAction{kind: swarmJoin, nodeID: "w"}},

		// One change per tick, in order.
		{name: "demotions go before grants, grants before promotions, promotions before joins",
			nodes: []swarmCuratorNode{cn("a"), cn("b", demoting), cn("c"), cn("d", noRole), cn("e", role), cn("w", notJoined)},
			swarm: []swarmNode{sn("Sa"), sn("Sb"), sn("Sc"), sn("Sd"), sn("Se", worker)},
			want:  &swarmAction{kind: swarmDemote, nodeID: "b", swarmID: "Sb"}},
		{name: "grants before promotions",
			nodes: []swarmCuratorNode{cn("a"), cn("c"), cn("d", noRole), cn("e", role), cn("w", notJoined)},
			swarm: []swarmNode{sn("Sa"), sn("Sc"), sn("Sd"), sn("Se", worker)},
			want:  &swarmAction{kind: swarmGrantRole, nodeID: "d", swarmID: "Sd"}},
		{name: "promotions before joins",
			nodes: []swarmCuratorNode{cn("a"), cn("c"), cn("e", role), cn("w", notJoined)},
			swarm: []swarmNode{sn("Sa"), sn("Sc"), sn("Se", worker)},
			want:  &swarmAction{kind: swarmPromote, nodeID: "e", swarmID: "Se"}},

		// Changes held back after failed Swarm calls.
		{name: "a held-back demotion: the promotion behind it goes on",
			nodes: []swarmCuratorNode{cn("a"), cn("b"), cn("c", demoting), cn("w", role)}, swarm: swarm3,
			held: []*swarmAction{{kind: swarmDemote, nodeID: "c", swarmID: "Sc"}},
			want: &swarmAction{kind: swarmPromote, nodeID: "w", swarmID: "Sw"}},
		{name: "a held-back change with nothing behind it: refuse, naming it",
			nodes: []swarmCuratorNode{cn("a"), cn("b"), cn("c", demoting), cn("w")}, swarm: swarm3,
			held: []*swarmAction{{kind: swarmDemote, nodeID: "c", swarmID: "Sc"}},
			want: &swarmAction{kind: swarmRefuse, nodeID: "c", swarmID: "Sc"}},
		{name: "a held-back orphan removal: the next orphan is removed",
			nodes: consistent, swarm: with(swarm3, sn("Sx", sDown), sn("Sy", worker, sDown)),
			held: []*swarmAction{{kind: swarmRemoveNode, swarmID: "Sx"}},
			want: &swarmAction{kind: swarmRemoveNode, swarmID: "Sy"}},
		{name: "the Swarm's leader waits for a held-back demotion of another manager",
			nodes: []swarmCuratorNode{cn("a", demoting), cn("b", demoting), cn("c"), cn("w")}, swarm: swarm3,
			held: []*swarmAction{{kind: swarmDemote, nodeID: "b", swarmID: "Sb"}},
			want: &swarmAction{kind: swarmRefuse, nodeID: "b", swarmID: "Sb"}},
		{name: "a held-back grant: the join behind it goes on",
			nodes: []swarmCuratorNode{cn("a"), cn("b"), cn("c"), cn("d", noRole), cn("w", notJoined)}, swarm: []swarmNode{sn("Sa"), sn("Sb"), sn("Sc"), sn("Sd")},
			held: []*swarmAction{{kind: swarmGrantRole, nodeID: "d", swarmID: "Sd"}},
			want: &swarmAction{kind: swarmJoin, nodeID: "w"}},
		{name: "a held-back availability of another value does not hold this one",
			nodes: []swarmCuratorNode{cn("a"), cn("b"), cn("c"), cn("w", drained)}, swarm: swarm3,
			held: []*swarmAction{{kind: swarmAvailability, nodeID: "w", swarmID: "Sw", availability: swarm.NodeAvailabilityPause}},
			want: &swarmAction{kind: swarmAvailability, nodeID: "w", swarmID: "Sw", availability: swarm.NodeAvailabilityDrain}},
		{name: "a held-back availability: the next node's goes on",
			nodes: []swarmCuratorNode{cn("a"), cn("b", drained), cn("c"), cn("w", drained)}, swarm: swarm3,
			held: []*swarmAction{{kind: swarmAvailability, nodeID: "b", swarmID: "Sb", availability: swarm.NodeAvailabilityDrain}},
			want: &swarmAction{kind: swarmAvailability, nodeID: "w", swarmID: "Sw", availability: swarm.NodeAvailabilityDrain}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			snap := swarmSnapshot{nodes: tt.nodes, swarm: tt.swarm, maxVoters: tt.max}
			for _, a := range tt.held {
				if snap.held == nil {
					snap.held = map[string]string{}
				}
				snap.held[a.key()] = "its Swarm call failed"
			}
			nodesBefore, swarmBefore := append([]swarmCuratorNode(nil), tt.nodes...), append([]swarmNode(nil), tt.swarm...)
			got := decideSwarm(snap)
			if got != nil && got.reason == "" {
				t.Errorf("action %v has no reason", got.kind)
			}
			if got != nil {
				t.Logf("%v", got)
			}
			if diff := cmp.Diff(nodesBefore, tt.nodes, cmp.AllowUnexported(swarmCuratorNode{})); diff != "" {
				t.Errorf("decideSwarm changed its snapshot's nodes:\n%s", diff)
			}
			if diff := cmp.Diff(swarmBefore, tt.swarm, cmp.AllowUnexported(swarmNode{})); diff != "" {
				t.Errorf("decideSwarm changed its snapshot's Swarm nodes:\n%s", diff)
			}
			if diff := cmp.Diff(tt.want, got, cmp.AllowUnexported(swarmAction{}), ignoreReason); diff != "" {
				t.Errorf("decideSwarm (-want +got):\n%s", diff)
			}
		})
	}
}

func TestSwarmQuorumAfter(t *testing.T) {
	v := newSwarmView(swarmSnapshot{swarm: []swarmNode{
		{id: "A", manager: true, leader: true, reachability: swarm.ReachabilityReachable},
		{id: "B", manager: true, reachability: swarm.ReachabilityReachable},
		{id: "C", manager: true, reachability: swarm.ReachabilityUnreachable},
		{id: "W"},
	}})
	for _, tt := range []struct {
		demote, promote string
		want            swarmQuorum
		ok              bool
	}{
		{"", "", swarmQuorum{3, 2}, true},
		{"C", "", swarmQuorum{2, 2}, true},
		{"B", "", swarmQuorum{2, 1}, false},
		{"", "W", swarmQuorum{4, 3}, true},
		{"", "A", swarmQuorum{3, 2}, true}, // promoting a manager changes nothing
		{"W", "", swarmQuorum{3, 2}, true}, // demoting a worker changes nothing
	} {
		got := v.swarmQuorumAfter(tt.demote, tt.promote)
		if got != tt.want || got.ok() != tt.ok {
			t.Errorf("swarmQuorumAfter(%q, %q) = %v (ok %v), want %v (ok %v)", tt.demote, tt.promote, got, got.ok(), tt.want, tt.ok)
		}
	}
}

func TestSwarmHolds(t *testing.T) {
	var h swarmHolds
	t0 := time.Unix(1_000_000, 0)
	a := &swarmAction{kind: swarmDemote, nodeID: "c", swarmID: "Sc"}
	other := &swarmAction{kind: swarmPromote, nodeID: "w", swarmID: "Sw"}
	boom := errors.New("engine timed out")

	if got := h.held(t0); len(got) != 0 {
		t.Fatalf("nothing failed, yet held: %v", got)
	}
	// Each failure in a row doubles the hold, to at most swarmHoldMax.
	var waits []time.Duration
	now := t0
	for range 8 {
		wait := h.fail(a, boom, now)
		waits = append(waits, wait)
		if _, ok := h.held(now)[a.key()]; !ok {
			t.Fatalf("failed at %v, not held then", now)
		}
		if _, ok := h.held(now.Add(wait - time.Millisecond))[a.key()]; !ok {
			t.Fatalf("not held just before its hold of %v ends", wait)
		}
		if _, ok := h.held(now.Add(wait))[a.key()]; ok {
			t.Fatalf("still held when its hold of %v ends", wait)
		}
		if _, ok := h.held(now)[other.key()]; ok {
			t.Fatal("another change is held with it")
		}
		now = now.Add(wait)
	}
	want := []time.Duration{2 * time.Second, 4 * time.Second, 8 * time.Second, 16 * time.Second, 32 * time.Second, time.Minute, time.Minute, time.Minute}
	if diff := cmp.Diff(want, waits); diff != "" {
		t.Errorf("holds (-want +got):\n%s", diff)
	}
	if why := h.held(now.Add(-time.Second))[a.key()]; !strings.Contains(why, "8 in a row") || !strings.Contains(why, boom.Error()) {
		t.Errorf("why it is held does not count the failures and name the last: %q", why)
	}
	// Going through forgets it: the next failure holds it 2 s again.
	h.done(a)
	if got := h.held(now); len(got) != 0 {
		t.Fatalf("done, yet held: %v", got)
	}
	if wait := h.fail(a, boom, now); wait != swarmHoldFirst {
		t.Errorf("after going through, the next failure holds it %v, want %v", wait, swarmHoldFirst)
	}
}
