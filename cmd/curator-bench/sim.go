package main

// Simulated nodes. Each is the agent's own code, in this process: it
// makes a key and joins through node.Register (what `curator agent join`
// does: the real Register RPC with the worker token, the CA checked
// against the token's fingerprint, the node ID against the key, the
// retries of unavailable managers and of a held address), then runs a
// node.Session, the agent's session: a Heartbeat stream over TLS with its
// own certificate, whose answers carry the node's record and the managers,
// through one manager at a time, with the agent's late-answer deadline and
// its reconnection (spread, and paced by the managers' admission). The
// bench only watches, through the session's hooks: when each heartbeat
// went and came back, and who answered.
//
// What it keeps per node is what an agent keeps for its session: a TLS
// connection to the manager in use (a node certificate is per node, so a
// connection cannot be shared), the session's goroutines, and a small ring
// of send times.

import (
	"context"
	"crypto"
	"crypto/x509"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/status"

	"github.com/curatorproject/curator/client"
	"github.com/curatorproject/curator/curator/spec"
	"github.com/curatorproject/curator/node"
	"github.com/curatorproject/curator/pki"
	pb "github.com/curatorproject/curator/proto"
)

const (
	// simVersion is the version simulated nodes report.
	simVersion = "curator-bench"
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
	roots    *x509.CertPool
	managers []string
	simBase  netip.Addr

	mu    sync.Mutex
	nodes []*simNode // joined, in the order they joined
	byID  map[string]*simNode
	// leaders interns leader IDs, so a node's pointer to its leader costs
	// no string.
	leaders map[string]*string
	errs    map[string]int
	// errsSeen are the keys of errs already printed.
	errsSeen map[string]struct{}

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
		byID: map[string]*simNode{}, leaders: map[string]*string{}, errs: map[string]int{}, errsSeen: map[string]struct{}{},
	}
	f.roots.AddCert(ccfg)
	for _, m := range c.managers {
		f.managers = append(f.managers, m.listen.String())
	}
	return f, nil
}

func loadClusterCA(cfgPath string) (*x509.Certificate, error) {
	cfg, err := client.LoadConfig(cfgPath)
	if err != nil {
		return nil, err
	}
	return cfg.ClusterCA(cfgPath)
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
	// JoinManagersCPUPct is each manager's CPU over the join wave (in
	// percent of a core, in the managers' order), JoinSimCPUPct the
	// bench's, JoinHostBusyPct the whole host's (of all its cores): what
	// bounds the rate.
	JoinManagersCPUPct []float64 `json:"join_managers_cpu_pct,omitempty"`
	JoinSimCPUPct      float64   `json:"join_sim_cpu_pct,omitempty"`
	JoinHostBusyPct    float64   `json:"join_host_busy_pct,omitempty"`
	// JoinManagersCPUMsPerJoin is the CPU time of all the managers over
	// the join wave (each whole process: curator, etcd, agent), divided
	// by the nodes that joined: what a join costs the managers, the
	// sessions of the nodes that joined before it included.
	// JoinSimCPUMsPerJoin is the bench's own. JoinGoalRatio is the
	// managers' figure over the goal (joinCPUGoal): at most 1 meets it.
	JoinManagersCPUMsPerJoin float64 `json:"join_managers_cpu_ms_per_join,omitempty"`
	JoinSimCPUMsPerJoin      float64 `json:"join_sim_cpu_ms_per_join,omitempty"`
	JoinGoalRatio            float64 `json:"join_cpu_goal_ratio,omitempty"`
	// JoinEtcdWrites are etcd's write transactions over the wave (its
	// revision's growth): the joins' records, the ready marks, events.
	JoinEtcdWrites int64 `json:"join_etcd_writes,omitempty"`
	// JoinHandshakesPerJoin is the connections the managers took up over
	// the wave, each a TLS handshake, per join: the Register's, the first
	// session's unless it ran on the Register's connection (--join-conn),
	// a session's move off the leader, and any retried.
	JoinHandshakesPerJoin float64 `json:"join_handshakes_per_join,omitempty"`
}

// joinCPUGoal is what a join may cost the managers' CPU, in all.
const joinCPUGoal = 2500 * time.Microsecond

// joinProfileWindow is how long each manager's CPU profile runs from the
// start of the join wave (heartbeats --pprof --profile DIR): a profile
// cannot be cut short, and 20 s is the first 2,000 to 6,000 joins.
const joinProfileWindow = 20 * time.Second

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

// joinOne does what `curator agent join` does for simulated node i (with
// the agent's own code, node.Register), then starts its session.
func (f *fleet) joinOne(ctx context.Context, i int) (*simNode, error) {
	key, err := pki.NewKey()
	if err != nil {
		return nil, err
	}
	pubDER, err := x509.MarshalPKIXPublicKey(key.Public())
	if err != nil {
		return nil, err
	}
	// Each node asks the managers from its own, so joins spread over
	// them as `agent join --manager` of different machines would.
	mgrs := append(slices.Clone(f.managers[i%len(f.managers):]), f.managers[:i%len(f.managers)]...)
	reg, err := node.Register(ctx, f.tok, mgrs, &pb.RegisterRequest{
		Token: f.token, PublicKey: pubDER, Name: simName(i), Address: simAddress(f.simBase, i),
		Availability: pb.Availability_AVAILABILITY_ACTIVE, Version: simVersion,
	}, f.joinKey(key))
	if err != nil {
		return nil, err
	}
	return f.newNode(reg, key)
}

// joinKey is the key a node's Register proves on its connection, to
// keep it for its first session (nil: none, with --join-conn=false).
func (f *fleet) joinKey(key crypto.Signer) crypto.Signer {
	if !f.cfg.joinConn {
		return nil
	}
	return key
}

func simName(i int) string { return "sim-" + strconv.Itoa(i+1) }

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
//
// The key is the stream, the code and, when the status has one, the
// curator's reason ("session: Unavailable SESSIONS_PACED"); the first
// message of each key goes to stderr, once.
func (f *fleet) streamError(stream string, err error) {
	st := status.Convert(err)
	key := streamErrorKey(stream, err)
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, seen := f.errsSeen[key]; !seen {
		f.errsSeen[key] = struct{}{}
		f.progress.printf("first %q: %s", key, spec.QuoteShort(st.Message()))
	}
	f.errs[key]++
}

// streamErrorKey is what an error of stream is counted under: its code and
// the curator's reason, or, for an error without one (a connection's), the
// kind of failure its message names, so that a failover's errors say
// whether the nodes met a dead manager, a busy one or a slow handshake.
func streamErrorKey(stream string, err error) string {
	if errors.Is(err, node.ErrSessionMoved) {
		return stream + ": moved off the leader"
	}
	st := status.Convert(err)
	key := stream + ": " + st.Code().String()
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok && info.Reason != "" {
			return key + " " + info.Reason
		}
	}
	msg := strings.ToLower(st.Message())
	for _, k := range connectionFailures {
		if strings.Contains(msg, k.says) {
			return key + " (" + k.kind + ")"
		}
	}
	return key
}

// connectionFailures are the kinds of connection failure streamErrorKey
// names, by what the message says; first match wins.
var connectionFailures = []struct{ says, kind string }{
	{"connection refused", "refused"},
	{"connection reset", "reset"},
	{"handshake", "tls handshake"},
	{"i/o timeout", "connect timeout"},
	{"server preface", "no server preface"},
	{"waiting for connections to become ready", "no connection ready"},
	{"deadline exceeded", "deadline"},
	{"eof", "eof"},
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
}

// simNode is one simulated node.
type simNode struct {
	f       *fleet
	id      string
	session *node.Session
	ctx     context.Context
	cancel  context.CancelFunc
	wg      sync.WaitGroup

	// managers is the manager list as last sent (node.Session asks).
	managers atomic.Pointer[[]string]
	// sentSeq and sentAt: the send time (Unix ns) of heartbeat seq, at
	// seq % sentRing.
	sentSeq [sentRing]atomic.Uint64
	sentAt  [sentRing]atomic.Int64

	leader      atomic.Pointer[string]
	newLeaderAt atomic.Int64 // Unix ns; see failoverMark
}

// newNode starts the session of a node that joined.
func (f *fleet) newNode(reg *node.Registration, key crypto.Signer) (*simNode, error) {
	ctx, cancel := context.WithCancel(context.Background())
	n := &simNode{f: f, id: reg.NodeID, ctx: ctx, cancel: cancel}
	mgrs := reg.Managers
	n.managers.Store(&mgrs)
	sess, err := node.NewSession(node.SessionConfig{
		First:    reg.Conn,
		TLS:      pki.ClientTLS(pki.TLSCertificate(reg.Cert, key), reg.CA),
		Version:  simVersion,
		Interval: f.interval,
		Managers: func() []string { return *n.managers.Load() },
		OnWatch: func(_ context.Context, resp *pb.WatchNodeResponse) {
			f.watchMsgs.Add(1)
			if len(resp.Managers) > 0 && !slices.Equal(resp.Managers, *n.managers.Load()) {
				m := slices.Clone(resp.Managers)
				n.managers.Store(&m)
			}
		},
		OnEnd:    func(_ context.Context, _ string, err error) { f.streamError("session", err) },
		OnSent:   n.sent,
		OnAnswer: n.answer,
		// No read buffer: a node's messages are tiny, and 32 KiB per
		// connection would be a third of a node's memory. The write
		// buffer stays: gRPC takes it from a pool only while writing, and
		// without it every HTTP/2 frame would be a TLS record and a
		// syscall of its own.
		DialOptions: []grpc.DialOption{grpc.WithReadBufferSize(0)},
	})
	if err != nil {
		cancel()
		return nil, err
	}
	n.session = sess
	n.wg.Go(func() {
		defer sess.Close()
		_ = sess.Run(ctx)
	})
	return n, nil
}

// stop ends the node as a crash would, at once: its streams and its
// connection close. Wait for n.wg afterwards.
func (n *simNode) stop() {
	n.cancel()
}

// sent notes when heartbeat seq went.
func (n *simNode) sent(seq uint64, at time.Time) {
	slot := seq % sentRing
	n.sentSeq[slot].Store(seq)
	n.sentAt[slot].Store(at.UnixNano())
	n.f.sent.Add(1)
}

// answer notes an answer from the leader: its round trip, who sent it, and
// whether it is the first from a new leader after a kill (the answer to a
// stream's opening counts: the new leader has the node's stream).
func (n *simNode) answer(resp *pb.HeartbeatResponse, now time.Time) {
	if p := n.leader.Load(); p == nil || *p != resp.Leader {
		n.leader.Store(n.f.intern(resp.Leader))
	}
	f := n.f
	if fm := f.failover.Load(); fm != nil && resp.Leader != "" && resp.Leader != fm.old &&
		n.newLeaderAt.CompareAndSwap(0, now.UnixNano()) {
		if fm.pending.Add(-1) == 0 {
			close(fm.done)
		}
	}
	if resp.Seq == 0 {
		return // the answer to the stream's opening
	}
	f.answered.Add(1)
	slot := resp.Seq % sentRing
	if n.sentSeq[slot].Load() == resp.Seq {
		if h := f.rtt.Load(); h != nil {
			h.record(now.Sub(time.Unix(0, n.sentAt[slot].Load())))
		}
	} else {
		f.late.Add(1)
	}
}
