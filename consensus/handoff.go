package consensus

import (
	"context"
	"net"
	"net/url"
	"time"

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
