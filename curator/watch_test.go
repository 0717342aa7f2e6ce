package curator

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/curatorproject/curator/curator/store"
	pb "github.com/curatorproject/curator/proto"
)

// watchEventsFrom keeps a WatchEvents open the way the client package
// does (which this package cannot import): on the managers in turn, each
// stream resumed from the revision of the last answer. It returns when
// ctx ends.
func (c *testCluster) watchEventsFrom(ctx context.Context, col *eventCollector, managers ...string) {
	cert := c.adminCert()
	conns := make([]pb.ManagementClient, len(managers))
	for i, m := range managers {
		conns[i] = pb.NewManagementClient(dial(c.t, m, &cert, c.root.Cert))
	}
	var after int64
	for i := 0; ctx.Err() == nil; i++ {
		s, err := conns[i%len(conns)].WatchEvents(ctx, &pb.WatchEventsRequest{AfterRevision: after})
		for err == nil {
			var resp *pb.WatchEventsResponse
			if resp, err = s.Recv(); err == nil {
				col.got(resp)
				after = max(after, resp.Revision)
				col.streamOf(i)
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// eventCollector keeps what a WatchEvents got.
type eventCollector struct {
	mu      sync.Mutex
	reasons []string
	// streams counts the streams that answered.
	streams map[int]bool
}

func (e *eventCollector) streamOf(i int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.streams == nil {
		e.streams = map[int]bool{}
	}
	e.streams[i] = true
}

func (e *eventCollector) streamCount() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.streams)
}

func (e *eventCollector) got(resp *pb.WatchEventsResponse) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, ev := range resp.Events {
		// The test's own; the health loop records too.
		if ev.Loop == "test" {
			e.reasons = append(e.reasons, ev.Reason)
		}
	}
	return nil
}

func (e *eventCollector) list() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.reasons)
}

// TestWatchesAcrossFailover: the watches go on across a failover. Events
// are recorded without a pause through whichever curator leads while the
// leader stops; a watch through the follower (forwarded, then served by it
// as the new leader) and one on the old leader itself (which moves to the
// next manager) each get every event in etcd, in etcd's order, none twice.
// The node watch starts again with a snapshot from the new leader, and
// then sees a node that joins.
func TestWatchesAcrossFailover(t *testing.T) {
	c := newTestCluster(t)
	first, stopFirst := c.startCurator(c.first, c.cli)
	waitFor(t, "the first curator leads", first.IsLeader)
	admin, anon := c.dialFirst()
	m2, _ := c.register(anon, c.token(admin, "manager"), "m2")
	second, _ := c.startCurator(m2, c.etcdClient())

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var watchers sync.WaitGroup
	defer watchers.Wait()
	defer cancel()
	viaFollower, viaLeader := &eventCollector{}, &eventCollector{}
	for col, managers := range map[*eventCollector][]string{viaFollower: {m2.address, c.first.address}, viaLeader: {c.first.address, m2.address}} {
		watchers.Add(1)
		go func() {
			defer watchers.Done()
			c.watchEventsFrom(ctx, col, managers...)
		}()
	}
	var nodesMu sync.Mutex
	var snapshots int
	nodes := map[string]string{}
	cert := c.adminCert()
	nodeWatch := pb.NewManagementClient(dial(t, m2.address, &cert, c.root.Cert))
	watchers.Add(1)
	go func() {
		defer watchers.Done()
		for ctx.Err() == nil {
			s, err := nodeWatch.WatchNodes(ctx, &pb.WatchNodesRequest{})
			for err == nil {
				var resp *pb.WatchNodesResponse
				if resp, err = s.Recv(); err != nil {
					break
				}
				nodesMu.Lock()
				if resp.Snapshot {
					snapshots++
					clear(nodes)
				}
				for _, v := range resp.Nodes {
					nodes[v.Node.Id] = v.Node.Name
				}
				for _, id := range resp.Removed {
					delete(nodes, id)
				}
				nodesMu.Unlock()
			}
			select {
			case <-ctx.Done():
			case <-time.After(50 * time.Millisecond):
			}
		}
	}()
	waitFor(t, "the node watch has its snapshot", func() bool {
		nodesMu.Lock()
		defer nodesMu.Unlock()
		return snapshots >= 1 && len(nodes) == 2
	})

	// The writer records event i+1 once event i is in, through whichever
	// curator leads.
	written := 0
	record := func() {
		for _, svc := range []*Service{first, second} {
			st := svc.currentLeader()
			if st == nil {
				continue
			}
			wctx, wcancel := context.WithTimeout(ctx, time.Second)
			err := store.EventRecord(wctx, st.Lead.Fence, &pb.Event{Time: st.Events.Timestamp(), Loop: "test", Action: "tick", Reason: fmt.Sprint(written)})
			wcancel()
			if err == nil {
				written++
				return
			}
		}
	}
	writerDone := make(chan struct{})
	stopWriter := make(chan struct{})
	go func() {
		defer close(writerDone)
		for {
			select {
			case <-stopWriter:
				return
			default:
			}
			record()
			time.Sleep(5 * time.Millisecond)
		}
	}()
	waitFor(t, "both watches get events", func() bool { return len(viaFollower.list()) > 20 && len(viaLeader.list()) > 20 })
	// A stream can end before the failover too (a doubted lease ends it,
	// and the loop above opens it again): the new leader's snapshot is
	// any after this one.
	nodesMu.Lock()
	snapshotsBefore := snapshots
	nodesMu.Unlock()
	stopFirst()
	waitFor(t, "the second curator leads", second.IsLeader)
	before := len(viaFollower.list())
	waitFor(t, "the watches go on after the failover", func() bool {
		return len(viaFollower.list()) > before+20 && len(viaLeader.list()) > before+20
	})
	close(stopWriter)
	<-writerDone

	all, _, err := store.EventsAfter(callCtx(t), c.cli, 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, ev := range all {
		if ev.Loop == "test" {
			want = append(want, ev.Reason)
		}
	}
	for name, col := range map[string]*eventCollector{"via the follower": viaFollower, "via the old leader": viaLeader} {
		testWaitEvents(t, name, col, len(want))
		t.Logf("%s: %d events on %d streams", name, len(col.list()), col.streamCount())
		if diff := cmp.Diff(want, col.list()); diff != "" {
			t.Errorf("events %s (-in etcd +watched):\n%s", name, diff)
		}
		if n := col.streamCount(); n < 2 {
			t.Errorf("the watch %s answered on %d stream(s): the failover did not end it", name, n)
		}
	}

	// The node watch: a snapshot from the new leader, then a new node.
	w, _ := c.register(dial(t, m2.address, nil, c.root.Cert), c.token(dial(t, m2.address, &cert, c.root.Cert), "worker"), "w1")
	waitFor(t, "the node watch sees the new leader's snapshot and the new node", func() bool {
		nodesMu.Lock()
		defer nodesMu.Unlock()
		return snapshots > snapshotsBefore && nodes[w.id] == "w1" && len(nodes) == 3
	})
}

// testWaitEvents waits until col has n events (or more: a repeat).
func testWaitEvents(t *testing.T, name string, col *eventCollector, n int) {
	t.Helper()
	waitFor(t, fmt.Sprintf("the watch %s has all %d events", name, n), func() bool { return len(col.list()) >= n })
}
