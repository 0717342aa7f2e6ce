package curator

// The key layout in etcd. Nothing outside the state_*.go files builds keys.
const (
	keyPrefix      = "/curator/"
	nodePrefix     = keyPrefix + "nodes/"
	clusterKey     = keyPrefix + "cluster"
	pkiKey         = keyPrefix + "pki"
	electionPrefix = keyPrefix + "election"
)

func nodeKey(id string) string { return nodePrefix + id }
