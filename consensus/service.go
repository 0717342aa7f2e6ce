package consensus

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/transport"
	"go.etcd.io/etcd/client/pkg/v3/types"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.etcd.io/etcd/server/v3/storage/wal"
	"go.uber.org/zap"
	"google.golang.org/grpc"
)

// Service runs one node's etcd. Create it with New, run it with Run (as a
// supervised runnable), watch it with Status and Watch.
type Service struct {
	cfg    Config
	lg     *zap.Logger
	status *statusValue

	mu      sync.Mutex
	running bool // Run is running
	cur     *run // set while Run runs and etcd is ready
	removed bool // the last Run ended with ErrRemoved
	left    bool // Leave removed this member; Run must not start again

	// starting is etcd while Run waits for it to join its cluster.
	starting *embed.Etcd

	// certPEM is the etcd certificate RotateCert last installed (nil:
	// the configured one); clientCert is what this package's own etcd
	// clients present at their next handshake. Both under tlsMu.
	tlsMu      sync.Mutex
	certPEM    []byte
	clientCert atomic.Pointer[tls.Certificate]
}

// run is one Run's etcd, from ready until it is closed.
type run struct {
	etcd     *embed.Etcd
	client   *clientv3.Client
	memberID uint64

	// leaving is set by Leave before it removes this member, so that the
	// server stopping itself afterwards is not taken for ErrRemoved.
	leaving   atomic.Bool
	leaveOnce sync.Once
	leaveReq  chan struct{} // closed by Leave once the member is removed
	done      chan struct{} // closed when etcd is closed
}

// New checks cfg and returns a Service that is not running yet.
func New(cfg Config) (*Service, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	return &Service{
		cfg:    cfg,
		lg:     cfg.Logger.With(zap.String("node", cfg.NodeID)),
		status: newStatusValue(),
	}, nil
}

// Status returns the current status.
func (s *Service) Status() Status {
	st, _, _ := s.status.get()
	return st
}

// Watch returns a watcher of the status.
func (s *Service) Watch() *StatusWatcher {
	return &StatusWatcher{v: s.status}
}

// Client returns a client of this node's own etcd member, or nil while etcd
// is not running or not ready. It is closed when Run returns: a caller that
// outlives a run (the curator beside it, restarted with it) asks again. On a
// learner it can only call Status and serializable reads.
func (s *Service) Client() *clientv3.Client {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cur == nil {
		return nil
	}
	return s.cur.client
}

// Run starts etcd, waits until it is ready, and keeps it running until ctx
// ends (it then closes etcd and returns ctx.Err()), Leave stops it (nil), or
// etcd fails (an error; ErrRemoved if this member was removed from the
// cluster). It may be called again after it has returned, and then restarts
// etcd from its data dir.
func (s *Service) Run(ctx context.Context) (err error) {
	s.mu.Lock()
	switch {
	case s.left:
		s.mu.Unlock()
		return fmt.Errorf("run etcd: %w: create a new service to join again", ErrLeft)
	case s.running:
		s.mu.Unlock()
		return errors.New("run etcd: already running")
	}
	s.running = true
	s.mu.Unlock()
	s.status.set(Status{State: Starting})
	defer func() {
		s.mu.Lock()
		s.running = false
		s.removed = errors.Is(err, ErrRemoved)
		s.mu.Unlock()
		s.status.set(Status{State: Stopped})
	}()

	e, sig, err := s.start(ctx)
	if err != nil {
		return err
	}
	r := &run{etcd: e, memberID: uint64(e.Server.MemberID()), leaveReq: make(chan struct{}), done: make(chan struct{})}
	defer s.stop(r)

	s.setStarting(e)
	err = s.waitReady(ctx, r, sig)
	s.setStarting(nil)
	if err != nil {
		return err
	}
	_, ca, err := s.loadTLS()
	if err != nil {
		return err
	}
	if r.client, err = newClient([]string{ClientURL(s.cfg.ListenIP, s.cfg.Port)}, s.clientCert.Load, ca, s.lg); err != nil {
		return fmt.Errorf("run etcd: own client: %w", err)
	}
	s.mu.Lock()
	s.cur = r
	s.mu.Unlock()
	s.publish(r)
	s.lg.Info("etcd is ready", zap.Stringer("state", s.Status().State),
		zap.String("member", hexID(r.memberID)), zap.String("cluster", hexID(s.Status().ClusterID)))
	if s.cfg.Ready != nil {
		s.cfg.Ready(ctx)
	}
	return s.serve(ctx, r, sig)
}

// start checks the ports, prepares the TLS files and starts etcd in the
// mode the data dir and the configuration call for.
func (s *Service) start(ctx context.Context) (*embed.Etcd, *etcdSignals, error) {
	c := s.tlsCfg()
	restart := memberExists(c.DataDir)
	if !restart && c.ForceNewCluster {
		return nil, nil, fmt.Errorf("start etcd: data dir %s holds no etcd member, so there is nothing to force a new cluster from: --force-new-cluster is for a surviving manager's own data dir", c.DataDir)
	}
	if restart && c.ForceNewCluster {
		if err := checkVoterData(c.DataDir, c.NodeID); err != nil {
			return nil, nil, fmt.Errorf("start etcd: %w", err)
		}
	}
	if !restart && c.Mode == ModeRestart {
		return nil, nil, fmt.Errorf("start etcd: data dir %s holds no etcd member to restart: this node must join the cluster again", c.DataDir)
	}
	if err := checkPorts(c.ListenIP, c.Port); err != nil {
		return nil, nil, fmt.Errorf("start etcd: %w", err)
	}
	files, err := c.prepareTLS()
	if err != nil {
		return nil, nil, fmt.Errorf("start etcd: %w", err)
	}

	if c.CRLFile != "" {
		if _, err := os.Stat(c.CRLFile); err != nil {
			return nil, nil, fmt.Errorf("start etcd: revocation list: %w", err)
		}
	}
	peerURL, _ := url.Parse(PeerURL(c.ListenIP, c.Port))
	clientURL, _ := url.Parse(ClientURL(c.ListenIP, c.Port))
	ec := embed.NewConfig()
	ec.Name = c.NodeID
	ec.Dir = c.DataDir
	ec.ListenPeerUrls = []url.URL{*peerURL}
	ec.AdvertisePeerUrls = []url.URL{*peerURL}
	ec.ListenClientUrls = []url.URL{*clientURL}
	ec.AdvertiseClientUrls = []url.URL{*clientURL}
	// Mutual TLS on both ports, trusting only the etcd CA. Peers are not
	// also checked by their source address (SkipClientSANVerify): members
	// that share a host's loopback dial from 127.0.0.1 whatever address
	// they listen on, and the etcd CA is what makes a peer a peer.
	tlsInfo := transport.TLSInfo{CertFile: files.cert, KeyFile: files.key, TrustedCAFile: files.ca, ClientCertAuth: true, CRLFile: c.CRLFile}
	ec.ClientTLSInfo = tlsInfo
	ec.PeerTLSInfo = tlsInfo
	ec.PeerTLSInfo.SkipClientSANVerify = true
	ec.TlsMinVersion = "TLS1.3"
	// Managers that join at once are learners at once: etcd's default of
	// one learner would make every join but the first wait.
	ec.MaxLearners = MaxLearners
	// etcd's strict reconfiguration check refuses every member add while
	// any voter is unreachable, even a learner's (it counts the newcomer
	// as a voter that is down), and any change for 5 s after a member
	// joins. That forbids the one thing that repairs a cluster with a dead
	// manager: adding a new one. The curator guards membership changes
	// itself, from node health: a learner can always be added, and a
	// promotion or removal must leave a healthy majority of voters (see
	// checkRemoval and the learner loop).
	ec.StrictReconfigCheck = false
	// The curator speaks gRPC only.
	ec.EnableGRPCGateway = false
	// Innermost, around etcd's own handlers: see survivesRemoval.
	guard := &stoppingServer{}
	ec.GRPCAdditionalServerOptions = []grpc.ServerOption{grpc.ChainUnaryInterceptor(survivesRemoval(guard))}
	// Keep an hour of history: enough for watchers to resume after a
	// restart, bounded so that the database does not grow forever.
	ec.AutoCompactionMode = embed.CompactorModePeriodic
	ec.AutoCompactionRetention = "1h"
	if c.TickMs != 0 {
		ec.TickMs, ec.ElectionMs = c.TickMs, c.ElectionMs
	}
	ec.InitialCluster = c.NodeID + "=" + peerURL.String()
	mode := "restart"
	switch {
	case restart && c.ForceNewCluster:
		mode = "force-new-cluster"
		ec.ForceNewCluster = true
	case restart:
		// etcd takes the membership from the data dir.
	case c.Mode == ModeBootstrap:
		mode = "bootstrap"
		ec.ClusterState = embed.ClusterStateFlagNew
		// The token is where the cluster ID comes from. A random one keeps two clusters
		// founded at the same address apart.
		ec.InitialClusterToken = "curator-" + randomHex(8)
	case c.Mode == ModeJoin:
		mode = "join"
		ec.ClusterState = embed.ClusterStateFlagExisting
		j := s.currentJoin()
		ec.InitialCluster = j.initialCluster()
		cert, ca, err := c.loadTLS()
		if err != nil {
			return nil, nil, fmt.Errorf("start etcd: %w", err)
		}
		wctx, cancel := context.WithTimeout(ctx, c.ReadyTimeout)
		err = waitPeersList(wctx, j, c.NodeID, peerURL.String(), cert, ca, s.lg)
		cancel()
		if err != nil {
			return nil, nil, err
		}
	}
	sig := &etcdSignals{}
	ec.ZapLoggerBuilder = embed.NewZapLoggerBuilder(etcdLogger(s.lg, c.EtcdLogLevel, sig))

	s.lg.Info("starting etcd", zap.String("mode", mode), zap.String("data-dir", c.DataDir),
		zap.String("peer-url", peerURL.String()), zap.String("client-url", clientURL.String()))
	e, err := embed.StartEtcd(ec)
	if err != nil {
		if isAddrInUse(err) {
			return nil, nil, fmt.Errorf("start etcd: %w: %s or %s is taken: stop the other process or pick another --listen",
				ErrPortInUse, peerURL.Host, clientURL.Host)
		}
		return nil, nil, fmt.Errorf("start etcd (%s): %w", mode, err)
	}
	guard.server.Store(e.Server)
	if err := s.checkIdentity(e); err != nil {
		e.Close()
		return nil, nil, fmt.Errorf("start etcd: %w", err)
	}
	return e, sig, nil
}

// checkIdentity refuses a data dir that holds another node's member or a
// member of another cluster than the one being joined.
func (s *Service) checkIdentity(e *embed.Etcd) error {
	c := s.cfg
	id := e.Server.MemberID()
	if m := e.Server.Cluster().Member(id); m != nil && m.Name != "" && m.Name != c.NodeID {
		return fmt.Errorf("%w: data dir %s holds etcd member %s of node %q, not of this node %q: point --data-dir at this node's own data, or wipe it and join again",
			ErrOtherCluster, c.DataDir, id, m.Name, c.NodeID)
	}
	if c.Mode != ModeJoin {
		return nil
	}
	if cid := uint64(e.Server.Cluster().ID()); c.Join.ClusterID != 0 && cid != c.Join.ClusterID {
		return fmt.Errorf("%w: data dir %s belongs to etcd cluster %s, but this node is joining cluster %s: wipe it (curator agent leave --force) and join again",
			ErrOtherCluster, c.DataDir, hexID(cid), hexID(c.Join.ClusterID))
	}
	if c.Join.MemberID != 0 && uint64(id) != c.Join.MemberID {
		// The node was added again under a new member ID (the peer URL is
		// unique, so the old member is gone) but kept its old data.
		return s.removedError(uint64(id))
	}
	return nil
}

// waitReady waits until etcd has joined the cluster and published itself.
func (s *Service) waitReady(ctx context.Context, r *run, sig *etcdSignals) error {
	timer := time.NewTimer(s.cfg.ReadyTimeout)
	defer timer.Stop()
	select {
	case <-r.etcd.Server.ReadyNotify():
		return nil
	case <-r.etcd.Server.StopNotify():
		return s.failure(r, sig, "etcd stopped while starting: see its log above")
	case err := <-r.etcd.Err():
		return s.failure(r, sig, fmt.Sprintf("etcd failed while starting: %v", err))
	case <-timer.C:
		if sig.otherCluster.Load() {
			return fmt.Errorf("%w: etcd was not ready within %v and its peers answer for another cluster: this data dir (%s) is stale; wipe it (curator agent leave --force) and join again",
				ErrOtherCluster, s.cfg.ReadyTimeout, s.cfg.DataDir)
		}
		return fmt.Errorf("etcd was not ready within %v: is a majority of the cluster's members running and reachable at their peer URLs?", s.cfg.ReadyTimeout)
	case <-ctx.Done():
		return ctx.Err()
	}
}

// serve keeps etcd running and the status fresh until something ends it.
func (s *Service) serve(ctx context.Context, r *run, sig *etcdSignals) error {
	ticker := time.NewTicker(s.cfg.StatusInterval)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-r.leaveReq:
			return nil
		case err := <-r.etcd.Err():
			return s.failure(r, sig, fmt.Sprintf("etcd failed: %v", err))
		case <-r.etcd.Server.StopNotify():
			return s.failure(r, sig, "etcd server stopped unexpectedly: see its log above")
		case <-ticker.C:
			s.publish(r)
		}
	}
}

// failure explains why etcd stopped on its own. The reason etcd gives its
// caller (a closed listener, "server is stopping") is often a consequence;
// the cause is in what it logged.
func (s *Service) failure(r *run, sig *etcdSignals, msg string) error {
	switch {
	case r.leaving.Load():
		// Leave removed this member; stopping is what it wants.
		return nil
	case sig.removed.Load():
		return s.removedError(r.memberID)
	}
	return errors.New(msg)
}

// publish refreshes the status from the local server's view of the
// membership: no RPC, so it is cheap enough to poll, and it works on a
// learner.
func (s *Service) publish(r *run) {
	m := r.etcd.Server.Cluster().Member(types.ID(r.memberID))
	if m == nil {
		// This member has just been removed (etcd's IsLearner would panic).
		// The server stops itself in a moment and serve reports it.
		return
	}
	st := Status{State: Voter, MemberID: r.memberID, ClusterID: uint64(r.etcd.Server.Cluster().ID())}
	if m.IsLearner {
		st.State = Learner
	}
	if prev := s.Status(); prev.State == Learner && st.State == Voter {
		s.lg.Info("etcd member promoted to voter", zap.String("member", hexID(r.memberID)))
	}
	s.status.set(st)
}

// stop closes the run's client and etcd.
func (s *Service) stop(r *run) {
	s.mu.Lock()
	if s.cur == r {
		s.cur = nil
	}
	s.mu.Unlock()
	if r.client != nil {
		r.client.Close()
	}
	select {
	case <-r.etcd.Server.ReadyNotify():
		s.handOff(r)
	default:
		// embed's Close waits for its client servers, which wait until the
		// server is ready or stopping: a server that never got ready must
		// be stopped first (as embed's own example does on a timeout).
		r.etcd.Server.HardStop()
	}
	r.etcd.Close()
	close(r.done)
	s.lg.Info("etcd stopped")
}

func (s *Service) removedError(memberID uint64) error {
	return &RemovedError{MemberID: memberID, msg: fmt.Sprintf("%v: etcd member %s is no longer in the cluster, so its data in %s can never serve again; the rest of the cluster is unaffected. Run `curator agent leave --force` (or wipe the data dir) and join again",
		ErrRemoved, hexID(memberID), s.cfg.DataDir)}
}

// memberExists reports whether dir holds an etcd member, the way etcd
// decides it: a write-ahead log in dir/member/wal.
func memberExists(dir string) bool {
	return wal.Exist(filepath.Join(dir, "member", "wal"))
}

// checkPorts fails with ErrPortInUse if etcd's peer or client port is taken.
// etcd would fail too, but with a message that names neither the port's
// purpose nor the fix.
func checkPorts(ip string, port int) error {
	for _, p := range []struct {
		what string
		url  string
	}{{"etcd peer", PeerURL(ip, port)}, {"etcd client", ClientURL(ip, port)}} {
		addr := strings.TrimPrefix(p.url, "https://")
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			if isAddrInUse(err) {
				return fmt.Errorf("%w: %s (%s port) is in use: stop the other process or pick another --listen", ErrPortInUse, addr, p.what)
			}
			return fmt.Errorf("cannot listen at %s (%s port): %w", addr, p.what, err)
		}
		ln.Close()
	}
	return nil
}

func isAddrInUse(err error) bool {
	return errors.Is(err, syscall.EADDRINUSE) || strings.Contains(err.Error(), "address already in use")
}

// hexID renders an etcd member or cluster ID the way etcd logs it.
func hexID(id uint64) string { return fmt.Sprintf("%x", id) }

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // never fails
	return hex.EncodeToString(b)
}

// currentJoin returns the join parameters with the cluster's membership as
// it is now. etcd checks a joining member's initial cluster against the
// cluster's (the same peer URLs, the same count), and the parameters the
// curator handed over are a snapshot from when the learner was added:
// managers that joined since are missing from it. So ask the cluster,
// through the voters' client URLs (peer port + 1), with this node's etcd
// certificate. Members that have not started have no name yet; etcd does
// not compare names, but they must be unique, so they get a placeholder.
// If no voter answers, the handed-over parameters are used as they are.
func (s *Service) currentJoin() JoinParams {
	c := s.cfg
	var endpoints []string
	for _, p := range c.Join.Peers {
		if p.NodeID == "" || p.NodeID == c.NodeID {
			continue
		}
		if ep, ok := clientURLFromPeer(p.PeerURL); ok {
			endpoints = append(endpoints, ep)
		}
	}
	if len(endpoints) == 0 {
		return *c.Join
	}
	_, ca, err := s.loadTLS()
	if err != nil {
		return *c.Join
	}
	cli, err := newClient(endpoints, s.clientCert.Load, ca, s.lg)
	if err != nil {
		return *c.Join
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	members, clusterID, err := memberList(ctx, cli)
	if err != nil {
		s.lg.Warn("could not read the cluster's members: joining with the handed-over list", zap.Error(err))
		return *c.Join
	}
	p := JoinParams{ClusterID: clusterID, MemberID: c.Join.MemberID}
	for _, m := range members {
		name := m.NodeID
		switch {
		case m.ID == c.Join.MemberID:
			name = c.NodeID
		case name == "":
			name = "unstarted-" + hexID(m.ID)
		}
		p.Peers = append(p.Peers, Peer{NodeID: name, PeerURL: m.PeerURL})
	}
	return p
}

// clientURLFromPeer derives a member's client URL from its peer URL, by the
// port convention (peer PORT+1, client PORT+2).
func clientURLFromPeer(peerURL string) (string, bool) {
	u, err := url.Parse(peerURL)
	if err != nil {
		return "", false
	}
	port, err := strconv.Atoi(u.Port())
	if err != nil {
		return "", false
	}
	return ClientURL(u.Hostname(), port-peerPortOffset), true
}
