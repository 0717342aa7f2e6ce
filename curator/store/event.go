package store

import (
	"context"
	"fmt"
	"slices"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/proto"

	pb "github.com/curatorproject/curator/proto"
)

// Events: what the loops did, and why. Keys sort by time; the history is
// bounded by trimming the oldest once it grows a tenth past MaxEvents.

const eventPrefix = keyPrefix + "events/"

// MaxEvents is how many events are kept.
const MaxEvents = 1000

func eventKey(ev *pb.Event) string { return timeKey(eventPrefix, ev.Time.AsTime()) }

// EventRecord writes an event, fenced, and trims the history.
func EventRecord(ctx context.Context, l *Fence, ev *pb.Event) error {
	return logAppend(ctx, l.cli, l, eventPrefix, eventKey(ev), ev, MaxEvents, "event")
}

// eventPuts are the writes of events evs, to go in the transaction of
// the change they explain. They are not trimmed there: the next
// EventRecord trims the history (it allows a tenth over MaxEvents).
func eventPuts(evs []*pb.Event) ([]clientv3.Op, error) {
	ops := make([]clientv3.Op, 0, len(evs)+2)
	for _, ev := range evs {
		data, err := proto.Marshal(ev)
		if err != nil {
			return nil, err
		}
		ops = append(ops, clientv3.OpPut(eventKey(ev), string(data)))
	}
	return ops, nil
}

// EventObserved writes an event without a Fence to fence it: the
// record of what a follower saw and did about the leader itself (its lease
// revoked after its process died), which no leader can write for it. It
// is a new key, never a change to one, and the next leader's trim counts
// it with the rest.
func EventObserved(ctx context.Context, kv clientv3.KV, ev *pb.Event) error {
	data, err := proto.Marshal(ev)
	if err != nil {
		return err
	}
	if _, err := kv.Put(ctx, eventKey(ev), string(data)); err != nil {
		return fmt.Errorf("record event: %w", err)
	}
	return nil
}

// EventList reads the newest limit events (0: all kept), oldest first.
func EventList(ctx context.Context, kv clientv3.KV, limit int64) ([]*pb.Event, error) {
	events, _, err := logNewest(ctx, kv, eventPrefix, limit, 0, func() *pb.Event { return &pb.Event{} }, "event")
	return events, err
}

// EventsAfter reads the kept events recorded after etcd revision after,
// oldest first; with after 0, the newest backlog of them (none if backlog
// is 0). It returns the revision it read at: every event up to it is in
// the answer or before after.
//
// Order and resumption go by revision, not by key: keys sort by the
// recording leader's clock, which two leaders do not share, while an
// event's revision is where etcd put it. An event is written once and
// never changed, so its ModRevision is the revision that made it.
func EventsAfter(ctx context.Context, kv clientv3.KV, after int64, backlog int64) ([]*pb.Event, int64, error) {
	opts := []clientv3.OpOption{clientv3.WithPrefix()}
	switch {
	case after > 0:
		opts = append(opts, clientv3.WithMinModRev(after+1), clientv3.WithSort(clientv3.SortByModRevision, clientv3.SortAscend))
	case backlog > 0:
		opts = append(opts, clientv3.WithSort(clientv3.SortByModRevision, clientv3.SortDescend), clientv3.WithLimit(backlog))
	default:
		opts = append(opts, clientv3.WithCountOnly())
	}
	resp, err := kv.Get(ctx, eventPrefix, opts...)
	if err != nil {
		return nil, 0, fmt.Errorf("list events: %w", err)
	}
	events := make([]*pb.Event, 0, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		ev := &pb.Event{}
		if err := proto.Unmarshal(kv.Value, ev); err != nil {
			return nil, 0, fmt.Errorf("event %s is corrupt: %w", kv.Key, err)
		}
		events = append(events, ev)
	}
	if after <= 0 {
		slices.Reverse(events)
	}
	return events, resp.Header.Revision, nil
}

// EventWatch watches for events recorded from revision from on. Only new
// events are of interest: the history's trims are deletes (EventCreated
// tells them apart).
func EventWatch(ctx context.Context, w clientv3.Watcher, from int64) clientv3.WatchChan {
	return w.Watch(ctx, eventPrefix, clientv3.WithPrefix(), clientv3.WithRev(from), clientv3.WithProgressNotify())
}

// EventCreated returns the event a watch event recorded, or nil for a
// trim.
func EventCreated(wev *clientv3.Event) (*pb.Event, error) {
	if !wev.IsCreate() {
		return nil, nil
	}
	ev := &pb.Event{}
	if err := proto.Unmarshal(wev.Kv.Value, ev); err != nil {
		return nil, fmt.Errorf("event %s is corrupt: %w", wev.Kv.Key, err)
	}
	return ev, nil
}
