package curator

import (
	"testing"

	"github.com/curatorproject/curator/internal/layercheck"
)

// TestLayers: the runtime builds no etcd key and writes nothing to etcd
// itself, and makes no membership change but through the fence: the
// records' layout and every write are curator/store's (its verbs, fenced
// by store.Fence), and the membership changes are the fence's methods,
// each preceded by its check.
func TestLayers(t *testing.T) {
	layercheck.Check(t, ".", "keys and writes are curator/store's, membership changes go through store.Fence", layercheck.Rules{
		Calls: []string{
			"clientv3.OpPut", "clientv3.OpDelete", "clientv3.OpTxn", "clientv3.OpGet", "clientv3.Compare", "clientv3.WithPrefix",
			"concurrency.NewElection", "store.Keys",
			"consensus.AddLearner", "consensus.PromoteLearner", "consensus.RemoveMember", "consensus.MoveLeader",
		},
		Methods:  []string{"Put", "Delete", "Txn", "Compact"},
		Literals: []string{"/curator/"},
	})
}

// TestFencedParts: every outside effect of a leadership that cannot be
// part of an etcd transaction has one owner, which checks the fence just
// before the call: only the Swarm part (leader_swarm.go) calls the
// engine's node updates, only the machines part (leader_machines.go)
// makes, destroys and clears machines. TestDeposedPartsChangeNothing
// shows the owners refuse once the leadership is over.
func TestFencedParts(t *testing.T) {
	layercheck.Check(t, ".", "the Swarm is changed only through the Swarm part (swarmEngine), which checks the fence", layercheck.Rules{
		Methods: []string{"NodeUpdate", "NodeRemove", "SwarmUpdate", "SwarmLeave", "SwarmJoin", "SwarmInit"},
		Owners:  []string{"leader_swarm.go"},
	})
	layercheck.Check(t, ".", "machines are made and destroyed only through the machines part, which checks the fence", layercheck.Rules{
		Methods: []string{"Provision", "Destroy", "ClearDead", "Prune"},
		Owners:  []string{"leader_machines.go"},
	})
}
