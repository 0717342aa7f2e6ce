// Package member holds the one type of an etcd member that both the
// consensus package (which reads members from etcd) and the curator's pure
// decisions (which must not link etcd) use.
package member

// Member is an etcd member as the curator sees it.
type Member struct {
	ID uint64
	// NodeID is the member's name, which is its node's ID. It is empty for
	// a learner whose etcd has not started yet, which the curator
	// matches to its node by PeerURL.
	NodeID    string
	PeerURL   string
	ClientURL string // empty until the member has started
	IsLearner bool
}
