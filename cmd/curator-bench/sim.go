package main

// Simulated nodes. Each does what `curator agent join` and a running agent
// do on the wire, and nothing else: it makes a key, registers through the
// real Register RPC with the worker token (its node ID is derived from its
// key by the cluster, and it checks that), checks the CA it is handed
// against the token's fingerprint, and then keeps a Heartbeat stream and a
// WatchNode stream open with its own node certificate, through one manager,
// reconnecting as the agent does when they break.
//
// What it keeps per node is small: one TLS connection (a node certificate
// is per node, so a connection cannot be shared), two goroutines blocked in
// Recv, and a timer that sends the heartbeats from a short-lived goroutine.
// Register calls share one connection per manager: a joining node has no
// certificate yet, so nothing in them is per node.

import (
	"context"
	"crypto"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/resolver"
	"google.golang.org/grpc/resolver/manual"
	"google.golang.org/grpc/status"

	"github.com/curatorproject/curator/client"
	"github.com/curatorproject/curator/pki"
	pb "github.com/curatorproject/curator/proto"
	"github.com/curatorproject/curator/supervisor"
	"github.com/curatorproject/curator/transport"
)

const (
	// simVersion is the version simulated nodes report.
	simVersion = "curator-bench"
	// registerAttemptTimeout bounds one Register call. Longer than the
	// agent's 5 s: a leader slowed down by a join wave must not be sent
	// the same registration again, which would measure the retries.
	registerAttemptTimeout = 30 * time.Second
	// Reconnect backoff of the streams, as the agent's.
	retryInitial   = 100 * time.Millisecond
	heartbeatRetry = time.Second
	watchRetry     = 2 * time.Second
	// sentRing is how many heartbeats in flight a node remembers the send
	// time of; an answer older than that is counted as late, not timed.
	sentRing = 4
)

// fleet is the simulated nodes.
type fleet struct {
	cfg      fleetConfig
	interval time.Duration
	progress *progress
	token    string
	tok      pki.Token
	// roots trusts the cluster CA, which the token pins; shared by every
	// node's TLS config.
	roots     *x509.CertPool
	managers  []string
	simBase   netip.Addr
	joinConns []*grpc.ClientConn

	mu    sync.Mutex
	nodes []*simNode // joined, in the order they joined
	byID  map[string]*simNode
	// leaders interns leader IDs, so a node's pointer to its leader costs
	// no string.
	leaders map[string]*string
	errs    map[string]int

	sent, answered, late, watchMsgs atomic.Uint64
	// rtt is non-nil while round trips are recorded.
	rtt      atomic.Pointer[latencyHist]
	failover atomic.Pointer[failoverMark]
}

// failoverMark is set when the leader is killed: every node notes the first
// heartbeat answered by another leader.
type failoverMark struct {
	old     string
	pending atomic.Int64
	done    chan struct{}
}

func newFleet(cfg fleetConfig, interval time.Duration, c *cluster, simBase netip.Addr, p *progress) (*fleet, error) {
	tok, err := pki.ParseToken(c.workerToken)
	if err != nil {
		return nil, fmt.Errorf("worker token: %w", err)
	}
	ccfg, err := loadClusterCA(c.cfgPath)
	if err != nil {
		return nil, err
	}
	// The bench is the operator here and holds the cluster's CA; the
	// token pins it, as it pins the CA a joining agent is shown.
	if err := tok.VerifyCA(ccfg); err != nil {
		return nil, fmt.Errorf("the admin credential's CA: %w", err)
	}
	f := &fleet{
		cfg: cfg, interval: interval, progress: p, token: c.workerToken, tok: tok,
		roots: x509.NewCertPool(), simBase: simBase,
		byID: map[string]*simNode{}, leaders: map[string]*string{}, errs: map[string]int{},
	}
	f.roots.AddCert(ccfg)
	for _, m := range c.managers {
		f.managers = append(f.managers, m.listen.String())
		// A joining node has no certificate: TLS that checks the server
		// only, as `agent join` does.
		conn, err := grpc.NewClient(m.listen.String(), grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{
			MinVersion: tls.VersionTLS13, RootCAs: f.roots,
		})))
		if err != nil {
			f.close()
			return nil, err
		}
		f.joinConns = append(f.joinConns, conn)
	}
	return f, nil
}

func loadClusterCA(cfgPath string) (*x509.Certificate, error) {
	cfg, err := client.LoadConfig(cfgPath)
	if err != nil {
		return nil, err
	}
	return pki.ReadCert(cfg.CA)
}

// joinFigures are the join wave's figures.
type joinFigures struct {
	Joined     int     `json:"joined"`
	JoinFailed int     `json:"join_failed,omitempty"`
	JoinS      float64 `json:"join_s"`
	JoinRate   float64 `json:"join_rate_per_s"`
	JoinP50Ms  float64 `json:"join_p50_ms"`
	JoinP99Ms  float64 `json:"join_p99_ms"`
	// Ready is how many simulated nodes were ready when the bench stopped
	// waiting; ReadyS the time from the first join to the last of them.
	Ready  int     `json:"ready"`
	ReadyS float64 `json:"ready_s,omitempty"`
	// SimKiBPerNode is the growth of the bench's Go heap and stacks over
	// the join wave (after a collection), per joined node.
	SimKiBPerNode float64 `json:"sim_kib_per_node,omitempty"`
	// SimGoroutines is the bench's goroutines after the join wave.
	SimGoroutines int `json:"sim_goroutines,omitempty"`
}

// join registers cfg.nodes nodes, cfg.joinConcurrency at a time, and starts
// each one's streams as soon as it has joined. It returns the first
// refusal or error, if any node failed.
func (f *fleet) join(ctx context.Context, fig *joinFigures) error {
	ctx, cancel := context.WithTimeout(ctx, f.cfg.joinTimeout)
	defer cancel()
	var (
		lat       samples
		mu        sync.Mutex
		firstErr  error
		failed    int
		lastJoin  time.Time
		wg        sync.WaitGroup
		next      atomic.Int64
		joinedCnt atomic.Int64
	)
	start := time.Now()
	done := make(chan struct{})
	var progressWG sync.WaitGroup
	defer progressWG.Wait()
	progressWG.Go(func() {
		t := time.NewTicker(5 * time.Second)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				j := joinedCnt.Load()
				f.progress.printf("joined %d of %d (%.1f/s)", j, f.cfg.nodes, float64(j)/time.Since(start).Seconds())
			}
		}
	})
	for range f.cfg.joinConcurrency {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= f.cfg.nodes {
					return
				}
				t := time.Now()
				n, err := f.joinOne(ctx, i)
				mu.Lock()
				if err != nil {
					failed++
					if firstErr == nil {
						firstErr = fmt.Errorf("node %d: %w", i, err)
					}
				} else {
					lastJoin = time.Now()
				}
				mu.Unlock()
				if err != nil {
					continue
				}
				lat.add(time.Since(t))
				joinedCnt.Add(1)
				f.add(n)
			}
		})
	}
	wg.Wait()
	close(done)
	fig.Joined = int(joinedCnt.Load())
	fig.JoinFailed = failed
	if fig.Joined > 0 {
		fig.JoinS = secs(lastJoin.Sub(start))
		fig.JoinRate = round3(float64(fig.Joined) / lastJoin.Sub(start).Seconds())
	}
	fig.JoinP50Ms, fig.JoinP99Ms = ms(lat.quantile(0.5)), ms(lat.quantile(0.99))
	f.progress.printf("%d of %d nodes joined in %.1fs (%.1f/s)", fig.Joined, f.cfg.nodes, fig.JoinS, fig.JoinRate)
	if failed > 0 {
		return fmt.Errorf("%d of %d nodes could not join; the first: %w", failed, f.cfg.nodes, firstErr)
	}
	return nil
}

// joinOne does what `curator agent join` does for simulated node i, then
// starts its streams.
func (f *fleet) joinOne(ctx context.Context, i int) (*simNode, error) {
	key, err := pki.NewKey()
	if err != nil {
		return nil, err
	}
	pubDER, err := x509.MarshalPKIXPublicKey(key.Public())
	if err != nil {
		return nil, err
	}
	id, err := pki.NodeID(key.Public())
	if err != nil {
		return nil, err
	}
	resp, err := f.register(ctx, i, &pb.RegisterRequest{
		Token: f.token, PublicKey: pubDER, Name: simName(i), Address: simAddress(f.simBase, i),
		Availability: pb.Availability_AVAILABILITY_ACTIVE, Version: simVersion,
	})
	if err != nil {
		return nil, err
	}
	if resp.NodeId != id {
		return nil, fmt.Errorf("the cluster names the node %s, its key makes it %s", resp.NodeId, id)
	}
	cert, err := pki.DecodeCert(resp.NodeCert)
	if err != nil {
		return nil, fmt.Errorf("certificate from the cluster: %w", err)
	}
	ca, err := pki.DecodeCert(resp.CaCert)
	if err != nil {
		return nil, fmt.Errorf("CA from the cluster: %w", err)
	}
	if err := f.tok.VerifyCA(ca); err != nil {
		return nil, err
	}
	managers := resp.Managers
	if len(managers) == 0 {
		managers = f.managers
	}
	return f.newNode(i, id, cert, key, managers)
}

func simName(i int) string { return "sim-" + strconv.Itoa(i+1) }

// register tries the managers in turn, from the node's own, until one
// answers; unavailable managers are retried until ctx ends, a refusal is
// final. As `agent join` does.
func (f *fleet) register(ctx context.Context, i int, req *pb.RegisterRequest) (*pb.RegisterResponse, error) {
	var lastErr error
	for attempt := 0; ; attempt++ {
		for k := range f.joinConns {
			conn := f.joinConns[(i+k)%len(f.joinConns)]
			actx, cancel := context.WithTimeout(ctx, registerAttemptTimeout)
			resp, err := pb.NewCuratorClient(conn).Register(actx, req)
			cancel()
			if err == nil {
				return resp, nil
			}
			switch status.Code(err) {
			case codes.Unavailable, codes.DeadlineExceeded, codes.Canceled:
				lastErr = err
				if ctx.Err() != nil {
					return nil, fmt.Errorf("no manager answered in time (last: %v)", lastErr)
				}
				continue
			}
			return nil, fmt.Errorf("join refused: %s", status.Convert(err).Message())
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("no manager answered in time (last: %v)", lastErr)
		case <-time.After(time.Duration(min(attempt+1, 5)) * 200 * time.Millisecond):
		}
	}
}

func (f *fleet) add(n *simNode) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.nodes = append(f.nodes, n)
	f.byID[n.id] = n
}

// alive returns the nodes that have not been stopped.
func (f *fleet) alive() []*simNode {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []*simNode
	for _, n := range f.nodes {
		if n.ctx.Err() == nil {
			out = append(out, n)
		}
	}
	return out
}

func (f *fleet) node(id string) *simNode {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.byID[id]
}

func (f *fleet) intern(leader string) *string {
	f.mu.Lock()
	defer f.mu.Unlock()
	p, ok := f.leaders[leader]
	if !ok {
		p = &leader
		f.leaders[leader] = p
	}
	return p
}

// streamError counts why streams ended, by stream and gRPC code.
func (f *fleet) streamError(stream string, err error) {
	key := stream + ": " + status.Code(err).String()
	f.mu.Lock()
	defer f.mu.Unlock()
	f.errs[key]++
}

// streamErrors returns the counts since the last call, and resets them.
func (f *fleet) streamErrors() map[string]int {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := f.errs
	f.errs = map[string]int{}
	if len(out) == 0 {
		return nil
	}
	return out
}

// startFailover arms the failover mark for a kill of leader old: from now
// on each alive node notes its first heartbeat answered by another leader.
func (f *fleet) startFailover(old string) (*failoverMark, []*simNode) {
	nodes := f.alive()
	fm := &failoverMark{old: old, done: make(chan struct{})}
	fm.pending.Store(int64(len(nodes)))
	for _, n := range nodes {
		n.newLeaderAt.Store(0)
	}
	if len(nodes) == 0 {
		close(fm.done)
	}
	f.failover.Store(fm)
	return fm, nodes
}

// close stops every node and waits for its goroutines.
func (f *fleet) close() {
	f.mu.Lock()
	nodes := f.nodes
	f.mu.Unlock()
	for _, n := range nodes {
		n.stop()
	}
	for _, n := range nodes {
		n.wg.Wait()
	}
	for _, c := range f.joinConns {
		_ = c.Close()
	}
}

// simNode is one simulated node.
type simNode struct {
	f      *fleet
	id     string
	conn   *grpc.ClientConn
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	timer  *time.Timer

	// mu serialises sends (a gRPC stream allows one sender at a time) and
	// guards stream and seq.
	mu     sync.Mutex
	stream grpc.BidiStreamingClient[pb.HeartbeatRequest, pb.HeartbeatResponse]
	seq    uint64
	// sentSeq and sentAt: the send time (Unix ns) of heartbeat seq, at
	// seq % sentRing.
	sentSeq [sentRing]atomic.Uint64
	sentAt  [sentRing]atomic.Int64

	leader      atomic.Pointer[string]
	newLeaderAt atomic.Int64 // Unix ns; see failoverMark
}

// newNode connects node i with its certificate to the managers (its own
// first, so nodes spread over them) and starts its streams.
func (f *fleet) newNode(i int, id string, cert *x509.Certificate, key crypto.Signer, managers []string) (*simNode, error) {
	var st resolver.State
	for k := range managers {
		m := managers[(i+k)%len(managers)]
		host, _, err := net.SplitHostPort(m)
		if err != nil {
			continue
		}
		// Certificates name managers by IP: check the one dialled.
		st.Addresses = append(st.Addresses, resolver.Address{Addr: m, ServerName: host})
	}
	if len(st.Addresses) == 0 {
		return nil, errors.New("no manager address")
	}
	r := manual.NewBuilderWithScheme("curator-bench")
	r.InitialState(st)
	tlsCfg := &tls.Config{
		MinVersion:   tls.VersionTLS13,
		Certificates: []tls.Certificate{pki.TLSCertificate(cert, key)},
		RootCAs:      f.roots,
		// As the agent's (pki.ClientTLS): a reconnect resumes the session.
		ClientSessionCache: tls.NewLRUClientSessionCache(4),
	}
	// pick_first: one connection per node, to its own manager while that
	// one is up, to the next when it is not. No read buffer: a node's
	// messages are tiny, and 32 KiB per connection would be a third of a
	// node's memory. The write buffer stays: gRPC takes it from a pool
	// only while writing, and without it every HTTP/2 frame would be a TLS
	// record and a syscall of its own.
	// The agent's keepalives and reconnect backoff.
	conn, err := grpc.NewClient(r.Scheme()+":///managers", append(transport.DialOptions(credentials.NewTLS(tlsCfg)),
		grpc.WithResolvers(r),
		grpc.WithReadBufferSize(0),
	)...)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	n := &simNode{f: f, id: id, conn: conn, ctx: ctx, cancel: cancel}
	n.timer = time.AfterFunc(f.interval, n.tick)
	n.wg.Add(2)
	go n.runHeartbeat()
	go n.runWatch()
	return n, nil
}

// stop ends the node as a crash would, at once: its connection closes
// with its streams. Wait for n.wg afterwards.
func (n *simNode) stop() {
	n.cancel()
	n.timer.Stop()
	_ = n.conn.Close()
}

// tick sends a heartbeat every interval, from the timer's goroutine.
func (n *simNode) tick() {
	if n.ctx.Err() != nil {
		return // stopped while the timer fired
	}
	n.send()
	if n.ctx.Err() == nil {
		n.timer.Reset(n.f.interval)
	}
}

// send sends the next heartbeat on the current stream, if there is one.
func (n *simNode) send() {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.stream == nil {
		return
	}
	n.seq++
	slot := n.seq % sentRing
	n.sentSeq[slot].Store(n.seq)
	n.sentAt[slot].Store(time.Now().UnixNano())
	if err := n.stream.Send(&pb.HeartbeatRequest{Version: simVersion, Seq: n.seq}); err == nil {
		n.f.sent.Add(1)
	}
}

// runHeartbeat keeps a heartbeat stream open, reconnecting as the agent
// does: at once, then backing off up to a second.
func (n *simNode) runHeartbeat() {
	defer n.wg.Done()
	cli := pb.NewCuratorClient(n.conn)
	backoff := retryInitial
	for {
		err := n.heartbeatOnce(cli, &backoff)
		if n.ctx.Err() != nil {
			return
		}
		n.f.streamError("heartbeat", err)
		if supervisor.Sleep(n.ctx, backoff) != nil {
			return
		}
		backoff = min(2*backoff, heartbeatRetry)
	}
}

func (n *simNode) heartbeatOnce(cli pb.CuratorClient, backoff *time.Duration) error {
	ctx, cancel := context.WithCancel(n.ctx)
	defer cancel()
	stream, err := cli.Heartbeat(ctx)
	if err != nil {
		return err
	}
	n.mu.Lock()
	n.stream = stream
	n.mu.Unlock()
	defer func() {
		cancel() // unblocks a send in progress
		n.mu.Lock()
		n.stream = nil
		n.mu.Unlock()
	}()
	n.send() // at once, as the agent does
	for {
		resp, err := stream.Recv()
		if err != nil {
			return err
		}
		*backoff = retryInitial
		n.answer(resp)
	}
}

// answer notes an answer from the leader: its round trip, who sent it, and
// whether it is the first from a new leader after a kill.
func (n *simNode) answer(resp *pb.HeartbeatResponse) {
	now := time.Now()
	if p := n.leader.Load(); p == nil || *p != resp.Leader {
		n.leader.Store(n.f.intern(resp.Leader))
	}
	if resp.Seq == 0 {
		return // the answer to the stream's opening
	}
	f := n.f
	f.answered.Add(1)
	slot := resp.Seq % sentRing
	if n.sentSeq[slot].Load() == resp.Seq {
		if h := f.rtt.Load(); h != nil {
			h.record(now.Sub(time.Unix(0, n.sentAt[slot].Load())))
		}
	} else {
		f.late.Add(1)
	}
	if fm := f.failover.Load(); fm != nil && resp.Leader != "" && resp.Leader != fm.old &&
		n.newLeaderAt.CompareAndSwap(0, now.UnixNano()) {
		if fm.pending.Add(-1) == 0 {
			close(fm.done)
		}
	}
}

// runWatch keeps a WatchNode stream open and counts what it is sent.
func (n *simNode) runWatch() {
	defer n.wg.Done()
	cli := pb.NewCuratorClient(n.conn)
	backoff := retryInitial
	for {
		stream, err := cli.WatchNode(n.ctx, &pb.WatchNodeRequest{})
		for err == nil {
			if _, err = stream.Recv(); err == nil {
				n.f.watchMsgs.Add(1)
				backoff = retryInitial
			}
		}
		if n.ctx.Err() != nil {
			return
		}
		n.f.streamError("watch", err)
		if supervisor.Sleep(n.ctx, backoff) != nil {
			return
		}
		backoff = min(2*backoff, watchRetry)
	}
}
