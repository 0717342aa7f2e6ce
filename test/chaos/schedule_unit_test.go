package chaos

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/types/known/timestamppb"

	pb "github.com/curatorproject/curator/proto"
)

// TestScheduleReplays: a seed gives the same schedule every time, and
// another seed another one, with every kind drawn over a long run.
func TestScheduleReplays(t *testing.T) {
	a, b := schedule(7, 200), schedule(7, 200)
	if diff := cmp.Diff(a, b); diff != "" {
		t.Fatalf("seed 7 twice (-first +second):\n%s", diff)
	}
	if cmp.Equal(a, schedule(8, 200)) {
		t.Fatal("seeds 7 and 8 give the same schedule")
	}
	kinds := map[stepKind]int{}
	for _, s := range a {
		kinds[s.Kind]++
		if s.Hold <= 0 || s.Gap <= 0 {
			t.Errorf("step %v: hold and gap must be positive", s)
		}
	}
	for _, w := range weights {
		if kinds[w.kind] == 0 {
			t.Errorf("no %s in 200 steps", w.kind)
		}
	}
}

// TestScheduleKinds: what a seed draws for each kind, as a table: a
// group-wide freeze holds for freezeFloor (down-after and replace_after
// twice over) to 6 s more, a stop or a cut 2–8 s, short of what a
// single node needs to be replaced; every step names its group where it
// has one; and the machines a schedule may call for.
func TestScheduleKinds(t *testing.T) {
	for _, tc := range []struct {
		kind             stepKind
		name, group      string
		minHold, maxHold time.Duration
		machines         int
	}{
		{stepKill, "kill", "", 2 * time.Second, 8 * time.Second, 1},
		{stepStop, "stop", "", 2 * time.Second, 8 * time.Second, 1},
		{stepCut, "cut", "", 2 * time.Second, 8 * time.Second, 1},
		{stepScaleWorkers, "scale-workers", "workers", 2 * time.Second, 8 * time.Second, 2},
		{stepRollManagers, "roll-managers", "managers", 2 * time.Second, 8 * time.Second, managers},
		{stepBadWorkers, "bad-workers", "workers", 2 * time.Second, 8 * time.Second, 2},
		{stepBadManagers, "bad-managers", "managers", 2 * time.Second, 8 * time.Second, 2},
		{stepFreezeWorkers, "freeze-workers", "workers", 25 * time.Second, 31 * time.Second, 0},
		{stepFreezeManagers, "freeze-managers", "managers", 25 * time.Second, 31 * time.Second, 0},
		{stepPowerLoss, "power-loss", "", 2 * time.Second, 8 * time.Second, 1},
		{stepDelay, "delay", "", 6 * time.Second, 24 * time.Second, 1},
		{stepSkew, "skew", "", 6 * time.Second, 24 * time.Second, 1},
		{stepStarve, "starve", "", 4 * time.Second, 16 * time.Second, 0},
		{stepPartition, "partition", "", 2 * time.Second, 8 * time.Second, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.kind.String(); got != tc.name {
				t.Errorf("String() = %q, want %q", got, tc.name)
			}
			if got := tc.kind.group(); got != tc.group {
				t.Errorf("group() = %q, want %q", got, tc.group)
			}
			if got := machinesNeeded([]step{{Kind: tc.kind}}) - managers - workers; got != tc.machines {
				t.Errorf("machines needed %d, want %d", got, tc.machines)
			}
			n := 0
			for seed := uint64(1); seed <= 20; seed++ {
				for _, s := range schedule(seed, 50) {
					if s.Kind != tc.kind {
						continue
					}
					n++
					if s.Hold < tc.minHold || s.Hold > tc.maxHold {
						t.Errorf("seed %d: %v: hold out of [%s, %s]", seed, s, tc.minHold, tc.maxHold)
					}
				}
			}
			if n == 0 {
				t.Errorf("no %s in 20 seeds of 50 steps", tc.kind)
			}
		})
	}
	if freezeFloor <= downAfter+replaceAfter {
		t.Errorf("a freeze of %s does not outlast down-after %s and replace_after %s", freezeFloor, downAfter, replaceAfter)
	}
	if 8*time.Second >= downAfter+replaceAfter {
		t.Errorf("a stop of 8 s outlasts down-after %s and replace_after %s: a single stopped node would be replaced", downAfter, replaceAfter)
	}
}

// TestCeilingOf: max_unhealthy as a count of a group's size, as the
// curator reads it (docs/groups.md), for the freeze's "more than".
func TestCeilingOf(t *testing.T) {
	for _, tc := range []struct {
		spec string
		size int
		want int
	}{
		{"40%", 3, 1}, {"40%", 4, 1}, {"40%", 5, 2}, {"40%", 1, 1},
		{"1", 5, 1}, {"2", 3, 2}, {"100%", 4, 4}, {"10%", 5, 1},
	} {
		got, err := ceilingOf(tc.spec, tc.size)
		if err != nil || got != tc.want {
			t.Errorf("ceilingOf(%q, %d) = %d, %v; want %d", tc.spec, tc.size, got, err, tc.want)
		}
	}
	if _, err := ceilingOf("lots", 3); err == nil {
		t.Error("ceilingOf(lots) gives no error")
	}
}

// TestGroupTargets: a group-wide freeze's nodes, from the step's pick on
// among the group's nodes that may be hit, none drained; voters only
// while the healthy voters left keep a majority.
func TestGroupTargets(t *testing.T) {
	node := func(name, group string, drained bool) *pb.NodeView {
		av := pb.Availability_AVAILABILITY_ACTIVE
		if drained {
			av = pb.Availability_AVAILABILITY_DRAIN
		}
		return &pb.NodeView{Node: &pb.Node{Id: "id-" + name, Name: name, Group: group, Availability: av}}
	}
	ready := []*pb.NodeView{
		node("m1", "managers", false), node("m2", "managers", false), node("m3", "managers", false),
		node("m4", "managers", false), node("m5", "managers", false),
		node("w1", "workers", false), node("w2", "workers", true), node("w3", "workers", false), node("w4", "workers", false),
	}
	voters := []string{"id-m1", "id-m2", "id-m3", "id-m4", "id-m5"}
	for _, tc := range []struct {
		name    string
		group   string
		k       int
		pick    uint32
		healthy int
		want    []string
	}{
		{"workers from the pick, the drained one left out", "workers", 2, 0, 5, []string{"w1", "w3"}},
		{"wrapping", "workers", 2, 2, 5, []string{"w4", "w1"}},
		{"all of them", "workers", 3, 1, 5, []string{"w3", "w4", "w1"}},
		{"more than there are", "workers", 4, 0, 5, nil},
		{"two managers of five healthy voters", "managers", 2, 3, 5, []string{"m4", "m5"}},
		{"two managers of four healthy voters: the quorum", "managers", 2, 0, 4, nil},
		{"three managers: the quorum", "managers", 3, 0, 5, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := faultView{ready: ready, voters: voters, healthy: tc.healthy}
			got, why := v.groupTargets(tc.group, tc.k, tc.pick)
			var names []string
			for _, n := range got {
				names = append(names, n.GetNode().GetName())
			}
			if diff := cmp.Diff(tc.want, names); diff != "" {
				t.Errorf("targets (-want +got):\n%s", diff)
			}
			if (got == nil) != (why != "") {
				t.Errorf("targets %v with reason %q: want a reason exactly when none", names, why)
			}
		})
	}
}

// TestGoodNodes: the nodes of a group that serve off a bad config: ready,
// not drained, on another SHA; a sample with a node unknown says
// nothing.
func TestGoodNodes(t *testing.T) {
	node := func(group, sha string, st pb.NodeStatus, av pb.Availability) *pb.NodeView {
		return &pb.NodeView{Node: &pb.Node{Group: group, ConfigSha: sha, Status: st, Availability: av}}
	}
	ready, down, unknown := pb.NodeStatus_NODE_STATUS_READY, pb.NodeStatus_NODE_STATUS_DOWN, pb.NodeStatus_NODE_STATUS_UNKNOWN
	active, drain := pb.Availability_AVAILABILITY_ACTIVE, pb.Availability_AVAILABILITY_DRAIN
	for _, tc := range []struct {
		name        string
		nodes       []*pb.NodeView
		good        int
		unknownSeen bool
	}{
		{"old and new", []*pb.NodeView{node("workers", "old", ready, active), node("workers", "bad", ready, active), node("workers", "older", ready, active)}, 2, false},
		{"down and drained do not serve", []*pb.NodeView{node("workers", "old", down, active), node("workers", "old", ready, drain), node("workers", "old", ready, active)}, 1, false},
		{"another group", []*pb.NodeView{node("managers", "old", ready, active)}, 0, false},
		{"unknown", []*pb.NodeView{node("workers", "old", unknown, active), node("workers", "old", ready, active)}, 1, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			good, unk := goodNodes(tc.nodes, "workers", "bad")
			if good != tc.good || unk != tc.unknownSeen {
				t.Errorf("goodNodes = %d, %v; want %d, %v", good, unk, tc.good, tc.unknownSeen)
			}
		})
	}
}

// TestPowerLost: after a power loss a node missing is lost, but for one a
// fault hit a moment before and one of a group whose rollout was under
// way (it goes on once the cluster is back, and replaces nodes).
func TestPowerLost(t *testing.T) {
	before := powerState{clusterID: "c",
		nodes:   map[string]string{"m1": "managers-1", "m2": "managers-2", "w1": "workers-1", "w2": "workers-2"},
		groupOf: map[string]string{"m1": "managers", "m2": "managers", "w1": "workers", "w2": "workers"},
		sizes:   map[string]uint32{"managers": 2, "workers": 2}, rolling: map[string]bool{"workers": true}}
	after := func(ids ...string) powerState {
		s := powerState{clusterID: "c", nodes: map[string]string{}, sizes: before.sizes}
		for _, id := range ids {
			s.nodes[id] = before.nodes[id]
		}
		return s
	}
	for _, tc := range []struct {
		name  string
		after powerState
		spare map[string]bool
		want  string
	}{
		{"every node", after("m1", "m2", "w1", "w2"), nil, ""},
		{"a manager gone", after("m1", "w1", "w2"), nil, "node managers-2"},
		{"a manager gone that a fault hit", after("m1", "w1", "w2"), map[string]bool{"m2": true}, ""},
		{"workers replaced by their rollout", after("m1", "m2"), nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := before.lost(tc.after, tc.spare)
			if got := fmt.Sprint(err); (tc.want == "" && err != nil) || (tc.want != "" && !strings.Contains(got, tc.want)) {
				t.Errorf("lost = %v, want %q", err, tc.want)
			}
		})
	}
}

// TestLiveMarkedDown: a mark-down counts as a live node's when no fault
// hit the node (or the whole cluster, a power loss) in the 40 s before,
// and says whether the host was starved then.
func TestLiveMarkedDown(t *testing.T) {
	t0 := time.Date(2026, 12, 6, 3, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	r := &runner{began: t0,
		struck:      []strike{{at: at(10), id: "stopped"}, {at: at(10), id: "long-ago"}},
		starves:     [][2]time.Time{{at(100), at(110)}},
		powerLosses: []time.Time{at(200)},
	}
	ev := func(s int, node, action string) *pb.Event {
		return &pb.Event{Time: timestamppb.New(at(s)), Loop: "health", Action: action, NodeId: node, Reason: "not heard from"}
	}
	events := []*pb.Event{
		ev(16, "stopped", "mark-down"),  // hit 6 s before
		ev(60, "long-ago", "mark-down"), // hit 50 s before: live
		ev(105, "worker", "mark-down"),  // live, the host starved
		ev(130, "worker", "mark-ready"), // not a mark-down
		ev(205, "worker", "mark-down"),  // a power loss 5 s before
		{Time: timestamppb.New(at(300)), Loop: "groups", Action: "drain", NodeId: "rolled"},
		ev(310, "rolled", "mark-down"), // drained by a rollout 10 s before
		{Time: timestamppb.New(at(70)), Loop: "groups", Action: "mark-down", NodeId: "x"}, // not the health loop
	}
	downs, starved := r.liveMarkedDown(events)
	if len(downs) != 2 || starved != 1 || !strings.HasPrefix(downs[0], "long-ago at 60.0s:") || !strings.HasPrefix(downs[1], "worker at 105.0s, the host starved:") {
		t.Errorf("live mark-downs %q, %d starved; want long-ago at 60 s and worker at 105 s (starved)", downs, starved)
	}
}
