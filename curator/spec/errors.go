package spec

import "errors"

// Sentinel errors that callers decide on. Handlers wrap them with context;
// toStatus maps them to gRPC codes, once, at the boundary.
var (
	// ErrNotLeader: this curator is not (or no longer) the leader, so a
	// write was refused by the fence.
	ErrNotLeader = errors.New("this curator is not the leader")
	// ErrNoLeader: no leader is elected right now.
	ErrNoLeader = errors.New("no curator leader is elected right now: retry in a few seconds")
	// ErrQuorum: too few etcd voters answer for etcd to elect a leader;
	// nothing can be read or written until enough come back (see
	// CheckQuorum).
	ErrQuorum   = errors.New("quorum lost")
	ErrNotFound = errors.New("not found")
	// ErrInvalid: the request is malformed.
	ErrInvalid = errors.New("invalid request")
	// ErrDenied: the caller may not do this.
	ErrDenied = errors.New("permission denied")
	// ErrNotManager: a call was forwarded by a node that is not a manager
	// (a worker, or a manager demoted a moment ago): refused, and marked so
	// that a client asks another manager.
	ErrNotManager = errors.New("not a manager")
	// ErrExists: the thing to create exists already.
	ErrExists = errors.New("already exists")
	// ErrPrecondition: the cluster is not in a state that allows this.
	ErrPrecondition = errors.New("refused")
	// ErrNodeGone: a node record to change was removed meanwhile.
	ErrNodeGone = errors.New("the node was removed meanwhile")
	// ErrNodeChanged: a node record to change was written meanwhile by a
	// write the leader had not seen yet; the change is to be made again
	// on the record as it is now.
	ErrNodeChanged = errors.New("the node record changed meanwhile: try again")
	// ErrAddressHeld: a machine made by a provider joins at an address
	// that a node record still names. The provider handed the address
	// out because no machine of its holds it any more, so the record is
	// stale and goes soon (its group removes it once it is down): the
	// joiner is to try again, not give up.
	ErrAddressHeld = errors.New("address still held")
	// ErrSessionsPaced: a manager admits session set-ups at a rate, and
	// this one came above it (the runtime's admission); the refusal says
	// when to come back.
	ErrSessionsPaced = errors.New("this manager admits no more sessions right now")
	// ErrReleaseSkew: the node's release may not run beside the managers'
	// (CheckReleaseSkew). A denial, marked so that an agent says to run
	// another release rather than to wipe its data.
	ErrReleaseSkew = errors.New("release outside the version policy")
)

// The details of a gRPC status that says the quorum is lost: an
// errdetails.ErrorInfo with this reason and domain.
const (
	ErrorDomain      = "curator.v1"
	QuorumLostReason = "QUORUM_LOST"
	// NotManagerReason marks a PermissionDenied that a forwarding node,
	// not the caller, earned: the caller is to ask another manager.
	NotManagerReason = "FORWARDER_NOT_MANAGER"
	// AddressHeldReason marks an Unavailable join: the joiner's address is
	// still named by a stale node record (ErrAddressHeld).
	AddressHeldReason = "ADDRESS_HELD"
	// NoLeaderReason marks an Unavailable that says no curator leader is
	// elected right now (ErrNoLeader): a client may wait out the election.
	NoLeaderReason = "NO_LEADER"
	// SessionsPacedReason marks an Unavailable that refused a session
	// set-up because the manager admits no more right now; its RetryInfo
	// says when to come back.
	SessionsPacedReason = "SESSIONS_PACED"
	// ReleaseSkewReason marks a PermissionDenied for a node whose release
	// the version policy keeps out (ErrReleaseSkew).
	ReleaseSkewReason = "RELEASE_SKEW"
)
