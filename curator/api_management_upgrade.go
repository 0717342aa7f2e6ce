package curator

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"strings"
	"time"

	"go.uber.org/zap"
	"google.golang.org/protobuf/proto"

	"github.com/curatorproject/curator/curator/internal/leader"
	"github.com/curatorproject/curator/curator/spec"
	"github.com/curatorproject/curator/curator/store"
	pb "github.com/curatorproject/curator/proto"
	"github.com/curatorproject/curator/provider/process"
)

// The management API's upgrade: start, status, cancel. They write the
// upgrade's record; the upgrade loop (loop_upgrade.go) does the rest.

func (m *managementAPI) StartUpgrade(ctx context.Context, req *pb.StartUpgradeRequest) (*pb.Upgrade, error) {
	st, err := m.s.leaderFor()
	if err != nil {
		return nil, err
	}
	if err := spec.CheckManagementRequest(req); err != nil {
		return nil, err
	}
	if req.Binary != "" {
		if err := process.CheckBinary(req.Binary); err != nil {
			return nil, fmt.Errorf("%w: --binary: %v", spec.ErrInvalid, err)
		}
		// A release that would not read the cluster's records is refused
		// (the storage version); one that does not say what it reads
		// (it cannot run here) is left to its rollout, which rolls back.
		cs, err := store.ClusterLoad(ctx, st.Cfg.Etcd)
		if err != nil {
			return nil, err
		}
		if release, reads, ok := binaryStorage(ctx, req.Binary); ok {
			if err := spec.CheckStorageRead(release, reads, cs.StorageVersion); err != nil {
				return nil, err
			}
		}
	}
	st.Groups.Mu.Lock()
	defer st.Groups.Mu.Unlock()
	old, rev, err := store.UpgradeLoad(ctx, st.Cfg.Etcd)
	if err != nil {
		return nil, err
	}
	if old != nil && old.State == pb.UpgradeState_UPGRADE_STATE_ROLLING {
		return nil, fmt.Errorf("%w: an upgrade to %s is under way: `curator upgrade status` shows where it is, `curator upgrade cancel` stops it", spec.ErrPrecondition, leader.UpgradeTarget(old))
	}
	groups, err := store.GroupList(ctx, st.Cfg.Etcd)
	if err != nil {
		return nil, err
	}
	u := &pb.Upgrade{Binary: req.Binary, Image: req.Image, State: pb.UpgradeState_UPGRADE_STATE_ROLLING, Started: st.Events.Timestamp(), StartedBy: identityFrom(ctx).name}
	waiting := 0
	for _, g := range leader.UpgradeOrder(groups) {
		ug := &pb.UpgradeGroup{Name: g.Spec.GetName(), State: leader.UpgradeWaiting, PreviousSha: g.ConfigSha}
		_, skip := spec.UpgradeProvider(proto.Clone(g.Spec).(*pb.GroupSpec), req.Binary, req.Image)
		switch {
		case g.Destroying:
			ug.State, ug.Reason = leader.UpgradeSkipped, "it is being destroyed"
		case skip != "":
			ug.State, ug.Reason = leader.UpgradeSkipped, skip
		default:
			waiting++
		}
		u.Groups = append(u.Groups, ug)
	}
	if waiting == 0 {
		return nil, fmt.Errorf("%w: no group runs on a provider the upgrade names a release for (%d groups): nothing to upgrade", spec.ErrPrecondition, len(groups))
	}
	reason := fmt.Sprintf("upgrade to %s started by an operator: %d groups, those with the consensus role first", leader.UpgradeTarget(u), waiting)
	if err := store.UpgradeSave(ctx, st.Lead.Fence, u, rev, st.Events.Event("upgrade", "start-upgrade", "", reason)); err != nil {
		return nil, err
	}
	m.s.logger(ctx).Info("upgrade started", zap.String("binary", u.Binary), zap.String("image", u.Image), zap.Int("groups", waiting))
	leader.KickUpgrade(st)
	return u, nil
}

func (m *managementAPI) GetUpgrade(ctx context.Context, _ *pb.GetUpgradeRequest) (*pb.Upgrade, error) {
	st, err := m.s.leaderFor()
	if err != nil {
		return nil, err
	}
	u, _, err := store.UpgradeLoad(ctx, st.Cfg.Etcd)
	if err != nil {
		return nil, err
	}
	if u == nil {
		return nil, fmt.Errorf("%w: the cluster has had no upgrade: `curator upgrade --binary PATH` (or --image REF) starts one", spec.ErrNotFound)
	}
	return u, nil
}

// CancelUpgrade stops the upgrade: the group in flight's rollout is
// cancelled with it (its machines stay as they are: some on the release,
// some not), and no further group is committed.
func (m *managementAPI) CancelUpgrade(ctx context.Context, _ *pb.CancelUpgradeRequest) (*pb.Upgrade, error) {
	st, err := m.s.leaderFor()
	if err != nil {
		return nil, err
	}
	st.Groups.Mu.Lock()
	defer st.Groups.Mu.Unlock()
	u, rev, err := store.UpgradeLoad(ctx, st.Cfg.Etcd)
	if err != nil {
		return nil, err
	}
	if u == nil || u.State != pb.UpgradeState_UPGRADE_STATE_ROLLING {
		return nil, fmt.Errorf("%w: no upgrade is under way: `curator upgrade status` shows the last", spec.ErrPrecondition)
	}
	where := "before its first group"
	for _, ug := range u.Groups {
		switch ug.State {
		case leader.UpgradeRolling:
			where = "at group " + ug.Name
			r, rrev, err := store.RolloutLoad(ctx, st.Cfg.Etcd, ug.Name)
			if err != nil {
				return nil, err
			}
			if r != nil && r.TargetSha == ug.TargetSha && (r.State == pb.RolloutState_ROLLOUT_STATE_ROLLING || r.State == pb.RolloutState_ROLLOUT_STATE_PAUSED) {
				r.State, r.Finished, r.Reason = pb.RolloutState_ROLLOUT_STATE_CANCELLED, st.Events.Timestamp(), "the upgrade was cancelled by an operator"
				if err := store.RolloutSave(ctx, st.Lead.Fence, r, rrev); err != nil {
					return nil, fmt.Errorf("cancel the rollout of group %s: %w: try again", ug.Name, err)
				}
			}
			ug.State = leader.UpgradeCancelled
		case leader.UpgradeWaiting:
			ug.State = leader.UpgradeCancelled
		}
	}
	u.State, u.Finished = pb.UpgradeState_UPGRADE_STATE_CANCELLED, st.Events.Timestamp()
	u.Reason = fmt.Sprintf("cancelled by %s %s", identityFrom(ctx).name, where)
	if err := store.UpgradeSave(ctx, st.Lead.Fence, u, rev, st.Events.Event("upgrade", "cancel-upgrade", "", fmt.Sprintf("upgrade to %s %s", leader.UpgradeTarget(u), u.Reason))); err != nil {
		return nil, err
	}
	st.Groups.Kick()
	return u, nil
}

// binaryStorage asks a curator binary its release and the storage version
// it reads (`curator version -o json`; a release from before storage
// versions prints none, or has no -o: it reads version 1). ok is false
// when the binary does not answer as a curator binary does.
func binaryStorage(ctx context.Context, bin string) (release string, reads uint32, ok bool) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if out, err := exec.CommandContext(ctx, bin, "version", "-o", "json").Output(); err == nil {
		var v struct {
			Release        string `json:"release"`
			StorageVersion uint32 `json:"storage_version"`
		}
		if json.Unmarshal(out, &v) == nil && v.Release != "" {
			return v.Release, max(v.StorageVersion, 1), true
		}
	}
	out, err := exec.CommandContext(ctx, bin, "version").Output()
	first, _, _ := strings.Cut(string(out), "\n")
	if err != nil || !strings.HasPrefix(first, "curator ") {
		return "", 0, false
	}
	return strings.TrimSpace(strings.TrimPrefix(first, "curator ")), 1, true
}
