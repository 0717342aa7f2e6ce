package consensus

import (
	"context"
	"fmt"
	"os"

	"go.uber.org/zap"
)

// Leave takes this node out of the etcd cluster for good: it removes its own
// member (through the other voters, first handing etcd leadership to one of
// them if it holds it), stops Run (which then returns nil), and deletes the
// data dir, so that the machine can join again from scratch. Afterwards Run
// returns ErrLeft.
//
// Leave needs the member to be running and ready, since that is when it
// knows its member ID and its peers. If this member was removed already
// (the last Run returned ErrRemoved) or the data dir holds no member, there
// is nothing to remove and Leave only wipes. Otherwise, when it cannot remove
// the member (not running, no quorum, the last voter) it returns an error
// and changes nothing: wiping the data of a member that is still in the
// cluster would leave a dead voter behind and shrink the quorum's margin.
func (s *Service) Leave(ctx context.Context) error {
	s.mu.Lock()
	r, running, removed := s.cur, s.running, s.removed
	s.mu.Unlock()
	if r == nil {
		if running {
			return fmt.Errorf("leave: %w: it is still starting; retry once it is ready", ErrNotRunning)
		}
		if removed || !memberExists(s.cfg.DataDir) {
			s.mu.Lock()
			s.left = true
			s.mu.Unlock()
			return s.wipe()
		}
		return fmt.Errorf("leave: %w, so it cannot remove itself from the cluster: start it first, or wipe %s by hand (curator agent leave --force) and remove the member from the cluster", ErrNotRunning, s.cfg.DataDir)
	}

	r.leaving.Store(true)
	if err := s.removeSelf(ctx, r); err != nil {
		r.leaving.Store(false)
		return fmt.Errorf("leave: %w", err)
	}
	s.mu.Lock()
	s.left = true
	s.mu.Unlock()
	r.leaveOnce.Do(func() { close(r.leaveReq) })
	select {
	case <-r.done:
	case <-ctx.Done():
		return fmt.Errorf("leave: removed from the cluster, but etcd did not stop: %w", ctx.Err())
	}
	return s.wipe()
}

// removeSelf removes this member through a client of the other voters: a
// learner serves no membership calls, and this member is about to go.
func (s *Service) removeSelf(ctx context.Context, r *run) error {
	var others []uint64
	var urls []string
	for _, m := range r.etcd.Server.Cluster().Members() {
		if uint64(m.ID) == r.memberID || m.IsLearner || len(m.ClientURLs) == 0 {
			continue
		}
		others = append(others, uint64(m.ID))
		urls = append(urls, m.ClientURLs...)
	}
	if len(others) == 0 {
		return fmt.Errorf("%w: removing it would destroy the cluster; promote another node first", ErrLastMember)
	}
	_, ca, err := s.loadTLS()
	if err != nil {
		return err
	}
	cli, err := newClient(urls, s.clientCert.Load, ca, s.lg)
	if err != nil {
		return err
	}
	defer cli.Close()
	if uint64(r.etcd.Server.Leader()) == r.memberID {
		// Removing the leader works too, but costs the cluster an election
		// timeout without a leader; a transfer costs almost nothing.
		if err := MoveLeader(ctx, cli, others[0]); err != nil {
			s.lg.Warn("could not hand etcd leadership away before leaving", zap.Error(err))
		}
	}
	if err := RemoveMember(ctx, cli, r.memberID); err != nil {
		return err
	}
	s.lg.Info("removed own etcd member", zap.String("member", hexID(r.memberID)))
	return nil
}

func (s *Service) wipe() error {
	if err := os.RemoveAll(s.cfg.DataDir); err != nil {
		return fmt.Errorf("leave: wipe data dir: %w", err)
	}
	s.lg.Info("wiped etcd data dir", zap.String("data-dir", s.cfg.DataDir))
	return nil
}
