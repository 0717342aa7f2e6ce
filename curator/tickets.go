package curator

import (
	"context"
	"time"

	"go.uber.org/zap"

	"github.com/curatorproject/curator/curator/store"
	"github.com/curatorproject/curator/pki"
	"github.com/curatorproject/curator/supervisor"
)

// Every manager encrypts its TLS session tickets with keys derived from the
// cluster CA's key (pki.SessionTickets), which every manager reads from
// etcd and no worker can: a node whose manager dies resumes its session
// with another (transport.SharedSessions) instead of a full handshake, and
// so does a follower that dials the new leader. Until the key is read, a
// manager's tickets are its own.

// ticketRefresh is how often the keys are derived again (a new one each
// UTC day).
const ticketRefresh = time.Hour

// runTickets reads the CA's key, derives the session ticket keys from it,
// and derives them again every ticketRefresh.
func (s *Service) runTickets(ctx context.Context) error {
	supervisor.Signal(ctx, supervisor.Healthy)
	var secret []byte
	for tries := 0; secret == nil; tries++ {
		rctx, cancel := context.WithTimeout(ctx, leaderLookupTimeout)
		cp, err := store.PKILoad(rctx, s.cfg.Etcd)
		cancel()
		if err == nil {
			secret, err = pki.EncodeKey(cp.CA.Key)
		}
		if err != nil {
			if tries == 0 {
				supervisor.Logger(ctx).Info("session tickets are this manager's own until the CA's key can be read (trying every 2 s)", zap.Error(err))
			}
			if err := supervisor.Sleep(ctx, 2*time.Second); err != nil {
				return err
			}
			continue
		}
	}
	for {
		if err := s.tickets.SetSecret(secret, s.cfg.Now()); err != nil {
			return err
		}
		if err := supervisor.Sleep(ctx, ticketRefresh); err != nil {
			return err
		}
	}
}
