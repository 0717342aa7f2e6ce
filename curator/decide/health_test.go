package decide

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	pb "github.com/curatorproject/curator/proto"
)

// ignoreWhy leaves a health change's words out of a comparison: the
// tables name what changes, not how it is said.
var ignoreWhy = cmpopts.IgnoreFields(HealthAction{}, "Reason", "OwnSilence")

func TestHealth(t *testing.T) {
	since := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	const downAfter = 5 * time.Second
	ready, down, unknown := pb.NodeStatus_NODE_STATUS_READY, pb.NodeStatus_NODE_STATUS_DOWN, pb.NodeStatus_NODE_STATUS_UNKNOWN
	fresh := func(id string, at time.Time) HealthNode {
		return HealthNode{ID: id, Status: ready, Last: at, Seen: true}
	}
	// Ten nodes that beat at `at`, for the bulk guard.
	fleet := func(at time.Time, silent int) []HealthNode {
		var out []HealthNode
		for i := range 10 {
			n := fresh(fmt.Sprintf("n%d", i), at)
			if i < silent {
				n.Last = since
			}
			out = append(out, n)
		}
		return out
	}
	later := since.Add(3 * downAfter)
	tests := []struct {
		name      string
		nodes     []HealthNode
		now       time.Time
		HoldSince time.Time
		want      []HealthAction
		Held      bool
	}{
		{"all fresh", []HealthNode{fresh("a", since)}, since.Add(time.Second), time.Time{}, nil, false},
		{"heartbeat makes ready", []HealthNode{{ID: "a", Status: unknown, Last: since, Seen: true}}, since.Add(time.Second), time.Time{},
			[]HealthAction{{NodeID: "a", To: ready}}, false},
		{"stale heartbeat makes down", []HealthNode{fresh("a", since)}, since.Add(downAfter), time.Time{},
			[]HealthAction{{NodeID: "a", To: down}}, false},
		{"new leader's grace: unseen node keeps its status", []HealthNode{{ID: "a", Status: ready}}, since.Add(downAfter - time.Millisecond), time.Time{}, nil, false},
		{"a node that joined later gets its grace from its joining", []HealthNode{{ID: "a", Status: unknown, Created: since.Add(time.Minute)}}, since.Add(time.Minute + downAfter - time.Millisecond), time.Time{}, nil, false},
		{"grace over: unseen node is down", []HealthNode{{ID: "a", Status: ready}, fresh("b", since.Add(2*downAfter)), fresh("c", since.Add(2*downAfter))}, since.Add(2 * downAfter), time.Time{},
			[]HealthAction{{NodeID: "a", To: down}}, false},
		{"every change in one tick", []HealthNode{fresh("a", since), fresh("b", since), {ID: "c", Status: down, Last: since.Add(9 * time.Second), Seen: true}, fresh("d", since.Add(9*time.Second)), fresh("e", since.Add(9*time.Second)), fresh("f", since.Add(9*time.Second))}, since.Add(10 * time.Second), time.Time{},
			[]HealthAction{{NodeID: "a", To: down}, {NodeID: "b", To: down}, {NodeID: "c", To: ready}}, false},
		{"down node that beats is ready", []HealthNode{{ID: "a", Status: down, Last: since.Add(9 * time.Second), Seen: true}}, since.Add(10 * time.Second), time.Time{},
			[]HealthAction{{NodeID: "a", To: ready}}, false},
		{"a minority silent is marked down", fleet(later, 4), later, time.Time{},
			[]HealthAction{{NodeID: "n0", To: down}, {NodeID: "n1", To: down}, {NodeID: "n2", To: down}, {NodeID: "n3", To: down}}, false},
		{"a majority silent is held back", fleet(later, 5), later, time.Time{}, nil, true},
		{"new leader hearing from few holds them all", []HealthNode{{ID: "a", Status: ready}, {ID: "b", Status: ready}, fresh("c", since.Add(2*downAfter))}, since.Add(2 * downAfter), time.Time{}, nil, true},
		{"held back, still within the extra wait", fleet(later, 6), later, later.Add(-downAfter + time.Millisecond), nil, true},
		{"held back long enough: marked down", fleet(later, 6), later, later.Add(-downAfter),
			[]HealthAction{{NodeID: "n0", To: down}, {NodeID: "n1", To: down}, {NodeID: "n2", To: down}, {NodeID: "n3", To: down}, {NodeID: "n4", To: down}, {NodeID: "n5", To: down}}, false},
		{"held back, readies still go through", append(fleet(later, 6), HealthNode{ID: "x", Status: down, Last: later, Seen: true}), later, time.Time{},
			[]HealthAction{{NodeID: "x", To: ready}}, true},
		{"one silent node is never held", []HealthNode{fresh("a", since), {ID: "b", Status: down}}, since.Add(downAfter), time.Time{},
			[]HealthAction{{NodeID: "a", To: down}}, false},
	}
	// The failover's hold: a new leader marks none down while nodes are
	// still arriving (heard by it for the first time), and judges them
	// all once the arrivals end.
	quiet := ArrivalsQuiet(downAfter)
	// arriving is 8 nodes heard at `at` and 2 never heard by this leader.
	arriving := func(at time.Time) []HealthNode {
		var out []HealthNode
		for i := range 10 {
			n := fresh(fmt.Sprintf("n%d", i), at)
			if i < 2 {
				n = HealthNode{ID: n.ID, Status: ready}
			}
			out = append(out, n)
		}
		return out
	}
	t1 := since.Add(downAfter + time.Second)
	twoDown := []HealthAction{{NodeID: "n0", To: down}, {NodeID: "n1", To: down}}
	settling := []struct {
		name     string
		nodes    []HealthNode
		now      time.Time
		mem      HealthMemory
		want     []HealthAction
		heldFor  bool
		Settling bool
		knocked  time.Time
	}{
		{"first tick of a new leader: the arrivals have just begun: hold", arriving(t1), t1, HealthMemory{},
			nil, true, true, time.Time{}},
		{"a node arrived this tick: hold", arriving(t1), t1, HealthMemory{Since: since, Arrived: 7, ArrivedAt: t1.Add(-2 * quiet)},
			nil, true, true, time.Time{}},
		{"the last arrival a moment ago: hold", arriving(t1), t1, HealthMemory{Since: since, Arrived: 8, ArrivedAt: t1.Add(-quiet + time.Millisecond)},
			nil, true, true, time.Time{}},
		{"arrivals over: nodes never heard are judged on their own silence", arriving(t1), t1, HealthMemory{Since: since, Arrived: 8, ArrivedAt: t1.Add(-quiet)},
			twoDown, false, false, time.Time{}},
		{"arrivals over early: unseen nodes keep their downAfter from the takeover", arriving(since.Add(downAfter - time.Millisecond)), since.Add(downAfter - time.Millisecond), HealthMemory{Since: since, Arrived: 8, ArrivedAt: since.Add(time.Second)},
			nil, false, false, time.Time{}},
		{"arrivals never end: the ceiling ends the hold", arriving(since.Add(SettleLimit(downAfter))), since.Add(SettleLimit(downAfter)), HealthMemory{Since: since, Arrived: 7, ArrivedAt: since.Add(SettleLimit(downAfter) - time.Second)},
			twoDown, false, false, time.Time{}},
		{"every node arrived: no hold, a node silent since is down", append(fleet(t1, 0)[:9], HealthNode{ID: "n9", Status: ready, Last: t1.Add(-downAfter), Seen: true}), t1, HealthMemory{Since: since, Arrived: 10, ArrivedAt: t1.Add(-time.Millisecond)},
			[]HealthAction{{NodeID: "n9", To: down}}, false, false, time.Time{}},
		{"a node heard by this leader, then silent, is down on its own silence while the others are held", append(arriving(t1)[1:], HealthNode{ID: "x", Status: ready, Last: since.Add(time.Millisecond), Seen: true}), t1, HealthMemory{Since: since, Arrived: 8, ArrivedAt: t1.Add(-time.Second)},
			[]HealthAction{{NodeID: "x", To: down}}, true, true, time.Time{}},
		{"only nodes heard by this leader went silent: nothing is held", append(fleet(t1, 0)[:9], HealthNode{ID: "x", Status: ready, Last: since.Add(time.Millisecond), Seen: true}, HealthNode{ID: "y", Status: unknown, Created: t1.Add(-time.Second)}), t1, HealthMemory{Since: since, Arrived: 9, ArrivedAt: t1.Add(-time.Second)},
			[]HealthAction{{NodeID: "x", To: down}}, false, true, time.Time{}},
		{"back from doubt: the arrivals count again from then", arriving(t1), t1, HealthMemory{Since: since.Add(-time.Hour), Arrived: 10, ArrivedAt: since.Add(-time.Hour)},
			nil, true, true, time.Time{}},
		{"no arrival for a while, but a node turned away at the door a moment ago: hold", arriving(t1), t1, HealthMemory{Since: since, Arrived: 8, ArrivedAt: t1.Add(-quiet)},
			nil, true, true, t1.Add(-time.Second)},
		{"the last knock as long ago as the quiet: judged", arriving(t1), t1, HealthMemory{Since: since, Arrived: 8, ArrivedAt: t1.Add(-2 * quiet)},
			twoDown, false, false, t1.Add(-quiet)},
		{"knocks before the takeover are not arrivals", arriving(t1), t1, HealthMemory{Since: since, Arrived: 8, ArrivedAt: t1.Add(-quiet)},
			twoDown, false, false, since.Add(-time.Millisecond)},
		{"knocks never end: the ceiling ends the hold", arriving(since.Add(SettleLimit(downAfter))), since.Add(SettleLimit(downAfter)), HealthMemory{Since: since, Arrived: 8, ArrivedAt: since.Add(time.Second)},
			twoDown, false, false, since.Add(SettleLimit(downAfter) - time.Millisecond)},
	}
	for _, tt := range settling {
		t.Run(tt.name, func(t *testing.T) {
			got := Health(tt.nodes, since, tt.now, downAfter, tt.knocked, tt.mem)
			if diff := cmp.Diff(tt.want, got.Changes, ignoreWhy, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("Health (-want +got):\n%s", diff)
			}
			if (got.Held != "") != tt.heldFor {
				t.Errorf("held = %q, want held %v", got.Held, tt.heldFor)
			}
			if got.Settling != tt.Settling {
				t.Errorf("settling = %v, want %v", got.Settling, tt.Settling)
			}
		})
	}
	// The bound: whatever the fleet's size, after the arrivals end a node
	// that never came back is down within downAfter of the hold's end.
	for _, size := range []int{10, 1000, 10000} {
		nodes := make([]HealthNode, size)
		for i := range nodes {
			nodes[i] = fresh(fmt.Sprintf("n%d", i), since.Add(time.Duration(i)*time.Millisecond))
		}
		nodes[0] = HealthNode{ID: "dead", Status: ready}
		end := since.Add(time.Duration(size-1)*time.Millisecond + quiet)
		var mem HealthMemory
		var downAt time.Time
		for now := since; now.Before(end.Add(2 * downAfter)); now = now.Add(100 * time.Millisecond) {
			// A node arrives at its time and beats every tick after;
			// one not arrived yet is not heard.
			heard := slices.Clone(nodes)
			for i := range heard {
				switch {
				case !heard[i].Seen:
				case heard[i].Last.After(now):
					heard[i] = HealthNode{ID: heard[i].ID, Status: ready}
				default:
					heard[i].Last = now
				}
			}
			d := Health(heard, since, now, downAfter, time.Time{}, mem)
			mem = mem.Remember(d, since)
			if slices.ContainsFunc(d.Changes, func(a HealthAction) bool { return a.NodeID == "dead" && a.To == down }) {
				downAt = now
				break
			}
		}
		if downAt.IsZero() || downAt.After(end.Add(downAfter)) {
			t.Errorf("%d nodes: the dead node was down at %v, hold ended at %v, bound %v", size, downAt, end, end.Add(downAfter))
		}
	}
	// steady is a memory in which the arrivals ended long ago.
	steady := func(nodes []HealthNode, leaderAt time.Time) HealthMemory {
		m := HealthMemory{Since: leaderAt, ArrivedAt: leaderAt}
		for _, n := range nodes {
			if n.Seen && !n.Last.Before(leaderAt) {
				m.Arrived++
			}
		}
		return m
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			leaderAt := since.Add(-time.Hour) // long in office
			if strings.Contains(tt.name, "new leader") || strings.Contains(tt.name, "grace") {
				leaderAt = since
			}
			mem := steady(tt.nodes, leaderAt)
			mem.HoldSince = tt.HoldSince
			got := Health(tt.nodes, leaderAt, tt.now, downAfter, time.Time{}, mem)
			for _, a := range got.Changes {
				if a.Reason == "" {
					t.Errorf("change of %s has no reason", a.NodeID)
				}
			}
			if diff := cmp.Diff(tt.want, got.Changes, ignoreWhy, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("Health (-want +got):\n%s", diff)
			}
			if (got.Held != "") != tt.Held {
				t.Errorf("held = %q, want held %v", got.Held, tt.Held)
			}
		})
	}
}

func TestHealthStatus(t *testing.T) {
	const downAfter = 5 * time.Second
	t0 := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	const (
		unknown = pb.NodeStatus_NODE_STATUS_UNKNOWN
		ready   = pb.NodeStatus_NODE_STATUS_READY
		down    = pb.NodeStatus_NODE_STATUS_DOWN
	)
	for _, tc := range []struct {
		name        string
		cur         pb.NodeStatus
		Last        time.Time
		Seen        bool
		leaderSince time.Time
		now         time.Time
		want        pb.NodeStatus
	}{
		{"fresh heartbeat makes ready", unknown, at(10 * time.Second), true, t0, at(11 * time.Second), ready},
		{"down node with fresh heartbeat is ready", down, at(10 * time.Second), true, t0, at(10 * time.Second), ready},
		{"heartbeat just under the limit", ready, at(10 * time.Second), true, t0, at(15*time.Second - time.Nanosecond), ready},
		{"heartbeat exactly at the limit is down", ready, at(10 * time.Second), true, t0, at(15 * time.Second), down},
		{"stale heartbeat is down", ready, at(10 * time.Second), true, t0, at(30 * time.Second), down},
		// The grace period of a new leader: no heartbeat seen since it
		// took over at t0.
		{"new leader, unseen, in grace: unknown kept", unknown, time.Time{}, false, t0, at(4 * time.Second), unknown},
		{"new leader, unseen, in grace: ready kept", ready, time.Time{}, false, t0, at(4 * time.Second), ready},
		{"new leader, unseen, in grace: down kept", down, time.Time{}, false, t0, at(time.Second), down},
		{"new leader, unseen, just under one down-after: ready kept", ready, time.Time{}, false, t0, at(5*time.Second - time.Nanosecond), ready},
		{"new leader, unseen, silent for one down-after since it took over", ready, time.Time{}, false, t0, at(5 * time.Second), down},
		{"new leader, unseen, long after", unknown, time.Time{}, false, t0, at(time.Hour), down},
		// A heartbeat older than the leadership (a clock oddity) counts
		// from the leadership.
		{"heartbeat before leadership, in grace", ready, at(-time.Minute), true, t0, at(2 * time.Second), ready},
		{"heartbeat before leadership, grace over", ready, at(-time.Minute), true, t0, at(10 * time.Second), down},
		{"seen by this leader, then silent", ready, at(time.Second), true, t0, at(6 * time.Second), down},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := HealthStatus(tc.cur, tc.Last, tc.Seen, tc.leaderSince, tc.now, downAfter)
			if got != tc.want {
				t.Errorf("HealthStatus = %v, want %v", got, tc.want)
			}
		})
	}
}
