package curator

import (
	"fmt"
	"strings"

	"github.com/curatorproject/curator/pki"
	pb "github.com/curatorproject/curator/proto"
)

// joinRole is the join token a node joins with, and so what it is to be:
// a worker, or a manager (a consensus member, within the voter limit). A
// node's record keeps it as joined_as, and the token calls name it; both
// as its String, which is part of the wire format and the CLI's JSON.
type joinRole string

const (
	joinWorker  joinRole = "worker"
	joinManager joinRole = "manager"
)

func (r joinRole) String() string { return string(r) }

// parseJoinRole reads the role argument of the token calls.
func parseJoinRole(role string) (joinRole, error) {
	switch r := joinRole(strings.ToLower(strings.TrimSpace(role))); r {
	case joinWorker, joinManager:
		return r, nil
	}
	return "", fmt.Errorf("%w: token role must be worker or manager, not %s", ErrInvalid, QuoteShort(role))
}

// joinedAs is the token node n joined with; "" for a node that joined
// before the record kept it (the first node, made by bootstrap, too).
func joinedAs(n *pb.Node) joinRole { return joinRole(n.JoinedAs) }

// tokenRole works out which join token a secret belongs to.
func tokenRole(cs *pb.ClusterState, secret string) (joinRole, bool) {
	// Compare against both, always, so timing says nothing about which.
	// An empty secret matches nothing, not even an empty stored one.
	w := pki.SecretEqual(secret, cs.WorkerTokenSecret) && secret != ""
	m := pki.SecretEqual(secret, cs.ManagerTokenSecret) && secret != ""
	switch {
	case w:
		return joinWorker, true
	case m:
		return joinManager, true
	}
	return "", false
}

// tokenSecret is the secret of the join token for role.
func tokenSecret(cs *pb.ClusterState, role joinRole) string {
	if role == joinManager {
		return cs.ManagerTokenSecret
	}
	return cs.WorkerTokenSecret
}
