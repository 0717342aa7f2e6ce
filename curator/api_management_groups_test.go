package curator

import (
	"context"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/proto"

	"github.com/curatorproject/curator/curator/spec"
	"github.com/curatorproject/curator/curator/store"
	pb "github.com/curatorproject/curator/proto"
)

// TestChangeRolloutRacesTheLoop: the group loop writes a rollout's
// progress as it goes, so an operator's pause, resume or cancel often
// reads a record the loop replaces a moment later. The change reads the
// record again and goes through; the progress the loop wrote is kept.
func TestChangeRolloutRacesTheLoop(t *testing.T) {
	c := newTestCluster(t)
	c.startLeader()
	admin, _ := c.dialFirst()
	api := pb.NewManagementClient(admin)
	const sha = "1111111111111111111111111111111111111111111111111111111111111111"
	put := func(key string, m proto.Message) {
		t.Helper()
		data, err := proto.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.cli.Put(context.Background(), key, string(data)); err != nil {
			t.Fatal(err)
		}
	}
	// A group whose spec names no provider: its loop leaves it alone.
	put(store.Keys.Group("w"), &pb.Group{Spec: &pb.GroupSpec{Name: "w", Size: 2}, ConfigSha: sha})
	put(store.Keys.Rollout("w"), &pb.Rollout{Group: "w", TargetSha: sha, State: pb.RolloutState_ROLLOUT_STATE_ROLLING, Total: 2})

	// The loop's stand-in: writes the step's progress of whatever state
	// the record is in, every few milliseconds (the real loop writes at
	// most once per action, seconds apart).
	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	var writes atomic.Int64
	go func() {
		defer wg.Done()
		for ctx.Err() == nil {
			r, rev, err := store.RolloutLoad(ctx, c.cli, "w")
			if err != nil || r == nil {
				continue
			}
			r.Step = "drain"
			r.Node = strings.Repeat("n", 1+int(writes.Load()%5))
			data, _ := proto.Marshal(r)
			resp, err := c.cli.Txn(ctx).If(store.RolloutUnchanged("w", rev)).Then(clientv3.OpPut(store.Keys.Rollout("w"), string(data))).Commit()
			if err == nil && resp.Succeeded {
				writes.Add(1)
			}
			time.Sleep(3 * time.Millisecond)
		}
	}()
	for i := 0; i < 20; i++ {
		for _, action := range []string{"pause", "resume"} {
			r, err := api.ChangeRollout(callCtx(t), &pb.ChangeRolloutRequest{Group: "w", Action: action})
			if err != nil {
				stop()
				wg.Wait()
				t.Fatalf("%s %d (after %d writes of the loop's stand-in): %v", action, i, writes.Load(), err)
			}
			if want := map[string]pb.RolloutState{"pause": pb.RolloutState_ROLLOUT_STATE_PAUSED, "resume": pb.RolloutState_ROLLOUT_STATE_ROLLING}[action]; r.State != want {
				t.Fatalf("%s %d: rollout %v, want %v", action, i, r.State, want)
			}
		}
	}
	r, err := api.ChangeRollout(callCtx(t), &pb.ChangeRolloutRequest{Group: "w", Action: "cancel"})
	stop()
	wg.Wait()
	if err != nil {
		t.Fatalf("cancel (after %d writes of the loop's stand-in): %v", writes.Load(), err)
	}
	if r.State != pb.RolloutState_ROLLOUT_STATE_CANCELLED || r.Step != "drain" || r.Total != 2 {
		t.Errorf("cancelled rollout %+v: want cancelled, with the loop's step and total kept", r)
	}
	if writes.Load() == 0 {
		t.Fatal("the loop's stand-in never wrote: the test raced nothing")
	}
	t.Logf("41 changes beside %d writes of the loop's stand-in", writes.Load())
}

// TestSuspendGroup: group suspend and resume, one group or all, each
// change an event; one already as asked is left out; bad requests refused.
func TestSuspendGroup(t *testing.T) {
	c := newTestCluster(t)
	c.startLeader()
	admin, _ := c.dialFirst()
	api := pb.NewManagementClient(admin)
	ctx := context.Background()
	for _, name := range []string{"a", "b"} {
		spec, err := spec.ParseGroupSpec([]byte("name: " + name + "\nsize: 0\nroles: [worker]\nprovider: {process: {addresses: 127.0.0.1-127.0.0.2, dir: " + t.TempDir() + "}}\n"))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := api.CommitGroup(ctx, &pb.CommitGroupRequest{Spec: spec}); err != nil {
			t.Fatal(err)
		}
	}
	changed := func(req *pb.SuspendGroupRequest) []string {
		t.Helper()
		resp, err := api.SuspendGroup(ctx, req)
		if err != nil {
			t.Fatalf("SuspendGroup(%v): %v", req, err)
		}
		var names []string
		for _, v := range resp.Groups {
			names = append(names, v.Group.Spec.Name)
		}
		return names
	}
	suspended := func(name string) string {
		g, err := store.GroupLoad(ctx, c.cli, name)
		if err != nil {
			t.Fatal(err)
		}
		return g.Suspended
	}
	if got := changed(&pb.SuspendGroupRequest{Name: "a"}); !slices.Equal(got, []string{"a"}) || !strings.HasPrefix(suspended("a"), "suspended by an operator") || suspended("b") != "" {
		t.Errorf("suspend a: changed %v; a %q, b %q", got, suspended("a"), suspended("b"))
	}
	if got := changed(&pb.SuspendGroupRequest{Name: "a"}); len(got) != 0 {
		t.Errorf("suspend a again changed %v", got)
	}
	// A commit keeps the suspension.
	g, _ := store.GroupLoad(ctx, c.cli, "a")
	g.Spec.Template.Version = "v2"
	if _, err := api.CommitGroup(ctx, &pb.CommitGroupRequest{Spec: g.Spec}); err != nil || suspended("a") == "" {
		t.Errorf("after a commit (%v) group a is suspended %q", err, suspended("a"))
	}
	if got := changed(&pb.SuspendGroupRequest{All: true, Resume: true}); !slices.Equal(got, []string{"a"}) || suspended("a") != "" {
		t.Errorf("resume --all: changed %v; a %q", got, suspended("a"))
	}
	evs, err := store.EventList(ctx, c.cli, 0)
	if err != nil {
		t.Fatal(err)
	}
	var actions []string
	for _, ev := range evs {
		if strings.HasSuffix(ev.Action, "-group") && ev.Action != "commit-group" {
			actions = append(actions, ev.Action)
		}
	}
	if !slices.Equal(actions, []string{"suspend-group", "resume-group"}) {
		t.Errorf("events %v, want one suspend-group and one resume-group", actions)
	}
	// Each of group a's: `curator events --group a` selects them.
	resp, err := api.ListEvents(ctx, &pb.ListEventsRequest{Filter: &pb.EventFilter{Group: "a", Kind: "groups"}})
	if err != nil {
		t.Fatal(err)
	}
	var ofA []string
	for _, ev := range resp.Events {
		ofA = append(ofA, ev.Action)
	}
	// The operator's, then the loop's once resumed (its rollout done).
	if want := []string{"commit-group", "suspend-group", "start-rollout", "resume-group"}; len(ofA) < len(want) || !slices.Equal(ofA[:len(want)], want) {
		t.Errorf("events of group a: %v, want %v first", ofA, want)
	}
	for _, req := range []*pb.SuspendGroupRequest{{Name: "a", All: true}, {Name: "no-such"}, {}} {
		if _, err := api.SuspendGroup(ctx, req); err == nil {
			t.Errorf("SuspendGroup(%v) was not refused", req)
		}
	}
}

// TestGroupViewCounts: group ls's READY counts the ready nodes whose
// machine the provider lists (a node's record outlives its machine for a
// moment after a scale down, a leader kill, a restore), and a done
// rollout's count is the group as it is now, not what it recorded
// before a scale.
func TestGroupViewCounts(t *testing.T) {
	const a, b = "aaaa", "bbbb"
	node := func(id, instance, sha string, ready bool) *pb.Node {
		n := &pb.Node{Id: id, InstanceId: instance, ConfigSha: sha, Status: pb.NodeStatus_NODE_STATUS_DOWN}
		if ready {
			n.Status = pb.NodeStatus_NODE_STATUS_READY
		}
		return n
	}
	g := &pb.Group{Spec: &pb.GroupSpec{Name: "w", Size: 2}, ConfigSha: a}
	type counts struct {
		Ready, Machines, Updated, Total uint32
		Rollout                         string
	}
	for _, tc := range []struct {
		name     string
		nodes    []*pb.Node
		machines []string
		rollout  *pb.Rollout
		want     counts
	}{
		{"every node's machine listed", []*pb.Node{node("n1", "m1", a, true), node("n2", "m2", a, true)}, []string{"m1", "m2"}, nil,
			counts{Ready: 2, Machines: 2}},
		{"a scale down: n3's record outlives its machine", []*pb.Node{node("n1", "m1", a, true), node("n2", "m2", a, true), node("n3", "m3", a, true)}, []string{"m1", "m2"}, nil,
			counts{Ready: 2, Machines: 2}},
		{"a node of no machine, added by hand", []*pb.Node{node("n1", "", a, true), node("n2", "m2", a, false)}, []string{"m2"}, nil,
			counts{Ready: 1, Machines: 1}},
		{"a done rollout of 3, then scaled to 2", []*pb.Node{node("n1", "m1", a, true), node("n2", "m2", a, true), node("n3", "m3", a, true)}, []string{"m1", "m2"},
			&pb.Rollout{Group: "w", TargetSha: a, State: pb.RolloutState_ROLLOUT_STATE_DONE, Updated: 3, Total: 3},
			counts{Ready: 2, Machines: 2, Updated: 2, Total: 2, Rollout: "done"}},
		{"a rolling rollout counts as it goes", []*pb.Node{node("n1", "m1", a, true), node("n2", "m2", b, true)}, []string{"m1", "m2"},
			&pb.Rollout{Group: "w", TargetSha: a, State: pb.RolloutState_ROLLOUT_STATE_ROLLING, Updated: 0, Total: 2},
			counts{Ready: 2, Machines: 2, Updated: 1, Total: 2, Rollout: "rolling"}},
	} {
		live := &liveGroup{nodes: tc.nodes, machines: map[string]bool{}}
		for _, m := range tc.machines {
			live.machines[m] = true
		}
		v := live.view(g, tc.rollout)
		got := counts{Ready: v.Ready, Machines: v.Machines, Updated: v.RolloutUpdated, Total: v.RolloutTotal, Rollout: v.RolloutState}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("%s: (-want +got):\n%s", tc.name, diff)
		}
	}
}
