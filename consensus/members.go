package consensus

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/curatorproject/curator/consensus/member"
	"github.com/curatorproject/curator/internal/backoff"
	"github.com/curatorproject/curator/supervisor"
)

// Member is an etcd member as the curator sees it (package member, so
// that the leader's pure decisions read it without linking etcd).
type Member = member.Member

// Members lists the cluster's members (a linearizable read: it needs a
// quorum).
func Members(ctx context.Context, cli *clientv3.Client) ([]Member, error) {
	ms, _, err := memberList(ctx, cli)
	return ms, err
}

func memberList(ctx context.Context, cli *clientv3.Client) ([]Member, uint64, error) {
	resp, err := cli.MemberList(ctx)
	if err != nil {
		return nil, 0, fmt.Errorf("list etcd members: %w", err)
	}
	return membersFromPB(resp.Members), resp.Header.GetClusterId(), nil
}

func membersFromPB(pbs []*pb.Member) []Member {
	ms := make([]Member, 0, len(pbs))
	for _, m := range pbs {
		mm := Member{ID: m.ID, NodeID: m.Name, IsLearner: m.IsLearner}
		if len(m.PeerURLs) > 0 {
			mm.PeerURL = m.PeerURLs[0]
		}
		if len(m.ClientURLs) > 0 {
			mm.ClientURL = m.ClientURLs[0]
		}
		ms = append(ms, mm)
	}
	return ms
}

// AddLearner adds node nodeID, to be reached at peerURL, as a learner, and
// returns the parameters the node joins with and its member ID.
//
// It is idempotent, so that a curator leader that died between adding the
// learner and recording it can be followed by one that simply adds it
// again: if a learner with this peer URL exists and is unnamed or named
// nodeID, its parameters are returned. A peer URL or node ID held by any
// other member is an error.
func AddLearner(ctx context.Context, cli *clientv3.Client, nodeID, peerURL string) (JoinParams, uint64, error) {
	members, clusterID, err := memberList(ctx, cli)
	if err != nil {
		return JoinParams{}, 0, fmt.Errorf("add learner %s: %w", nodeID, err)
	}
	for _, m := range members {
		switch {
		case m.PeerURL == peerURL && m.IsLearner && (m.NodeID == "" || m.NodeID == nodeID):
			return joinParams(members, m.ID, nodeID, clusterID), m.ID, nil
		case m.PeerURL == peerURL:
			return JoinParams{}, 0, fmt.Errorf("add learner %s: peer URL %s already belongs to member %s (node %q)", nodeID, peerURL, hexID(m.ID), m.NodeID)
		case m.NodeID == nodeID:
			return JoinParams{}, 0, fmt.Errorf("add learner %s: the node is already member %s at %s: remove that member first", nodeID, hexID(m.ID), m.PeerURL)
		}
	}
	var resp *clientv3.MemberAddResponse
	err = retryReconfig(ctx, func() (err error) {
		resp, err = cli.MemberAddAsLearner(ctx, []string{peerURL})
		return err
	})
	if err != nil {
		return JoinParams{}, 0, fmt.Errorf("add learner %s at %s: %w", nodeID, peerURL, err)
	}
	id := resp.Member.ID
	return joinParams(membersFromPB(resp.Members), id, nodeID, resp.Header.GetClusterId()), id, nil
}

// joinParams lists every member for the new learner newID, which is named
// nodeID there since it has no name yet.
func joinParams(members []Member, newID uint64, nodeID string, clusterID uint64) JoinParams {
	p := JoinParams{ClusterID: clusterID, MemberID: newID}
	for _, m := range members {
		name := m.NodeID
		if m.ID == newID {
			name = nodeID
		}
		p.Peers = append(p.Peers, Peer{NodeID: name, PeerURL: m.PeerURL})
	}
	return p
}

// PromoteLearner makes learner memberID a voter. etcd refuses while the
// learner lags behind the leader, so it retries with backoff until the
// learner has caught up or ctx ends. A member that already votes counts as
// promoted.
func PromoteLearner(ctx context.Context, cli *clientv3.Client, memberID uint64) error {
	err := retryReconfig(ctx, func() error {
		_, err := cli.MemberPromote(ctx, memberID)
		if errors.Is(err, rpctypes.ErrMemberNotLearner) {
			return nil
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("promote learner %s: %w", hexID(memberID), err)
	}
	return nil
}

// RemoveMember removes member memberID. A member that is already gone
// counts as removed.
func RemoveMember(ctx context.Context, cli *clientv3.Client, memberID uint64) error {
	err := retryReconfig(ctx, func() error {
		_, err := cli.MemberRemove(ctx, memberID)
		if errors.Is(err, rpctypes.ErrMemberNotFound) {
			return nil
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("remove etcd member %s: %w", hexID(memberID), err)
	}
	return nil
}

// retryReconfig calls change until it succeeds, fails for good, or ctx
// ends, backing off from 100ms to 2s. Two refusals of etcd's are only a
// matter of time, and are retried:
//
//   - ErrMemberLearnerNotReady: a learner is promoted only once it has
//     nearly caught up with the leader.
//   - ErrUnhealthy: the member that got the request has not been connected
//     to a quorum of voters for 5 seconds (etcd's strict reconfiguration
//     check), as happens for a while after a member starts or joins.
//
// If ctx ends first, the error says what etcd last answered.
func retryReconfig(ctx context.Context, change func() error) error {
	for n := 0; ; n++ {
		err := change()
		if err == nil || !(errors.Is(err, rpctypes.ErrMemberLearnerNotReady) || errors.Is(err, rpctypes.ErrUnhealthy)) {
			return err
		}
		if serr := supervisor.Sleep(ctx, reconfigBackoff.Wait(n)); serr != nil {
			return fmt.Errorf("%w (gave up: %w)", err, serr)
		}
	}
}

// reconfigBackoff is retryReconfig's wait between refusals.
var reconfigBackoff = backoff.Policy{Initial: 100 * time.Millisecond, Factor: 2, Max: 2 * time.Second}

// statusTimeout bounds each endpoint's Status call in Leader, so that one
// dead member does not use up the caller's whole deadline.
const statusTimeout = 2 * time.Second

// Leader returns the member ID of the etcd leader, asking the client's
// endpoints and then every member's client URL until one knows.
func Leader(ctx context.Context, cli *clientv3.Client) (uint64, error) {
	endpoints := slices.Clone(cli.Endpoints())
	if members, err := Members(ctx, cli); err == nil {
		for _, m := range members {
			if m.ClientURL != "" && !slices.Contains(endpoints, m.ClientURL) {
				endpoints = append(endpoints, m.ClientURL)
			}
		}
	}
	var errs []error
	for _, ep := range endpoints {
		if ctx.Err() != nil {
			break
		}
		sctx, cancel := context.WithTimeout(ctx, statusTimeout)
		st, err := cli.Status(sctx, ep)
		cancel()
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", ep, err))
			continue
		}
		if st.Leader != 0 {
			return st.Leader, nil
		}
	}
	return 0, fmt.Errorf("no etcd member knows a leader: %w", errors.Join(append(errs, ctx.Err())...))
}

// MoveLeader hands etcd leadership to member to, a voter. etcd only accepts
// the request from the current leader, so it finds the leader (Leader) and
// sends it there over a connection to the leader's client URL; if leadership
// changes in between, it tries again. It returns once the transfer is done
// (etcd waits for it), or at once if to already leads.
func MoveLeader(ctx context.Context, cli *clientv3.Client, to uint64) error {
	for {
		err := moveLeaderOnce(ctx, cli, to)
		if !errors.Is(err, rpctypes.ErrNotLeader) {
			return err
		}
		if err := supervisor.Sleep(ctx, 100*time.Millisecond); err != nil {
			return fmt.Errorf("move etcd leadership to %s: %w", hexID(to), err)
		}
	}
}

func moveLeaderOnce(ctx context.Context, cli *clientv3.Client, to uint64) error {
	leader, err := Leader(ctx, cli)
	if err != nil {
		return fmt.Errorf("move etcd leadership to %s: %w", hexID(to), err)
	}
	if leader == to {
		return nil
	}
	members, err := Members(ctx, cli)
	if err != nil {
		return fmt.Errorf("move etcd leadership to %s: %w", hexID(to), err)
	}
	i := slices.IndexFunc(members, func(m Member) bool { return m.ID == leader })
	if i < 0 || members[i].ClientURL == "" {
		// The leader changed (or was removed) since we asked: try again.
		return rpctypes.ErrNotLeader
	}
	conn, err := cli.Dial(members[i].ClientURL)
	if err != nil {
		return fmt.Errorf("move etcd leadership to %s: dial leader %s: %w", hexID(to), hexID(leader), err)
	}
	defer conn.Close()
	_, err = pb.NewMaintenanceClient(conn).MoveLeader(ctx, &pb.MoveLeaderRequest{TargetID: to})
	if err != nil {
		err = rpctypes.Error(err)
		if errors.Is(err, rpctypes.ErrNotLeader) {
			return err
		}
		return fmt.Errorf("move etcd leadership from %s to %s: %w", hexID(leader), hexID(to), err)
	}
	return nil
}
