package decide

import (
	"time"

	pb "github.com/curatorproject/curator/proto"
)

// The status of a node, each rule of it written once. A node's record
// carries a status (unknown, ready, down) that only the health loop
// writes; the leader reads it in three ways, each a function here that
// every other place calls:
//
//   - HealthStatus: the status the health loop judges a node to have
//     (through Health), from its heartbeats;
//   - ShownStatus and Vouched: the status a reply shows, and whether this
//     leadership stands behind the record's word (the membership snapshot's
//     Unvouched, which no removal counts on);
//   - Ready: whether a node counts as ready for a quorum or a Swarm step
//     (Membership.Healthy, the swarm sync's snapshot).
//
// They read what this leader heard of a node as (last, seen): the time of
// its last heartbeat to this leader, seen false if it never sent one.

// HeardSince says whether a node last heard at (last, seen) was heard by
// a leadership that began at since: its heartbeat reached this leader, not
// only the one before it.
func HeardSince(last time.Time, seen bool, since time.Time) bool {
	return seen && !last.Before(since)
}

// HealthStatus is the health rule: the status the health loop judges node
// of status cur to have at now, last heard at (last, seen).
//
//	heard                              | judged
//	within downAfter of now            | ready
//	after graceFrom, not since         | down (heard by this leader, then silent)
//	not after graceFrom, graceFrom     | down (silent since the takeover)
//	  at least downAfter ago           |
//	otherwise                          | cur (the takeover's grace)
//
// Preconditions:
//   - graceFrom is the later of when this leader last began to serve (its
//     election, or its coming back from doubt: heartbeats before went
//     elsewhere) and when the node joined;
//   - the node is up (a pending node has no status to judge).
//
// Health holds the downs back while streams are still moving to a new
// leader; this rule alone does not.
func HealthStatus(cur pb.NodeStatus, last time.Time, seen bool, graceFrom, now time.Time, downAfter time.Duration) pb.NodeStatus {
	if seen && now.Sub(last) < downAfter {
		return pb.NodeStatus_NODE_STATUS_READY
	}
	if seen && last.After(graceFrom) {
		// Heard by this leader, then silent.
		return pb.NodeStatus_NODE_STATUS_DOWN
	}
	if now.Sub(graceFrom) >= downAfter {
		return pb.NodeStatus_NODE_STATUS_DOWN
	}
	return cur
}

// ShownStatus is the status a reply shows for node n, last heard at
// (last, seen), under the leadership of the curator of node self that
// began at since. A record's "ready" this leadership has neither heard nor
// judged was written before it (by the previous leader, or before a forced
// new cluster or a restore): after a failover it may be long stale, and a
// dead machine must not look ready until the health loop judges it.
//
//	node                                       | shown
//	the leader's own                           | as recorded (it runs)
//	not up (pending approval, ...)             | as recorded
//	recorded unknown or down                   | as recorded
//	recorded ready, heard since since          | ready
//	recorded ready, status changed since since | ready (judged by this leader)
//	recorded ready, neither                    | unknown
//
// Preconditions:
//   - since is the leadership's start, not the end of a doubt of the lease
//     guard: a doubt loses no heartbeat, and counting from its end would
//     show every node unknown for an interval after each one;
//   - (last, seen) is this leader's memory of heartbeats: a heartbeat a
//     follower replayed to it after a failover is no news of the node and
//     is not in it.
func ShownStatus(n *pb.Node, last time.Time, seen bool, since time.Time, self string) pb.NodeStatus {
	if n.Id == self || n.State != pb.NodeState_NODE_STATE_UP || n.Status != pb.NodeStatus_NODE_STATUS_READY {
		return n.Status
	}
	if HeardSince(last, seen, since) {
		return n.Status
	}
	if n.StatusChanged != nil && !n.StatusChanged.AsTime().Before(since) {
		return n.Status
	}
	return pb.NodeStatus_NODE_STATUS_UNKNOWN
}

// Vouched says whether this leadership stands behind node n's status:
// the status a reply shows for it (ShownStatus, same arguments and
// preconditions) is a known one. A voter it does not vouch for counts for
// no removal (Membership.Unvouched, RemovalQuorum), so a new leader never
// spends a dead voter's stale "ready" on demoting a live one.
//
//	node                                      | vouched
//	recorded unknown (never judged; the       | no
//	  leader's own too)                       |
//	recorded ready, neither heard nor judged  | no
//	  since since (shown unknown)             |
//	any other (shown as recorded)             | yes
func Vouched(n *pb.Node, last time.Time, seen bool, since time.Time, self string) bool {
	return ShownStatus(n, last, seen, since, self) != pb.NodeStatus_NODE_STATUS_UNKNOWN
}

// Ready says whether node n counts as ready under the curator of node
// self: the curator's own node runs (it observed this), whatever its
// record still says; any other node is ready when its record says so.
//
//	node                       | ready
//	the curator's own          | yes
//	recorded ready             | yes
//	recorded unknown or down   | no
//
// It reads the record's status, not ShownStatus: a quorum counts what the
// records say (a reply's count too), and the removals add Vouched on top
// (Membership.HealthyForRemoval).
func Ready(n *pb.Node, self string) bool {
	return n.Id == self || n.Status == pb.NodeStatus_NODE_STATUS_READY
}
