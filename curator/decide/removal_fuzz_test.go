package decide

import (
	"fmt"
	"testing"
	"time"

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
// rollout, the group loop never demotes or removes a voter that the
// removal check (Membership.CheckRemoval, the quorum guard of an
// operator's demote and of the consensus sync) refuses. The group
// decision keeps counts, not members; this is the property that the two
// quorum judgments agree where it matters.
func FuzzGroupRemovalAgreesWithCheck(f *testing.F) {
	for _, seed := range [][]byte{
		{3, 0, 1, 1, 1, 0, 1, 1, 1, 2},
		{5, 2, 0, 0, 1, 1, 1, 0, 0, 1, 1, 1, 0, 1, 0, 3, 1},
		{2, 0, 0, 1, 1, 1, 0, 0, 1, 0, 1},
		{3, 1, 0, 0, 0, 1, 1, 1, 1, 0, 2, 1, 1},
	} {
		f.Add(seed)
	}
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, data []byte) {
		b := fuzzBytes(data)
		voters := 1 + b.next(7)
		learners := b.next(3)
		self := b.next(voters)
		var (
			nodes    []*pb.Node
			members  []member.Member
			machines []GroupMachine
		)
		for i := range voters + learners {
			id := fmt.Sprintf("n%d", i)
			n := &pb.Node{Id: id, InstanceId: "m" + id, Status: []pb.NodeStatus{pb.NodeStatus_NODE_STATUS_READY, pb.NodeStatus_NODE_STATUS_DOWN, pb.NodeStatus_NODE_STATUS_UNKNOWN}[b.next(3)],
				Roles: []pb.Role{pb.Role_ROLE_CONSENSUS}}
			if b.next(4) == 0 {
				n.Availability = pb.Availability_AVAILABILITY_DRAIN
			}
			nodes = append(nodes, n)
			members = append(members, member.Member{ID: uint64(i + 1), NodeID: id, IsLearner: i >= voters})
			if b.next(3) != 0 {
				machines = append(machines, GroupMachine{ID: n.InstanceId, Created: now.Add(-time.Hour), ConfigSHA: []string{"old", "new"}[b.next(2)]})
			}
		}
		selfID := fmt.Sprintf("n%d", self)
		// Every voter vouched for (heard when this leadership began)
		// and heard by etcd.
		in := MembershipInputs{Self: selfID, Members: members, Nodes: nodes, Heartbeats: map[string]time.Time{},
			HeartbeatInterval: time.Second, LeaderSince: now, Now: now, EtcdHeard: map[uint64]bool{}}
		for _, m := range members {
			in.Heartbeats[m.NodeID], in.EtcdHeard[m.ID] = now, !m.IsLearner
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
		for _, n := range nodes {
			mem := ms.MemberOf[n.Id]
			s.Nodes = append(s.Nodes, GroupNode{
				ID: n.Id, InstanceID: n.InstanceId, Status: n.Status, Since: now.Add(-time.Duration(b.next(3)) * time.Hour),
				Consensus: true, Learner: mem.IsLearner, Drained: n.Availability == pb.Availability_AVAILABILITY_DRAIN,
				Leader: n.Id == selfID, HealthyVoter: ms.HealthyVoter(n.Id),
			})
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
			t.Fatalf("the group loop would %s node %s (%s), which the removal check refuses: %v\nsnapshot: %+v", a.Kind, a.Node, a.Reason, err, s)
		}
	})
}
