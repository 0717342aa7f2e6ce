package spec

import (
	"strings"

	pb "github.com/curatorproject/curator/proto"
)

// StatusWord is NODE_STATUS_READY → ready: a node status as tables,
// events and refusals say it.
func StatusWord(enum string) string {
	return strings.ToLower(strings.TrimPrefix(enum, "NODE_STATUS_"))
}

// ShortSHA is a config SHA as every table shows it: its first 12 hex
// digits.
func ShortSHA(sha string) string { return sha[:min(len(sha), 12)] }

// HasRole says whether n holds role r.
func HasRole(n *pb.Node, r pb.Role) bool {
	for _, have := range n.Roles {
		if have == r {
			return true
		}
	}
	return false
}

// StateWord is NODE_STATE_UP → up: a node state as tables and refusals say
// it.
func StateWord(s pb.NodeState) string {
	return strings.ToLower(strings.TrimPrefix(s.String(), "NODE_STATE_"))
}
