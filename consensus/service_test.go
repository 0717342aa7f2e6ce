package consensus

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/curatorproject/curator/pki"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

func TestBootstrap(t *testing.T) {
	t.Parallel()
	p := newTestPKI(t)
	n := p.newNode(t, "n0", ModeBootstrap, nil)
	w := n.svc.Watch()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	if st, err := w.Get(ctx); err != nil || st.State != Stopped {
		t.Fatalf("status before Run: %+v, %v; want stopped", st, err)
	}

	n.start()
	st := n.waitState(Voter)
	if st.MemberID == 0 || st.ClusterID == 0 {
		t.Errorf("status %+v: want member and cluster IDs", st)
	}
	cli := n.svc.Client()
	if cli == nil {
		t.Fatal("Client() = nil while running")
	}
	put(t, cli, "k", "v")
	if got := get(t, cli, "k"); got != "v" {
		t.Errorf("get k = %q, want v", got)
	}
	members, err := Members(ctx, cli)
	if err != nil {
		t.Fatal(err)
	}
	want := []Member{{ID: st.MemberID, NodeID: "n0", PeerURL: n.peerURL(), ClientURL: n.clientURL()}}
	if diff := cmp.Diff(want, members); diff != "" {
		t.Errorf("members (-want +got):\n%s", diff)
	}

	if err := n.stop(); err != nil {
		t.Errorf("Run after cancel: %v, want context.Canceled", err)
	}
	if got := n.svc.Status(); got.State != Stopped {
		t.Errorf("status after Run: %+v, want stopped", got)
	}
	if n.svc.Client() != nil {
		t.Error("Client() != nil after Run returned")
	}
}

func TestRestartKeepsData(t *testing.T) {
	t.Parallel()
	p := newTestPKI(t)
	n := p.newNode(t, "n0", ModeBootstrap, nil)
	n.start()
	before := n.waitState(Voter)
	put(t, n.svc.Client(), "k", "kept")
	if err := n.stop(); err != nil {
		t.Fatal(err)
	}

	// The same Service runs again: its data dir has a member now, so it
	// restarts from it although its mode says bootstrap.
	n.start()
	after := n.waitState(Voter)
	if diff := cmp.Diff(before, after); diff != "" {
		t.Errorf("status after restart (-before +after):\n%s", diff)
	}
	if got := get(t, n.svc.Client(), "k"); got != "kept" {
		t.Errorf("after restart k = %q, want kept", got)
	}
	if err := n.stop(); err != nil {
		t.Fatal(err)
	}

	// A new Service in restart mode, as after a reboot.
	cfg := n.cfg
	cfg.Mode = ModeRestart
	n.svc = n.mustNew(cfg)
	n.start()
	n.waitState(Voter)
	if got := get(t, n.svc.Client(), "k"); got != "kept" {
		t.Errorf("after reboot k = %q, want kept", got)
	}
}

func TestRestartWithoutData(t *testing.T) {
	t.Parallel()
	p := newTestPKI(t)
	n := p.newNode(t, "n0", ModeRestart, nil)
	n.start()
	err := n.wait(testTimeout)
	if err == nil || !strings.Contains(err.Error(), "holds no etcd member to restart") {
		t.Errorf("Run in restart mode without data: %v, want an error saying there is nothing to restart", err)
	}
}

func TestJoinAsLearnerAndPromote(t *testing.T) {
	t.Parallel()
	p := newTestPKI(t)
	nodes := p.newCluster(t, 2)
	cli := p.client(t, nodes...)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()

	ip := nextIP(t)
	port := freeBasePort(t, ip)
	params, id, err := AddLearner(ctx, cli, "n2", PeerURL(ip, port))
	if err != nil {
		t.Fatal(err)
	}
	// Adding the same learner again (a new curator leader retrying) returns
	// the same member.
	again, againID, err := AddLearner(ctx, cli, "n2", PeerURL(ip, port))
	if err != nil {
		t.Fatal(err)
	}
	if againID != id {
		t.Errorf("AddLearner again: member %x, want %x", againID, id)
	}
	sortPeers := cmpopts.SortSlices(func(a, b Peer) bool { return a.PeerURL < b.PeerURL })
	if diff := cmp.Diff(params, again, sortPeers); diff != "" {
		t.Errorf("join params of the second AddLearner (-first +second):\n%s", diff)
	}
	// A started member's peer URL cannot be taken, nor can a node be added
	// twice.
	if _, _, err := AddLearner(ctx, cli, "other", nodes[1].peerURL()); err == nil {
		t.Error("AddLearner at a voter's peer URL: no error")
	}
	if _, _, err := AddLearner(ctx, cli, "n1", PeerURL(ip, port+10)); err == nil {
		t.Error("AddLearner of a node that is a voter already: no error")
	}

	// Before it starts, the learner has no name: it is matched by peer URL.
	members, err := Members(ctx, cli)
	if err != nil {
		t.Fatal(err)
	}
	byPeerURL := map[string]string{PeerURL(ip, port): "n2"}
	var unnamed int
	for _, m := range members {
		if m.NodeID == "" {
			unnamed++
			if got := byPeerURL[m.PeerURL]; got != "n2" || !m.IsLearner {
				t.Errorf("unstarted member %+v: node %q learner %v, want n2 and a learner", m, got, m.IsLearner)
			}
		}
	}
	if unnamed != 1 {
		t.Errorf("%d unnamed members, want 1 (the learner)", unnamed)
	}

	// The join parameters travel as JSON.
	data, err := json.Marshal(params)
	if err != nil {
		t.Fatal(err)
	}
	var decoded JoinParams
	if err := json.Unmarshal(data, &decoded); err != nil {
		t.Fatal(err)
	}
	wantPeers := []Peer{{"n0", nodes[0].peerURL()}, {"n1", nodes[1].peerURL()}, {"n2", PeerURL(ip, port)}}
	if diff := cmp.Diff(JoinParams{Peers: wantPeers, ClusterID: nodes[0].svc.Status().ClusterID, MemberID: id}, decoded, sortPeers); diff != "" {
		t.Errorf("join params (-want +got):\n%s", diff)
	}

	n := p.newNodeAt(t, "n2", ip, port, ModeJoin, &decoded)
	w := n.svc.Watch()
	// The first Get answers at once with the state before Run.
	first, err := w.Get(ctx)
	if err != nil {
		t.Fatal(err)
	}
	states := []State{first.State}
	n.start()
	for {
		st, err := w.Get(ctx)
		if err != nil {
			t.Fatalf("watching n2: %v (states so far %v)", err, states)
		}
		if states[len(states)-1] != st.State {
			states = append(states, st.State)
		}
		if st.State == Learner {
			if st.MemberID != id {
				t.Errorf("learner runs as member %x, was added as %x", st.MemberID, id)
			}
			if err := PromoteLearner(ctx, cli, id); err != nil {
				t.Fatal(err)
			}
		}
		if st.State == Voter {
			break
		}
	}
	if diff := cmp.Diff([]State{Stopped, Starting, Learner, Voter}, states); diff != "" {
		t.Errorf("states of the joining node (-want +got):\n%s", diff)
	}
	// Promoting a voter again is fine.
	if err := PromoteLearner(ctx, cli, id); err != nil {
		t.Errorf("PromoteLearner of a voter: %v", err)
	}

	members, err = Members(ctx, cli)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, m := range members {
		if m.IsLearner {
			t.Errorf("member %s still a learner", m.NodeID)
		}
		got = append(got, m.NodeID)
	}
	if diff := cmp.Diff([]string{"n0", "n1", "n2"}, got, cmpopts.SortSlices(func(a, b string) bool { return a < b })); diff != "" {
		t.Errorf("members (-want +got):\n%s", diff)
	}
	// The new voter serves.
	put(t, n.svc.Client(), "from-n2", "ok")
}

func TestMoveLeader(t *testing.T) {
	t.Parallel()
	p := newTestPKI(t)
	nodes := p.newCluster(t, 3)
	cli := p.client(t, nodes[0])
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()

	// Move leadership to each non-leader in turn: the second move starts
	// from a leader the first one chose.
	for range 2 {
		leader := leaderNode(t, cli, nodes)
		var target *testNode
		for _, n := range nodes {
			if n != leader {
				target = n
				break
			}
		}
		to := target.svc.Status().MemberID
		if err := MoveLeader(ctx, cli, to); err != nil {
			t.Fatal(err)
		}
		if got := leaderNode(t, cli, nodes); got != target {
			t.Fatalf("after MoveLeader to %s the leader is %s", target.id, got.id)
		}
	}
	// Moving to the leader itself is a no-op.
	if err := MoveLeader(ctx, cli, leaderNode(t, cli, nodes).svc.Status().MemberID); err != nil {
		t.Errorf("MoveLeader to the leader: %v", err)
	}
	put(t, cli, "k", "v")
}

// TestRemoveMember removes a member while its node is down and restarts it
// (ErrRemoved, the cluster undisturbed), then removes a running member (its
// Run ends with ErrRemoved). The rest keep quorum throughout.
func TestRemoveMember(t *testing.T) {
	t.Parallel()
	p := newTestPKI(t)
	nodes := p.newCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()

	// Keep the leader; remove the two others one after the other.
	cli := p.client(t, nodes...)
	leader := leaderNode(t, cli, nodes)
	var others []*testNode
	for _, n := range nodes {
		if n != leader {
			others = append(others, n)
		}
	}
	down, running := others[0], others[1]
	cli = p.client(t, leader, running)

	downID := down.svc.Status().MemberID
	if err := down.stop(); err != nil {
		t.Fatal(err)
	}
	if err := RemoveMember(ctx, cli, downID); err != nil {
		t.Fatal(err)
	}
	if err := RemoveMember(ctx, cli, downID); err != nil {
		t.Errorf("removing a removed member again: %v", err)
	}
	put(t, cli, "after-first-removal", "ok")

	// The removed member comes back: it learns it was removed and stops.
	start := time.Now()
	down.start()
	err := down.wait(testTimeout)
	if !errors.Is(err, ErrRemoved) {
		t.Fatalf("restarting a removed member: %v, want ErrRemoved", err)
	}
	t.Logf("removed member stopped after %v: %v", time.Since(start).Round(time.Millisecond), err)
	if !strings.Contains(err.Error(), "leave --force") {
		t.Errorf("error %q does not say what to do", err)
	}
	if got := leaderNode(t, cli, nodes); got != leader {
		t.Errorf("leader changed from %s to %s while the removed member restarted", leader.id, got.id)
	}
	put(t, cli, "after-removed-restart", "ok")
	members, err := Members(ctx, cli)
	if err != nil {
		t.Fatal(err)
	}
	if len(members) != 2 {
		t.Errorf("%d members, want 2: %+v", len(members), members)
	}
	// The removed member may leave: it only wipes its data.
	if err := down.svc.Leave(ctx); err != nil {
		t.Errorf("Leave of a removed member: %v", err)
	}
	if _, err := os.Stat(down.cfg.DataDir); !os.IsNotExist(err) {
		t.Errorf("data dir of the removed member still there: %v", err)
	}

	// Remove a member that is running: its Run ends with ErrRemoved.
	if err := RemoveMember(ctx, p.client(t, leader), running.svc.Status().MemberID); err != nil {
		t.Fatal(err)
	}
	if err := running.wait(testTimeout); !errors.Is(err, ErrRemoved) {
		t.Errorf("Run of a member removed while running: %v, want ErrRemoved", err)
	}
	put(t, p.client(t, leader), "alone", "ok")
}

func TestTLSRefusesOtherCertificates(t *testing.T) {
	t.Parallel()
	p := newTestPKI(t)
	n := p.newNode(t, "n0", ModeBootstrap, nil)
	n.start()
	n.waitState(Voter)
	foreign, err := pki.NewCA("foreign CA")
	if err != nil {
		t.Fatal(err)
	}
	foreignEtcd, err := foreign.NewIntermediate("foreign etcd CA")
	if err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		name    string
		cert    tls.Certificate
		wantErr bool
	}{
		{"etcd certificate", p.tlsCert(t, p.etcd, pki.RoleConsensus), false},
		{"node certificate from the root CA", p.tlsCert(t, p.root, pki.RoleNode), true},
		{"certificate from another CA", p.tlsCert(t, foreignEtcd, pki.RoleConsensus), true},
		{"no certificate", tls.Certificate{}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Client port: a gRPC call.
			cli, err := NewClient([]string{n.clientURL()}, tc.cert, p.etcd.Cert)
			if err != nil {
				t.Fatal(err)
			}
			defer cli.Close()
			// A refused call fails only at its deadline: gRPC keeps retrying
			// the handshake.
			timeout := testTimeout
			if tc.wantErr {
				timeout = 1500 * time.Millisecond
			}
			ctx, cancel := context.WithTimeout(context.Background(), timeout)
			defer cancel()
			_, err = cli.Get(ctx, "k")
			if gotErr := err != nil; gotErr != tc.wantErr {
				t.Errorf("client port: Get: %v, want error: %v", err, tc.wantErr)
			}

			// Peer port: an HTTPS request to the raft transport.
			hc := &http.Client{Timeout: 3 * time.Second, Transport: &http.Transport{
				DisableKeepAlives: true,
				TLSClientConfig: &tls.Config{
					Certificates: []tls.Certificate{tc.cert},
					RootCAs:      caPool(p.etcd.Cert),
				},
			}}
			resp, err := hc.Get(n.peerURL() + "/version")
			if err == nil {
				_, err = io.ReadAll(resp.Body)
				resp.Body.Close()
			}
			if gotErr := err != nil; gotErr != tc.wantErr {
				t.Errorf("peer port: GET /version: %v, want error: %v", err, tc.wantErr)
			}
		})
	}
}

func TestPortInUse(t *testing.T) {
	t.Parallel()
	p := newTestPKI(t)
	for _, tc := range []struct {
		name   string
		offset int
	}{
		{"peer", peerPortOffset},
		{"client", clientPortOffset},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := p.newNode(t, "n0", ModeBootstrap, nil)
			addr := net.JoinHostPort(n.ip, strconv.Itoa(n.port+tc.offset))
			ln, err := net.Listen("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer ln.Close()
			n.start()
			err = n.wait(testTimeout)
			if !errors.Is(err, ErrPortInUse) {
				t.Fatalf("Run with port %s taken: %v, want ErrPortInUse", addr, err)
			}
			if !strings.Contains(err.Error(), addr) || !strings.Contains(err.Error(), "pick another --listen") {
				t.Errorf("error %q does not name %s and the fix", err, addr)
			}
			if _, err := os.Stat(n.cfg.DataDir + "/member"); !os.IsNotExist(err) {
				t.Errorf("etcd created its data although its port was taken: %v", err)
			}
		})
	}
}

func TestOtherCluster(t *testing.T) {
	t.Parallel()
	p := newTestPKI(t)
	n := p.newNode(t, "n0", ModeBootstrap, nil)
	n.start()
	st := n.waitState(Voter)
	if err := n.stop(); err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		name   string
		change func(*Config)
	}{
		{"another node's data dir", func(c *Config) { c.NodeID = "n9"; c.Mode = ModeRestart }},
		{"joining another cluster", func(c *Config) {
			c.Mode = ModeJoin
			c.Join = &JoinParams{
				Peers:     []Peer{{NodeID: c.NodeID, PeerURL: PeerURL(c.ListenIP, c.Port)}},
				ClusterID: st.ClusterID + 1,
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := n.cfg
			tc.change(&cfg)
			svc, err := New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
			defer cancel()
			err = svc.Run(ctx)
			if !errors.Is(err, ErrOtherCluster) {
				t.Fatalf("Run: %v, want ErrOtherCluster", err)
			}
			if !strings.Contains(err.Error(), "wipe") {
				t.Errorf("error %q does not say what to do", err)
			}
		})
	}

	// The data dir is intact and still runs as itself.
	n.start()
	if got := n.waitState(Voter); got != st {
		t.Errorf("status after the refused runs: %+v, want %+v", got, st)
	}
}

func TestLeave(t *testing.T) {
	t.Parallel()
	p := newTestPKI(t)
	nodes := p.newCluster(t, 2)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	cli := p.client(t, nodes[0])

	// Make the leaving node the leader, so that Leave must hand leadership
	// away first.
	leaving, staying := nodes[1], nodes[0]
	if err := MoveLeader(ctx, cli, leaving.svc.Status().MemberID); err != nil {
		t.Fatal(err)
	}
	put(t, cli, "before", "ok")

	if err := leaving.svc.Leave(ctx); err != nil {
		t.Fatal(err)
	}
	if err := leaving.wait(testTimeout); err != nil {
		t.Errorf("Run after Leave: %v, want nil", err)
	}
	if _, err := os.Stat(leaving.cfg.DataDir); !os.IsNotExist(err) {
		t.Errorf("data dir after Leave: %v, want it gone", err)
	}
	members, err := Members(ctx, cli)
	if err != nil {
		t.Fatal(err)
	}
	if len(members) != 1 || members[0].NodeID != staying.id {
		t.Errorf("members after Leave: %+v, want only %s", members, staying.id)
	}
	put(t, cli, "after", "ok")
	if err := leaving.svc.Run(ctx); !errors.Is(err, ErrLeft) {
		t.Errorf("Run after Leave: %v, want ErrLeft", err)
	}

	// The last voter cannot leave.
	if err := staying.svc.Leave(ctx); !errors.Is(err, ErrLastMember) {
		t.Errorf("Leave of the last voter: %v, want ErrLastMember", err)
	}
	put(t, cli, "still", "ok")

	// A stopped member cannot remove itself, so Leave keeps its data.
	if err := staying.stop(); err != nil {
		t.Fatal(err)
	}
	if err := staying.svc.Leave(ctx); !errors.Is(err, ErrNotRunning) {
		t.Errorf("Leave while stopped: %v, want ErrNotRunning", err)
	}
	if !memberExists(staying.cfg.DataDir) {
		t.Error("Leave while stopped wiped the data")
	}
}

// TestStaleDataDir restarts a member whose peer's address is now taken by a
// node of another cluster: the peer refuses it for its cluster ID, and Run
// says so once the ready timeout is up. Then it cancels such a start.
func TestStaleDataDir(t *testing.T) {
	t.Parallel()
	p := newTestPKI(t)
	a := p.newCluster(t, 2)
	for _, n := range a {
		if err := n.stop(); err != nil {
			t.Fatal(err)
		}
	}
	b := p.newNodeAt(t, "b0", a[1].ip, a[1].port, ModeBootstrap, nil)
	b.start()
	b.waitState(Voter)

	cfg := a[0].cfg
	cfg.ReadyTimeout = 3 * time.Second
	a[0].svc = a[0].mustNew(cfg)
	a[0].start()
	err := a[0].wait(testTimeout)
	if !errors.Is(err, ErrOtherCluster) {
		t.Fatalf("Run with a peer of another cluster: %v, want ErrOtherCluster", err)
	}
	// The other cluster is unaffected.
	put(t, b.svc.Client(), "k", "v")

	// A start that cannot finish (no quorum) ends promptly when cancelled.
	cfg.ReadyTimeout = testTimeout
	a[0].svc = a[0].mustNew(cfg)
	a[0].start()
	a[0].waitState(Starting)
	start := time.Now()
	if err := a[0].stop(); err != nil {
		t.Errorf("Run cancelled while starting: %v, want context.Canceled", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("Run took %v to return after its context was cancelled while starting", d)
	}
}

// TestLearnersJoinAtOnce: two managers are added as learners before either
// starts, so each one's join parameters (a snapshot) miss the other. Each
// must still join: it reads the current membership before it starts.
func TestLearnersJoinAtOnce(t *testing.T) {
	t.Parallel()
	p := newTestPKI(t)
	nodes := p.newCluster(t, 1)
	cli := p.client(t, nodes...)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()

	type added struct {
		id       string
		ip       string
		port     int
		params   JoinParams
		memberID uint64
	}
	var learners []added
	for _, id := range []string{"a", "b"} {
		ip := nextIP(t)
		port := freeBasePort(t, ip)
		params, memberID, err := AddLearner(ctx, cli, id, PeerURL(ip, port))
		if err != nil {
			t.Fatalf("add learner %s: %v (etcd must accept more than one learner at once)", id, err)
		}
		learners = append(learners, added{id, ip, port, params, memberID})
	}
	if got := len(learners[0].params.Peers); got != 2 {
		t.Fatalf("the first learner's parameters list %d peers, want 2 (the snapshot before the second was added)", got)
	}
	var started []*testNode
	for _, l := range learners {
		n := p.newNodeAt(t, l.id, l.ip, l.port, ModeJoin, &l.params)
		n.start()
		started = append(started, n)
	}
	for i, n := range started {
		if st := n.waitState(Learner); st.MemberID != learners[i].memberID {
			t.Errorf("learner %s runs as member %x, was added as %x", learners[i].id, st.MemberID, learners[i].memberID)
		}
		if err := PromoteLearner(ctx, cli, learners[i].memberID); err != nil {
			t.Fatal(err)
		}
		n.waitState(Voter)
	}
}

// TestLeaderStopsPromptly stops a follower and, at once, the etcd leader:
// the leader hands leadership to the voter that answers rather than wait
// for one that has just stopped (etcd's own stop may pick it, and then
// waits its whole request timeout), and the cluster keeps working.
func TestLeaderStopsPromptly(t *testing.T) {
	p := newTestPKI(t)
	nodes := p.newCluster(t, 3)
	cli := p.client(t, nodes...)
	leader := leaderNode(t, cli, nodes)
	var followers []*testNode
	for _, n := range nodes {
		if n != leader {
			followers = append(followers, n)
		}
	}
	if err := followers[0].stop(); err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	if err := leader.stop(); err != nil {
		t.Fatal(err)
	}
	took := time.Since(began)
	t.Logf("the etcd leader stopped in %s, a follower having stopped just before", took.Round(time.Millisecond))
	if took > 3*time.Second {
		t.Errorf("the etcd leader took %s to stop, want at most 3s", took.Round(time.Millisecond))
	}
	// The survivor cannot lead alone; bring the follower back and check
	// the cluster works.
	followers[0].svc = followers[0].mustNew(followers[0].cfg)
	followers[0].start()
	followers[0].waitState(Voter)
	put(t, p.client(t, followers...), "after", "stop")
}
