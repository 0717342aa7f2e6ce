package consensus

import "errors"

// Errors an operator (or the node agent) decides on. They are returned
// wrapped, with a message that says what happened and what to do.
var (
	// ErrPortInUse: the etcd peer or client port is taken by another
	// process. Checked before etcd starts.
	ErrPortInUse = errors.New("port in use")

	// ErrRemoved: this member was removed from the etcd cluster, usually
	// while the node was down. Its data dir can never serve again; the node
	// must wipe it and join anew.
	ErrRemoved = errors.New("this node was removed from the etcd cluster")

	// ErrOtherCluster: the data dir holds an etcd member of another node or
	// another cluster, or the peers answer for another cluster.
	ErrOtherCluster = errors.New("data dir belongs to another etcd cluster")

	// ErrNotRunning: Leave was called while etcd was not running (or not yet
	// ready), so the member cannot remove itself.
	ErrNotRunning = errors.New("etcd is not running")

	// ErrLeft: the service left the cluster with Leave and wiped its data;
	// it will not run again. Create a new Service to join again.
	ErrLeft = errors.New("this node left the etcd cluster")

	// ErrLastMember: Leave was called on the only voter, which cannot remove
	// itself without destroying the cluster.
	ErrLastMember = errors.New("this node is the last etcd voter")

	// ErrNotVoter: a new cluster was to be forced from the data dir of a
	// member that was not a voter (a learner, still catching up, or one
	// that had not finished joining): its data may lack what the cluster
	// had committed, and etcd cannot make a cluster of a learner alone.
	ErrNotVoter = errors.New("this node's etcd member was not a voter")
)

// RemovedError is ErrRemoved with the member whose data the data dir
// holds: a node whose record hands it another member (its peer URL added
// again under a new ID) knows its data is of no use and may wipe it.
type RemovedError struct {
	// MemberID is the removed member the data dir holds.
	MemberID uint64
	msg      string
}

func (e *RemovedError) Error() string { return e.msg }

// Unwrap makes errors.Is(err, ErrRemoved) hold.
func (e *RemovedError) Unwrap() error { return ErrRemoved }
