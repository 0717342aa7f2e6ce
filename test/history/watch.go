package history

import (
	"context"
	"errors"
	"fmt"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/curatorproject/curator/client"
	pb "github.com/curatorproject/curator/proto"
)

// The watches' validators. A watch is kept open across failovers by the
// client (client/watch.go): a stream that ends is opened again on the
// next manager that answers, WatchEvents from the revision it got to,
// WatchNodes with a new snapshot. What the promise says of them
// (docs/consistency.md) is checked here:
//
//   - WatchEvents: each event once, in etcd's order, and none lost across
//     a resume: what the watch got, at the end, is what a fresh read of
//     the events after its first revision returns (a prefix of it);
//   - both: the revision an answer says it reflects never goes back, on
//     one stream or across a resume;
//   - WatchNodes: a node's label LabelKey, which every write of the
//     workload sets to a value of its own, never comes back to a value it
//     left (the view never goes back in time).

// errStop ends a watch from its callback.
var errStop = errors.New("stop")

// watchClient is a client of every manager, which follows a watch
// across failovers until ctx ends.
func (w *Workload) watchClient(ctx context.Context) (*client.Client, error) {
	return client.Dial(ctx, w.Config, w.ConfigPath, client.WithCachePath(""), client.WithFollowUntilCancelled(func(string) {}))
}

// eventKey identifies an event (events carry no ID of their own): the
// whole record.
func eventKey(ev *pb.Event) string {
	b, _ := proto.MarshalOptions{Deterministic: true}.Marshal(ev)
	return string(b)
}

func (w *Workload) logf(format string, args ...any) {
	if w.Logf != nil {
		w.Logf(format, args...)
	}
}

// watchEvents follows the events until ctx ends, then checks what it got
// against a fresh read.
func (w *Workload) watchEvents(ctx context.Context, rec *Recorder) {
	c, err := w.watchClient(ctx)
	if err != nil {
		rec.WatchBroken("events: %v", err)
		return
	}
	defer c.Close()
	var (
		first, last int64 = -1, 0
		got         []*pb.Event
		seen        = map[string]bool{}
		answers     int
		truncated   bool
	)
	err = c.WatchEvents(ctx, 0, 0, func(resp *pb.WatchEventsResponse) error {
		answers++
		if first < 0 {
			first = resp.GetRevision()
		}
		if resp.GetRevision() < last {
			rec.WatchBroken("events: an answer at revision %d after one at %d (went back)", resp.GetRevision(), last)
		}
		last = max(last, resp.GetRevision())
		if resp.GetTruncated() {
			// The promise leaves those out (the history is bounded):
			// nothing to compare from here.
			w.logf("history: events trimmed before the watch got them, after revision %d", last)
			truncated = true
		}
		for _, ev := range resp.GetEvents() {
			k := eventKey(ev)
			if seen[k] {
				rec.WatchBroken("events: %s %s of %s sent twice", ev.GetLoop(), ev.GetAction(), ev.GetTime().AsTime().Format(time.RFC3339Nano))
			}
			seen[k] = true
			got = append(got, ev)
		}
		return nil
	})
	if ctx.Err() == nil {
		rec.WatchBroken("events: the watch ended: %v", err)
		return
	}
	if first < 0 {
		rec.WatchBroken("events: the watch never answered")
		return
	}
	// What the watch got must be what etcd holds after its first
	// revision, in order: a fresh read returns it and maybe more.
	fctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	fresh, err := w.watchClient(fctx)
	if err != nil {
		rec.WatchBroken("events: %v", err)
		return
	}
	defer fresh.Close()
	var want *pb.WatchEventsResponse
	err = fresh.WatchEvents(fctx, first, 0, func(resp *pb.WatchEventsResponse) error {
		want = resp
		return errStop
	})
	if !errors.Is(err, errStop) {
		// Nothing to compare with: not a finding of the watch's.
		w.logf("history: events watch: %d events not compared: the fresh read after revision %d: %v", len(got), first, err)
		return
	}
	if want.GetTruncated() || truncated {
		w.logf("history: the events after revision %d were trimmed meanwhile: the watch's %d not compared", first, len(got))
		return
	}
	evs := want.GetEvents()
	for i, ev := range got {
		if i >= len(evs) {
			rec.WatchBroken("events: the watch got %d events after revision %d, a fresh read %d: the %dth, %s %s, is not kept", len(got), first, len(evs), i+1, ev.GetLoop(), ev.GetAction())
			return
		}
		if eventKey(ev) != eventKey(evs[i]) {
			rec.WatchBroken("events: the watch's %dth event after revision %d is %s %s %s, a fresh read's %s %s %s (one lost, repeated or out of order)", i+1, first,
				ev.GetLoop(), ev.GetAction(), ev.GetNodeId(), evs[i].GetLoop(), evs[i].GetAction(), evs[i].GetNodeId())
			return
		}
	}
	w.logf("history: events watch: %d answers, %d events, each once and in order, none lost (revisions %d to %d)", answers, len(got), first, last)
}

// watchNodes follows the nodes until ctx ends.
func (w *Workload) watchNodes(ctx context.Context, rec *Recorder) {
	if len(w.Nodes) == 0 {
		return
	}
	c, err := w.watchClient(ctx)
	if err != nil {
		rec.WatchBroken("nodes: %v", err)
		return
	}
	defer c.Close()
	var last int64
	answers, snapshots := 0, 0
	// now and left: each node's label now, and the values it had and
	// left.
	now := map[string]string{}
	left := map[string]map[string]bool{}
	see := func(n *pb.Node) {
		id, v := n.GetId(), n.GetLabels()[LabelKey]
		if cur, ok := now[id]; ok && cur != v {
			if left[id] == nil {
				left[id] = map[string]bool{}
			}
			left[id][cur] = true
		}
		if left[id][v] {
			rec.WatchBroken("nodes: node %s's label %s is %q again, a value it had left (went back in time), at revision %d", id, LabelKey, v, last)
		}
		now[id] = v
	}
	err = c.WatchNodes(ctx, func(resp *pb.WatchNodesResponse) error {
		answers++
		if resp.GetSnapshot() {
			snapshots++
		}
		if resp.GetRevision() < last {
			rec.WatchBroken("nodes: an answer at revision %d after one at %d (went back)", resp.GetRevision(), last)
		}
		last = max(last, resp.GetRevision())
		for _, nv := range resp.GetNodes() {
			see(nv.GetNode())
		}
		return nil
	})
	if ctx.Err() == nil {
		rec.WatchBroken("nodes: the watch ended: %v", err)
		return
	}
	w.logf("history: nodes watch: %d answers, %d snapshots (a resume sends one), up to revision %d", answers, snapshots, last)
}

// String names the workload for a log.
func (w *Workload) String() string {
	return fmt.Sprintf("%d clients, each through its own of %d managers; %d nodes' labels, %d groups", w.clients(), len(w.Managers), len(w.Nodes), w.groupCount())
}
