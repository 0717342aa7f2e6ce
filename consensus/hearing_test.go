package consensus

import (
	"context"
	"net"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/pkg/v3/proxy"
	"go.uber.org/zap"
)

// newHearing starts a cluster of three voters, and returns a context for
// the test, its nodes, a client, its members, etcd's leader and a Hearer
// (closed at the end of the test).
func newHearing(t *testing.T) (context.Context, []*testNode, *clientv3.Client, []Member, *testNode, *Hearer) {
	t.Helper()
	p := newTestPKI(t)
	nodes := p.newCluster(t, 3)
	cli := p.client(t, nodes...)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	t.Cleanup(cancel)
	members, err := Members(ctx, cli)
	if err != nil {
		t.Fatal(err)
	}
	hearer := NewHearer(cli)
	t.Cleanup(hearer.Close)
	return ctx, nodes, cli, members, leaderNode(t, cli, nodes), hearer
}

// TestHearNotTheDead: a voter stopped a moment ago is not heard, at once
// (no waiting for a timeout of etcd's), while the leader and the live
// voter are; and a move of leadership to it ends at its bound, saying
// what did not finish.
func TestHearNotTheDead(t *testing.T) {
	t.Parallel()
	ctx, nodes, cli, members, leader, hearer := newHearing(t)
	heard := func(ns ...*testNode) map[uint64]bool {
		out := map[uint64]bool{}
		for _, n := range ns {
			out[n.svc.Status().MemberID] = true
		}
		return out
	}
	// The last voter was promoted a moment ago: wait until it follows.
	var diff string
	for deadline := time.Now().Add(testTimeout); ; time.Sleep(50 * time.Millisecond) {
		h := hearer.Hear(ctx, members)
		if diff = cmp.Diff(Hearing{Leader: leader.svc.Status().MemberID, Heard: heard(nodes...)}, h); diff == "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("every voter running (-want +got):\n%s", diff)
		}
	}

	var dead, live *testNode
	for _, n := range nodes {
		switch {
		case n == leader:
		case dead == nil:
			dead = n
		default:
			live = n
		}
	}
	deadID := dead.svc.Status().MemberID
	if err := dead.stop(); err != nil {
		t.Fatal(err)
	}
	asked := time.Now()
	h := hearer.Hear(ctx, members)
	took := time.Since(asked)
	if diff := cmp.Diff(Hearing{Leader: leader.svc.Status().MemberID, Heard: heard(leader, live)}, h); diff != "" {
		t.Errorf("right after voter %s stopped (-want +got):\n%s", dead.id, diff)
	}
	t.Logf("Hear answered %v after the stop", took)
	if took >= HearTimeout {
		t.Errorf("Hear took %v with a voter stopped, want less than its bound %v: a refused port fails at once", took, HearTimeout)
	}

	const bound = time.Second
	asked = time.Now()
	err := Bounded(ctx, bound, "move etcd leadership to the stopped member", func(ctx context.Context) error {
		return MoveLeader(ctx, cli, deadID)
	})
	took = time.Since(asked)
	// Either bound may come first: ours, or etcd's own on a transfer
	// (its election timeout's worth); both say the move was not made.
	if err == nil || !strings.Contains(err.Error(), "move etcd leadership to the stopped member: not done within 1s") && !strings.Contains(err.Error(), "leader transfer took too long") {
		t.Errorf("move to the stopped member = %v, want it to say it was not done within %v, or etcd's own transfer timeout", err, bound)
	}
	if took > bound+time.Second {
		t.Errorf("move to the stopped member answered after %v, want about %v", took, bound)
	}
	if got := leaderNode(t, cli, nodes); got == dead {
		t.Errorf("etcd leadership went to the stopped member %s", dead.id)
	}
}

// TestHearSilentVoterOnce: a voter that goes silent (its member's client
// traffic held by a proxy, as a frozen process or a partition holds it)
// costs one Hear its bound, and no Hear after it: the next counts it
// unheard at once and asks it again in the background. Once it answers
// again it is waited on, and heard, again.
func TestHearSilentVoterOnce(t *testing.T) {
	t.Parallel()
	ctx, nodes, _, members, leader, hearer := newHearing(t)
	var quiet *testNode
	for _, n := range nodes {
		if n != leader {
			quiet = n
			break
		}
	}
	// The quiet member is asked through a proxy on its own address (its
	// certificate names it), which the test can hold.
	l, err := net.Listen("tcp", net.JoinHostPort(quiet.ip, "0"))
	if err != nil {
		t.Fatal(err)
	}
	from := l.Addr().String()
	l.Close()
	to, err := url.Parse(quiet.clientURL())
	if err != nil {
		t.Fatal(err)
	}
	px := proxy.NewServer(proxy.ServerConfig{Logger: zap.NewNop(), From: url.URL{Scheme: "tcp", Host: from}, To: url.URL{Scheme: "tcp", Host: to.Host}})
	<-px.Ready()
	// The proxy's Close waits for its connections to end: the Hearer's
	// through it are closed first (Close again at the end is a no-op).
	t.Cleanup(func() {
		hearer.Close()
		px.Close()
	})
	quietID := quiet.svc.Status().MemberID
	for i := range members {
		if members[i].ID == quietID {
			members[i].ClientURL = "https://" + from
		}
	}
	everyone := map[uint64]bool{}
	for _, n := range nodes {
		everyone[n.svc.Status().MemberID] = true
	}
	heardAll := func(what string) {
		t.Helper()
		var diff string
		for deadline := time.Now().Add(testTimeout); ; time.Sleep(50 * time.Millisecond) {
			h := hearer.Hear(ctx, members)
			if diff = cmp.Diff(Hearing{Leader: leader.svc.Status().MemberID, Heard: everyone}, h); diff == "" {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s (-want +got):\n%s", what, diff)
			}
		}
	}
	heardAll("every voter running")

	px.PauseTx()
	px.PauseRx()
	withoutQuiet := Hearing{Leader: leader.svc.Status().MemberID, Heard: map[uint64]bool{}}
	for id := range everyone {
		if id != quietID {
			withoutQuiet.Heard[id] = true
		}
	}
	asked := time.Now()
	h := hearer.Hear(ctx, members)
	first := time.Since(asked)
	if diff := cmp.Diff(withoutQuiet, h); diff != "" {
		t.Errorf("the first Hear with the voter silent (-want +got):\n%s", diff)
	}
	if first < HearTimeout {
		t.Fatalf("the first Hear with the voter silent took %v, less than its bound %v: the voter was not silent", first, HearTimeout)
	}
	for i := range 3 {
		asked = time.Now()
		h = hearer.Hear(ctx, members)
		took := time.Since(asked)
		if diff := cmp.Diff(withoutQuiet, h); diff != "" {
			t.Errorf("Hear %d after the voter went silent (-want +got):\n%s", i+2, diff)
		}
		if took >= HearTimeout/2 {
			t.Errorf("Hear %d after the voter went silent took %v: it waited on the silent voter again", i+2, took)
		}
	}

	px.UnpauseTx()
	px.UnpauseRx()
	heardAll("the voter answering again")
}
