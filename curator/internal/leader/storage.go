package leader

import (
	"context"
	"fmt"

	"github.com/curatorproject/curator/curator/spec"
	"github.com/curatorproject/curator/curator/store"
	pb "github.com/curatorproject/curator/proto"
)

// The storage version (spec.StorageVersion): the layout of the records
// in etcd. The leader raises the cluster's, one version at a time, each
// once every manager runs a release that reads it (so that any of them
// may lead after), migrating the records as the version says; from then
// on an upgrade to a release that does not read it is refused
// (StartUpgrade). A version the leader's release does not know (a newer
// one, written before a downgrade the policy should have refused) is
// left as it is.

// storageMigrations rewrite the records into each storage version above
// 1, by version. There are none yet: version 1 is the layout of the first
// releases, which a cluster made before storage versions holds already.
var storageMigrations = map[uint32]func(ctx context.Context, l *upgradeLoop) error{}

// migrateStorage raises the cluster's storage version by one, if it is
// below this release's and every manager reads the next. acted says
// whether it wrote.
func (l *upgradeLoop) migrateStorage(ctx context.Context) (res loopResult, acted bool, err error) {
	cs, err := store.ClusterLoad(ctx, l.cfg.Etcd)
	if err != nil {
		return loopResult{}, false, err
	}
	at := cs.StorageVersion
	if at >= spec.StorageVersion {
		return loopResult{}, false, nil
	}
	next := max(at+1, 1)
	if at == 0 {
		next = 1 // the layout it has: named, nothing to migrate
	}
	var managers []string
	for _, n := range l.reg.Nodes() {
		if spec.HasRole(n, pb.Role_ROLE_CONSENSUS) {
			managers = append(managers, n.Version)
		}
	}
	lowest := spec.LowestRelease(managers)
	if !spec.StorageReadable(next, lowest) {
		layout, _ := spec.StorageLayoutOf(next)
		return loopResult{waiting: true, reason: fmt.Sprintf("the records stay at storage version %d until every manager runs %s or later (the lowest runs %s)", max(at, 1), layout.FirstRelease, lowest)}, false, nil
	}
	if migrate := storageMigrations[next]; migrate != nil {
		if err := migrate(ctx, l); err != nil {
			return loopResult{}, false, fmt.Errorf("migrate the records to storage version %d: %w", next, err)
		}
	}
	layout, _ := spec.StorageLayoutOf(next)
	reason := fmt.Sprintf("the records are at storage version %d: %s", next, layout.What)
	if _, err := store.ClusterStorageRaise(ctx, l.fence, next, l.events.Event("upgrade", "storage-version", "", reason)); err != nil {
		return loopResult{}, false, err
	}
	return loopResult{action: "storage-version", reason: reason, recorded: true}, true, nil
}
