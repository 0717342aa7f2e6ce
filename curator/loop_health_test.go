package curator

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	pb "github.com/curatorproject/curator/proto"
)

func TestDecideHealth(t *testing.T) {
	since := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	const downAfter = 5 * time.Second
	ready, down, unknown := pb.NodeStatus_NODE_STATUS_READY, pb.NodeStatus_NODE_STATUS_DOWN, pb.NodeStatus_NODE_STATUS_UNKNOWN
	fresh := func(id string, at time.Time) healthNode {
		return healthNode{id: id, status: ready, last: at, seen: true}
	}
	// Ten nodes that beat at `at`, for the bulk guard.
	fleet := func(at time.Time, silent int) []healthNode {
		var out []healthNode
		for i := range 10 {
			n := fresh(fmt.Sprintf("n%d", i), at)
			if i < silent {
				n.last = since
			}
			out = append(out, n)
		}
		return out
	}
	later := since.Add(3 * downAfter)
	tests := []struct {
		name      string
		nodes     []healthNode
		now       time.Time
		holdSince time.Time
		want      []healthAction
		held      bool
	}{
		{"all fresh", []healthNode{fresh("a", since)}, since.Add(time.Second), time.Time{}, nil, false},
		{"heartbeat makes ready", []healthNode{{id: "a", status: unknown, last: since, seen: true}}, since.Add(time.Second), time.Time{},
			[]healthAction{{nodeID: "a", to: ready}}, false},
		{"stale heartbeat makes down", []healthNode{fresh("a", since)}, since.Add(downAfter), time.Time{},
			[]healthAction{{nodeID: "a", to: down}}, false},
		{"new leader's grace: unseen node keeps its status", []healthNode{{id: "a", status: ready}}, since.Add(2*downAfter - time.Millisecond), time.Time{}, nil, false},
		{"a node that joined later gets its grace from its joining", []healthNode{{id: "a", status: unknown, created: since.Add(time.Minute)}}, since.Add(time.Minute + 2*downAfter - time.Millisecond), time.Time{}, nil, false},
		{"grace over: unseen node is down", []healthNode{{id: "a", status: ready}, fresh("b", since.Add(2*downAfter)), fresh("c", since.Add(2*downAfter))}, since.Add(2 * downAfter), time.Time{},
			[]healthAction{{nodeID: "a", to: down}}, false},
		{"every change in one tick", []healthNode{fresh("a", since), fresh("b", since), {id: "c", status: down, last: since.Add(9 * time.Second), seen: true}, fresh("d", since.Add(9*time.Second)), fresh("e", since.Add(9*time.Second)), fresh("f", since.Add(9*time.Second))}, since.Add(10 * time.Second), time.Time{},
			[]healthAction{{nodeID: "a", to: down}, {nodeID: "b", to: down}, {nodeID: "c", to: ready}}, false},
		{"down node that beats is ready", []healthNode{{id: "a", status: down, last: since.Add(9 * time.Second), seen: true}}, since.Add(10 * time.Second), time.Time{},
			[]healthAction{{nodeID: "a", to: ready}}, false},
		{"a minority silent is marked down", fleet(later, 4), later, time.Time{},
			[]healthAction{{nodeID: "n0", to: down}, {nodeID: "n1", to: down}, {nodeID: "n2", to: down}, {nodeID: "n3", to: down}}, false},
		{"a majority silent is held back", fleet(later, 5), later, time.Time{}, nil, true},
		{"new leader hearing from few holds them all", []healthNode{{id: "a", status: ready}, {id: "b", status: ready}, fresh("c", since.Add(2*downAfter))}, since.Add(2 * downAfter), time.Time{}, nil, true},
		{"held back, still within the extra wait", fleet(later, 6), later, later.Add(-downAfter + time.Millisecond), nil, true},
		{"held back long enough: marked down", fleet(later, 6), later, later.Add(-downAfter),
			[]healthAction{{nodeID: "n0", to: down}, {nodeID: "n1", to: down}, {nodeID: "n2", to: down}, {nodeID: "n3", to: down}, {nodeID: "n4", to: down}, {nodeID: "n5", to: down}}, false},
		{"held back, readies still go through", append(fleet(later, 6), healthNode{id: "x", status: down, last: later, seen: true}), later, time.Time{},
			[]healthAction{{nodeID: "x", to: ready}}, true},
		{"one silent node is never held", []healthNode{fresh("a", since), {id: "b", status: down}}, since.Add(downAfter), time.Time{},
			[]healthAction{{nodeID: "a", to: down}}, false},
	}
	// Settling: a new leader still hearing from more nodes by the tick.
	settling := []struct {
		name    string
		nodes   []healthNode
		now     time.Time
		mem     healthMemory
		want    []healthAction
		heldFor bool
	}{
		{"new leader, more nodes heard than last tick: hold", fleet(since.Add(2*downAfter), 2), since.Add(2 * downAfter), healthMemory{heard: 5},
			nil, true},
		{"new leader, grew a moment ago: hold", fleet(since.Add(2*downAfter), 2), since.Add(2 * downAfter), healthMemory{heard: 8, grewAt: since.Add(2*downAfter - downAfter/4)},
			nil, true},
		{"new leader, settled: mark down", fleet(since.Add(2*downAfter), 2), since.Add(2 * downAfter), healthMemory{heard: 8, grewAt: since.Add(downAfter)},
			[]healthAction{{nodeID: "n0", to: down}, {nodeID: "n1", to: down}}, false},
		{"old leader, growing: mark down", fleet(since.Add(settleLimit(downAfter)), 2), since.Add(settleLimit(downAfter)), healthMemory{heard: 5},
			[]healthAction{{nodeID: "n0", to: down}, {nodeID: "n1", to: down}}, false},
	}
	for _, tt := range settling {
		t.Run(tt.name, func(t *testing.T) {
			got := decideHealth(tt.nodes, since, tt.now, downAfter, tt.mem)
			if diff := cmp.Diff(tt.want, got.changes, cmp.AllowUnexported(healthAction{}), cmp.FilterPath(func(p cmp.Path) bool { return p.Last().String() == ".reason" }, cmp.Ignore()), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("decideHealth (-want +got):\n%s", diff)
			}
			if (got.held != "") != tt.heldFor {
				t.Errorf("held = %q, want held %v", got.held, tt.heldFor)
			}
		})
	}
	// steady is a memory in which nothing grew: the count heard now.
	steady := func(nodes []healthNode, now time.Time) healthMemory {
		m := healthMemory{}
		for _, n := range nodes {
			if n.seen && now.Sub(n.last) < downAfter {
				m.heard++
			}
		}
		return m
	}
	opt := cmp.FilterPath(func(p cmp.Path) bool { return p.Last().String() == ".reason" }, cmp.Ignore())
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mem := steady(tt.nodes, tt.now)
			mem.holdSince = tt.holdSince
			leaderAt := since.Add(-time.Hour) // long in office
			if strings.Contains(tt.name, "new leader") || strings.Contains(tt.name, "grace") {
				leaderAt = since
			}
			got := decideHealth(tt.nodes, leaderAt, tt.now, downAfter, mem)
			for _, a := range got.changes {
				if a.reason == "" {
					t.Errorf("change of %s has no reason", a.nodeID)
				}
			}
			if diff := cmp.Diff(tt.want, got.changes, cmp.AllowUnexported(healthAction{}), opt, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("decideHealth (-want +got):\n%s", diff)
			}
			if (got.held != "") != tt.held {
				t.Errorf("held = %q, want held %v", got.held, tt.held)
			}
		})
	}
}
