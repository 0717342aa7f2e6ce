package curator

import (
	"testing"

	"github.com/curatorproject/curator/internal/layercheck"
)

// runtimeDirs are the directories of the curator's runtime: the API
// (package curator) and the leader's parts and loops.
var runtimeDirs = []string{".", "internal/leader"}

// TestLayers: the runtime builds no etcd key and writes nothing to etcd
// itself, and makes no membership change but through the fence: the
// records' layout and every write are curator/store's (its verbs, fenced
// by store.Fence), and the membership changes are the fence's methods,
// each preceded by its check.
func TestLayers(t *testing.T) {
	for _, dir := range runtimeDirs {
		checkLayers(t, dir)
	}
}

func checkLayers(t *testing.T, dir string) {
	layercheck.Check(t, dir, "keys and writes are curator/store's, membership changes go through store.Fence", layercheck.Rules{
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
// before the call: only the Swarm part (internal/leader/swarm.go) calls
// the engine's node updates, only the machines part
// (internal/leader/machines.go) makes, destroys and clears machines; the
// API calls neither. TestDeposedPartsChangeNothing (internal/leader)
// shows the owners refuse once the leadership is over.
func TestFencedParts(t *testing.T) {
	for _, c := range []struct{ dir, swarm, machines string }{
		{dir: ".", swarm: "", machines: ""},
		{dir: "internal/leader", swarm: "swarm.go", machines: "machines.go"},
	} {
		layercheck.Check(t, c.dir, "the Swarm is changed only through the Swarm part (swarmEngine), which checks the fence", layercheck.Rules{
			Methods: []string{"NodeUpdate", "NodeRemove", "SwarmUpdate", "SwarmLeave", "SwarmJoin", "SwarmInit"},
			Owners:  []string{c.swarm},
		})
		layercheck.Check(t, c.dir, "machines are made and destroyed only through the machines part, which checks the fence", layercheck.Rules{
			Methods: []string{"Provision", "Destroy", "ClearDead", "Prune"},
			Owners:  []string{c.machines},
		})
	}
}
