package curator

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	pb "github.com/curatorproject/curator/proto"
)

func TestDecideRollout(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	const (
		old = "0000000000000000000000000000000000000000000000000000000000000000"
		neu = "1111111111111111111111111111111111111111111111111111111111111111"
	)
	ready, down := pb.NodeStatus_NODE_STATUS_READY, pb.NodeStatus_NODE_STATUS_DOWN
	m := func(id, sha string, age time.Duration) groupMachine {
		return groupMachine{ID: id, ConfigSHA: sha, Created: now.Add(-age)}
	}
	n := func(id, inst string) groupNode {
		return groupNode{ID: id, InstanceID: inst, Status: ready, Since: now.Add(-time.Hour)}
	}
	voter := func(g groupNode) groupNode { g.Consensus = true; return g }
	learner := func(g groupNode) groupNode { g.Consensus, g.Learner = true, true; return g }
	leader := func(g groupNode) groupNode { g.Leader = true; return g }
	drainedN := func(g groupNode) groupNode { g.Drained = true; return g }
	notReady := func(g groupNode) groupNode { g.Status = pb.NodeStatus_NODE_STATUS_UNKNOWN; return g }
	swarmOn := func(s groupSnapshot) groupSnapshot { s.Swarm = true; return s }
	inSwarm := func(g groupNode) groupNode { g.SwarmIn, g.SwarmManager, g.SwarmVoter = true, true, true; return g }
	notInRaft := func(g groupNode) groupNode { g.SwarmIn, g.SwarmManager = true, true; return g }
	swarmWorker := func(g groupNode) groupNode { g.SwarmIn = true; return g }
	swarmLeader := func(g groupNode) groupNode { g.SwarmLeader = true; return g }
	leaveAsked := func(g groupNode, ago time.Duration) groupNode { g.SwarmLeaveAsked = now.Add(-ago); return g }
	workers := func(par int, ms []groupMachine, ns []groupNode) groupSnapshot {
		return groupSnapshot{Name: "w", Size: 2, ReplaceAfter: time.Minute, JoinTimeout: 3 * time.Minute,
			Machines: ms, Nodes: ns, Voters: 3, HealthyVoters: 3, Now: now, Rolling: true, TargetSHA: neu, MaxParallel: par}
	}
	managers := func(ms []groupMachine, ns []groupNode) groupSnapshot {
		return groupSnapshot{Name: "m", Size: 3, ReplaceAfter: time.Minute, JoinTimeout: 3 * time.Minute,
			Machines: ms, Nodes: ns, Voters: 3, HealthyVoters: 3, Now: now, Rolling: true, TargetSHA: neu, MaxParallel: 1, ConsensusGroup: true}
	}
	for _, tc := range []struct {
		name string
		s    groupSnapshot
		want *groupAction
	}{
		{"workers: drain a stale node first", workers(1,
			[]groupMachine{m("a", old, time.Hour), m("b", old, time.Hour)}, []groupNode{n("A", "a"), n("B", "b")}),
			&groupAction{Kind: groupDrain, Machine: "a", Node: "A", Step: "drain", Reason: "rolling group w to 111111111111 (0 of 2 updated)"}},
		{"workers: a drained node's machine goes", workers(1,
			[]groupMachine{m("a", old, time.Hour), m("b", old, time.Hour)}, []groupNode{drainedN(n("A", "a")), n("B", "b")}),
			&groupAction{Kind: groupDestroyMachine, Machine: "a", Node: "A", Step: "destroy", Reason: "rolling group w to 111111111111 (0 of 2 updated): node A is drained"}},
		{"workers: the drained node's record goes as soon as its machine is gone", workers(1,
			[]groupMachine{m("b", old, time.Hour)}, []groupNode{drainedN(n("A", "a")), n("B", "b")}),
			&groupAction{Kind: groupRemoveNode, Machine: "a", Node: "A", Reason: "node A is ready and its machine a is gone"}},
		{"workers: a killed node holds its place until it is down", workers(1,
			[]groupMachine{m("b", old, time.Hour)}, []groupNode{n("A", "a"), n("B", "b")}), nil},
		{"workers: then a new machine", workers(1,
			[]groupMachine{m("b", old, time.Hour)}, []groupNode{n("B", "b")}),
			&groupAction{Kind: groupProvision, Step: "provision", Reason: "rolling group w to 111111111111 (0 of 2 updated): group has 1 of 2 machines"}},
		{"workers: max_parallel 1 waits for the new node", workers(1,
			[]groupMachine{m("b", old, time.Hour), m("c", neu, time.Second)}, []groupNode{n("B", "b")}), nil},
		{"workers: max_parallel 2 drains the next meanwhile", workers(2,
			[]groupMachine{m("b", old, time.Hour), m("c", neu, time.Second)}, []groupNode{n("B", "b")}),
			&groupAction{Kind: groupDrain, Machine: "b", Node: "B", Step: "drain", Reason: "rolling group w to 111111111111 (0 of 2 updated)"}},
		{"workers: a stale machine whose node is down goes without draining", workers(1,
			[]groupMachine{m("a", old, time.Hour), m("b", neu, time.Hour)}, []groupNode{{ID: "A", InstanceID: "a", Status: down, Since: now}, n("B", "b")}),
			&groupAction{Kind: groupDestroyMachine, Machine: "a", Node: "A", Step: "destroy", Reason: "rolling group w to 111111111111 (1 of 2 updated): its node is not ready"}},
		{"stuck: a new machine never ready fails the rollout", workers(1,
			[]groupMachine{m("b", old, time.Hour), m("c", neu, 3*time.Minute)}, []groupNode{n("B", "b")}),
			&groupAction{Kind: groupRolloutFail, Machine: "c", Reason: "rollout of group w to 111111111111 failed: machine c was made 3m0s ago and its node never joined (join_timeout 3m0s); the old machines keep serving"}},
		{"done", workers(1,
			[]groupMachine{m("c", neu, time.Hour), m("d", neu, time.Hour)}, []groupNode{n("C", "c"), n("D", "d")}),
			&groupAction{Kind: groupRolloutDone, Reason: "rollout of group w to 111111111111 is done: 2 of 2 machines run it"}},
		{"managers: surge first", managers(
			[]groupMachine{m("a", old, time.Hour), m("b", old, time.Hour), m("c", old, time.Hour)},
			[]groupNode{leader(voter(n("A", "a"))), voter(n("B", "b")), voter(n("C", "c"))}),
			&groupAction{Kind: groupProvision, Step: "surge", Reason: "rolling group m to 111111111111 (0 of 3 updated): a new member first, beside the old ones"}},
		{"managers: wait while the new member is a learner", managers(
			[]groupMachine{m("a", old, time.Hour), m("b", old, time.Hour), m("c", old, time.Hour), m("d", neu, time.Second)},
			[]groupNode{leader(voter(n("A", "a"))), voter(n("B", "b")), voter(n("C", "c")), learner(n("D", "d"))}), nil},
		{"managers: the new member a ready voter, drain an old one, not the leader's", managers(
			[]groupMachine{m("a", old, time.Hour), m("b", old, time.Hour), m("c", old, time.Hour), m("d", neu, time.Second)},
			[]groupNode{leader(voter(n("A", "a"))), voter(n("B", "b")), voter(n("C", "c")), voter(n("D", "d"))}),
			&groupAction{Kind: groupDrain, Machine: "b", Node: "B", Step: "drain", Reason: "rolling group m to 111111111111 (1 of 3 updated)"}},
		{"managers: drained, demote it", managers(
			[]groupMachine{m("a", old, time.Hour), m("b", old, time.Hour), m("c", old, time.Hour), m("d", neu, time.Second)},
			[]groupNode{leader(voter(n("A", "a"))), drainedN(voter(n("B", "b"))), voter(n("C", "c")), voter(n("D", "d"))}),
			&groupAction{Kind: groupDemote, Machine: "b", Node: "B", Step: "demote", Reason: "rolling group m to 111111111111 (1 of 3 updated): demoting node B, its replacement a ready voter"}},
		{"managers: demoted, its machine goes", managers(
			[]groupMachine{m("a", old, time.Hour), m("b", old, time.Hour), m("c", old, time.Hour), m("d", neu, time.Second)},
			[]groupNode{leader(voter(n("A", "a"))), drainedN(n("B", "b")), voter(n("C", "c")), voter(n("D", "d"))}),
			&groupAction{Kind: groupDestroyMachine, Machine: "b", Node: "B", Step: "destroy", Reason: "rolling group m to 111111111111 (1 of 3 updated)"}},
		{"managers: the leader's node last", managers(
			[]groupMachine{m("a", old, time.Hour), m("d", neu, time.Hour), m("e", neu, time.Hour), m("f", neu, time.Second)},
			[]groupNode{leader(voter(n("A", "a"))), voter(n("D", "d")), voter(n("E", "e")), voter(n("F", "f"))}),
			&groupAction{Kind: groupDrain, Machine: "a", Node: "A", Step: "drain", Reason: "rolling group m to 111111111111 (3 of 3 updated)"}},
		{"managers: a demotion that would break the quorum is refused", func() groupSnapshot {
			s := managers(
				[]groupMachine{m("a", old, time.Hour), m("b", old, time.Hour), m("c", old, time.Hour), m("d", neu, time.Second)},
				[]groupNode{leader(voter(n("A", "a"))), drainedN(voter(n("B", "b"))), voter(n("C", "c")), voter(n("D", "d"))})
			s.Voters, s.HealthyVoters = 4, 2
			return s
		}(), &groupAction{Kind: groupRefuse, Machine: "b", Node: "B", Reason: "rolling group m to 111111111111 (1 of 3 updated), but demoting node B would leave 1 healthy voters of 3, short of a majority: bring voters back first"}},
		{"not rolling: stale machines stay", func() groupSnapshot {
			s := workers(1, []groupMachine{m("a", old, time.Hour), m("b", old, time.Hour)}, []groupNode{n("A", "a"), n("B", "b")})
			s.Rolling = false
			return s
		}(), nil},
		{"managers: a missing machine during a rollout is provisioned", managers(
			[]groupMachine{m("a", old, time.Hour), m("b", old, time.Hour)},
			[]groupNode{leader(voter(n("A", "a"))), voter(n("B", "b"))}),
			&groupAction{Kind: groupProvision, Reason: "group m has 2 of 3 machines"}},
		{"workers: no new node ready in time while stale drained: fail", workers(1,
			[]groupMachine{m("b", old, time.Hour), m("c", neu, 4*time.Minute)}, []groupNode{n("B", "b"), notReady(n("C", "c"))}),
			&groupAction{Kind: groupRolloutFail, Machine: "c", Reason: "rollout of group w to 111111111111 failed: machine c was made 4m0s ago and its node C is not a ready member yet (join_timeout 3m0s); the old machines keep serving"}},
		// The Swarm flavor on: a ready node's engine leaves the Swarm
		// before its machine goes, a new member counts once it is a Swarm
		// manager too, and the Swarm's leader goes next to last.
		{"swarm: a new member not yet a Swarm manager is waited for", swarmOn(managers(
			[]groupMachine{m("a", old, time.Hour), m("b", old, time.Hour), m("c", old, time.Hour), m("d", neu, time.Second)},
			[]groupNode{inSwarm(leader(voter(n("A", "a")))), inSwarm(voter(n("B", "b"))), inSwarm(voter(n("C", "c"))), swarmWorker(voter(n("D", "d")))})), nil},
		{"swarm: a new member promoted in Swarm but not in its Raft yet is waited for", swarmOn(managers(
			[]groupMachine{m("a", old, time.Hour), m("b", old, time.Hour), m("c", old, time.Hour), m("d", neu, time.Second)},
			[]groupNode{inSwarm(leader(voter(n("A", "a")))), inSwarm(voter(n("B", "b"))), inSwarm(voter(n("C", "c"))), notInRaft(voter(n("D", "d")))})), nil},
		{"swarm: the new member a Swarm manager, drain an old one", swarmOn(managers(
			[]groupMachine{m("a", old, time.Hour), m("b", old, time.Hour), m("c", old, time.Hour), m("d", neu, time.Second)},
			[]groupNode{inSwarm(leader(voter(n("A", "a")))), inSwarm(voter(n("B", "b"))), inSwarm(voter(n("C", "c"))), inSwarm(voter(n("D", "d")))})),
			&groupAction{Kind: groupDrain, Machine: "b", Node: "B", Step: "drain", Reason: "rolling group m to 111111111111 (1 of 3 updated)"}},
		{"swarm: the Swarm's leader after the others, before the curator leader's", swarmOn(managers(
			[]groupMachine{m("a", old, time.Hour), m("b", old, time.Hour), m("c", old, time.Hour), m("d", neu, time.Second)},
			[]groupNode{inSwarm(leader(voter(n("A", "a")))), swarmLeader(inSwarm(voter(n("B", "b")))), inSwarm(voter(n("C", "c"))), inSwarm(voter(n("D", "d")))})),
			&groupAction{Kind: groupDrain, Machine: "c", Node: "C", Step: "drain", Reason: "rolling group m to 111111111111 (1 of 3 updated)"}},
		{"swarm: the Swarm's leader once only the curator leader's is left", swarmOn(managers(
			[]groupMachine{m("a", old, time.Hour), m("b", old, time.Hour), m("d", neu, time.Hour), m("e", neu, time.Hour)},
			[]groupNode{inSwarm(leader(voter(n("A", "a")))), swarmLeader(inSwarm(voter(n("B", "b")))), inSwarm(voter(n("D", "d"))), inSwarm(voter(n("E", "e")))})),
			&groupAction{Kind: groupDrain, Machine: "b", Node: "B", Step: "drain", Reason: "rolling group m to 111111111111 (2 of 3 updated)"}},
		{"swarm: demoted, its engine leaves the Swarm first", swarmOn(managers(
			[]groupMachine{m("a", old, time.Hour), m("b", old, time.Hour), m("c", old, time.Hour), m("d", neu, time.Second)},
			[]groupNode{inSwarm(leader(voter(n("A", "a")))), swarmWorker(drainedN(n("B", "b"))), inSwarm(voter(n("C", "c"))), inSwarm(voter(n("D", "d")))})),
			&groupAction{Kind: groupSwarmLeave, Machine: "b", Node: "B", Step: "swarm-leave", Reason: "rolling group m to 111111111111 (1 of 3 updated): node B's engine leaves the Swarm before its machine goes"}},
		{"swarm: demoted, but still a Swarm manager: wait", swarmOn(managers(
			[]groupMachine{m("a", old, time.Hour), m("b", old, time.Hour), m("c", old, time.Hour), m("d", neu, time.Second)},
			[]groupNode{inSwarm(leader(voter(n("A", "a")))), inSwarm(drainedN(n("B", "b"))), inSwarm(voter(n("C", "c"))), inSwarm(voter(n("D", "d")))})),
			&groupAction{Kind: groupWait, Machine: "b", Node: "B", Step: "destroy", Reason: "rolling group m to 111111111111 (1 of 3 updated): node B's engine is still a Swarm manager; it leaves the Swarm once the swarm sync has demoted it"}},
		{"swarm: asked to leave, wait for it", swarmOn(managers(
			[]groupMachine{m("a", old, time.Hour), m("b", old, time.Hour), m("c", old, time.Hour), m("d", neu, time.Second)},
			[]groupNode{inSwarm(leader(voter(n("A", "a")))), leaveAsked(swarmWorker(drainedN(n("B", "b"))), time.Second), inSwarm(voter(n("C", "c"))), inSwarm(voter(n("D", "d")))})),
			&groupAction{Kind: groupWait, Machine: "b", Node: "B", Step: "destroy", Reason: "rolling group m to 111111111111 (1 of 3 updated): waiting for node B's engine to leave the Swarm"}},
		{"swarm: left (its Swarm node down), its machine goes", swarmOn(managers(
			[]groupMachine{m("a", old, time.Hour), m("b", old, time.Hour), m("c", old, time.Hour), m("d", neu, time.Second)},
			[]groupNode{inSwarm(leader(voter(n("A", "a")))), leaveAsked(drainedN(n("B", "b")), time.Second), inSwarm(voter(n("C", "c"))), inSwarm(voter(n("D", "d")))})),
			&groupAction{Kind: groupDestroyMachine, Machine: "b", Node: "B", Step: "destroy", Reason: "rolling group m to 111111111111 (1 of 3 updated)"}},
		{"swarm: an agent that does not answer holds the machine for join_timeout only", swarmOn(managers(
			[]groupMachine{m("a", old, time.Hour), m("b", old, time.Hour), m("c", old, time.Hour), m("d", neu, time.Second)},
			[]groupNode{inSwarm(leader(voter(n("A", "a")))), leaveAsked(swarmWorker(drainedN(n("B", "b"))), 3*time.Minute), inSwarm(voter(n("C", "c"))), inSwarm(voter(n("D", "d")))})),
			&groupAction{Kind: groupDestroyMachine, Machine: "b", Node: "B", Step: "destroy", Reason: "rolling group m to 111111111111 (1 of 3 updated): node B's engine did not leave the Swarm within join_timeout 3m0s; its Swarm node is removed once it is down"}},
		{"swarm: a stale node that is not ready goes without leaving", swarmOn(workers(1,
			[]groupMachine{m("a", old, time.Hour), m("b", neu, time.Hour)}, []groupNode{{ID: "A", InstanceID: "a", Status: down, Since: now, SwarmIn: true}, swarmWorker(n("B", "b"))})),
			&groupAction{Kind: groupDestroyMachine, Machine: "a", Node: "A", Step: "destroy", Reason: "rolling group w to 111111111111 (1 of 2 updated): its node is not ready"}},
		{"swarm: a drained worker leaves the Swarm first", swarmOn(workers(1,
			[]groupMachine{m("a", old, time.Hour), m("b", old, time.Hour)}, []groupNode{swarmWorker(drainedN(n("A", "a"))), swarmWorker(n("B", "b"))})),
			&groupAction{Kind: groupSwarmLeave, Machine: "a", Node: "A", Step: "swarm-leave", Reason: "rolling group w to 111111111111 (0 of 2 updated): node A is drained: node A's engine leaves the Swarm before its machine goes"}},
		{"swarm: a group made smaller: the worker leaves the Swarm first", func() groupSnapshot {
			s := swarmOn(workers(1, []groupMachine{m("a", old, time.Hour), m("b", old, time.Hour)}, []groupNode{swarmWorker(n("A", "a")), swarmWorker(n("B", "b"))}))
			s.Rolling, s.Size = false, 1
			return s
		}(), &groupAction{Kind: groupSwarmLeave, Machine: "a", Node: "A", Reason: "group w has 2 machines, wants 1: node A's engine leaves the Swarm before its machine goes"}},
		{"swarm: a rollout cancelled after a node was asked to leave: the request is cleared", func() groupSnapshot {
			s := swarmOn(workers(1, []groupMachine{m("a", old, time.Hour), m("b", old, time.Hour)}, []groupNode{leaveAsked(drainedN(n("A", "a")), time.Second), swarmWorker(n("B", "b"))}))
			s.Rolling = false
			return s
		}(), &groupAction{Kind: groupSwarmStay, Node: "A", Machine: "a", Reason: "node A was asked to leave the Swarm, but its machine a stays (group w has 2 of 2 machines): clearing the request, so that it joins the Swarm again"}},
		{"swarm: a new member never a Swarm manager fails the rollout, saying so", swarmOn(managers(
			[]groupMachine{m("a", old, time.Hour), m("b", old, time.Hour), m("c", old, time.Hour), m("d", neu, 3*time.Minute)},
			[]groupNode{inSwarm(leader(voter(n("A", "a")))), inSwarm(voter(n("B", "b"))), inSwarm(voter(n("C", "c"))), swarmWorker(voter(n("D", "d")))})),
			&groupAction{Kind: groupRolloutFail, Machine: "d", Reason: "rollout of group m to 111111111111 failed: machine d was made 3m0s ago and its node D is not a reachable Swarm manager yet (is its agent given its Docker engine, --docker-socket?) (join_timeout 3m0s); the old machines keep serving"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if d := cmp.Diff(tc.want, decideGroup(tc.s)); d != "" {
				t.Errorf("decideGroup (-want +got):\n%s", d)
			}
		})
	}
}
