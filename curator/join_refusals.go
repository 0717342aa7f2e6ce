package curator

import (
	"context"
	"fmt"
	"net"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/curatorproject/curator/curator/internal/leader"
	"github.com/curatorproject/curator/curator/spec"
	"github.com/curatorproject/curator/curator/store"
)

// A refused join is a trace an investigator looks for: someone holds a
// token of another cluster, an old one, or is guessing. Every Register
// that a token refuses reaches the leader (a follower forwards Register
// like any call, with the caller's address) and is refused there, so the
// leader records it: a count in curator_joins_refused_total{reason}, and,
// at most once a minute for each address and reason, a log line and an
// event `joins` / `join-refused` that says from where, why, and how many
// more were refused since the last. So a storm of bad joins costs an
// event a minute per address, never the event list. The token itself
// never appears: not its secret, and not the text a caller sent.
//
// A refused join is not an audit entry: the audit trail is what operators'
// certificates asked of the management API; a join carries no operator.

// joinRefusal is why a join was refused: a label of the metric, and the
// key of the rate limit with the address.
type joinRefusal string

const (
	// refusedMalformed: the token does not parse.
	refusedMalformed joinRefusal = "malformed-token"
	// refusedOtherCluster: the token names another CA (another
	// cluster's token).
	refusedOtherCluster joinRefusal = "other-cluster"
	// refusedSecret: the secret is neither join token's (a wrong or
	// rotated token).
	refusedSecret joinRefusal = "wrong-secret"
	// refusedRemoved: the key is a node removed from the cluster.
	refusedRemoved joinRefusal = "removed-node"
	// refusedRelease: the node's release may not run beside the
	// managers' (spec.CheckReleaseSkew).
	refusedRelease joinRefusal = "release-skew"
)

// what says a refusal in words, for the event and the log.
func (r joinRefusal) what() string {
	switch r {
	case refusedMalformed:
		return "the join token is malformed"
	case refusedOtherCluster:
		return "the join token is another cluster's (it names another CA)"
	case refusedSecret:
		return "the join token's secret is neither of this cluster's (a wrong or rotated token)"
	case refusedRemoved:
		return "the node was removed from this cluster"
	case refusedRelease:
		return "the node's release may not run beside the managers'"
	}
	return string(r)
}

// Defaults of the refusal limiter.
const (
	// refusalEvery is how often an address and a reason make an event.
	refusalEvery = time.Minute
	// maxRefusalKeys bounds the addresses and reasons remembered; past
	// it (after forgetting those older than refusalEvery) the refusals
	// share one key, "other addresses".
	maxRefusalKeys = 1024
)

// refusalKey is what the limiter counts by.
type refusalKey struct {
	host   string
	reason joinRefusal
}

// refusalSlot is when a key last made an event, and how many refusals it
// has had since.
type refusalSlot struct {
	at         time.Time
	suppressed int
}

// refusalLimiter allows an event per key every refusalEvery. It holds at
// most maxRefusalKeys keys, and the shared one of otherHosts.
type refusalLimiter struct {
	mu    sync.Mutex
	every time.Duration
	max   int
	slots map[refusalKey]*refusalSlot
}

func newRefusalLimiter() *refusalLimiter {
	return &refusalLimiter{every: refusalEvery, max: maxRefusalKeys, slots: map[refusalKey]*refusalSlot{}}
}

// otherHosts stands for every address once the limiter is full.
const otherHosts = "other addresses"

// allow says whether a refusal of k at now makes an event, and if so how
// many refusals of k were not events since the last one (k's host may be
// otherHosts, when the limiter was full).
func (l *refusalLimiter) allow(k refusalKey, now time.Time) (ok bool, suppressed int, key refusalKey) {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.slots[k]
	if s == nil && len(l.slots) >= l.max {
		for old, os := range l.slots {
			if now.Sub(os.at) >= l.every {
				delete(l.slots, old)
			}
		}
		if len(l.slots) >= l.max {
			k.host = otherHosts
			s = l.slots[k]
		}
	}
	if s != nil && now.Sub(s.at) < l.every {
		s.suppressed++
		return false, 0, k
	}
	if s != nil {
		suppressed = s.suppressed
	}
	l.slots[k] = &refusalSlot{at: now}
	return true, suppressed, k
}

// peerHost is the host of a peer address (host:port), or the address as
// it is.
func peerHost(addr string) string {
	if host, _, err := net.SplitHostPort(addr); err == nil {
		return host
	}
	return addr
}

// refuseJoin records a join refused for reason, from the caller of ctx,
// and returns err, the refusal the caller is told.
func (s *Service) refuseJoin(ctx context.Context, st *leader.State, reason joinRefusal, name string, err error) error {
	s.metrics.JoinsRefused.WithLabelValues(string(reason)).Inc()
	peer := identityFrom(ctx).peer
	ok, suppressed, key := s.joinRefusals.allow(refusalKey{host: peerHost(peer), reason: reason}, s.cfg.Now())
	if !ok {
		return err
	}
	text := fmt.Sprintf("a join from %s was refused: %s", peer, reason.what())
	if key.host == otherHosts {
		text = fmt.Sprintf("a join from %s (counted with other addresses: too many refused at once) was refused: %s", peer, reason.what())
	}
	if name != "" {
		text += fmt.Sprintf("; it asked for the name %s", spec.QuoteShort(name))
	}
	if suppressed > 0 {
		text += fmt.Sprintf("; %d more refused so since the last such event", suppressed)
	}
	s.logger(ctx).Warn("refused a join", zap.String("peer", peer), zap.String("reason", string(reason)),
		zap.String("name", spec.QuoteShort(name)), zap.Int("suppressed", suppressed))
	// The refusal is answered after the event is written, within a
	// bound: a caller that hangs up at once does not lose it.
	ectx, cancel := context.WithTimeout(context.WithoutCancel(ctx), joinEventTimeout)
	defer cancel()
	if werr := store.EventRecord(ectx, st.Lead.Fence, st.Events.Event("joins", "join-refused", "", text)); werr != nil {
		s.logger(ctx).Warn("could not record a refused join", zap.Error(werr))
	}
	return err
}

// joinEventTimeout bounds the write of a refused join's event.
const joinEventTimeout = 5 * time.Second
