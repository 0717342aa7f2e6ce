package decide

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	pb "github.com/curatorproject/curator/proto"
)

// ReapNode is what the reaper reads of one node.
type ReapNode struct {
	ID        string
	Status    pb.NodeStatus
	Since     time.Time
	Consensus bool
	// Grouped: the node names a group that exists.
	Grouped bool
	Leader  bool
}

type ReapSnapshot struct {
	Nodes                 []ReapNode
	Voters, HealthyVoters int
	ReapAfter             time.Duration
	Now                   time.Time
}

type ReapAction struct {
	Node    string
	Refused bool
	Reason  string
}

// Reap picks the node down longest past ReapAfter, if any.
func Reap(s ReapSnapshot) *ReapAction {
	var due []ReapNode
	for _, n := range s.Nodes {
		if n.Grouped || n.Leader || n.Status != pb.NodeStatus_NODE_STATUS_DOWN || s.Now.Sub(n.Since) < s.ReapAfter {
			continue
		}
		due = append(due, n)
	}
	if len(due) == 0 {
		return nil
	}
	n := slices.MinFunc(due, func(a, b ReapNode) int {
		return cmp.Or(a.Since.Compare(b.Since), cmp.Compare(a.ID, b.ID))
	})
	down := s.Now.Sub(n.Since).Round(time.Second)
	if n.Consensus && !QuorumAfterRemoval(s.Voters, s.HealthyVoters, false) {
		return &ReapAction{Node: n.ID, Refused: true, Reason: fmt.Sprintf("node %s has been down for %v, but removing its etcd member would leave %d healthy of %d voters: bring voters back first", n.ID, down, s.HealthyVoters, s.Voters-1)}
	}
	return &ReapAction{Node: n.ID, Reason: fmt.Sprintf("node %s has been down for %v (reap-after %v) and no group answers for it", n.ID, down, s.ReapAfter)}
}
