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
	// groupPrefix holds the groups: one key per group, by name.
	groupPrefix = keyPrefix + "groups/"
	// rolloutPrefix holds each group's rollout: the target config SHA,
	// its state and progress.
	rolloutPrefix = keyPrefix + "rollouts/"
)

func nodeKey(id string) string { return nodePrefix + id }

func promotionKey(id string) string { return promotionPrefix + id }

func groupKey(name string) string { return groupPrefix + name }

func rolloutKey(group string) string { return rolloutPrefix + group }
