package decide

import (
	"fmt"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/curatorproject/curator/consensus/member"
	pb "github.com/curatorproject/curator/proto"
)

// fuzzBytes hands out the fuzzer's bytes one at a time, zero when spent.
type fuzzBytes []byte

func (b *fuzzBytes) next(n int) int {
	if len(*b) == 0 {
		return 0
	}
	v := int((*b)[0])
	*b = (*b)[1:]
	return v % n
}

// FuzzGroupRemovalAgreesWithCheck: whatever the group's machines, nodes and
// rollout, and whatever this leader has heard of the voters, the group
// loop never demotes or removes a voter that the removal check
// (Membership.CheckRemoval, the quorum guard of an operator's demote and
// of the consensus sync) refuses. The group decision keeps counts, not
// members; this is the property that the two quorum judgments agree where
// it matters. The snapshot is built as the loops build theirs
// (BuildMembership from gathered inputs), with voters drawn that this
// leadership has not vouched for (recorded ready by a previous leader,
// never heard since) and voters etcd does not hear: no removal counts on
// either.
func FuzzGroupRemovalAgreesWithCheck(f *testing.F) {
	for _, seed := range [][]byte{
		{3, 0, 1, 1, 1, 0, 1, 1, 1, 2},
		{5, 2, 0, 0, 1, 1, 1, 0, 0, 1, 1, 1, 0, 1, 0, 3, 1},
		{2, 0, 0, 1, 1, 1, 0, 0, 1, 0, 1},
		{3, 1, 0, 0, 0, 1, 1, 1, 1, 0, 2, 1, 1},
		// Three voters, the leader's own first; the second recorded
		// ready, heard and judged by the previous leader only
		// (unvouched): the group made smaller by one.
		{2, 0, 0, 0, 1, 3, 1, 1, 1, 0, 0, 1, 1, 0, 1, 1, 0, 0, 1, 3, 1, 1, 1, 0, 2, 1, 1, 0, 0, 0},
		// Five voters, the second and third ready by their heartbeats
		// but not heard by etcd now (unheard): the group destroyed.
		{4, 0, 0, 0, 1, 3, 1, 1, 1, 0, 0, 1, 3, 1, 0, 1, 0, 0, 1, 3, 1, 0, 1, 0, 0, 1, 3, 1, 1, 1, 0, 0, 1, 3, 1, 1, 1, 0, 5, 0, 1, 0, 0, 0, 0, 0},
	} {
		f.Add(seed)
	}
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	since := now.Add(-time.Minute)
	f.Fuzz(func(t *testing.T, data []byte) {
		b := fuzzBytes(data)
		voters := 1 + b.next(7)
		learners := b.next(3)
		self := b.next(voters)
		selfID := fmt.Sprintf("n%d", self)
		in := MembershipInputs{Self: selfID, Heartbeats: map[string]time.Time{}, HeartbeatInterval: time.Second,
			LeaderSince: since, Now: now, EtcdHeard: map[uint64]bool{}}
		var machines []GroupMachine
		for i := range voters + learners {
			id := fmt.Sprintf("n%d", i)
			n := &pb.Node{Id: id, InstanceId: "m" + id, State: pb.NodeState_NODE_STATE_UP,
				Status: []pb.NodeStatus{pb.NodeStatus_NODE_STATUS_READY, pb.NodeStatus_NODE_STATUS_DOWN, pb.NodeStatus_NODE_STATUS_UNKNOWN}[b.next(3)],
				Roles:  []pb.Role{pb.Role_ROLE_CONSENSUS}}
			if b.next(4) == 0 {
				n.Availability = pb.Availability_AVAILABILITY_DRAIN
			}
			// What this leadership heard of the node: never, only
			// before it began (the previous leader did), at its start,
			// or just now; and when its status was last judged: by
			// the previous leader, or by this one.
			switch b.next(4) {
			case 1:
				in.Heartbeats[id] = since.Add(-time.Second)
			case 2:
				in.Heartbeats[id] = since
			case 3:
				in.Heartbeats[id] = now
			}
			n.StatusChanged = timestamppb.New([]time.Time{since.Add(-time.Hour), since.Add(time.Second)}[b.next(2)])
			in.Nodes = append(in.Nodes, n)
			m := member.Member{ID: uint64(i + 1), NodeID: id, IsLearner: i >= voters}
			in.Members = append(in.Members, m)
			if !m.IsLearner && b.next(4) != 0 {
				in.EtcdHeard[m.ID] = true
			}
			if b.next(3) != 0 {
				machines = append(machines, GroupMachine{ID: n.InstanceId, Created: now.Add(-time.Hour), ConfigSHA: []string{"old", "new"}[b.next(2)]})
			}
		}
		ms := BuildMembership(in)
		q := ms.RemovalQuorum(0)
		s := GroupSnapshot{
			Name: "g", Size: b.next(voters + learners + 2), Destroying: b.next(8) == 0,
			ReplaceAfter: time.Minute, JoinTimeout: time.Minute, Machines: machines,
			Voters: q.Voters, HealthyVoters: q.Healthy, Now: now,
			ConsensusGroup: true, MaxParallel: 1, MaxFailures: 1, MaxUnhealthy: voters + learners, MaxReplacements: 10, ReplacementWindow: time.Hour,
		}
		if b.next(2) == 0 {
			s.Rolling, s.TargetSHA, s.Failures = true, "new", b.next(2)
			s.Monitor, s.ProgressDeadline = time.Second, time.Hour
		}
		healthy := 0
		for _, n := range ms.Nodes {
			mem := ms.MemberOf[n.Id]
			gn := GroupNode{
				ID: n.Id, InstanceID: n.InstanceId, Status: n.Status, Since: now.Add(-time.Duration(b.next(3)) * time.Hour),
				Consensus: true, Learner: mem.IsLearner, Drained: n.Availability == pb.Availability_AVAILABILITY_DRAIN,
				Leader: n.Id == selfID, HealthyVoter: ms.HealthyVoter(n.Id),
			}
			if gn.HealthyVoter {
				healthy++
				if ms.Unvouched[n.Id] || ms.Unheard[n.Id] {
					t.Fatalf("node %s counts as a healthy voter for a removal, but this leadership does not vouch for it (%v) or etcd does not hear it (%v)", n.Id, ms.Unvouched[n.Id], ms.Unheard[n.Id])
				}
			}
			s.Nodes = append(s.Nodes, gn)
		}
		if healthy != s.HealthyVoters {
			t.Fatalf("the group's nodes count %d healthy voters, its snapshot %d", healthy, s.HealthyVoters)
		}
		a := Group(s)
		if a == nil || (a.Kind != GroupDemote && a.Kind != GroupRemoveNode) {
			return
		}
		mem, ok := ms.MemberOf[a.Node]
		if !ok || mem.IsLearner {
			return
		}
		if err := ms.CheckRemoval(mem, a.Node); err != nil {
			t.Fatalf("the group loop would %s node %s (%s), which the removal check refuses: %v\nunvouched %v, unheard %v\nsnapshot: %+v", a.Kind, a.Node, a.Reason, err, ms.Unvouched, ms.Unheard, s)
		}
	})
}
