// Package curator is the control plane. Every consensus member runs one
// curator; they elect a leader through etcd. The leader serves the node
// API (nodeAPI, api_node.go) and the management API (managementAPI,
// api_management*.go), and runs the loops (curator/internal/leader:
// the list is in loop.go, each loop in loop_<name>.go); followers forward
// every call to it. The APIs and the loops act through the one
// leader.State of the leadership, and every write the leader makes is
// fenced on its election key (store.Fence). Membership decisions read one
// snapshot (decide.Membership). How the parts fit and why they are safe is in
// docs/architecture.md.
package curator

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	"go.uber.org/zap"
	"google.golang.org/grpc/health"

	"github.com/curatorproject/curator/curator/internal/leader"
	"github.com/curatorproject/curator/curator/spec"
	"github.com/curatorproject/curator/curator/store"
	"github.com/curatorproject/curator/pki"
	pb "github.com/curatorproject/curator/proto"
	"github.com/curatorproject/curator/supervisor"
)

// Service is one curator.
type Service struct {
	cfg Config

	// listen makes the gRPC server's listener (net.Listen; tests wrap it
	// to restart the server inside a live curator).
	listen func(network, address string) (net.Listener, error)
	// shedAfter is how long a TLS handshake waits for a slot before it is
	// shed (handshakeWait; tests shorten it).
	shedAfter time.Duration
	// leader is set while this curator leads.
	leader  atomic.Pointer[leader.State]
	fwd     forwarder
	metrics *Metrics
	// health is the gRPC health service (see servingStatus).
	health *health.Server
	// quorum is what the last quorum check found (runQuorumCheck).
	quorum quorumCache
	// sessions admits the nodes' session set-ups (admission.go).
	sessions *sessionGate
	// knocks is when a node was last turned away (admission.go).
	knocks *leader.Knocks
	// stopping is set once Run's ctx ended: forwarded session streams
	// end with the connection to the leader, not forwarded again.
	stopping atomic.Bool
	// nodes reads node records while this curator does not lead.
	nodes *nodeLookup
	// refusals are the audit entries of refused calls, waiting to be
	// written (runRefusalLog).
	refusals chan *pb.AuditEntry
	// clusterReads shares the reads of the cluster record of the
	// Registers that ask at once (a join wave).
	clusterReads *store.ClusterReads
	// tickets are the keys of the server's TLS session tickets, the
	// managers' own (tickets.go).
	tickets *pki.SessionTickets
	// digests are the heartbeats of the sessions this follower holds,
	// reported to the leader (liveness.go).
	digests livenessDigests
	// calls are the management calls in progress, ended when their
	// certificate is revoked (revocation.go) by revocationWatch
	// (runRevocationWatch; tests replace it).
	calls           *openCalls
	revocationWatch supervisor.Runnable
	// joinRefusals limits the events of refused joins
	// (join_refusals.go).
	joinRefusals *refusalLimiter
	// logRelays are the NodeLogs calls in flight on this curator while
	// it leads, by request ID (api_node_logs.go).
	logRelays logRelays
	// crashEvery is the crash watch's period (0: crashProbeEvery; tests
	// lengthen it), and crashProbes counts its looks at the leader.
	crashEvery  time.Duration
	crashProbes atomic.Int64
	// livenessTrace, set by a test, is told each answer to a heartbeat
	// and each digest taken (liveness.go): the history the digests'
	// promise is checked on.
	livenessTrace atomic.Pointer[func(livenessEvent)]
}

// New checks cfg and returns a curator; Run runs it.
func New(cfg Config) (*Service, error) {
	cfg = cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("curator config: %w", err)
	}
	m := cfg.Metrics
	if m == nil {
		m = NewMetrics(nil)
	}
	m.CAExpiry.Set(float64(cfg.CA.NotAfter.Unix()))
	if cfg.Certs == nil {
		cfg.Certs = pki.NewCertSource(pki.TLSCertificate(cfg.NodeCert, cfg.NodeKey, cfg.CA))
	}
	nodes := newNodeLookup(func(ctx context.Context, id string) (*pb.Node, error) { return store.NodeLoad(ctx, cfg.Etcd, id) }, cfg.Now)
	s := &Service{cfg: cfg, metrics: m, health: health.NewServer(), listen: net.Listen, shedAfter: handshakeWait, sessions: newSessionGate(cfg.SessionRate, cfg.SessionBurst), knocks: &leader.Knocks{}, nodes: nodes,
		refusals: make(chan *pb.AuditEntry, refusalQueue), tickets: pki.NewSessionTickets(), calls: newOpenCalls(), joinRefusals: newRefusalLimiter(),
		clusterReads: store.NewClusterReads(cfg.Etcd)}
	s.revocationWatch = s.runRevocationWatch
	return s, nil
}

// IsLeader says whether this curator leads and serves right now (not while
// it is in doubt about its lease).
func (s *Service) IsLeader() bool {
	st := s.currentLeader()
	return st != nil && st.Guard.Held()
}

func (s *Service) currentLeader() *leader.State { return s.leader.Load() }

// Run is the curator's runnable: the gRPC server and the election. Once ctx
// ends it returns when they have, within stopTimeout: the agent stops etcd
// when Run returns, and a leader must still reach etcd to resign (revoke
// its election lease) on its way out; without the wait the lease outlived
// the stop and the next leader waited out its TTL.
func (s *Service) Run(ctx context.Context) error {
	var running supervisor.Running
	if err := supervisor.RunGroup(ctx, map[string]supervisor.Runnable{
		"grpc":     running.Wrap(s.runGRPC),
		"election": running.Wrap(s.runElection),
		"quorum":   s.runQuorumCheck,
		"crashes":  s.runCrashWatch,
		"audit":    s.runRefusalLog,
		"tickets":  s.runTickets,
		"liveness": s.runLiveness,
		"revoked":  s.revocationWatch,
	}); err != nil {
		return err
	}
	if err := supervisor.Run(ctx, "follow-election", s.runFollowElection); err != nil {
		return err
	}
	supervisor.Signal(ctx, supervisor.Healthy)
	<-ctx.Done()
	s.stopping.Store(true)
	// Forwarded streams end with the connection to the leader, so the
	// gRPC server need not wait for them; close it again after the wait,
	// in case a call dialled the leader meanwhile.
	s.fwd.close()
	running.Wait(stopTimeout)
	s.fwd.close()
	return ctx.Err()
}

// stopTimeout bounds how long Run waits for its runnables once stopped:
// the gRPC server gives calls a second, the lease revocation has one.
const stopTimeout = 2 * time.Second

// runElection campaigns, and while it leads runs the leader's runnables.
// Losing the election lease ends the runnable with an error: the supervisor
// cancels the leader's subtree and campaigns again after a backoff.
func (s *Service) runElection(ctx context.Context) error {
	lg := supervisor.Logger(ctx)
	ttl := int(s.cfg.ElectionTTL / time.Second)
	sess, err := concurrency.NewSession(s.cfg.Etcd, concurrency.WithTTL(ttl), concurrency.WithContext(ctx))
	if err != nil {
		return fmt.Errorf("election session: %w", err)
	}
	// On a clean stop resign at once, rather than leave the others to wait
	// out the lease: revoke it with a context of its own, as ours is done.
	defer func() {
		defer sess.Orphan()
		if s.cfg.Etcd.Ctx().Err() != nil {
			return // etcd is gone with its client: the lease expires there
		}
		rctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if _, err := s.cfg.Etcd.Revoke(rctx, sess.Lease()); err != nil {
			lg.Warn("could not revoke the election lease", zap.Error(err))
		}
	}()
	e := store.NewElection(sess)
	supervisor.Signal(ctx, supervisor.Healthy)
	// A node that is being demoted must not lead: it would only resign
	// again. Wait until its demotion is finished (its agent then stops this
	// curator) or called off.
	if err := s.waitNotDemoting(ctx); err != nil {
		return err
	}
	if err := e.Campaign(ctx, leaderValue(s.cfg.NodeID, s.cfg.Address)); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("campaign: %w", err)
	}

	lctx, cancel := context.WithCancel(ctx)
	defer cancel()
	reg := store.NewRegistry(s.cfg.Etcd)
	l := &leader.Leadership{Fence: store.NewFence(s.cfg.Etcd, s.cfg.NodeID, e.Key(), e.Rev(), reg)}
	cp, err := store.PKILoad(ctx, s.cfg.Etcd)
	if err != nil {
		return fmt.Errorf("leader: %w", err)
	}
	// The lease guard: a leader that cannot renew its lease stops acting
	// and answering before etcd can give the lease up, so there is no
	// moment with two leaders answering, and serves again if a renewal
	// succeeds in time (see leaseGuard).
	guard := leader.NewLeaseGuard(s.cfg.Etcd, sess.Lease(), s.cfg.ElectionTTL, s.cfg.Now, lg)
	st := leader.New(lctx, s.cfg.leader(), l, reg, cp, guard, s.knocks)
	defer st.Close()
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	wg.Go(func() { guard.Run(lctx) })
	// Leadership ends when our key goes, whoever deletes it (the lease
	// expiring, an operator): watch it, rather than wait for the session to
	// notice, so the loops stop at once. Only the key's deletion ends it:
	// an etcd election, or our member losing its leader for a moment, is
	// not a reason to give up (the lease guard covers a member that stays
	// cut off).
	keyGone := make(chan struct{})
	wg.Go(func() { defer close(keyGone); s.watchOwnKey(lctx, l) })
	regErr := make(chan error, 1)
	wg.Go(func() { regErr <- reg.Run(lctx) })
	wg.Go(func() { st.Pushes.Run(lctx, reg) })
	select {
	case <-reg.Ready():
	case err := <-regErr:
		return fmt.Errorf("leader: %w", err)
	case <-guard.Lost():
		return fmt.Errorf("lost leadership before serving: %v", guard.Why())
	case <-keyGone:
		return errors.New("lost leadership before serving: the election key is gone")
	case <-ctx.Done():
		return ctx.Err()
	}
	s.leader.Store(st)
	defer s.leader.Store(nil)
	s.metrics.LeaderChanges.Inc()
	s.metrics.IsLeader.Set(1)
	defer s.metrics.IsLeader.Set(0)
	defer s.metrics.LeaderGone()
	lg.Info("became leader", zap.String("key", l.Key()), zap.Int64("revision", l.Rev()))
	if err := supervisor.Run(ctx, "leader", func(ctx context.Context) error { return st.Run(ctx, s.metrics) }); err != nil {
		return err
	}
	select {
	case <-ctx.Done():
		s.leader.Store(nil)
		lg.Info("stepping down")
		return ctx.Err()
	case <-guard.Lost():
		// Not the session's own keepalive giving up: it counts the TTL
		// from its last answer, and gives up while etcd elects a leader,
		// when no lease can expire. The guard renews the lease too, and
		// only etcd saying it is gone ends the leadership.
		s.leader.Store(nil)
		return fmt.Errorf("lost leadership: %v", guard.Why())
	case <-st.Resigned:
		s.leader.Store(nil)
		lg.Info("resigned to hand over the demotion of this node")
		return leader.ErrResigned
	case <-keyGone:
		s.leader.Store(nil)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return errors.New("lost leadership: the election key is gone")
	case err := <-regErr:
		s.leader.Store(nil)
		return fmt.Errorf("lost leadership: the registry view failed: %w", err)
	}
}

// waitNotDemoting blocks while this curator's own node is being demoted.
func (s *Service) waitNotDemoting(ctx context.Context) error {
	for {
		n, rev, err := store.NodeLoadRev(ctx, s.cfg.Etcd, s.cfg.NodeID)
		if err != nil {
			return fmt.Errorf("read own node: %w", err)
		}
		if n == nil || !n.Demoting {
			return nil
		}
		supervisor.Logger(ctx).Info("this node is being demoted: not campaigning")
		wctx, cancel := context.WithCancel(ctx)
		wch := store.NodeWatch(wctx, s.cfg.Etcd, s.cfg.NodeID, rev+1)
		select {
		case <-ctx.Done():
		case <-wch:
		}
		cancel()
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
}

// newRefusal notes a loop's refusal and says whether it differs from the

// watchOwnKey returns when the election key l.Key() is deleted (or ctx
// ends). A watch that fails is opened again from where it stopped.
func (s *Service) watchOwnKey(ctx context.Context, l *leader.Leadership) {
	rev := l.Rev()
	for ctx.Err() == nil {
		wctx, cancel := context.WithCancel(ctx)
		wch := s.cfg.Etcd.Watch(wctx, l.Key(), clientv3.WithRev(rev))
		for wr := range wch {
			if wr.Err() != nil {
				// Compacted past rev, or the watch failed: read the key
				// itself before watching again.
				resp, err := s.cfg.Etcd.Get(wctx, l.Key())
				if err == nil {
					if len(resp.Kvs) == 0 || resp.Kvs[0].CreateRevision != l.Rev() {
						cancel()
						return
					}
					rev = resp.Header.Revision + 1
				}
				break
			}
			for _, ev := range wr.Events {
				if ev.Type == clientv3.EventTypeDelete {
					cancel()
					return
				}
				rev = ev.Kv.ModRevision + 1
			}
			if wr.Header.Revision >= rev {
				rev = wr.Header.Revision + 1
			}
		}
		cancel()
		select {
		case <-ctx.Done():
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// leaderFor returns the leadership a handler acts under, or ErrNotLeader
// (ErrQuorum when a leader in doubt about its lease finds the quorum lost).
func (s *Service) leaderFor() (*leader.State, error) {
	st := s.currentLeader()
	if st != nil && st.Guard.Held() {
		return st, nil
	}
	if st != nil {
		if err := s.quorumLost(); err != nil {
			return nil, err
		}
	}
	return nil, spec.ErrNotLeader
}
