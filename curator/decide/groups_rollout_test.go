package decide

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
	m := func(id, sha string, age time.Duration) GroupMachine {
		return GroupMachine{ID: id, ConfigSHA: sha, Created: now.Add(-age)}
	}
	n := func(id, inst string) GroupNode {
		return GroupNode{ID: id, InstanceID: inst, Status: ready, Since: now.Add(-time.Hour)}
	}
	// A voter is healthy as the membership judges it: ready (none of these
	// is the leader's own unless marked so).
	voter := func(g GroupNode) GroupNode {
		g.Consensus, g.HealthyVoter = true, g.Status == pb.NodeStatus_NODE_STATUS_READY || g.Leader
		return g
	}
	learner := func(g GroupNode) GroupNode { g.Consensus, g.Learner = true, true; return g }
	leader := func(g GroupNode) GroupNode { g.Leader = true; return g }
	drainedN := func(g GroupNode) GroupNode { g.Drained = true; return g }
	notReady := func(g GroupNode) GroupNode { g.Status = pb.NodeStatus_NODE_STATUS_UNKNOWN; return g }
	swarmOn := func(s GroupSnapshot) GroupSnapshot { s.Swarm = true; return s }
	inSwarm := func(g GroupNode) GroupNode { g.SwarmIn, g.SwarmManager, g.SwarmVoter = true, true, true; return g }
	notInRaft := func(g GroupNode) GroupNode { g.SwarmIn, g.SwarmManager = true, true; return g }
	swarmWorker := func(g GroupNode) GroupNode { g.SwarmIn = true; return g }
	swarmLeader := func(g GroupNode) GroupNode { g.SwarmLeader = true; return g }
	leaveAsked := func(g GroupNode, ago time.Duration) GroupNode { g.SwarmLeaveAsked = now.Add(-ago); return g }
	workers := func(par int, ms []GroupMachine, ns []GroupNode) GroupSnapshot {
		return GroupSnapshot{Name: "w", Size: 2, ReplaceAfter: time.Minute, JoinTimeout: 3 * time.Minute,
			Machines: ms, Nodes: ns, Voters: 3, HealthyVoters: 3, Now: now, Rolling: true, TargetSHA: neu, MaxParallel: par,
			Monitor: 5 * time.Second, ProgressDeadline: 3 * time.Minute, MaxFailures: 1, MaxSurge: 0, MaxUnavailable: 1,
			MaxUnhealthy: 2, MaxUnhealthySpec: "100%", MaxReplacements: 100, ReplacementWindow: 10 * time.Minute}
	}
	// surge: the default worker policy, a new one before an old one goes.
	surge := func(s GroupSnapshot) GroupSnapshot { s.MaxSurge, s.MaxUnavailable = 1, 0; return s }
	managers := func(ms []GroupMachine, ns []GroupNode) GroupSnapshot {
		return GroupSnapshot{Name: "m", Size: 3, ReplaceAfter: time.Minute, JoinTimeout: 3 * time.Minute,
			Machines: ms, Nodes: ns, Voters: 3, HealthyVoters: 3, Now: now, Rolling: true, TargetSHA: neu, MaxParallel: 1, ConsensusGroup: true,
			Monitor: 5 * time.Second, ProgressDeadline: 3 * time.Minute, MaxFailures: 1, MaxSurge: 1,
			MaxUnhealthy: 3, MaxUnhealthySpec: "100%", MaxReplacements: 100, ReplacementWindow: 10 * time.Minute}
	}
	for _, tc := range []struct {
		name string
		s    GroupSnapshot
		want *GroupAction
	}{
		{"workers: drain a stale node first", workers(1,
			[]GroupMachine{m("a", old, time.Hour), m("b", old, time.Hour)}, []GroupNode{n("A", "a"), n("B", "b")}),
			&GroupAction{Kind: GroupDrain, Machine: "a", Node: "A", Step: "drain", Reason: "rolling group w to 111111111111 (0 of 2 updated)"}},
		{"workers: a drained node's machine goes", workers(1,
			[]GroupMachine{m("a", old, time.Hour), m("b", old, time.Hour)}, []GroupNode{drainedN(n("A", "a")), n("B", "b")}),
			&GroupAction{Kind: GroupDestroyMachine, Machine: "a", Node: "A", Step: "destroy", Reason: "rolling group w to 111111111111 (0 of 2 updated): node A is drained"}},
		{"workers: the drained node's record goes as soon as its machine is gone", workers(1,
			[]GroupMachine{m("b", old, time.Hour)}, []GroupNode{drainedN(n("A", "a")), n("B", "b")}),
			&GroupAction{Kind: GroupRemoveNode, Machine: "a", Node: "A", Reason: "node A is ready and its machine a is gone"}},
		{"workers: a killed node holds its place until it is down", workers(1,
			[]GroupMachine{m("b", old, time.Hour)}, []GroupNode{n("A", "a"), n("B", "b")}), nil},
		{"workers: then a new machine", workers(1,
			[]GroupMachine{m("b", old, time.Hour)}, []GroupNode{n("B", "b")}),
			&GroupAction{Kind: GroupProvision, Step: "provision", Reason: "rolling group w to 111111111111 (0 of 2 updated): group has 1 of 2 machines"}},
		{"workers: max_parallel 1 waits for the new node", workers(1,
			[]GroupMachine{m("b", old, time.Hour), m("c", neu, time.Second)}, []GroupNode{n("B", "b")}), nil},
		{"workers: max_parallel 2, max_unavailable 2 drains the next meanwhile", func() GroupSnapshot {
			s := workers(2, []GroupMachine{m("b", old, time.Hour), m("c", neu, time.Second)}, []GroupNode{n("B", "b")})
			s.MaxUnavailable = 2
			return s
		}(),
			&GroupAction{Kind: GroupDrain, Machine: "b", Node: "B", Step: "drain", Reason: "rolling group w to 111111111111 (0 of 2 updated)"}},
		{"workers: a stale machine whose node is down for replace_after goes without draining (rule 2)", workers(1,
			[]GroupMachine{m("a", old, time.Hour), m("b", neu, time.Hour)}, []GroupNode{{ID: "A", InstanceID: "a", Status: down, Since: now.Add(-time.Minute)}, n("B", "b")}),
			&GroupAction{Kind: GroupDestroyMachine, Machine: "a", Node: "A", Repair: true, Reason: "node A has been down for 1m0s (replace_after 1m0s): replacing its machine"}},
		{"workers: a stale machine whose node is unknown for replace_after goes without draining", workers(1,
			[]GroupMachine{m("a", old, time.Hour), m("b", neu, time.Hour)}, []GroupNode{{ID: "A", InstanceID: "a", Since: now.Add(-time.Minute)}, n("B", "b")}),
			&GroupAction{Kind: GroupDestroyMachine, Machine: "a", Node: "A", Step: "destroy", Repair: true, Reason: "rolling group w to 111111111111 (1 of 2 updated): its node is not ready"}},
		// Regression (the chaos suite, a group-wide freeze and a bad
		// template): a rollout destroyed a frozen worker marked down a
		// moment before, while the one frozen beside it was not down yet
		// and the ceiling counted one.
		{"workers: a stale node down a moment ago waits, alone", workers(1,
			[]GroupMachine{m("a", old, time.Hour), m("b", neu, time.Hour)}, []GroupNode{{ID: "A", InstanceID: "a", Status: down, Since: now.Add(-time.Second)}, n("B", "b")}), nil},
		{"workers: a stale node down a moment ago waits, a ready one is rolled", surge(workers(1,
			[]GroupMachine{m("a", old, time.Hour), m("b", old, time.Hour)}, []GroupNode{{ID: "A", InstanceID: "a", Status: down, Since: now.Add(-time.Second)}, n("B", "b")})),
			&GroupAction{Kind: GroupProvision, Step: "surge", Reason: "rolling group w to 111111111111 (0 of 2 updated): a new machine first, beside the old ones (max_surge 1)"}},
		{"workers: down a moment ago after a hold lifted: waits", func() GroupSnapshot {
			s := workers(1, []GroupMachine{m("a", old, time.Hour), m("b", neu, time.Hour)}, []GroupNode{{ID: "A", InstanceID: "a", Status: down, Since: now.Add(-time.Hour)}, n("B", "b")})
			s.RepairResumed = now.Add(-time.Second)
			return s
		}(), nil},
		{"stuck: a new machine never ready goes at once, the last of max_failures", workers(1,
			[]GroupMachine{m("b", old, time.Hour), m("c", neu, 3*time.Minute)}, []GroupNode{n("B", "b")}),
			&GroupAction{Kind: GroupDestroyMachine, Machine: "c", Step: "failed", Reason: "rollout of group w to 111111111111: machine c failed (1 of max_failures 1): was made 3m0s ago and its node never joined (progress_deadline 3m0s); it goes at once, and the rollout fails"}},
		{"stuck: then the rollout fails on the count", func() GroupSnapshot {
			s := workers(1, []GroupMachine{m("b", old, time.Hour)}, []GroupNode{n("B", "b")})
			s.Failures, s.LastFailure = 1, "machine c failed"
			return s
		}(), &GroupAction{Kind: GroupRolloutFail, Reason: "rollout of group w to 111111111111 failed: 1 of max_failures 1 new machines failed, the last: machine c failed; the old machines keep serving"}},
		{"done", workers(1,
			[]GroupMachine{m("c", neu, time.Hour), m("d", neu, time.Hour)}, []GroupNode{n("C", "c"), n("D", "d")}),
			&GroupAction{Kind: GroupRolloutDone, Reason: "rollout of group w to 111111111111 is done: 2 of 2 machines run it"}},
		{"managers: surge first", managers(
			[]GroupMachine{m("a", old, time.Hour), m("b", old, time.Hour), m("c", old, time.Hour)},
			[]GroupNode{leader(voter(n("A", "a"))), voter(n("B", "b")), voter(n("C", "c"))}),
			&GroupAction{Kind: GroupProvision, Step: "surge", Reason: "rolling group m to 111111111111 (0 of 3 updated): a new member first, beside the old ones"}},
		{"managers: wait while the new member is a learner", managers(
			[]GroupMachine{m("a", old, time.Hour), m("b", old, time.Hour), m("c", old, time.Hour), m("d", neu, time.Second)},
			[]GroupNode{leader(voter(n("A", "a"))), voter(n("B", "b")), voter(n("C", "c")), learner(n("D", "d"))}), nil},
		{"managers: the new member a ready voter, drain an old one, not the leader's", managers(
			[]GroupMachine{m("a", old, time.Hour), m("b", old, time.Hour), m("c", old, time.Hour), m("d", neu, time.Second)},
			[]GroupNode{leader(voter(n("A", "a"))), voter(n("B", "b")), voter(n("C", "c")), voter(n("D", "d"))}),
			&GroupAction{Kind: GroupDrain, Machine: "b", Node: "B", Step: "drain", Reason: "rolling group m to 111111111111 (1 of 3 updated)"}},
		{"managers: drained, demote it", managers(
			[]GroupMachine{m("a", old, time.Hour), m("b", old, time.Hour), m("c", old, time.Hour), m("d", neu, time.Second)},
			[]GroupNode{leader(voter(n("A", "a"))), drainedN(voter(n("B", "b"))), voter(n("C", "c")), voter(n("D", "d"))}),
			&GroupAction{Kind: GroupDemote, Machine: "b", Node: "B", Step: "demote", Reason: "rolling group m to 111111111111 (1 of 3 updated): demoting node B, its replacement a ready voter"}},
		{"managers: demoted, its machine goes", managers(
			[]GroupMachine{m("a", old, time.Hour), m("b", old, time.Hour), m("c", old, time.Hour), m("d", neu, time.Second)},
			[]GroupNode{leader(voter(n("A", "a"))), drainedN(n("B", "b")), voter(n("C", "c")), voter(n("D", "d"))}),
			&GroupAction{Kind: GroupDestroyMachine, Machine: "b", Node: "B", Step: "destroy", Reason: "rolling group m to 111111111111 (1 of 3 updated)"}},
		{"managers: the leader's node last", managers(
			[]GroupMachine{m("a", old, time.Hour), m("d", neu, time.Hour), m("e", neu, time.Hour), m("f", neu, time.Second)},
			[]GroupNode{leader(voter(n("A", "a"))), voter(n("D", "d")), voter(n("E", "e")), voter(n("F", "f"))}),
			&GroupAction{Kind: GroupDrain, Machine: "a", Node: "A", Step: "drain", Reason: "rolling group m to 111111111111 (3 of 3 updated)"}},
		{"managers: a demotion that would break the quorum is refused", func() GroupSnapshot {
			s := managers(
				[]GroupMachine{m("a", old, time.Hour), m("b", old, time.Hour), m("c", old, time.Hour), m("d", neu, time.Second)},
				[]GroupNode{leader(voter(n("A", "a"))), drainedN(voter(n("B", "b"))), voter(n("C", "c")), voter(n("D", "d"))})
			s.Voters, s.HealthyVoters = 4, 2
			return s
		}(), &GroupAction{Kind: GroupRefuse, Machine: "b", Node: "B", Reason: "rolling group m to 111111111111 (1 of 3 updated), but demoting node B would leave 1 healthy voters of 3, short of a majority: bring voters back first"}},
		{"not rolling: stale machines stay", func() GroupSnapshot {
			s := workers(1, []GroupMachine{m("a", old, time.Hour), m("b", old, time.Hour)}, []GroupNode{n("A", "a"), n("B", "b")})
			s.Rolling = false
			return s
		}(), nil},
		{"managers: a missing machine during a rollout is provisioned", managers(
			[]GroupMachine{m("a", old, time.Hour), m("b", old, time.Hour)},
			[]GroupNode{leader(voter(n("A", "a"))), voter(n("B", "b"))}),
			&GroupAction{Kind: GroupProvision, Reason: "group m has 2 of 3 machines"}},
		{"workers: no new node ready in time while stale drained: it goes at once, failing the rollout", workers(1,
			[]GroupMachine{m("b", old, time.Hour), m("c", neu, 4*time.Minute)}, []GroupNode{n("B", "b"), notReady(n("C", "c"))}),
			&GroupAction{Kind: GroupDestroyMachine, Machine: "c", Node: "C", Step: "failed", Reason: "rollout of group w to 111111111111: machine c failed (1 of max_failures 1): was made 4m0s ago and its node C is not a ready member yet (progress_deadline 3m0s); it goes at once, and the rollout fails"}},
		// The Swarm flavor on: a ready node's engine leaves the Swarm
		// before its machine goes, a new member counts once it is a Swarm
		// manager too, and the Swarm's leader goes next to last.
		{"swarm: a new member not yet a Swarm manager is waited for", swarmOn(managers(
			[]GroupMachine{m("a", old, time.Hour), m("b", old, time.Hour), m("c", old, time.Hour), m("d", neu, time.Second)},
			[]GroupNode{inSwarm(leader(voter(n("A", "a")))), inSwarm(voter(n("B", "b"))), inSwarm(voter(n("C", "c"))), swarmWorker(voter(n("D", "d")))})), nil},
		{"swarm: a new member promoted in Swarm but not in its Raft yet is waited for", swarmOn(managers(
			[]GroupMachine{m("a", old, time.Hour), m("b", old, time.Hour), m("c", old, time.Hour), m("d", neu, time.Second)},
			[]GroupNode{inSwarm(leader(voter(n("A", "a")))), inSwarm(voter(n("B", "b"))), inSwarm(voter(n("C", "c"))), notInRaft(voter(n("D", "d")))})), nil},
		{"swarm: the new member a Swarm manager, drain an old one", swarmOn(managers(
			[]GroupMachine{m("a", old, time.Hour), m("b", old, time.Hour), m("c", old, time.Hour), m("d", neu, time.Second)},
			[]GroupNode{inSwarm(leader(voter(n("A", "a")))), inSwarm(voter(n("B", "b"))), inSwarm(voter(n("C", "c"))), inSwarm(voter(n("D", "d")))})),
			&GroupAction{Kind: GroupDrain, Machine: "b", Node: "B", Step: "drain", Reason: "rolling group m to 111111111111 (1 of 3 updated)"}},
		{"swarm: the Swarm's leader after the others, before the curator leader's", swarmOn(managers(
			[]GroupMachine{m("a", old, time.Hour), m("b", old, time.Hour), m("c", old, time.Hour), m("d", neu, time.Second)},
			[]GroupNode{inSwarm(leader(voter(n("A", "a")))), swarmLeader(inSwarm(voter(n("B", "b")))), inSwarm(voter(n("C", "c"))), inSwarm(voter(n("D", "d")))})),
			&GroupAction{Kind: GroupDrain, Machine: "c", Node: "C", Step: "drain", Reason: "rolling group m to 111111111111 (1 of 3 updated)"}},
		{"swarm: the Swarm's leader once only the curator leader's is left", swarmOn(managers(
			[]GroupMachine{m("a", old, time.Hour), m("b", old, time.Hour), m("d", neu, time.Hour), m("e", neu, time.Hour)},
			[]GroupNode{inSwarm(leader(voter(n("A", "a")))), swarmLeader(inSwarm(voter(n("B", "b")))), inSwarm(voter(n("D", "d"))), inSwarm(voter(n("E", "e")))})),
			&GroupAction{Kind: GroupDrain, Machine: "b", Node: "B", Step: "drain", Reason: "rolling group m to 111111111111 (2 of 3 updated)"}},
		{"swarm: demoted, its engine leaves the Swarm first", swarmOn(managers(
			[]GroupMachine{m("a", old, time.Hour), m("b", old, time.Hour), m("c", old, time.Hour), m("d", neu, time.Second)},
			[]GroupNode{inSwarm(leader(voter(n("A", "a")))), swarmWorker(drainedN(n("B", "b"))), inSwarm(voter(n("C", "c"))), inSwarm(voter(n("D", "d")))})),
			&GroupAction{Kind: GroupSwarmLeave, Machine: "b", Node: "B", Step: "swarm-leave", Reason: "rolling group m to 111111111111 (1 of 3 updated): node B's engine leaves the Swarm before its machine goes"}},
		{"swarm: demoted, but still a Swarm manager: wait", swarmOn(managers(
			[]GroupMachine{m("a", old, time.Hour), m("b", old, time.Hour), m("c", old, time.Hour), m("d", neu, time.Second)},
			[]GroupNode{inSwarm(leader(voter(n("A", "a")))), inSwarm(drainedN(n("B", "b"))), inSwarm(voter(n("C", "c"))), inSwarm(voter(n("D", "d")))})),
			&GroupAction{Kind: GroupWait, Machine: "b", Node: "B", Step: "destroy", Reason: "rolling group m to 111111111111 (1 of 3 updated): node B's engine is still a Swarm manager; it leaves the Swarm once the swarm sync has demoted it"}},
		{"swarm: asked to leave, wait for it", swarmOn(managers(
			[]GroupMachine{m("a", old, time.Hour), m("b", old, time.Hour), m("c", old, time.Hour), m("d", neu, time.Second)},
			[]GroupNode{inSwarm(leader(voter(n("A", "a")))), leaveAsked(swarmWorker(drainedN(n("B", "b"))), time.Second), inSwarm(voter(n("C", "c"))), inSwarm(voter(n("D", "d")))})),
			&GroupAction{Kind: GroupWait, Machine: "b", Node: "B", Step: "destroy", Reason: "rolling group m to 111111111111 (1 of 3 updated): waiting for node B's engine to leave the Swarm"}},
		{"swarm: left (its Swarm node down), its machine goes", swarmOn(managers(
			[]GroupMachine{m("a", old, time.Hour), m("b", old, time.Hour), m("c", old, time.Hour), m("d", neu, time.Second)},
			[]GroupNode{inSwarm(leader(voter(n("A", "a")))), leaveAsked(drainedN(n("B", "b")), time.Second), inSwarm(voter(n("C", "c"))), inSwarm(voter(n("D", "d")))})),
			&GroupAction{Kind: GroupDestroyMachine, Machine: "b", Node: "B", Step: "destroy", Reason: "rolling group m to 111111111111 (1 of 3 updated)"}},
		{"swarm: an agent that does not answer holds the machine for join_timeout only", swarmOn(managers(
			[]GroupMachine{m("a", old, time.Hour), m("b", old, time.Hour), m("c", old, time.Hour), m("d", neu, time.Second)},
			[]GroupNode{inSwarm(leader(voter(n("A", "a")))), leaveAsked(swarmWorker(drainedN(n("B", "b"))), 3*time.Minute), inSwarm(voter(n("C", "c"))), inSwarm(voter(n("D", "d")))})),
			&GroupAction{Kind: GroupDestroyMachine, Machine: "b", Node: "B", Step: "destroy", Reason: "rolling group m to 111111111111 (1 of 3 updated): node B's engine did not leave the Swarm within join_timeout 3m0s; its Swarm node is removed once it is down"}},
		{"swarm: a stale node that is not ready goes without leaving", swarmOn(workers(1,
			[]GroupMachine{m("a", old, time.Hour), m("b", neu, time.Hour)}, []GroupNode{{ID: "A", InstanceID: "a", Status: down, Since: now.Add(-time.Minute), SwarmIn: true}, swarmWorker(n("B", "b"))})),
			&GroupAction{Kind: GroupDestroyMachine, Machine: "a", Node: "A", Repair: true, Reason: "node A has been down for 1m0s (replace_after 1m0s): replacing its machine"}},
		{"swarm: a drained worker leaves the Swarm first", swarmOn(workers(1,
			[]GroupMachine{m("a", old, time.Hour), m("b", old, time.Hour)}, []GroupNode{swarmWorker(drainedN(n("A", "a"))), swarmWorker(n("B", "b"))})),
			&GroupAction{Kind: GroupSwarmLeave, Machine: "a", Node: "A", Step: "swarm-leave", Reason: "rolling group w to 111111111111 (0 of 2 updated): node A is drained: node A's engine leaves the Swarm before its machine goes"}},
		{"swarm: a group made smaller: the worker leaves the Swarm first", func() GroupSnapshot {
			s := swarmOn(workers(1, []GroupMachine{m("a", old, time.Hour), m("b", old, time.Hour)}, []GroupNode{swarmWorker(n("A", "a")), swarmWorker(n("B", "b"))}))
			s.Rolling, s.Size = false, 1
			return s
		}(), &GroupAction{Kind: GroupSwarmLeave, Machine: "a", Node: "A", Reason: "group w has 2 machines, wants 1: node A's engine leaves the Swarm before its machine goes"}},
		{"swarm: a rollout cancelled after a node was asked to leave: the request is cleared", func() GroupSnapshot {
			s := swarmOn(workers(1, []GroupMachine{m("a", old, time.Hour), m("b", old, time.Hour)}, []GroupNode{leaveAsked(drainedN(n("A", "a")), time.Second), swarmWorker(n("B", "b"))}))
			s.Rolling = false
			return s
		}(), &GroupAction{Kind: GroupSwarmStay, Node: "A", Machine: "a", Reason: "node A was asked to leave the Swarm, but its machine a stays (group w has 2 of 2 machines): clearing the request, so that it joins the Swarm again"}},
		{"swarm: a new member never a Swarm manager failed, saying so: demoted before it goes", swarmOn(managers(
			[]GroupMachine{m("a", old, time.Hour), m("b", old, time.Hour), m("c", old, time.Hour), m("d", neu, 3*time.Minute)},
			[]GroupNode{inSwarm(leader(voter(n("A", "a")))), inSwarm(voter(n("B", "b"))), inSwarm(voter(n("C", "c"))), swarmWorker(voter(n("D", "d")))})),
			&GroupAction{Kind: GroupDemote, Machine: "d", Node: "D", Step: "demote", Reason: "rollout of group m to 111111111111: machine d failed (was made 3m0s ago and its node D is not a reachable Swarm manager yet (is its agent given its Docker engine, --docker-socket?) (progress_deadline 3m0s)): demoting node D before its machine goes"}},
		{"failure: the last failed member whose demotion the quorum refuses fails the rollout as it is", func() GroupSnapshot {
			s := managers([]GroupMachine{m("a", old, time.Hour), m("b", old, time.Hour), m("c", old, time.Hour), m("d", neu, 3*time.Minute)},
				[]GroupNode{leader(voter(n("A", "a"))), voter(n("B", "b")), voter(notReady(n("C", "c"))), voter(GroupNode{ID: "D", InstanceID: "d", Status: ready, Since: now.Add(-time.Second)})})
			s.Voters, s.HealthyVoters = 4, 2
			return s
		}(), &GroupAction{Kind: GroupRolloutFail, Machine: "d", Reason: "rollout of group m to 111111111111 failed: 1 of max_failures 1 new machines failed, the last: machine d was made 3m0s ago and its node D has not stayed ready for monitor 5s (progress_deadline 3m0s); the old machines keep serving"}},
		// The rollout policy: surge, monitor, failures, rollback, pause.
		{"surge: a new worker before an old one goes", surge(workers(1,
			[]GroupMachine{m("a", old, time.Hour), m("b", old, time.Hour)}, []GroupNode{n("A", "a"), n("B", "b")})),
			&GroupAction{Kind: GroupProvision, Step: "surge", Reason: "rolling group w to 111111111111 (0 of 2 updated): a new machine first, beside the old ones (max_surge 1)"}},
		{"surge: the new worker not ready: no old one goes (not rule 5 either)", surge(workers(1,
			[]GroupMachine{m("a", old, time.Hour), m("b", old, time.Hour), m("c", neu, time.Second)}, []GroupNode{n("A", "a"), n("B", "b")})), nil},
		{"surge: ready, but not for monitor yet: wait", surge(workers(1,
			[]GroupMachine{m("a", old, time.Hour), m("b", old, time.Hour), m("c", neu, time.Minute)},
			[]GroupNode{n("A", "a"), n("B", "b"), {ID: "C", InstanceID: "c", Status: ready, Since: now.Add(-2 * time.Second)}})), nil},
		{"surge: ready for monitor: an old one is drained", surge(workers(1,
			[]GroupMachine{m("a", old, time.Hour), m("b", old, time.Hour), m("c", neu, time.Minute)},
			[]GroupNode{n("A", "a"), n("B", "b"), {ID: "C", InstanceID: "c", Status: ready, Since: now.Add(-5 * time.Second)}})),
			&GroupAction{Kind: GroupDrain, Machine: "a", Node: "A", Step: "drain", Reason: "rolling group w to 111111111111 (1 of 2 updated)"}},
		{"surge: one old gone, the next surge", surge(workers(1,
			[]GroupMachine{m("b", old, time.Hour), m("c", neu, time.Minute)}, []GroupNode{n("B", "b"), n("C", "c")})),
			&GroupAction{Kind: GroupProvision, Step: "surge", Reason: "rolling group w to 111111111111 (1 of 2 updated): a new machine first, beside the old ones (max_surge 1)"}},
		{"failure: a new machine that died fails the rollout, with its last words and the rollback", func() GroupSnapshot {
			s := surge(workers(1, []GroupMachine{m("a", old, time.Hour), m("b", old, time.Hour)}, []GroupNode{n("A", "a"), n("B", "b")}))
			s.Failures, s.LastFailure = 1, "machine w-3 exited before its node joined: unknown flag: --no-such-flag"
			s.OnFailure, s.RollBack = "rolling the group back to its previous config 000000000000", true
			return s
		}(), &GroupAction{Kind: GroupRolloutFail, Reason: "rollout of group w to 111111111111 failed: 1 of max_failures 1 new machines failed, the last: machine w-3 exited before its node joined: unknown flag: --no-such-flag; rolling the group back to its previous config 000000000000"}},
		{"failure: below max_failures a machine past progress_deadline goes, counted", func() GroupSnapshot {
			s := surge(workers(1, []GroupMachine{m("a", old, time.Hour), m("b", old, time.Hour), m("c", neu, 3*time.Minute)}, []GroupNode{n("A", "a"), n("B", "b")}))
			s.MaxFailures = 3
			return s
		}(), &GroupAction{Kind: GroupDestroyMachine, Machine: "c", Step: "failed", Reason: "rollout of group w to 111111111111: machine c failed (1 of max_failures 3): was made 3m0s ago and its node never joined (progress_deadline 3m0s); it goes, and another is made"}},
		{"failure: a node that does not stay ready for monitor failed: it goes at once", surge(workers(1,
			[]GroupMachine{m("a", old, time.Hour), m("b", old, time.Hour), m("c", neu, 3*time.Minute)},
			[]GroupNode{n("A", "a"), n("B", "b"), {ID: "C", InstanceID: "c", Status: ready, Since: now.Add(-time.Second)}})),
			&GroupAction{Kind: GroupDestroyMachine, Machine: "c", Node: "C", Step: "failed", Reason: "rollout of group w to 111111111111: machine c failed (1 of max_failures 1): was made 3m0s ago and its node C has not stayed ready for monitor 5s (progress_deadline 3m0s); it goes at once, and the rollout fails"}},
		{"rollback: a down machine of the failed config goes at once, not after replace_after", func() GroupSnapshot {
			s := surge(workers(1, []GroupMachine{m("a", neu, time.Hour), m("b", neu, time.Hour), m("c", old, time.Minute)},
				[]GroupNode{n("A", "a"), n("B", "b"), {ID: "C", InstanceID: "c", Status: down, Since: now.Add(-time.Second)}}))
			s.RollbackOf = old
			return s
		}(), &GroupAction{Kind: GroupDestroyMachine, Machine: "c", Node: "C", Step: "destroy", Repair: true, Reason: "rolling group w to 111111111111 (2 of 2 updated): its node is not ready"}},
		{"rollout: a down stale machine (not of a failed config) waits for replace_after", surge(workers(1,
			[]GroupMachine{m("a", neu, time.Hour), m("b", neu, time.Hour), m("c", old, time.Minute)},
			[]GroupNode{n("A", "a"), n("B", "b"), {ID: "C", InstanceID: "c", Status: down, Since: now.Add(-time.Second)}})), nil},
		{"failure: a frozen surge worker (down) of a rollout failed by progress_deadline goes at once, not after replace_after", surge(workers(1,
			[]GroupMachine{m("a", old, time.Hour), m("b", old, time.Hour), m("c", neu, 3*time.Minute)},
			[]GroupNode{n("A", "a"), n("B", "b"), {ID: "C", InstanceID: "c", Status: down, Since: now.Add(-time.Second)}})),
			&GroupAction{Kind: GroupDestroyMachine, Machine: "c", Node: "C", Step: "failed", Reason: "rollout of group w to 111111111111: machine c failed (1 of max_failures 1): was made 3m0s ago and its node C is not a ready member yet (progress_deadline 3m0s); it goes at once, and the rollout fails"}},
		{"failure: a failed manager that joined is demoted before it goes", func() GroupSnapshot {
			s := managers([]GroupMachine{m("a", old, time.Hour), m("b", old, time.Hour), m("c", old, time.Hour), m("d", neu, 3*time.Minute)},
				[]GroupNode{leader(voter(n("A", "a"))), voter(n("B", "b")), voter(n("C", "c")), learner(n("D", "d"))})
			s.MaxFailures = 2
			return s
		}(), &GroupAction{Kind: GroupDemote, Machine: "d", Node: "D", Step: "demote", Reason: "rollout of group m to 111111111111: machine d failed (was made 3m0s ago and its node D is not a ready member yet (progress_deadline 3m0s)): demoting node D before its machine goes"}},
		{"rollback: the bad machine goes, no old one is touched", func() GroupSnapshot {
			// Rolling back to old: the machine of the failed config neu
			// is stale, the old ones are the target.
			s := surge(workers(1, []GroupMachine{m("a", old, time.Hour), m("b", old, time.Hour), m("c", neu, time.Minute)}, []GroupNode{n("A", "a"), n("B", "b")}))
			s.TargetSHA = old
			return s
		}(), &GroupAction{Kind: GroupDestroyMachine, Machine: "c", Step: "destroy", Repair: true, Reason: "rolling group w to 000000000000 (2 of 2 updated): its node is not ready"}},
		{"rollback: an old machine on the target, down as the rollback begins, is not a failed new machine", func() GroupSnapshot {
			s := surge(workers(1, []GroupMachine{m("a", old, time.Hour), m("b", old, time.Hour)},
				[]GroupNode{n("A", "a"), {ID: "B", InstanceID: "b", Status: down, Since: now.Add(-time.Second)}}))
			s.TargetSHA, s.RolloutStarted = old, now.Add(-2*time.Second)
			return s
		}(), nil},
		{"rollback: the same machine still down progress_deadline after the rollback began fails it", func() GroupSnapshot {
			s := surge(workers(1, []GroupMachine{m("a", old, time.Hour), m("b", old, time.Hour)},
				[]GroupNode{n("A", "a"), {ID: "B", InstanceID: "b", Status: down, Since: now.Add(-time.Second)}}))
			s.TargetSHA, s.RolloutStarted = old, now.Add(-3*time.Minute)
			return s
		}(), &GroupAction{Kind: GroupDestroyMachine, Machine: "b", Node: "B", Step: "failed", Reason: "rollout of group w to 000000000000: machine b failed (1 of max_failures 1): has had 3m0s since the rollout began and its node B is not a ready member yet (progress_deadline 3m0s); it goes at once, and the rollout fails"}},
		{"rollback: then done", func() GroupSnapshot {
			s := surge(workers(1, []GroupMachine{m("a", old, time.Hour), m("b", old, time.Hour)}, []GroupNode{n("A", "a"), n("B", "b")}))
			s.TargetSHA = old
			return s
		}(), &GroupAction{Kind: GroupRolloutDone, Reason: "rollout of group w to 000000000000 is done: 2 of 2 machines run it"}},
		{"held: a paused manager rollout keeps its surge member", func() GroupSnapshot {
			s := managers([]GroupMachine{m("a", old, time.Hour), m("b", old, time.Hour), m("c", old, time.Hour), m("d", neu, time.Minute)},
				[]GroupNode{leader(voter(n("A", "a"))), voter(n("B", "b")), voter(n("C", "c")), voter(n("D", "d"))})
			s.Rolling, s.Held, s.Voters, s.HealthyVoters = false, true, 4, 4
			return s
		}(), nil},
		{"held: a paused worker rollout keeps its surge", func() GroupSnapshot {
			s := surge(workers(1, []GroupMachine{m("a", old, time.Hour), m("b", old, time.Hour), m("c", neu, time.Minute)}, []GroupNode{n("A", "a"), n("B", "b"), n("C", "c")}))
			s.Rolling, s.Held = false, true
			return s
		}(), nil},
		{"not held: a cancelled rollout's surge goes", func() GroupSnapshot {
			s := surge(workers(1, []GroupMachine{m("a", old, time.Hour), m("b", old, time.Hour), m("c", neu, time.Minute)}, []GroupNode{n("A", "a"), n("B", "b"), n("C", "c")}))
			s.Rolling = false
			return s
		}(), &GroupAction{Kind: GroupDestroyMachine, Machine: "a", Node: "A", Reason: "group w has 3 machines, wants 2"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if d := cmp.Diff(tc.want, Group(tc.s)); d != "" {
				t.Errorf("Group (-want +got):\n%s", d)
			}
		})
	}
}
