package curator

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"
	"google.golang.org/grpc"

	"github.com/curatorproject/curator/consensus"
	"github.com/curatorproject/curator/curator/internal/leader"
	"github.com/curatorproject/curator/curator/spec"
	"github.com/curatorproject/curator/curator/store"
	"github.com/curatorproject/curator/internal/testenv"
	pb "github.com/curatorproject/curator/proto"
	"github.com/curatorproject/curator/supervisor"
)

// The consensus sync against real etcd: a running leader finishes each
// half-applied change a crash can leave, refuses to act when it cannot find
// its own node, and its loops end with its leadership.

const (
	// syncLoopName is the consensus sync's name in events and metrics.
	syncLoopName = "consensus-sync"
	// repairWithin is how soon a running leader must finish a half-applied
	// change: etcd's member list has no watch, so a planted member is seen
	// at the next resync (every DefaultSyncInterval); the rest is slack for
	// the race detector. A fixed 5 s poll would take up to 5 s.
	repairWithin = 2 * time.Second
	// stopWithin is how soon a curator that lost its election key must stop
	// leading and stop its loops.
	stopWithin = time.Second
)

// metricValue reads a counter or a gauge. (prometheus/testutil would do,
// but it needs a module this one does not require.)
func metricValue(t testing.TB, m prometheus.Metric) float64 {
	t.Helper()
	var d dto.Metric
	if err := m.Write(&d); err != nil {
		t.Fatal(err)
	}
	switch {
	case d.Counter != nil:
		return d.Counter.GetValue()
	case d.Gauge != nil:
		return d.Gauge.GetValue()
	}
	t.Fatalf("metric %v is neither a counter nor a gauge", m.Desc())
	return 0
}

// histogramCount reads how many observations a histogram holds.
func histogramCount(t testing.TB, o prometheus.Observer) uint64 {
	t.Helper()
	m, ok := o.(prometheus.Metric)
	if !ok {
		t.Fatalf("observer %T is not a metric", o)
	}
	var d dto.Metric
	if err := m.Write(&d); err != nil {
		t.Fatal(err)
	}
	return d.GetHistogram().GetSampleCount()
}

func syncActions(t testing.TB, s *Service, action string) float64 {
	t.Helper()
	return metricValue(t, s.metrics.Actions.WithLabelValues(syncLoopName, action))
}

func syncTicks(t testing.TB, s *Service) float64 {
	t.Helper()
	return metricValue(t, s.metrics.Ticks.WithLabelValues(syncLoopName))
}

func syncRefusals(t testing.TB, s *Service) float64 {
	t.Helper()
	return metricValue(t, s.metrics.Refusals.WithLabelValues(syncLoopName))
}

// syncFixture is a one-member etcd, its first node's curator leading, and
// connections to it.
type syncFixture struct {
	c   *testCluster
	svc *Service
	// stop stops svc (nil if the test started it otherwise).
	stop  context.CancelFunc
	admin *grpc.ClientConn
	anon  *grpc.ClientConn
}

func newSyncFixture(t *testing.T) *syncFixture {
	t.Helper()
	c := newTestCluster(t)
	svc, stop := c.startCurator(c.first, c.cli)
	waitFor(t, "the first curator leads", svc.IsLeader)
	adminCert := c.adminCert()
	return &syncFixture{
		c:     c,
		svc:   svc,
		stop:  stop,
		admin: dial(t, c.first.address, &adminCert, c.root.Cert),
		anon:  dial(t, c.first.address, nil, c.root.Cert),
	}
}

// worker registers a node with the worker token.
func (f *syncFixture) worker(name string) *testNode {
	f.c.t.Helper()
	n, _ := f.c.register(f.anon, f.c.token(f.admin, "worker"), name)
	return n
}

// peerURLOf is the etcd peer URL of a node at address (PORT+1).
func peerURLOf(t testing.TB, address string) string {
	t.Helper()
	ip, port, err := spec.SplitAddress(address)
	if err != nil {
		t.Fatal(err)
	}
	return consensus.PeerURL(ip.String(), port)
}

// unusedPeerURL is a peer URL no node has: a fresh address nobody
// registered.
func unusedPeerURL(t testing.TB) string {
	t.Helper()
	ip := nextIP(t)
	return consensus.PeerURL(ip, freeBasePort(t, ip))
}

// members lists etcd's members.
func (f *syncFixture) members(t *testing.T) []consensus.Member {
	t.Helper()
	ms, err := consensus.Members(callCtx(t), f.c.cli)
	if err != nil {
		t.Fatal(err)
	}
	return ms
}

func hasMember(ms []consensus.Member, id uint64) bool {
	return slices.ContainsFunc(ms, func(m consensus.Member) bool { return m.ID == id })
}

// events lists the events through the management API, as an operator
// sees them.
func (f *syncFixture) events(t *testing.T) []*pb.Event {
	t.Helper()
	resp, err := pb.NewManagementClient(f.admin).ListEvents(callCtx(t), &pb.ListEventsRequest{})
	if err != nil {
		t.Fatalf("ListEvents: %v", err)
	}
	return resp.Events
}

// findEvents returns the events of loop with action about nodeID.
func findEvents(events []*pb.Event, loop, action, nodeID string) []*pb.Event {
	var out []*pb.Event
	for _, ev := range events {
		if ev.Loop == loop && ev.Action == action && ev.NodeId == nodeID {
			out = append(out, ev)
		}
	}
	return out
}

// waitEvent waits until the sync has recorded action about nodeID and
// returns the event.
func (f *syncFixture) waitEvent(t *testing.T, action, nodeID string) *pb.Event {
	t.Helper()
	var ev *pb.Event
	waitFor(t, fmt.Sprintf("a %s event %q about node %q", syncLoopName, action, nodeID), func() bool {
		if found := findEvents(f.events(t), syncLoopName, action, nodeID); len(found) > 0 {
			ev = found[0]
			return true
		}
		return false
	})
	return ev
}

// saveAsLeader rewrites node id through svc's leadership, holding muNodes
// as every leader read-modify-write does (the health loop writes the same
// records).
func saveAsLeader(t *testing.T, svc *Service, id string, mutate func(*pb.Node)) {
	t.Helper()
	st := svc.currentLeader()
	if st == nil {
		t.Fatal("the curator does not lead")
	}
	st.Lead.MuNodes.Lock()
	defer st.Lead.MuNodes.Unlock()
	ctx := callCtx(t)
	n, err := store.NodeLoad(ctx, svc.cfg.Etcd, id)
	if err != nil {
		t.Fatal(err)
	}
	mutate(n)
	if err := store.NodeSave(ctx, st.Lead.Fence, n); err != nil {
		t.Fatal(err)
	}
}

// TestSyncRepairsHalfAppliedChanges plants, behind a running leader's back,
// each half-applied change a crash between the two steps of a membership
// change leaves, and checks that the leader's sync loop finishes it: soon,
// with one action, recorded as an event with a reason, and counted.
func TestSyncRepairsHalfAppliedChanges(t *testing.T) {
	for _, tc := range []struct {
		name string
		// plant makes the half-applied change and returns the node the
		// repair is about ("" for none), and what it expects of the
		// repaired state (nil: not there yet).
		plant  func(t *testing.T, f *syncFixture) (nodeID string, repaired func() error)
		action string
		// reason is what the event's reason must mention, filled in by
		// plant.
		reason *string
	}{
		{
			// A promote that died after adding the learner, before writing
			// the role: the member is the truth, the sync grants the role
			// with the join parameters of that member.
			name:   "member without role",
			action: "grant-role",
			plant: func(t *testing.T, f *syncFixture) (string, func() error) {
				w := f.worker("w1")
				_, memberID, err := consensus.AddLearner(callCtx(t), f.c.cli, w.id, peerURLOf(t, w.address))
				if err != nil {
					t.Fatal(err)
				}
				return w.id, func() error {
					n := f.c.loadNode(w.id)
					if !spec.HasRole(n, pb.Role_ROLE_CONSENSUS) {
						return fmt.Errorf("roles %v", n.Roles)
					}
					if n.Consensus.GetMemberId() != memberID {
						return fmt.Errorf("the role carries member %x, want %x", n.Consensus.GetMemberId(), memberID)
					}
					if !spec.HasRole(n, pb.Role_ROLE_WORKER) {
						t.Errorf("granting consensus took the worker role: %v", n.Roles)
					}
					if len(n.Consensus.EtcdCert) == 0 || len(n.Consensus.EtcdCa) == 0 {
						t.Error("the join parameters carry no etcd certificate or CA")
					}
					var peers []string
					for _, p := range n.Consensus.Peers {
						peers = append(peers, p.PeerUrl)
					}
					if !slices.Contains(peers, peerURLOf(t, w.address)) || !slices.Contains(peers, peerURLOf(t, f.c.first.address)) {
						t.Errorf("join peers %v lack the node's own or the first node's peer URL", peers)
					}
					if !hasMember(f.members(t), memberID) {
						t.Errorf("member %x was removed: the sync must follow membership, not fight it", memberID)
					}
					return nil
				}
			},
		},
		{
			// A demote that died after removing the member, before clearing
			// the role: the role goes, with its join parameters.
			name:   "role without member",
			action: "clear-role",
			plant: func(t *testing.T, f *syncFixture) (string, func() error) {
				w := f.worker("w1")
				saveAsLeader(t, f.svc, w.id, func(n *pb.Node) {
					n.Roles = leader.WithRole(n.Roles, pb.Role_ROLE_CONSENSUS)
					n.Consensus = &pb.ConsensusJoin{MemberId: 0xdead}
				})
				before := len(f.members(t))
				return w.id, func() error {
					n := f.c.loadNode(w.id)
					if spec.HasRole(n, pb.Role_ROLE_CONSENSUS) || n.Consensus != nil {
						return fmt.Errorf("roles %v, consensus %v", n.Roles, n.Consensus)
					}
					if !spec.HasRole(n, pb.Role_ROLE_WORKER) {
						t.Errorf("clearing consensus took the worker role: %v", n.Roles)
					}
					if got := len(f.members(t)); got != before {
						t.Errorf("%d etcd members after the repair, %d before", got, before)
					}
					return nil
				}
			},
		},
		{
			// A node removed (or a registration that died after adding its
			// learner): a member no node owns must not keep a place.
			name:   "member without node",
			action: "remove-member",
			plant: func(t *testing.T, f *syncFixture) (string, func() error) {
				_, memberID, err := consensus.AddLearner(callCtx(t), f.c.cli, "ghost", unusedPeerURL(t))
				if err != nil {
					t.Fatal(err)
				}
				nodes := len(f.mustNodes(t))
				return "", func() error {
					if hasMember(f.members(t), memberID) {
						return fmt.Errorf("member %x is still there", memberID)
					}
					if got := len(f.mustNodes(t)); got != nodes {
						t.Errorf("%d nodes after the repair, %d before", got, nodes)
					}
					return nil
				}
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newSyncFixture(t)
			if n := syncActions(t, f.svc, tc.action); n != 0 {
				t.Fatalf("%v %s actions before anything was planted", n, tc.action)
			}
			converged := histogramCount(t, f.svc.metrics.Converge.WithLabelValues(syncLoopName))

			planted := time.Now()
			nodeID, repaired := tc.plant(t, f)
			var last error
			waitFor(t, "the sync repairs it", func() bool {
				last = repaired()
				return last == nil
			})
			took := time.Since(planted)
			t.Logf("repaired in %v", took.Round(time.Millisecond))
			if took > repairWithin {
				t.Errorf("repair took %v, want within %v", took.Round(time.Millisecond), repairWithin)
			}

			ev := f.waitEvent(t, tc.action, nodeID)
			if ev.Reason == "" {
				t.Errorf("event %v has no reason", ev)
			}
			if ev.Leader != f.c.first.id {
				t.Errorf("event leader %q, want %q", ev.Leader, f.c.first.id)
			}
			if nodeID != "" && !strings.Contains(ev.Reason, nodeID) {
				t.Errorf("reason %q does not name node %s", ev.Reason, nodeID)
			}
			if got := findEvents(f.events(t), syncLoopName, tc.action, nodeID); len(got) != 1 {
				t.Errorf("%d %s events, want 1: %v", len(got), tc.action, got)
			}
			// The event is recorded after the action is counted.
			if n := syncActions(t, f.svc, tc.action); n != 1 {
				t.Errorf("%s actions counted: %v, want 1", tc.action, n)
			}
			if n := syncRefusals(t, f.svc); n != 0 {
				t.Errorf("%v refusals", n)
			}
			waitFor(t, "the sync records its convergence", func() bool {
				return histogramCount(t, f.svc.metrics.Converge.WithLabelValues(syncLoopName)) > converged
			})
		})
	}
}

// TestSyncWakesOnMembershipChange: with a resync of a minute, the two
// half-applied changes that only etcd's membership shows (a member
// without its role, a role without its member) are repaired within a
// second all the same: the local etcd member tells the leader of each
// membership change it applies (Config.MembershipChanges), and the
// membership loops look at once.
func TestSyncWakesOnMembershipChange(t *testing.T) {
	c := newTestCluster(t)
	cfg := c.curatorConfig(c.first, c.cli)
	cfg.SyncInterval = time.Minute
	cfg.LearnerDownLimit = time.Hour // the planted learner never starts
	svc, _ := c.runCurator(cfg)
	waitFor(t, "the first curator leads", svc.IsLeader)
	adminCert := c.adminCert()
	admin, anon := dial(t, c.first.address, &adminCert, c.root.Cert), dial(t, c.first.address, nil, c.root.Cert)
	w, _ := c.register(anon, c.token(admin, "worker"), "w1")
	// The first ticks after the join are over: only a change wakes the
	// loops from here.
	time.Sleep(100 * time.Millisecond)

	const within = time.Second
	planted := time.Now()
	_, memberID, err := consensus.AddLearner(callCtx(t), c.cli, w.id, peerURLOf(t, w.address))
	if err != nil {
		t.Fatal(err)
	}
	testenv.WaitUntil(t, within, "the role granted to the member added behind the leader's back", func() bool {
		return spec.HasRole(c.loadNode(w.id), pb.Role_ROLE_CONSENSUS)
	})
	t.Logf("member without role repaired in %v", time.Since(planted).Round(time.Millisecond))

	planted = time.Now()
	if err := consensus.RemoveMember(callCtx(t), c.cli, memberID); err != nil {
		t.Fatal(err)
	}
	testenv.WaitUntil(t, within, "the role cleared of the member removed behind the leader's back", func() bool {
		return !spec.HasRole(c.loadNode(w.id), pb.Role_ROLE_CONSENSUS)
	})
	t.Logf("role without member repaired in %v", time.Since(planted).Round(time.Millisecond))
}

func (f *syncFixture) mustNodes(t *testing.T) []*pb.Node {
	t.Helper()
	nodes, err := store.NodeList(callCtx(t), f.c.cli)
	if err != nil {
		t.Fatal(err)
	}
	return nodes
}

// TestSyncRefusesWithoutLeaderNode: a leader that cannot find its own node
// among the registry's nodes or among etcd's members is reading something
// wrong, and must change nothing: not even a member that belongs to no
// node, which it would otherwise remove first. Each refusal is an event
// with the reason and a metric; once the leader finds itself again, it acts.
func TestSyncRefusesWithoutLeaderNode(t *testing.T) {
	t.Run("leader's node missing from the registry", func(t *testing.T) {
		f := newSyncFixture(t)
		ctx := callCtx(t)
		own, err := f.c.cli.Get(ctx, store.Keys.Node(f.c.first.id))
		if err != nil || len(own.Kvs) != 1 {
			t.Fatalf("read own node: %v, %v", own, err)
		}
		// Behind the leader's back, as only a bug or an operator editing
		// etcd could: the leader's node record goes, and a member that no
		// node owns appears.
		if _, err := f.c.cli.Delete(ctx, store.Keys.Node(f.c.first.id)); err != nil {
			t.Fatal(err)
		}
		_, ghost, err := consensus.AddLearner(ctx, f.c.cli, "ghost", unusedPeerURL(t))
		if err != nil {
			t.Fatal(err)
		}
		assertRefuses(t, f, f.svc, ghost, "not in the registry")

		// Put the node back: the refusal ends and the sync removes the
		// member.
		if _, err := f.c.cli.Put(ctx, store.Keys.Node(f.c.first.id), string(own.Kvs[0].Value)); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "the sync removes the member once the leader finds itself", func() bool {
			return !hasMember(f.members(t), ghost)
		})
		f.waitEvent(t, "remove-member", "")
	})

	t.Run("leader's node not among the members", func(t *testing.T) {
		// The leader is a node that joined with the manager token: its
		// member is a learner that never started (it has no name), found
		// only through the peer URL its address gives. Rewrite that address
		// and the leader cannot tell its own member: without the guard the
		// sync would remove that member as no node's, then take the
		// leader's role.
		f := newSyncFixture(t)
		m2, _ := f.c.register(f.anon, f.c.token(f.admin, "manager"), "m2")
		member := f.c.loadNode(m2.id).Consensus.GetMemberId()
		if member == 0 {
			t.Fatal("m2 joined without a member")
		}
		second, _ := f.c.startCurator(m2, f.c.etcdClient())
		// Hand leadership to m2: the first curator stops, resigning.
		f.stop()
		waitFor(t, "m2 leads", second.IsLeader)
		adminCert := f.c.adminCert()
		f.admin = dial(t, m2.address, &adminCert, f.c.root.Cert)

		saveAsLeader(t, second, m2.id, func(n *pb.Node) {
			ip := nextIP(t)
			n.Address = fmt.Sprintf("%s:%d", ip, freeBasePort(t, ip))
		})
		assertRefuses(t, f, second, member, "not among the etcd members")
		n := f.c.loadNode(m2.id)
		if !spec.HasRole(n, pb.Role_ROLE_CONSENSUS) || n.Consensus.GetMemberId() != member {
			t.Errorf("the refusing leader changed its own role: roles %v, consensus %v", n.Roles, n.Consensus)
		}
	})
}

// assertRefuses checks that leader's sync refuses, saying why (want), and
// that member, which it would otherwise remove, stays while the loop ticks
// on: several ticks pass without any action.
func assertRefuses(t *testing.T, f *syncFixture, leader *Service, member uint64, want string) {
	t.Helper()
	ev := f.waitEvent(t, "refuse", leader.cfg.NodeID)
	if !strings.Contains(ev.Reason, want) {
		t.Errorf("refusal reason %q does not say %q", ev.Reason, want)
	}
	if ev.Leader != leader.cfg.NodeID {
		t.Errorf("refusal recorded by %q, want %q", ev.Leader, leader.cfg.NodeID)
	}
	// The refusal repeats every tick; let several pass (the loop ticks at
	// least every resync), each one a refusal and none an action.
	// A tick counts itself, then its refusal: read refusals first at the
	// start and last at the end, and allow for one tick in between.
	refusals := syncRefusals(t, leader)
	ticks := syncTicks(t, leader)
	waitFor(t, "four more ticks of the sync", func() bool { return syncTicks(t, leader) >= ticks+4 })
	dTicks := syncTicks(t, leader) - ticks
	if dRefusals := syncRefusals(t, leader) - refusals; dRefusals < dTicks-1 {
		t.Errorf("%v refusals in %v ticks, want a refusal each tick", dRefusals, dTicks)
	}
	for _, action := range []string{"remove-member", "grant-role", "clear-role"} {
		if n := syncActions(t, leader, action); n != 0 {
			t.Errorf("%v %s actions while refusing", n, action)
		}
	}
	if !hasMember(f.members(t), member) {
		t.Errorf("member %x was removed although the leader cannot find itself", member)
	}
	// Refusing each tick, but recorded once: the history is not flooded.
	if got := findEvents(f.events(t), syncLoopName, "refuse", leader.cfg.NodeID); len(got) != 1 {
		t.Errorf("%d refusal events for one cause, want 1", len(got))
	}
}

// startSupervised runs a curator for n in a supervision tree the test can
// look into (TestHarness hides its Supervisor).
func (c *testCluster) startSupervised(t *testing.T, n *testNode) (*Service, *supervisor.Supervisor) {
	t.Helper()
	svc, err := New(c.curatorConfig(n, c.cli))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	sup := supervisor.New(ctx, func(ctx context.Context) error {
		if err := supervisor.Run(ctx, "main", svc.Run); err != nil {
			return err
		}
		supervisor.Signal(ctx, supervisor.Done)
		return nil
	}, supervisor.WithLogger(zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel))), supervisor.WithPropagatePanic())
	t.Cleanup(func() {
		cancel()
		select {
		case <-sup.Done():
		case <-time.After(testTimeout):
			t.Errorf("the curator's tree did not stop within %v", testTimeout)
		}
	})
	return svc, sup
}

// leaderRunnables lists the live runnables of the leader's subtree (the
// loops and their parent).
func leaderRunnables(sup *supervisor.Supervisor) []string {
	var out []string
	for _, st := range sup.Snapshot() {
		if strings.Contains(st.Name, ".election.leader") {
			out = append(out, fmt.Sprintf("%s (%v)", st.Name, st.State))
		}
	}
	return out
}

// TestSyncStopsWithLeadership takes the election key from a leading curator
// while another candidate (the test) waits, so the curator cannot simply
// win again. Within a second it must stop leading and every loop must have
// returned; a half-applied change planted then is left alone until the
// curator leads again, and then repaired under its new leadership.
func TestSyncStopsWithLeadership(t *testing.T) {
	c := newTestCluster(t)
	svc, sup := c.startSupervised(t, c.first)
	waitFor(t, "the curator leads", svc.IsLeader)
	waitFor(t, "the loops run", func() bool { return len(leaderRunnables(sup)) > 1 && syncTicks(t, svc) > 0 })
	adminCert := c.adminCert()
	f := &syncFixture{c: c, svc: svc,
		admin: dial(t, c.first.address, &adminCert, c.root.Cert),
		anon:  dial(t, c.first.address, nil, c.root.Cert)}
	w := f.worker("w1")

	// The test campaigns too, and waits in line behind the curator.
	sess, err := concurrency.NewSession(c.cli, concurrency.WithTTL(10))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sess.Close() })
	election := concurrency.NewElection(sess, store.Keys.Election())
	campaignCtx, cancelCampaign := context.WithTimeout(context.Background(), testTimeout)
	defer cancelCampaign()
	won := make(chan error, 1)
	standIn := aliveAddress(t)
	go func() { won <- election.Campaign(campaignCtx, leaderValue("test", standIn)) }()
	waitFor(t, "the test's candidacy is in line", func() bool {
		resp, err := c.cli.Get(callCtx(t), store.Keys.Election()+"/", clientv3.WithPrefix(), clientv3.WithCountOnly())
		return err == nil && resp.Count == 2
	})

	old := svc.currentLeader()
	deposed := time.Now()
	if _, err := c.cli.Delete(callCtx(t), old.Lead.Key()); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the curator stops leading", func() bool { return !svc.IsLeader() })
	notLeader := time.Since(deposed)
	var left []string
	waitFor(t, "the leader's loops stop", func() bool {
		left = leaderRunnables(sup)
		return len(left) == 0
	})
	stopped := time.Since(deposed)
	t.Logf("after the election key went: not leader in %v, loops stopped in %v",
		notLeader.Round(time.Millisecond), stopped.Round(time.Millisecond))
	if notLeader > stopWithin || stopped > stopWithin {
		t.Errorf("not leader after %v, loops stopped after %v: want both within %v", notLeader, stopped, stopWithin)
	}
	select {
	case err := <-won:
		if err != nil {
			t.Fatalf("the test's campaign: %v", err)
		}
	case <-time.After(testTimeout):
		t.Fatal("the test's campaign did not win after the curator's key went")
	}

	// A member without its role, planted while nobody but the test leads:
	// no loop of the deposed leadership may touch it. The loops are gone
	// (above); the counters show no tick and no action over a few resync
	// periods, and the record is unchanged.
	ticks, actions := syncTicks(t, svc), syncActions(t, svc, "grant-role")
	_, memberID, err := consensus.AddLearner(callCtx(t), c.cli, w.id, peerURLOf(t, w.address))
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(4 * DefaultSyncInterval) // a negative: nothing to wait for
	if n := c.loadNode(w.id); spec.HasRole(n, pb.Role_ROLE_CONSENSUS) {
		t.Errorf("the role was granted while the curator did not lead: %v", n.Roles)
	}
	if got := syncTicks(t, svc); got != ticks {
		t.Errorf("the sync ticked %v times after losing leadership", got-ticks)
	}
	if got := syncActions(t, svc, "grant-role"); got != actions {
		t.Errorf("grant-role actions went from %v to %v after losing leadership", actions, got)
	}
	if old.Ctx.Err() == nil {
		t.Error("the old leadership's context is still live")
	}

	// The test steps aside: the curator leads again, under a new
	// leadership, and finishes the change.
	if err := election.Resign(callCtx(t)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the curator leads again", func() bool {
		st := svc.currentLeader()
		return st != nil && st != old
	})
	waitFor(t, "the new leadership grants the role", func() bool {
		n := c.loadNode(w.id)
		return spec.HasRole(n, pb.Role_ROLE_CONSENSUS) && n.Consensus.GetMemberId() == memberID
	})
	ev := f.waitEvent(t, "grant-role", w.id)
	if ev.Leader != c.first.id {
		t.Errorf("grant-role recorded by %q, want %q", ev.Leader, c.first.id)
	}
}

// TestSyncRemovesMembersFirst plants a member no node owns and a role
// without a member together: the member goes first, then the role, one
// change per tick with at least MinActionGap between them.
func TestSyncRemovesMembersFirst(t *testing.T) {
	f := newSyncFixture(t)
	w := f.worker("w1")
	// The member first: it has no watch, so it waits for a tick, and the
	// role write that follows gives it one that sees both.
	_, ghost, err := consensus.AddLearner(callCtx(t), f.c.cli, "ghost", unusedPeerURL(t))
	if err != nil {
		t.Fatal(err)
	}
	saveAsLeader(t, f.svc, w.id, func(n *pb.Node) {
		n.Roles = leader.WithRole(n.Roles, pb.Role_ROLE_CONSENSUS)
		n.Consensus = &pb.ConsensusJoin{MemberId: 0xdead}
	})
	waitFor(t, "both are repaired", func() bool {
		return !hasMember(f.members(t), ghost) && !spec.HasRole(f.c.loadNode(w.id), pb.Role_ROLE_CONSENSUS)
	})
	removed := f.waitEvent(t, "remove-member", "")
	cleared := f.waitEvent(t, "clear-role", w.id)
	gap := cleared.Time.AsTime().Sub(removed.Time.AsTime())
	if gap < DefaultMinActionGap {
		t.Errorf("clear-role %v after remove-member, want it after and at least %v apart (one change per tick)", gap, DefaultMinActionGap)
	}
	var order []string
	for _, ev := range f.events(t) {
		if ev.Loop == syncLoopName {
			order = append(order, ev.Action)
		}
	}
	if diff := cmp.Diff([]string{"remove-member", "clear-role"}, order); diff != "" {
		t.Errorf("sync events (-want +got):\n%s", diff)
	}
}

// TestSyncRecordsRecurringRefusal: a refusal is recorded once while it
// lasts (not every tick), but a refusal that comes back after the loop
// recovered is news, and must be recorded again.
func TestSyncRecordsRecurringRefusal(t *testing.T) {
	f := newSyncFixture(t)
	ctx := callCtx(t)
	own, err := f.c.cli.Get(ctx, store.Keys.Node(f.c.first.id))
	if err != nil || len(own.Kvs) != 1 {
		t.Fatalf("read own node: %v, %v", own, err)
	}
	for round := 1; round <= 2; round++ {
		if _, err := f.c.cli.Delete(ctx, store.Keys.Node(f.c.first.id)); err != nil {
			t.Fatal(err)
		}
		refusals := syncRefusals(t, f.svc)
		waitFor(t, "the sync refuses", func() bool { return syncRefusals(t, f.svc) > refusals })
		if _, err := f.c.cli.Put(ctx, store.Keys.Node(f.c.first.id), string(own.Kvs[0].Value)); err != nil {
			t.Fatal(err)
		}
		// Recovered: it acts again.
		_, ghost, err := consensus.AddLearner(ctx, f.c.cli, "ghost", unusedPeerURL(t))
		if err != nil {
			t.Fatal(err)
		}
		waitFor(t, "the sync acts again", func() bool { return !hasMember(f.members(t), ghost) })
		if got := findEvents(f.events(t), syncLoopName, "refuse", f.c.first.id); len(got) != round {
			t.Errorf("after %d refusals, %d refusal events", round, len(got))
		}
	}
}
