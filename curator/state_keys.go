package curator

// The key layout in etcd. Nothing outside the state_*.go files builds keys.
const (
	keyPrefix      = "/curator/"
	nodePrefix     = keyPrefix + "nodes/"
	clusterKey     = keyPrefix + "cluster"
	pkiKey         = keyPrefix + "pki"
	electionPrefix = keyPrefix + "election"
	// promotionPrefix holds the promotions an approval owes: one key per
	// approved node that joined with the manager token.
	promotionPrefix = keyPrefix + "promotions/"
)

func nodeKey(id string) string { return nodePrefix + id }

func promotionKey(id string) string { return promotionPrefix + id }
