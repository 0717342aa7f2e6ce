package decide

import (
	"fmt"
	"sort"

	"github.com/curatorproject/curator/curator/spec"
	pb "github.com/curatorproject/curator/proto"
)

// ApprovalNode is a node with a pending promotion, as the loop sees it.
type ApprovalNode struct {
	ID string
	// Exists is false when the node has been removed.
	Exists bool
	State  pb.NodeState
	Status pb.NodeStatus
	// Consensus: the node holds the consensus role or is an etcd member.
	Consensus bool
	Demoting  bool
	// Domain is the failure domain of its machine ("" for none).
	Domain string
}

type ApprovalSnapshot struct {
	Pending []ApprovalNode
	// Members counts etcd members, voters and learners: what the voter
	// limit bounds (as in promote).
	Members   int
	MaxVoters uint32
	// ConsensusByDomain counts the consensus members in each failure
	// domain: a node of a domain with fewer is promoted first, so that
	// the voters spread and losing one domain keeps the quorum when the
	// domains allow it.
	ConsensusByDomain map[string]int
}

// ApprovalActionKind is what an action does, as events and metrics name it.
type ApprovalActionKind string

const (
	ApprovalPromote ApprovalActionKind = "promote"
	ApprovalDrop    ApprovalActionKind = "drop-promotion"
)

type ApprovalAction struct {
	Kind   ApprovalActionKind
	NodeID string
	Reason string
}

// Approvals returns the one pending promotion to finish or drop, or
// nil when every pending promotion waits for its node to be ready.
func Approvals(s ApprovalSnapshot) *ApprovalAction {
	pending := append([]ApprovalNode(nil), s.Pending...)
	sort.Slice(pending, func(i, j int) bool {
		ci, cj := s.ConsensusByDomain[pending[i].Domain], s.ConsensusByDomain[pending[j].Domain]
		if ci != cj {
			return ci < cj
		}
		return pending[i].ID < pending[j].ID
	})
	for _, n := range pending {
		drop := func(format string, args ...any) *ApprovalAction {
			return &ApprovalAction{Kind: ApprovalDrop, NodeID: n.ID, Reason: fmt.Sprintf(format, args...)}
		}
		switch {
		case !n.Exists:
			return drop("node %s was approved as a manager but no longer exists: nothing to promote", n.ID)
		case n.Consensus:
			return drop("node %s holds the consensus role: its promotion after approval is done", n.ID)
		case n.Demoting:
			return drop("node %s is being demoted: its promotion after approval is called off", n.ID)
		case n.State != pb.NodeState_NODE_STATE_UP:
			return drop("node %s is %s: it cannot be promoted", n.ID, spec.StateWord(n.State))
		case n.Status != pb.NodeStatus_NODE_STATUS_READY:
			continue // a node that does not answer cannot catch up with etcd
		case uint32(s.Members+1) > s.MaxVoters:
			return drop("node %s joined with the manager token and was approved, but the cluster has %d consensus members, the voter limit of %d: it stays a worker; "+
				"raise the limit with `curator cluster update --max-voters N` and promote it with `curator node promote %s`", n.ID, s.Members, s.MaxVoters, n.ID)
		}
		where := ""
		if n.Domain != "" {
			where = fmt.Sprintf(" in domain %s, which holds %d consensus members", n.Domain, s.ConsensusByDomain[n.Domain])
		}
		return &ApprovalAction{Kind: ApprovalPromote, NodeID: n.ID,
			Reason: fmt.Sprintf("node %s%s joined with the manager token and was approved, and it is ready: promoting it (an etcd learner first, a voter once it has caught up)", n.ID, where)}
	}
	return nil
}
