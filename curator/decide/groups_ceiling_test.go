package decide

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	pb "github.com/curatorproject/curator/proto"
)

// ceilingGroup is a group w of four workers a..d (max_unhealthy 40%: 1),
// all ready and heard a moment ago, in a cluster with a heartbeat
// interval of 1 s and down-after 5 s: replace_after's floor 6 s, nodes
// silent for 2 s suspect. Its replace_after is 1ns, as a group stored
// before the floor.
func ceilingGroup(now time.Time) GroupSnapshot {
	s := GroupSnapshot{Name: "w", Size: 4, ReplaceAfter: time.Nanosecond, JoinTimeout: 3 * time.Minute, Voters: 3, HealthyVoters: 3, Now: now,
		MaxUnhealthy: 1, MaxUnhealthySpec: "40%", MaxReplacements: 10, ReplacementWindow: 10 * time.Minute,
		ReplaceAfterFloor: 6 * time.Second, SuspectAfter: SuspectAfter(time.Second), HeardSince: now.Add(-time.Hour)}
	for _, id := range []string{"a", "b", "c", "d"} {
		s.Machines = append(s.Machines, GroupMachine{ID: id, Created: now.Add(-time.Hour)})
		s.Nodes = append(s.Nodes, GroupNode{ID: "N" + id, InstanceID: id, Status: pb.NodeStatus_NODE_STATUS_READY, Since: now.Add(-time.Hour), LastHeard: now.Add(-100 * time.Millisecond)})
	}
	return s
}

// TestCeilingStaggeredMarks: three of the four workers stop at once (a
// partition); their last heartbeats were up to an interval apart, so the
// health loop marks them down in three ticks half a second apart. The
// group loop, ticking a moment after every health tick for 30 s (as a
// mark kicks it), destroys none of
// them: it holds, and says so once. With the floor (6 s) the first is due
// 6 s after its mark, when all three are down; without it (a tiny
// replace_after alone), the two not yet marked are counted as silent.
func TestCeilingStaggeredMarks(t *testing.T) {
	for _, tc := range []struct {
		name  string
		floor time.Duration
		// heldAt is when the hold comes, from the stop.
		heldAt time.Duration
	}{
		{"replace_after at its floor", 6 * time.Second, 10260 * time.Millisecond},
		{"a tiny replace_after: the silent count", 0, 4260 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stop := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
			s := ceilingGroup(stop)
			s.ReplaceAfterFloor = tc.floor
			// Last heard 0.9, 0.4 and 0.1 s before the stop: marked down
			// (5 s of silence, health ticks every 0.5 s) at 4.25, 4.75
			// and 5.25 s.
			last := map[string]time.Duration{"a": -900 * time.Millisecond, "b": -400 * time.Millisecond, "c": -100 * time.Millisecond}
			for i := range s.Nodes {
				if d, ok := last[s.Nodes[i].InstanceID]; ok {
					s.Nodes[i].LastHeard = stop.Add(d)
				}
			}
			var holds []string
			for tick := 250 * time.Millisecond; tick <= 30*time.Second; tick += 500 * time.Millisecond {
				s.Now = stop.Add(tick)
				for i := range s.Nodes {
					n := &s.Nodes[i]
					if _, ok := last[n.InstanceID]; !ok {
						n.LastHeard = s.Now.Add(-100 * time.Millisecond) // d is heard
					}
					if n.Status == pb.NodeStatus_NODE_STATUS_READY && s.Now.Sub(n.LastHeard) >= 5*time.Second {
						n.Status, n.Since = pb.NodeStatus_NODE_STATUS_DOWN, s.Now
					}
				}
				// The group loop ticks on the marks, a moment later.
				s.Now = s.Now.Add(10 * time.Millisecond)
				a := Group(s)
				switch {
				case a == nil, a.Kind == GroupWait:
				case a.Kind == GroupRepairHold:
					holds = append(holds, fmt.Sprintf("at %v: %s", s.Now.Sub(stop), a.Reason))
					s.RepairHeld = a.Reason
					if at := s.Now.Sub(stop); at != tc.heldAt {
						t.Errorf("held at %v, want at %v", at, tc.heldAt)
					}
				default:
					t.Fatalf("at %v after the stop: %s: %s", s.Now.Sub(stop), a.Kind, a.Reason)
				}
			}
			if len(holds) != 1 {
				t.Fatalf("holds %q, want one", holds)
			}
			t.Log(holds[0])
		})
	}
}

// TestCeilingCounts: what the ceiling counts, and when a hold lifts.
func TestCeilingCounts(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	const (
		ready = pb.NodeStatus_NODE_STATUS_READY
		down  = pb.NodeStatus_NODE_STATUS_DOWN
	)
	with := func(f func(*GroupSnapshot)) GroupSnapshot {
		s := ceilingGroup(now)
		f(&s)
		return s
	}
	// downFor marks node i down for d.
	downFor := func(s *GroupSnapshot, i int, d time.Duration) {
		s.Nodes[i].Status, s.Nodes[i].Since, s.Nodes[i].LastHeard = down, now.Add(-d), now.Add(-d-5*time.Second)
	}
	heldAs := func(list, kind, would string) string {
		return "group w: " + list + ", more than max_unhealthy 40% (1 of size 4): replacing and destroying none of them until the group recovers (a partition or a switch, more likely than so many machines; it would " + kind + ": " + would + ")"
	}
	held := func(list, would string) string { return heldAs(list, "destroy-machine", would) }
	destroyA := "node Na has been down for 2m0s (replace_after 1ns, raised to its floor 6s): replacing its machine"
	// die has machine i die, its provider keeping it: the provider lists
	// it no more, and it is among the dead.
	die := func(s *GroupSnapshot, i int) {
		s.Dead = append(s.Dead, s.Machines[i])
		s.Machines = slices.Delete(s.Machines, i, i+1)
	}
	removeA := "node Na is down and its machine a died (its provider keeps it, but nothing started it again): replacing it"
	for _, tc := range []struct {
		name string
		s    GroupSnapshot
		want *GroupAction
	}{
		{"one down, the rest heard: replaced", with(func(s *GroupSnapshot) { downFor(s, 0, 2*time.Minute) }),
			&GroupAction{Kind: GroupDestroyMachine, Machine: "a", Node: "Na", Repair: true, Reason: destroyA}},
		{"a node silent for two intervals counts", with(func(s *GroupSnapshot) {
			downFor(s, 0, 2*time.Minute)
			s.Nodes[1].LastHeard = now.Add(-2500 * time.Millisecond)
		}), &GroupAction{Kind: GroupRepairHold, Machine: "a", Node: "Na",
			Reason: held("2 of its 4 machines are unhealthy (node Na, node Nb unheard for 2.5s)", destroyA)}},
		{"a node silent for less does not", with(func(s *GroupSnapshot) {
			downFor(s, 0, 2*time.Minute)
			s.Nodes[1].LastHeard = now.Add(-1900 * time.Millisecond)
		}), &GroupAction{Kind: GroupDestroyMachine, Machine: "a", Node: "Na", Repair: true, Reason: destroyA}},
		{"a node ready a moment ago is not silent", with(func(s *GroupSnapshot) {
			downFor(s, 0, 2*time.Minute)
			s.Nodes[1].LastHeard, s.Nodes[1].Since = now.Add(-time.Minute), now.Add(-time.Second)
		}), &GroupAction{Kind: GroupDestroyMachine, Machine: "a", Node: "Na", Repair: true, Reason: destroyA}},
		{"a drained node is not counted", with(func(s *GroupSnapshot) {
			downFor(s, 0, 2*time.Minute)
			s.Nodes[1].LastHeard, s.Nodes[1].Drained = now.Add(-time.Minute), true
		}), &GroupAction{Kind: GroupDestroyMachine, Machine: "a", Node: "Na", Repair: true, Reason: destroyA}},
		{"a node not heard since this leader took over counts", with(func(s *GroupSnapshot) {
			downFor(s, 0, 2*time.Minute)
			s.HeardSince = now.Add(-3 * time.Second)
			s.Nodes[1].LastHeard = time.Time{}
		}), &GroupAction{Kind: GroupRepairHold, Machine: "a", Node: "Na",
			Reason: held("2 of its 4 machines are unhealthy (node Na, node Nb unheard for 3s)", destroyA)}},
		{"the whole group found dead at once: held, marked or not", with(func(s *GroupSnapshot) {
			// A power loss of the group's hosts: every node silent since
			// the same moment, one marked down so far.
			for i := range s.Nodes {
				s.Nodes[i].LastHeard = now.Add(-7 * time.Second)
			}
			downFor(s, 0, 2*time.Minute)
		}), &GroupAction{Kind: GroupRepairHold, Machine: "a", Node: "Na",
			Reason: held("4 of its 4 machines are unhealthy (node Na, node Nb unheard for 7s, node Nc unheard for 7s, node Nd unheard for 7s)", destroyA)}},
		{"the whole group found dead by a new leader: held", with(func(s *GroupSnapshot) {
			s.HeardSince = now.Add(-20 * time.Second)
			for i := range s.Nodes {
				s.Nodes[i].Status, s.Nodes[i].Since, s.Nodes[i].LastHeard = down, now.Add(-10*time.Second), time.Time{}
			}
		}), &GroupAction{Kind: GroupRepairHold, Machine: "a", Node: "Na",
			Reason: held("4 of its 4 machines are unhealthy (node Na, node Nb, node Nc, node Nd)", "node Na has been down for 10s (replace_after 1ns, raised to its floor 6s): replacing its machine")}},
		{"below the floor: not yet", with(func(s *GroupSnapshot) { downFor(s, 0, 5*time.Second) }), nil},
		{"a spec above the floor is the spec's", with(func(s *GroupSnapshot) {
			s.ReplaceAfter = time.Minute
			downFor(s, 0, 61*time.Second)
		}), &GroupAction{Kind: GroupDestroyMachine, Machine: "a", Node: "Na", Repair: true, Reason: "node Na has been down for 1m1s (replace_after 1m0s): replacing its machine"}},
		{"resumed a moment ago: a node still down has its full replace_after", with(func(s *GroupSnapshot) {
			downFor(s, 0, 2*time.Minute)
			s.RepairResumed = now.Add(-5 * time.Second)
		}), nil},
		{"resumed replace_after ago: replaced", with(func(s *GroupSnapshot) {
			downFor(s, 0, 2*time.Minute)
			s.RepairResumed = now.Add(-6 * time.Second)
		}), &GroupAction{Kind: GroupDestroyMachine, Machine: "a", Node: "Na", Repair: true, Reason: "node Na has been down for 6s (replace_after 1ns, raised to its floor 6s): replacing its machine"}},
		{"held, none due this tick: the hold stays", with(func(s *GroupSnapshot) {
			s.ReplaceAfter = time.Minute
			downFor(s, 0, 30*time.Second)
			downFor(s, 1, 30*time.Second)
			s.RepairHeld = "held"
		}), nil},
		{"held, silent nodes: the hold stays", with(func(s *GroupSnapshot) {
			s.ReplaceAfter = time.Minute
			downFor(s, 0, 30*time.Second)
			s.Nodes[1].LastHeard = now.Add(-3 * time.Second)
			s.RepairHeld = "held"
		}), nil},
		{"held, a record whose machine is gone goes, the hold stays", with(func(s *GroupSnapshot) {
			downFor(s, 0, 2*time.Minute)
			downFor(s, 1, 2*time.Minute)
			s.Nodes = append(s.Nodes, GroupNode{ID: "Ne", InstanceID: "e", Status: down, Since: now.Add(-time.Minute)})
			s.RepairHeld = "held"
		}), &GroupAction{Kind: GroupRemoveNode, Node: "Ne", Machine: "e", Reason: "node Ne is down and its machine e is gone"}},
		{"one machine dead (its provider keeps it), its node down: replaced at once", with(func(s *GroupSnapshot) {
			downFor(s, 0, time.Second)
			die(s, 0)
		}), &GroupAction{Kind: GroupRemoveNode, Machine: "a", Node: "Na", Repair: true, Reason: removeA}},
		{"one machine dead, its node not marked yet: nothing, no new machine", with(func(s *GroupSnapshot) {
			die(s, 0)
		}), nil},
		{"two machines dead, one node down: held, not removed", with(func(s *GroupSnapshot) {
			downFor(s, 0, time.Second)
			die(s, 0)
			die(s, 0) // b, once a is dead
		}), &GroupAction{Kind: GroupRepairHold, Machine: "a", Node: "Na",
			Reason: heldAs("2 of its 4 machines are unhealthy (node Na, its machine dead, node Nb, its machine dead)", "remove-node", removeA)}},
		{"the whole group's machines dead (a power loss), found by a new leader: held", with(func(s *GroupSnapshot) {
			// Every node's record still says ready but one, and the
			// new leader has heard none of them.
			for i := range s.Nodes {
				s.Nodes[i].LastHeard = time.Time{}
			}
			for range 4 {
				die(s, 0)
			}
			s.HeardSince = now.Add(-time.Second)
			downFor(s, 0, time.Second)
		}), &GroupAction{Kind: GroupRepairHold, Machine: "a", Node: "Na",
			Reason: heldAs("4 of its 4 machines are unhealthy (node Na, its machine dead, node Nb, its machine dead, node Nc, its machine dead, node Nd, its machine dead)", "remove-node", removeA)}},
		{"two managers dead, given up by a forced new cluster: removed as gone", with(func(s *GroupSnapshot) {
			// Their records are refused: started again, they would be
			// refused, so they count for nothing.
			downFor(s, 0, time.Second)
			downFor(s, 1, time.Second)
			for i := range s.Nodes {
				s.Nodes[i].Consensus, s.Nodes[i].Refused = true, i <= 1
			}
			s.Voters, s.HealthyVoters = 2, 2
			die(s, 0)
			die(s, 0)
		}), &GroupAction{Kind: GroupRemoveNode, Machine: "a", Node: "Na", Reason: "node Na is down and its machine a is gone"}},
		{"two managers dead, still members: held", with(func(s *GroupSnapshot) {
			downFor(s, 0, time.Second)
			downFor(s, 1, time.Second)
			for i := range s.Nodes {
				s.Nodes[i].Consensus = true
				s.Nodes[i].HealthyVoter = i > 1
			}
			s.Voters, s.HealthyVoters = 4, 2
			die(s, 0)
			die(s, 0)
		}), &GroupAction{Kind: GroupRepairHold, Machine: "a", Node: "Na",
			Reason: heldAs("2 of its 4 machines are unhealthy (node Na, its machine dead, node Nb, its machine dead)", "remove-node", removeA)}},
		{"a dead machine's removal spends no budget", with(func(s *GroupSnapshot) {
			downFor(s, 0, time.Second)
			die(s, 0)
			for range 10 {
				s.Replacements = append(s.Replacements, now.Add(-time.Minute))
			}
		}), &GroupAction{Kind: GroupRemoveNode, Machine: "a", Node: "Na", Repair: true, Reason: removeA}},
		{"held, recovered to the ceiling: lifted", with(func(s *GroupSnapshot) {
			downFor(s, 0, 2*time.Minute)
			s.RepairHeld = "held"
		}), &GroupAction{Kind: GroupRepairResume, Reason: "the repairs of group w go on: 1 of its 4 machines unhealthy (max_unhealthy 40%: 1), 0 of max_replacements 10 replaced in the last 10m0s; it was held: held"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if d := cmp.Diff(tc.want, Group(tc.s)); d != "" {
				t.Errorf("Group (-want +got):\n%s", d)
			}
		})
	}
	if got := Group(with(func(s *GroupSnapshot) {
		for i := range s.Nodes {
			s.Nodes[i].LastHeard = now.Add(-7 * time.Second)
		}
		downFor(s, 0, 2*time.Minute)
		s.RepairHeld = "held"
	})); got == nil || got.Kind != GroupWait || !strings.Contains(got.Reason, "4 of its 4 machines are unhealthy") {
		t.Errorf("the whole group silent, held already: %+v, want a wait that says 4 of 4", got)
	}
}
