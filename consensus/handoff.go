package consensus

import (
	"context"
	"net"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
)

// Handing etcd leadership over on a stop. etcd's own stop, on the leader,
// hands leadership to the peer it has been connected to longest and waits
// up to its request timeout (seven seconds here) for that to happen. A peer
// that stopped a moment before can still count as connected; the stop then
// takes eight seconds, and a stopping manager that also led etcd kept its
// operator waiting that long. So the leader first hands leadership to a
// voter that answers, within a bounded time, and when there is none it
// stops without handing over (the others, if any run, elect a leader after
// one election timeout, as they would have to anyway).

const (
	// handOffProbeTimeout bounds the check that a voter answers.
	handOffProbeTimeout = 300 * time.Millisecond
	// handOffTimeout bounds the transfers, all together.
	handOffTimeout = 1500 * time.Millisecond
)

// handOff runs before a ready etcd is closed; see above.
func (s *Service) handOff(r *run) {
	srv := r.etcd.Server
	select {
	case <-srv.StopNotify():
		return // stopped already (removed, or failed)
	default:
	}
	self := srv.MemberID()
	if srv.Leader() != self {
		return
	}
	var voters, answering []uint64
	for _, m := range srv.Cluster().Members() {
		if m.ID == self || m.IsLearner {
			continue
		}
		voters = append(voters, uint64(m.ID))
		if len(m.PeerURLs) > 0 && answers(m.PeerURLs[0]) {
			answering = append(answering, uint64(m.ID))
		}
	}
	if len(voters) == 0 {
		return // the only voter: nobody to hand over to, and etcd knows it
	}
	ctx, cancel := context.WithTimeout(context.Background(), handOffTimeout)
	defer cancel()
	for _, to := range answering {
		err := srv.MoveLeader(ctx, uint64(self), to)
		if err == nil {
			s.lg.Info("handed etcd leadership over before stopping", zap.String("to", hexID(to)))
			return
		}
		s.lg.Warn("could not hand etcd leadership over before stopping", zap.String("to", hexID(to)), zap.Error(err))
	}
	s.lg.Warn("no voter answers to take etcd leadership: stopping without handing it over")
	srv.HardStop()
}

// answers says whether something accepts connections at an etcd peer URL.
func answers(peerURL string) bool {
	u, err := url.Parse(peerURL)
	if err != nil {
		return false
	}
	conn, err := net.DialTimeout("tcp", u.Host, handOffProbeTimeout)
	if err != nil {
		return false
	}
	conn.Close()
	return true
}

// StartingVoter is a voting member of the cluster as this member's etcd
// sees it while it starts (StartingVoters).
type StartingVoter struct {
	// NodeID is the member's name: its node's ID.
	NodeID  string
	PeerURL string
	// Self: this member. Answers: something accepts connections at its
	// peer URL (this member always does).
	Self, Answers bool
}

// setStarting notes etcd while Run waits for it to be ready (nil after).
func (s *Service) setStarting(e *embed.Etcd) {
	s.mu.Lock()
	s.starting = e
	s.mu.Unlock()
}

// StartingVoters says, while Run waits for etcd to join its cluster, which
// voters of the membership etcd recovered from its data dir accept
// connections at their peer URLs: a member cannot get ready without a
// majority of them, so when too few answer, it waits for them (or for
// --force-new-cluster) and says so nowhere else. ok is false when etcd is
// not starting.
func (s *Service) StartingVoters() (voters []StartingVoter, ok bool) {
	s.mu.Lock()
	e := s.starting
	s.mu.Unlock()
	if e == nil {
		return nil, false
	}
	self := e.Server.MemberID()
	var wg sync.WaitGroup
	var mu sync.Mutex
	for _, m := range e.Server.Cluster().Members() {
		if m.IsLearner {
			continue
		}
		v := StartingVoter{NodeID: m.Name, Self: m.ID == self}
		if len(m.PeerURLs) > 0 {
			v.PeerURL = m.PeerURLs[0]
		}
		wg.Go(func() {
			v.Answers = v.Self || v.PeerURL != "" && answers(v.PeerURL)
			mu.Lock()
			voters = append(voters, v)
			mu.Unlock()
		})
	}
	wg.Wait()
	slices.SortFunc(voters, func(a, b StartingVoter) int { return strings.Compare(a.NodeID, b.NodeID) })
	return voters, true
}
