package curator

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/moby/moby/api/types/events"
	"github.com/moby/moby/api/types/swarm"
	"github.com/moby/moby/client"

	"github.com/curatorproject/curator/curator/decide"
	"github.com/curatorproject/curator/curator/internal/leader"
	"github.com/curatorproject/curator/curator/spec"
	"github.com/curatorproject/curator/internal/swarmtest"
	pb "github.com/curatorproject/curator/proto"
)

// fakeEventer answers each Events call with the next of its streams: a
// stream is the messages it sends, then the error it ends with (nil: it
// stays open until the call's context ends).
type fakeEventer struct {
	mu      sync.Mutex
	streams []fakeStream
	sinces  []string
}

type fakeStream struct {
	msgs []events.Message
	err  error
}

func (f *fakeEventer) Events(ctx context.Context, options client.EventsListOptions) client.EventsResult {
	f.mu.Lock()
	f.sinces = append(f.sinces, options.Since)
	var s fakeStream
	if len(f.streams) > 0 {
		s, f.streams = f.streams[0], f.streams[1:]
	}
	f.mu.Unlock()
	msgs := make(chan events.Message)
	errs := make(chan error, 1)
	go func() {
		for _, m := range s.msgs {
			select {
			case msgs <- m:
			case <-ctx.Done():
				errs <- ctx.Err()
				return
			}
		}
		if s.err != nil {
			errs <- s.err
			return
		}
		<-ctx.Done()
		errs <- ctx.Err()
	}()
	return client.EventsResult{Messages: msgs, Err: errs}
}

func (f *fakeEventer) calls() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.sinces...)
}

// TestWatchSwarm checks the watch without an engine: a stream that fails
// is opened again, each event kicks the loop, a stream opened again starts
// at the last event's time, and the watch ends with its context.
func TestWatchSwarm(t *testing.T) {
	at := time.Unix(1700000000, 5).UnixNano()
	f := &fakeEventer{streams: []fakeStream{
		{err: errors.New("connection refused")},
		{msgs: []events.Message{{Type: events.NodeEventType, Action: events.ActionUpdate, TimeNano: at}}, err: errors.New("EOF")},
		{msgs: []events.Message{{Type: events.NodeEventType, Action: events.ActionCreate, TimeNano: at + 1}}},
	}}
	ch := make(chan struct{}, 1)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		leader.WatchSwarm(ctx, f, ch)
	}()
	for i := range 2 {
		select {
		case <-ch:
		case <-time.After(10 * time.Second):
			t.Fatalf("kick %d did not come", i)
		}
	}
	waitFor(t, "the third stream to be opened", func() bool { return len(f.calls()) == 3 })
	cancel()
	<-done
	if diff := cmp.Diff([]string{"", "", "1700000000.000000005"}, f.calls()); diff != "" {
		t.Errorf("the streams' since (-want +got):\n%s", diff)
	}
}

// TestSwarmWatchWakes runs the swarm sync against a real Swarm (one
// manager, the leader's node's engine, and one worker, node b's) with a
// periodic read of a minute: a promotion made in the Swarm alone (what a
// promotion cut short after its Swarm step leaves, with the curator
// running) is acted on well within a second, which only the Swarm's node
// events can make it do. Setting the cluster's Swarm mode, with every
// node's Swarm ID known already, wakes the sync at once too.
func TestSwarmWatchWakes(t *testing.T) {
	if err := swarmtest.Available(); err != nil {
		t.Skipf("swarmtest: %v", err)
	}
	start := time.Now()
	sw := swarmtest.Start(t, swarmtest.Config{Managers: 1, Workers: 1})
	t.Logf("Swarm of 2 engines up in %v", time.Since(start).Round(time.Millisecond))
	m0, w0 := sw.Engines[0], sw.Engines[1]

	c := newTestCluster(t)
	cfg := c.curatorConfig(c.first, c.cli)
	cfg.Docker = m0.Client
	cfg.SwarmInterval = time.Minute
	svc, _ := c.leadWith(cfg)
	admin, anon := c.dialFirst()
	tok := c.token(admin, "worker")

	firstConn := dial(t, c.first.address, c.first.tlsCert(), c.root.Cert)
	runSwarmAgent(t, c, c.first.id, firstConn, m0)
	b, _ := c.register(anon, tok, "b")
	conn := dial(t, c.first.address, b.tlsCert(), c.root.Cert)
	keepBeating(t, conn)
	runSwarmAgent(t, c, b.id, conn, w0)
	c.waitStatus(b.id, pb.NodeStatus_NODE_STATUS_READY)
	waitFor(t, "both nodes to have their Swarm node ID", func() bool {
		return c.loadNode(c.first.id).SwarmNodeId == m0.NodeID && c.loadNode(b.id).SwarmNodeId == w0.NodeID
	})
	// Swarm mode set once nothing else changes: setting it wakes the
	// sync, not its periodic read a minute later.
	on := time.Now()
	setSwarm(t, admin, true)
	waitFor(t, "the swarm sync to have read the Swarm", func() bool {
		st := svc.currentLeader()
		return st != nil && st.Swarm.Seen.Read()
	})
	if took := time.Since(on); took > 5*time.Second {
		t.Errorf("the swarm sync read the Swarm %v after Swarm mode was set, want at once", took.Round(time.Millisecond))
	}

	setSwarmRole(t, m0, w0.NodeID, swarm.NodeRoleManager)
	changed := time.Now()
	ev := c.swarmEvent(changed.Add(-time.Second), "swarm-sync", string(decide.SwarmGrantRole), b.id)
	took := ev.Time.AsTime().Sub(changed)
	t.Logf("grant-role %v after the Swarm change (periodic read every %v)", took.Round(time.Millisecond), cfg.SwarmInterval)
	if took >= time.Second {
		t.Errorf("grant-role came %v after the Swarm change; want < 1s", took)
	}
	waitFor(t, "node b to have the consensus role", func() bool { return spec.HasRole(c.loadNode(b.id), pb.Role_ROLE_CONSENSUS) })
}
