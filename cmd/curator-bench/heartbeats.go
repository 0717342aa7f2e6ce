package main

// `curator-bench heartbeats`: a fleet at rest, then optionally a leader
// kill and a mass failure.
//
// The order is: cluster up; N nodes join (join rate); wait until every one
// is ready; a settle of two intervals; the at-rest window of --duration
// (heartbeat round trips, CPU and RSS, etcd writes, watch messages); then
// --kill-leader; then --mass-failure.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"time"

	"github.com/spf13/cobra"

	pb "github.com/curatorproject/curator/proto"
	"github.com/curatorproject/curator/supervisor"
)

const (
	// failoverExtra is how long, beyond the election TTL and down-after,
	// the bench waits for every node to be answered by a new leader.
	failoverExtra = time.Minute
	// massFailureExtra is how long, beyond down-after, the bench waits for
	// the stopped nodes to be marked down.
	massFailureExtra = 30 * time.Second
	// massFailureBound is the goal: every stopped node down within
	// down-after plus this.
	massFailureBound = 2 * time.Second
	massFailurePoll  = 250 * time.Millisecond
	// eventsLimit is how many events the bench reads back; the cluster
	// keeps the last 1000.
	eventsLimit = 1000
)

type heartbeatsConfig struct {
	cluster     clusterConfig
	fleet       fleetConfig
	duration    time.Duration
	killLeader  bool
	massFailure int
	// profile is a dir for the bench's own CPU profile over the at-rest
	// window and its heap profile at the end of it ("": none).
	profile string
	// simGCPercent is the simulator's own GOGC: its garbage collection
	// over 10,000 agents' goroutines stands in for no machine's, and
	// takes from the managers' share of the host.
	simGCPercent int
}

func (c *heartbeatsConfig) Validate() error {
	if c.simGCPercent <= 0 {
		return fmt.Errorf("--sim-gc-percent %d: want more than 0 (100 is Go's default)", c.simGCPercent)
	}
	if err := c.fleet.Validate(); err != nil {
		return err
	}
	if c.duration <= 0 {
		return fmt.Errorf("--duration %s: want more than 0", c.duration)
	}
	if c.killLeader && c.cluster.managers < 3 {
		return fmt.Errorf("--kill-leader with --managers %d: a leader kill leaves no quorum; want 3 or more", c.cluster.managers)
	}
	if c.massFailure < 0 || c.massFailure > c.fleet.nodes {
		return fmt.Errorf("--mass-failure %d: want 0 to --nodes (%d)", c.massFailure, c.fleet.nodes)
	}
	return nil
}

func newHeartbeatsCommand() *cobra.Command {
	c := &heartbeatsConfig{}
	cmd := &cobra.Command{
		Use:   "heartbeats",
		Short: "A fleet at rest: join rate, heartbeat round trips, leader CPU and RSS, etcd writes; a leader kill; a mass failure",
		Long: `Start a cluster of --managers real curator processes, join --nodes simulated
nodes through the real Register RPC (--join-concurrency at a time), each keeping
a Heartbeat stream (one heartbeat per --interval, the answers carrying the
node's record and the managers as they change) over TLS with its own
certificate, through one of the managers. Once every node is
ready, measure for --duration: heartbeat round trips, the leader's CPU and RSS,
etcd writes per second, watch messages, the bench's own CPU.

--kill-leader: then kill -9 the curator leader's process; report the time
until every node's heartbeat is answered by a new leader, and how many nodes
were marked down meanwhile (goal: 0).

--mass-failure M: then stop M nodes at once (their connections close, as in
a crash); report the time until all are down, against --down-after.

The last line on stdout is one JSON object with the figures; it holds an
"error" field, and the exit status is 1, if the run fell short.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runHeartbeats(cmd.Context(), c, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	c.cluster.register(cmd)
	c.fleet.register(cmd)
	cmd.Flags().DurationVar(&c.duration, "duration", DefaultDuration, "the at-rest measuring window")
	cmd.Flags().BoolVar(&c.killLeader, "kill-leader", false, "after the window, kill -9 the curator leader and time the failover")
	cmd.Flags().IntVar(&c.massFailure, "mass-failure", 0, "after the window (and the kill), stop this many nodes at once and time their marking down")
	cmd.Flags().IntVar(&c.simGCPercent, "sim-gc-percent", 100, "the bench process's GOGC (the simulated nodes' garbage collection, which real nodes do on machines of their own; the managers keep theirs)")
	cmd.Flags().StringVar(&c.profile, "profile", "", "write the bench's own CPU profile over the at-rest window and heap profile at its end (sim-cpu.pprof, sim-heap.pprof), and over the first 30s after --kill-leader (sim-failover-cpu.pprof), into this dir; with --pprof also the leader's over the window (leader-cpu.pprof) and each manager's over the first 20s of the join wave (manager-N-join-cpu.pprof)")
	return cmd
}

// heartbeatsResult is the JSON line of `heartbeats`.
type heartbeatsResult struct {
	Cmd          string  `json:"cmd"`
	Nodes        int     `json:"nodes"`
	Managers     int     `json:"managers"`
	IntervalS    float64 `json:"interval_s"`
	DownAfterS   float64 `json:"down_after_s"`
	ElectionTTLS float64 `json:"election_ttl_s"`
	joinFigures
	// JoinOwnCPUMsPerJoin is join_managers_cpu_ms_per_join less the
	// sessions of the nodes joined before: the managers' CPU at rest
	// (the full fleet, measured after the wave) for half the wave, the
	// fleet having grown from none to all. What a slower wave (a busier
	// host) adds to the figure, taken out: an estimate.
	JoinOwnCPUMsPerJoin float64             `json:"join_own_cpu_ms_per_join,omitempty"`
	Rest                *restFigures        `json:"rest,omitempty"`
	KillLeader          *killLeaderFigures  `json:"kill_leader,omitempty"`
	MassFailure         *massFailureFigures `json:"mass_failure,omitempty"`
	// StreamErrors counts why simulated nodes' streams ended, over the
	// whole run ("heartbeat: Unavailable": 3).
	StreamErrors map[string]int `json:"stream_errors,omitempty"`
	Error        string         `json:"error,omitempty"`
}

// restFigures are measured over the at-rest window.
type restFigures struct {
	WindowS float64 `json:"window_s"`
	Leader  string  `json:"leader"`
	// LeaderChanged: another curator led at the end of the window.
	LeaderChanged bool    `json:"leader_changed,omitempty"`
	RTTP50Ms      float64 `json:"rtt_p50_ms"`
	RTTP99Ms      float64 `json:"rtt_p99_ms"`
	RTTMaxMs      float64 `json:"rtt_max_ms"`
	RTTSamples    uint64  `json:"rtt_samples"`
	// HeartbeatsPerS are the heartbeats answered per second; Unanswered
	// is sent minus answered over the window (in flight at its edges
	// included); Late are answers that came more than sentRing
	// heartbeats after their send.
	HeartbeatsPerS float64 `json:"heartbeats_per_s"`
	Unanswered     int64   `json:"unanswered"`
	Late           uint64  `json:"late,omitempty"`
	// EtcdWritesPerS is etcd's revision growth per second: every write
	// transaction counts one, reads, watches and lease keep-alives none.
	EtcdWritesPerS float64 `json:"etcd_writes_per_s"`
	EtcdRevisions  int64   `json:"etcd_revisions"`
	// EtcdKeysPerS are the keys etcd put or deleted per second, from its
	// own metrics (a batched write of many records counts each).
	EtcdKeysPerS float64 `json:"etcd_keys_written_per_s"`
	// LeaderReadPerS are the heartbeats the leader read on the nodes'
	// session streams per second, LeaderDigestedPerS those it took in
	// its followers' liveness digests (its own metrics).
	LeaderReadPerS     float64 `json:"leader_heartbeats_read_per_s"`
	LeaderDigestedPerS float64 `json:"leader_heartbeats_digested_per_s"`
	// WatchMsgsPerS are the answers carrying a node's record or the
	// managers that the simulated nodes received.
	WatchMsgsPerS float64 `json:"watch_msgs_per_s"`
	// CPU in percent of one core over the window, from /proc/PID/stat.
	LeaderCPUPct float64 `json:"leader_cpu_pct"`
	LeaderRSSMiB float64 `json:"leader_rss_mib"`
	// LeaderCPUUsPerHeartbeat is the leader's CPU time over the window
	// (its whole process: curator, etcd, agent) per heartbeat answered
	// in it, in microseconds: what a heartbeat costs the leader at rest,
	// forwarding and TLS included.
	LeaderCPUUsPerHeartbeat float64 `json:"leader_cpu_us_per_heartbeat,omitempty"`
	// LeaderKiBPerNode is the leader's RSS growth since before the join
	// wave, per node in the fleet.
	LeaderKiBPerNode float64   `json:"leader_kib_per_node,omitempty"`
	FollowersCPUPct  []float64 `json:"followers_cpu_pct"`
	SimCPUPct        float64   `json:"sim_cpu_pct"`
	SimRSSMiB        float64   `json:"sim_rss_mib"`
	// HostBusyPct is how busy the whole host was, in percent of all its
	// cores (other work on the machine included).
	HostBusyPct float64 `json:"host_busy_pct"`
	HostCores   int     `json:"host_cores"`
}

// killLeaderFigures: kill -9 of the curator leader.
type killLeaderFigures struct {
	OldLeader string `json:"old_leader"`
	NewLeader string `json:"new_leader"`
	// AllAnsweredS is the time from the kill until the last node had a
	// heartbeat answered by another leader; AnsweredP50S the median.
	AllAnsweredS float64 `json:"all_answered_s"`
	AnsweredP50S float64 `json:"answered_p50_s"`
	Unanswered   int     `json:"unanswered"`
	// MarkedDown are simulated nodes whose status changed after the kill
	// (all were ready before: any change was a mark down); MarkDownEvents
	// the mark-down events for them the cluster lists.
	MarkedDown     int `json:"marked_down"`
	MarkDownEvents int `json:"mark_down_events"`
}

// massFailureFigures: M nodes stop at once.
type massFailureFigures struct {
	Stopped int `json:"stopped"`
	// AllDownS is the time from the stop to the last node marked down,
	// from the nodes' status_changed; DownP50S the median; ObservedS when
	// the bench's polling saw them all down.
	AllDownS  float64 `json:"all_down_s"`
	DownP50S  float64 `json:"down_p50_s"`
	ObservedS float64 `json:"observed_s"`
	NotDown   int     `json:"not_down"`
	// OthersNotReady are simulated nodes that were not stopped and are not
	// ready at the end (goal: 0).
	OthersNotReady int     `json:"others_not_ready"`
	DownAfterS     float64 `json:"down_after_s"`
	BoundS         float64 `json:"bound_s"`
	WithinBound    bool    `json:"within_bound"`
}

func runHeartbeats(ctx context.Context, cfg *heartbeatsConfig, stdout, stderr io.Writer) error {
	managers, simBase, err := cfg.cluster.Validate()
	if err != nil {
		return err
	}
	if err := cfg.Validate(); err != nil {
		return err
	}
	debug.SetGCPercent(cfg.simGCPercent)
	if cfg.profile != "" && cfg.cluster.pprof {
		cfg.fleet.joinProfile = cfg.profile
	}
	if cfg.profile != "" {
		// Fine-grained heap samples, from the start, so the heap profile
		// shows what a node costs.
		runtime.MemProfileRate = 4096
	}
	p := newProgress(stderr)
	res := &heartbeatsResult{
		Cmd: "heartbeats", Nodes: cfg.fleet.nodes, Managers: cfg.cluster.managers,
		IntervalS: secs(cfg.cluster.interval), DownAfterS: secs(cfg.cluster.downAfter),
		ElectionTTLS: secs(cfg.cluster.electionTTL),
	}
	problems := withFleet(ctx, cfg.cluster, managers, simBase, cfg.fleet, p, &res.joinFigures,
		func(c *cluster, f *fleet) []error { return heartbeatsMeasure(ctx, cfg, c, f, p, res) },
		func(f *fleet) { res.StreamErrors = f.streamErrors() })
	return finish(stdout, res, func(e string) { res.Error = e }, problems)
}

func heartbeatsMeasure(ctx context.Context, cfg *heartbeatsConfig, c *cluster, f *fleet, p *progress, res *heartbeatsResult) []error {
	var problems []error
	// Let the last joiners' first heartbeats and the ready marks settle.
	if supervisor.Sleep(ctx, 2*cfg.cluster.interval) != nil {
		return []error{ctx.Err()}
	}
	rest, err := measureRest(ctx, c, f, cfg.duration, cfg.profile, p)
	res.Rest = rest
	if err != nil {
		return append(problems, fmt.Errorf("at rest: %w", err))
	}
	res.JoinOwnCPUMsPerJoin = joinOwnCPU(res.joinFigures, rest)
	if cfg.killLeader {
		kl, err := killLeader(ctx, cfg, c, f, p)
		res.KillLeader = kl
		if err != nil {
			problems = append(problems, fmt.Errorf("kill leader: %w", err))
		}
	}
	if cfg.massFailure > 0 {
		mf, err := massFailure(ctx, cfg, c, f, p)
		res.MassFailure = mf
		if err != nil {
			problems = append(problems, fmt.Errorf("mass failure: %w", err))
		}
	}
	return problems
}

// joinOwnCPU is JoinOwnCPUMsPerJoin of a wave j and the fleet at rest
// after it (0 without the figures).
func joinOwnCPU(j joinFigures, rest *restFigures) float64 {
	if j.Joined == 0 || j.JoinManagersCPUMsPerJoin == 0 || rest == nil || rest.LeaderCPUPct < 0 {
		return 0
	}
	restCores := rest.LeaderCPUPct / 100
	for _, f := range rest.FollowersCPUPct {
		restCores += f / 100
	}
	sessionsMs := restCores * j.JoinS / 2 * 1000 / float64(j.Joined)
	return round3(max(j.JoinManagersCPUMsPerJoin-sessionsMs, 0))
}

// measureRest measures the fleet at rest for d.
func measureRest(ctx context.Context, c *cluster, f *fleet, d time.Duration, profileDir string, p *progress) (*restFigures, error) {
	leader, lm, err := c.leader(ctx)
	if err != nil {
		return nil, err
	}
	var followers []*managerProc
	pids := []int{lm.pid(), os.Getpid()}
	for _, m := range c.managers {
		if m != lm && m.alive() {
			followers = append(followers, m)
			pids = append(pids, m.pid())
		}
	}
	rev0, err := c.etcdRevision(ctx)
	if err != nil {
		return nil, err
	}
	keys0, err := c.etcdKeysWritten(ctx, lm)
	if err != nil {
		return nil, err
	}
	read0, digested0, err := leaderHeartbeats(ctx, lm)
	if err != nil {
		return nil, err
	}
	p.printf("at rest: measuring for %s (leader %s, %s)", d, leader, lm.name)
	sent0, answered0, late0, watch0 := f.sent.Load(), f.answered.Load(), f.late.Load(), f.watchMsgs.Load()
	h := &latencyHist{}
	f.rtt.Store(h)
	stopProfile, err := startProfile(profileDir)
	if err != nil {
		return nil, err
	}
	leaderProfile := make(chan error, 1)
	if profileDir != "" && c.cfg.pprof {
		go func() { leaderProfile <- fetchCPUProfile(ctx, lm, d, filepath.Join(profileDir, "leader-cpu.pprof")) }()
	} else {
		leaderProfile <- nil
	}
	w := startCPUWindow(pids...)
	slept := supervisor.Sleep(ctx, d) == nil
	f.rtt.Store(nil)
	if err := stopProfile(); err != nil {
		return nil, err
	}
	if !slept {
		return nil, ctx.Err()
	}
	if err := <-leaderProfile; err != nil {
		p.printf("could not profile the leader: %v", err)
	}
	r := &restFigures{
		Leader:       leader,
		LeaderCPUPct: round3(w.pct(lm.pid())),
		SimCPUPct:    round3(w.pct(os.Getpid())),
		HostBusyPct:  round3(w.hostPct()),
		HostCores:    runtime.NumCPU(),
	}
	for _, m := range followers {
		r.FollowersCPUPct = append(r.FollowersCPUPct, round3(w.pct(m.pid())))
	}
	window := time.Since(w.start)
	r.WindowS = secs(window)
	sent, answered := f.sent.Load()-sent0, f.answered.Load()-answered0
	r.HeartbeatsPerS = round3(float64(answered) / window.Seconds())
	r.Unanswered = int64(sent) - int64(answered)
	r.Late = f.late.Load() - late0
	r.WatchMsgsPerS = round3(float64(f.watchMsgs.Load()-watch0) / window.Seconds())
	r.RTTP50Ms, r.RTTP99Ms, r.RTTMaxMs = ms(h.quantile(0.5)), ms(h.quantile(0.99)), ms(h.maximum())
	r.RTTSamples = h.total.Load()
	if r.HeartbeatsPerS > 0 {
		r.LeaderCPUUsPerHeartbeat = round3(r.LeaderCPUPct / 100 * 1e6 / r.HeartbeatsPerS)
	}
	if rss, err := procRSS(lm.pid()); err == nil {
		r.LeaderRSSMiB = mib(rss)
		if before, ok := c.rssBefore[lm.pid()]; ok && rss > before {
			if n := len(f.alive()); n > 0 {
				r.LeaderKiBPerNode = round3(float64(rss-before) / 1024 / float64(n))
			}
		}
	}
	if rss, err := procRSS(os.Getpid()); err == nil {
		r.SimRSSMiB = mib(rss)
	}
	rev1, err := c.etcdRevision(ctx)
	if err != nil {
		return r, err
	}
	r.EtcdRevisions = rev1 - rev0
	r.EtcdWritesPerS = round3(float64(r.EtcdRevisions) / window.Seconds())
	keys1, err := c.etcdKeysWritten(ctx, lm)
	if err != nil {
		return r, err
	}
	r.EtcdKeysPerS = round3(float64(keys1-keys0) / window.Seconds())
	read1, digested1, err := leaderHeartbeats(ctx, lm)
	if err != nil {
		return r, err
	}
	r.LeaderReadPerS = round3((read1 - read0) / window.Seconds())
	r.LeaderDigestedPerS = round3((digested1 - digested0) / window.Seconds())
	if now, _, err := c.leader(ctx); err == nil && now != leader {
		r.LeaderChanged = true
	}
	p.printf("at rest: rtt p50 %.2fms p99 %.2fms, leader cpu %.1f%% (%.0fµs a heartbeat) rss %.0fMiB (%.1f KiB a node), heartbeats %.0f/s read on streams and %.0f/s in digests, etcd %.2f writes/s, sim cpu %.1f%%, host %.0f%% busy",
		r.RTTP50Ms, r.RTTP99Ms, r.LeaderCPUPct, r.LeaderCPUUsPerHeartbeat, r.LeaderRSSMiB, r.LeaderKiBPerNode, r.LeaderReadPerS, r.LeaderDigestedPerS, r.EtcdWritesPerS, r.SimCPUPct, r.HostBusyPct)
	return r, nil
}

// killLeader kills the curator leader's process and times the failover as
// the nodes see it.
func killLeader(ctx context.Context, cfg *heartbeatsConfig, c *cluster, f *fleet, p *progress) (*killLeaderFigures, error) {
	old, m, err := c.leader(ctx)
	if err != nil {
		return nil, err
	}
	fm, nodes := f.startFailover(old)
	defer f.failover.Store(nil)
	t0 := time.Now()
	c.kill(m)
	p.printf("killed the leader %s (%s, pid %d)", old, m.name, m.pid())
	if cfg.profile != "" {
		// The bench's own CPU over the failover's first half minute.
		if err := profileFor(filepath.Join(cfg.profile, "sim-failover-cpu.pprof"), failoverProfile); err != nil {
			p.printf("could not profile the failover: %v", err)
		}
	}
	kl := &killLeaderFigures{OldLeader: old}
	wait := cfg.cluster.electionTTL + cfg.cluster.downAfter + failoverExtra
	var problems []error
	select {
	case <-fm.done:
	case <-time.After(wait):
		problems = append(problems, fmt.Errorf("%d of %d nodes not answered by a new leader %s after the kill", fm.pending.Load(), len(nodes), wait))
	case <-ctx.Done():
		return kl, ctx.Err()
	}
	var delays []time.Duration
	for _, n := range nodes {
		if at := n.newLeaderAt.Load(); at != 0 {
			delays = append(delays, time.Unix(0, at).Sub(t0))
		} else {
			kl.Unanswered++
		}
	}
	if len(delays) > 0 {
		kl.AllAnsweredS, kl.AnsweredP50S = secs(slices.Max(delays)), secs(quantile(delays, 0.5))
	}
	p.printf("%d of %d nodes answered by a new leader, the last %.2fs after the kill (median %.2fs)", len(delays), len(nodes), kl.AllAnsweredS, kl.AnsweredP50S)
	if kl.NewLeader, _, err = c.waitLeader(ctx, old); err != nil {
		return kl, errors.Join(append(problems, err)...)
	}
	// The new leader marks down only nodes it has not heard from within
	// its grace period; give a late mark time to land before reading.
	if supervisor.Sleep(ctx, 2*cfg.cluster.interval) != nil {
		return kl, ctx.Err()
	}
	views, _, _, err := c.listNodes(ctx, 0)
	if err != nil {
		return kl, errors.Join(append(problems, err)...)
	}
	for _, v := range views {
		n := v.GetNode()
		if f.node(n.GetId()) == nil {
			continue
		}
		if n.GetStatus() != pb.NodeStatus_NODE_STATUS_READY || n.GetStatusChanged().AsTime().After(t0) {
			kl.MarkedDown++
		}
	}
	events, err := listEvents(ctx, c)
	if err != nil {
		return kl, errors.Join(append(problems, err)...)
	}
	for _, e := range events {
		if e.GetAction() == "mark-down" && e.GetTime().AsTime().After(t0) && f.node(e.GetNodeId()) != nil {
			kl.MarkDownEvents++
		}
	}
	p.printf("new leader %s; %d nodes marked down meanwhile (%d mark-down events)", kl.NewLeader, kl.MarkedDown, kl.MarkDownEvents)
	return kl, errors.Join(problems...)
}

func listEvents(ctx context.Context, c *cluster) ([]*pb.Event, error) {
	var events []*pb.Event
	err := c.admin.Management(ctx, func(ctx context.Context, m pb.ManagementClient) error {
		resp, err := m.ListEvents(ctx, &pb.ListEventsRequest{Limit: eventsLimit})
		events = resp.GetEvents()
		return err
	})
	return events, err
}

// massFailure stops cfg.massFailure nodes at once, spread over the fleet,
// and times their marking down.
func massFailure(ctx context.Context, cfg *heartbeatsConfig, c *cluster, f *fleet, p *progress) (*massFailureFigures, error) {
	alive := f.alive()
	m := min(cfg.massFailure, len(alive))
	victims := map[string]*simNode{}
	for k := range m {
		n := alive[k*len(alive)/m]
		victims[n.id] = n
	}
	mf := &massFailureFigures{
		Stopped: m, DownAfterS: secs(cfg.cluster.downAfter),
		BoundS: secs(cfg.cluster.downAfter + massFailureBound),
	}
	t0 := time.Now()
	for _, n := range victims {
		n.stop()
	}
	for _, n := range victims {
		n.wg.Wait()
	}
	p.printf("stopped %d nodes at once", m)
	deadline := t0.Add(cfg.cluster.downAfter + massFailureExtra)
	var views []*pb.NodeView
	for {
		var err error
		views, _, _, err = c.listNodes(ctx, 0)
		if err != nil {
			return mf, err
		}
		down := 0
		for _, v := range views {
			if victims[v.GetNode().GetId()] != nil && v.GetNode().GetStatus() == pb.NodeStatus_NODE_STATUS_DOWN {
				down++
			}
		}
		if down == m {
			mf.ObservedS = secs(time.Since(t0))
			break
		}
		if time.Now().After(deadline) {
			break
		}
		if supervisor.Sleep(ctx, massFailurePoll) != nil {
			return mf, ctx.Err()
		}
	}
	var delays []time.Duration
	for _, v := range views {
		n := v.GetNode()
		switch {
		case victims[n.GetId()] != nil && n.GetStatus() == pb.NodeStatus_NODE_STATUS_DOWN:
			delays = append(delays, n.GetStatusChanged().AsTime().Sub(t0))
		case victims[n.GetId()] == nil && f.node(n.GetId()) != nil && n.GetStatus() != pb.NodeStatus_NODE_STATUS_READY:
			mf.OthersNotReady++
		}
	}
	mf.NotDown = m - len(delays)
	if len(delays) > 0 {
		mf.AllDownS, mf.DownP50S = secs(slices.Max(delays)), secs(quantile(delays, 0.5))
	}
	mf.WithinBound = mf.NotDown == 0 && mf.AllDownS <= mf.BoundS
	p.printf("%d of %d stopped nodes down, the last %.2fs after the stop (down-after %s; bound %.1fs)",
		len(delays), m, mf.AllDownS, cfg.cluster.downAfter, mf.BoundS)
	if mf.NotDown > 0 {
		return mf, fmt.Errorf("%d of %d stopped nodes not down %s after they stopped", mf.NotDown, m, time.Since(t0).Round(time.Second))
	}
	return mf, nil
}

// fetchCPUProfile writes m's CPU profile over d (its agent must run with
// --pprof) to path.
func fetchCPUProfile(ctx context.Context, m *managerProc, d time.Duration, path string) error {
	url := fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", netip.AddrPortFrom(m.listen.Addr(), m.listen.Port()+3), int(d.Seconds()))
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
