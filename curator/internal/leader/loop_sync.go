package leader

import (
	"context"

	"github.com/curatorproject/curator/curator/decide"
	"github.com/curatorproject/curator/curator/internal/metrics"
)

// The consensus sync loop. Its decision is a pure function of the
// membership snapshot.
//
// etcd membership is the truth and roles follow it: every operation that
// changes membership changes etcd first (promote adds the learner, demote
// removes the member) and the role second. A crash between the two leaves a
// member without the role, or a role without the member; completing the
// operation from membership finishes it instead of fighting it.
//
// Members whose node does not exist are removed first: a node that was
// removed (or never registered, after a crash between adding its learner
// and writing its record) must not keep a vote. Only then are roles
// aligned, one change per tick, so that each tick acts on a snapshot that
// reflects the previous change.
//
// The one thing this loop could do that cannot be undone is strip roles or
// members on a wrong reading of who is who. As a safety measure it refuses
// to act at all unless the leader's own node is both an etcd member and in
// the registry: a leader that cannot find itself is reading something
// wrong.

type syncLoop struct {
	cfg     *Config
	metrics *metrics.Metrics
	members *members
	roles   *roles
}

func newSyncLoop(st *State, metrics *metrics.Metrics) *syncLoop {
	return &syncLoop{cfg: st.Cfg, metrics: metrics, members: st.Members, roles: st.Roles}
}

func (l *syncLoop) spec() loopSpec {
	return membershipLoop("consensus-sync", l.cfg, l.members, l.tick)
}

// tick decides on the membership snapshot (observed by membershipLoop)
// and acts.
func (l *syncLoop) tick(ctx context.Context, ms *decide.Membership) (loopResult, error) {
	q := ms.QuorumAfter(0, 0)
	l.metrics.SetQuorum(q.Healthy, q.Voters, q.Need())
	return l.act(ctx, ms, decide.Sync(ms))
}

// act makes change a (nil: none) of snapshot ms.
func (l *syncLoop) act(ctx context.Context, ms *decide.Membership, a *decide.SyncAction) (loopResult, error) {
	if a == nil {
		return loopResult{}, nil
	}
	res := loopResult{action: string(a.Kind), nodeID: a.NodeID, reason: a.Reason}
	var err error
	switch a.Kind {
	case decide.SyncRefuse:
		res.refused = true
	case decide.SyncRemoveMember:
		m, _ := ms.Member(a.MemberID)
		err = l.members.remove(ctx, ms, m)
	case decide.SyncGrantRole:
		err = l.roles.grantConsensusRole(ctx, ms, ms.ByID[a.NodeID], a.MemberID)
	case decide.SyncClearRole:
		err = l.roles.clearConsensusRole(ctx, ms.ByID[a.NodeID])
	}
	return res, err
}
