package spec

import (
	"fmt"
	"strings"

	"github.com/curatorproject/curator/pki"
	pb "github.com/curatorproject/curator/proto"
)

// JoinRole is the join token a node joins with, and so what it is to be:
// a worker, or a manager (a consensus member, within the voter limit). A
// node's record keeps it as joined_as, and the token calls name it; both
// as its String, which is part of the wire format and the CLI's JSON.
type JoinRole string

const (
	JoinWorker  JoinRole = "worker"
	JoinManager JoinRole = "manager"
)

func (r JoinRole) String() string { return string(r) }

// ParseJoinRole reads the role argument of the token calls.
func ParseJoinRole(role string) (JoinRole, error) {
	switch r := JoinRole(strings.ToLower(strings.TrimSpace(role))); r {
	case JoinWorker, JoinManager:
		return r, nil
	}
	return "", fmt.Errorf("%w: token role must be worker or manager, not %s", ErrInvalid, QuoteShort(role))
}

// JoinedAs is the token node n joined with; "" for a node that joined
// before the record kept it (the first node, made by bootstrap, too).
func JoinedAs(n *pb.Node) JoinRole { return JoinRole(n.JoinedAs) }

// TokenRole works out which join token a secret belongs to.
func TokenRole(cs *pb.ClusterState, secret string) (JoinRole, bool) {
	// Compare against both, always, so timing says nothing about which.
	// An empty secret matches nothing, not even an empty stored one.
	w := pki.SecretEqual(secret, cs.WorkerTokenSecret) && secret != ""
	m := pki.SecretEqual(secret, cs.ManagerTokenSecret) && secret != ""
	switch {
	case w:
		return JoinWorker, true
	case m:
		return JoinManager, true
	}
	return "", false
}

// TokenSecret is the secret of the join token for role.
func TokenSecret(cs *pb.ClusterState, role JoinRole) string {
	if role == JoinManager {
		return cs.ManagerTokenSecret
	}
	return cs.WorkerTokenSecret
}
