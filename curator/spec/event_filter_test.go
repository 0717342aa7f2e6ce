package spec

import (
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	pb "github.com/curatorproject/curator/proto"
)

func TestEventMatch(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	known := []*pb.Node{{Id: "aaaa1111", Name: "web-1", Group: "web"}, {Id: "bbbb2222", Name: "db-1", Group: "db"}}
	ev := func(loop, action, node, name, group string, at time.Time) *pb.Event {
		return &pb.Event{Loop: loop, Action: action, NodeId: node, NodeName: name, Group: group, Time: timestamppb.New(at)}
	}
	for _, tc := range []struct {
		name   string
		filter *pb.EventFilter
		event  *pb.Event
		want   bool
	}{
		{"no filter", nil, ev("health", "mark-down", "x", "", "", t0), true},
		{"empty filter", &pb.EventFilter{}, ev("health", "mark-down", "x", "", "", t0), true},
		{"group recorded", &pb.EventFilter{Group: "web"}, ev("groups", "provision", "", "", "web", t0), true},
		{"another group recorded", &pb.EventFilter{Group: "web"}, ev("groups", "provision", "", "", "db", t0), false},
		{"no group recorded, its node in the group now", &pb.EventFilter{Group: "web"}, ev("health", "mark-down", "aaaa1111", "", "", t0), true},
		{"a group recorded wins over the node's now", &pb.EventFilter{Group: "web"}, ev("health", "mark-down", "aaaa1111", "", "db", t0), false},
		{"node by ID", &pb.EventFilter{Node: "aaaa1111"}, ev("health", "mark-down", "aaaa1111", "", "", t0), true},
		{"node by ID prefix", &pb.EventFilter{Node: "aaaa"}, ev("health", "mark-down", "aaaa1111", "", "", t0), true},
		{"node by name recorded (removed since)", &pb.EventFilter{Node: "old-1"}, ev("reaper", "reap", "cccc3333", "old-1", "", t0), true},
		{"node by its name now (not recorded)", &pb.EventFilter{Node: "db-1"}, ev("health", "mark-down", "bbbb2222", "", "", t0), true},
		{"another node", &pb.EventFilter{Node: "db-1"}, ev("health", "mark-down", "aaaa1111", "web-1", "", t0), false},
		{"an event of no node", &pb.EventFilter{Node: "db-1"}, ev("groups", "provision", "", "", "", t0), false},
		{"kind: action, any case", &pb.EventFilter{Kind: "Mark-Down"}, ev("health", "mark-down", "x", "", "", t0), true},
		{"kind: loop", &pb.EventFilter{Kind: "health"}, ev("health", "mark-down", "x", "", "", t0), true},
		{"kind: neither", &pb.EventFilter{Kind: "refuse"}, ev("health", "mark-down", "x", "", "", t0), false},
		{"since: at it", &pb.EventFilter{Since: timestamppb.New(t0)}, ev("health", "mark-down", "x", "", "", t0), true},
		{"since: before it", &pb.EventFilter{Since: timestamppb.New(t0)}, ev("health", "mark-down", "x", "", "", t0.Add(-time.Second)), false},
		{"every field must match", &pb.EventFilter{Kind: "health", Node: "db-1"}, ev("health", "mark-down", "aaaa1111", "", "", t0), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := NewEventMatch(tc.filter, known).Match(tc.event); got != tc.want {
				t.Errorf("Match = %v, want %v", got, tc.want)
			}
		})
	}
}
