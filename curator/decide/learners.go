package decide

import (
	"fmt"
	"time"

	"github.com/curatorproject/curator/consensus/member"
	pb "github.com/curatorproject/curator/proto"
)

type LearnerAction struct {
	Promote  bool // else remove
	MemberID uint64
	NodeID   string
	Reason   string
}

// Learners returns the one learner change to make, or nil: first a
// learner whose node has been down past downLimit is removed, then a
// learner that has started and whose node this leader hears from right
// now is promoted if, counted as a healthy voter, a healthy majority of
// voters remains (etcd's own check of this is off: see consensus).
// Learners are taken by member ID. Heard from now, not merely not down: a
// node killed a moment ago stays ready until down-after, its learner is
// still caught up, and promoted it would be a dead voter the others'
// quorum must carry, unknown to anyone counting voters a moment before.
// held are the learners etcd refused to promote a moment ago.
func Learners(ms *Membership, now time.Time, downLimit time.Duration, held map[uint64]bool) *LearnerAction {
	for _, m := range ms.Members {
		n := ms.NodeOfMember(m)
		if !m.IsLearner || n == nil || n.Status != pb.NodeStatus_NODE_STATUS_DOWN {
			continue
		}
		if since := n.StatusChanged.AsTime(); now.Sub(since) >= downLimit {
			return &LearnerAction{MemberID: m.ID, NodeID: n.Id,
				Reason: fmt.Sprintf("learner %x: node %s has been down since %s, past the limit of %s", m.ID, n.Id, since.Format(time.RFC3339), downLimit)}
		}
	}
	for _, m := range ms.Members {
		if !m.IsLearner || held[m.ID] || LearnerWaits(ms, m) != "" {
			continue
		}
		n := ms.NodeOfMember(m)
		return &LearnerAction{Promote: true, MemberID: m.ID, NodeID: n.Id,
			Reason: fmt.Sprintf("learner %x of node %s is running: promote it to voter (etcd refuses until it has caught up)", m.ID, n.Id)}
	}
	return nil
}

// LearnerWaits says why learner m is not to be promoted now ("": it is).
func LearnerWaits(ms *Membership, m member.Member) string {
	n := ms.NodeOfMember(m)
	switch {
	case n == nil:
		return "no node matches it (the consensus sync removes it)"
	case m.NodeID == "":
		// A member that has started carries its node's ID as its name.
		return "its etcd has not started (the member has no name yet): the agent's log of its node says why"
	case n.Status == pb.NodeStatus_NODE_STATUS_DOWN:
		return "its node is down"
	case !ms.Heard[n.Id]:
		return "this leader has not heard from its node just now (no heartbeat within two intervals): frozen, cut off, or its session is moving"
	}
	if q := ms.QuorumAfter(0, m.ID); !q.OK() {
		return fmt.Sprintf("promoted, it would leave %d healthy of %d voters, short of a majority", q.Healthy, q.Voters)
	}
	return ""
}

const (
	LearnerRetry      = 500 * time.Millisecond
	LearnerStuckAfter = 30 * time.Second
)

// LearnerMemory is what the learners loop remembers between ticks, per
// learner: when this leader first saw it, and etcd's last refusal to
// promote it. Only the learners loop uses it.
type LearnerMemory struct {
	since   map[uint64]time.Time
	refusal map[uint64]learnerRefusal
}

type learnerRefusal struct {
	until time.Time
	err   error
}

// observe notes the learners of ms first seen at now, and forgets the
// members that are no longer learners.
func (lm *LearnerMemory) Observe(ms *Membership, now time.Time) {
	if lm.since == nil {
		lm.since, lm.refusal = map[uint64]time.Time{}, map[uint64]learnerRefusal{}
	}
	learners := map[uint64]bool{}
	for _, m := range ms.Members {
		if !m.IsLearner {
			continue
		}
		learners[m.ID] = true
		if _, ok := lm.since[m.ID]; !ok {
			lm.since[m.ID] = now
		}
	}
	for id := range lm.since {
		if !learners[id] {
			delete(lm.since, id)
			delete(lm.refusal, id)
		}
	}
}

// refused notes that etcd refused to promote learner id at now: it is
// held back LearnerRetry.
func (lm *LearnerMemory) Refused(id uint64, err error, now time.Time) {
	lm.refusal[id] = learnerRefusal{until: now.Add(LearnerRetry), err: err}
}

// held returns the learners held back at now.
func (lm *LearnerMemory) Held(now time.Time) map[uint64]bool {
	held := map[uint64]bool{}
	for id, r := range lm.refusal {
		if now.Before(r.until) {
			held[id] = true
		}
	}
	return held
}

// stuck returns the first learner of ms first seen LearnerStuckAfter or
// more before now, with why it is not promoted ("" for none).
func (lm *LearnerMemory) Stuck(ms *Membership, now time.Time) (memberID uint64, nodeID, why string) {
	for _, m := range ms.Members {
		since, ok := lm.since[m.ID]
		if !m.IsLearner || !ok || now.Sub(since) < LearnerStuckAfter {
			continue
		}
		why := LearnerWaits(ms, m)
		if r, ok := lm.refusal[m.ID]; ok && why == "" {
			why = fmt.Sprintf("etcd does not let it be promoted, it has not caught up with the etcd leader: %v", r.err)
		}
		if why == "" {
			continue // about to be promoted
		}
		return m.ID, ms.NodeOf[m.ID], why
	}
	return 0, "", ""
}
