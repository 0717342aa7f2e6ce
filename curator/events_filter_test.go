package curator

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	pb "github.com/curatorproject/curator/proto"
)

// eventSummary is what TestEventFilters compares of an event.
type eventSummary struct{ Loop, Action, NodeName, Group string }

func summarize(events []*pb.Event) []eventSummary {
	var out []eventSummary
	for _, e := range events {
		out = append(out, eventSummary{e.Loop, e.Action, e.NodeName, e.Group})
	}
	return out
}

// TestEventFilters: an event keeps the name and group its node had when
// it was recorded, so a removed node's events still name it; ListEvents
// and WatchEvents select events by the request's filter on the leader
// (the newest --limit of those selected), and refuse a filter that
// selects nothing sensible.
func TestEventFilters(t *testing.T) {
	c := newTestCluster(t)
	c.startLeader()
	admin, anon := c.dialFirst()
	m := pb.NewManagementClient(admin)
	tok := c.token(admin, "worker")
	a, _ := c.register(anon, tok, "worker-a")
	b, _ := c.register(anon, tok, "worker-b")
	before := time.Now()
	for _, n := range []*testNode{a, b} {
		if _, err := m.UpdateNode(callCtx(t), &pb.UpdateNodeRequest{Id: n.id, LabelAdd: map[string]string{"zone": "a"}}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := m.RemoveNode(callCtx(t), &pb.RemoveNodeRequest{Id: "worker-a", Force: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := m.GetNode(callCtx(t), &pb.GetNodeRequest{Id: a.id}); status.Code(err) != codes.NotFound {
		t.Fatalf("worker-a after its removal: %v, want NotFound", err)
	}

	list := func(f *pb.EventFilter, limit uint32) []eventSummary {
		t.Helper()
		resp, err := m.ListEvents(callCtx(t), &pb.ListEventsRequest{Filter: f, Limit: limit})
		if err != nil {
			t.Fatal(err)
		}
		return summarize(resp.Events)
	}
	updA := eventSummary{"operator", "UpdateNode", "worker-a", ""}
	updB := eventSummary{"operator", "UpdateNode", "worker-b", ""}
	rmA := eventSummary{"operator", "RemoveNode", "worker-a", ""}
	for _, tc := range []struct {
		name   string
		filter *pb.EventFilter
		limit  uint32
		want   []eventSummary
	}{
		{"a removed node, by its name", &pb.EventFilter{Node: "worker-a"}, 0, []eventSummary{updA, rmA}},
		{"a removed node, by its ID's prefix", &pb.EventFilter{Node: a.id[:8]}, 0, []eventSummary{updA, rmA}},
		{"a node, by name", &pb.EventFilter{Node: "worker-b"}, 0, []eventSummary{updB}},
		{"by action, in any case", &pb.EventFilter{Kind: "removenode"}, 0, []eventSummary{rmA}},
		{"by loop, since", &pb.EventFilter{Kind: "operator", Since: timestamppb.New(before)}, 0, []eventSummary{updA, updB, rmA}},
		{"the newest of those selected", &pb.EventFilter{Kind: "operator", Since: timestamppb.New(before)}, 1, []eventSummary{rmA}},
		{"both must match", &pb.EventFilter{Kind: "RemoveNode", Node: "worker-b"}, 0, nil},
		{"since later", &pb.EventFilter{Kind: "operator", Since: timestamppb.New(time.Now().Add(time.Hour))}, 0, nil},
		{"a group no event is of", &pb.EventFilter{Group: "web"}, 0, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, list(tc.filter, tc.limit)); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
		})
	}

	// The watch's backlog is the newest of those selected, then only
	// those selected come.
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	s, err := m.WatchEvents(ctx, &pb.WatchEventsRequest{Backlog: 1, Filter: &pb.EventFilter{Node: "worker-b"}})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := s.Recv()
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]eventSummary{updB}, summarize(resp.Events)); diff != "" {
		t.Errorf("the watch's backlog (-want +got):\n%s", diff)
	}
	if _, err := m.UpdateNode(callCtx(t), &pb.UpdateNodeRequest{Id: c.first.id, LabelAdd: map[string]string{"zone": "b"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := m.RemoveNode(callCtx(t), &pb.RemoveNodeRequest{Id: "worker-b", Force: true}); err != nil {
		t.Fatal(err)
	}
	for {
		resp, err := s.Recv()
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.Events) == 0 {
			continue
		}
		if diff := cmp.Diff([]eventSummary{{"operator", "RemoveNode", "worker-b", ""}}, summarize(resp.Events)); diff != "" {
			t.Errorf("the watch's next events (-want +got):\n%s", diff)
		}
		break
	}

	// A filter no event could match is refused.
	long := string(make([]byte, 200))
	for _, f := range []*pb.EventFilter{{Node: long}, {Since: &timestamppb.Timestamp{Nanos: -1}}} {
		if _, err := m.ListEvents(callCtx(t), &pb.ListEventsRequest{Filter: f}); status.Code(err) != codes.InvalidArgument {
			t.Errorf("ListEvents with filter %v: %v, want InvalidArgument", f, err)
		}
	}
}
