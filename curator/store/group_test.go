package store

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"

	pb "github.com/curatorproject/curator/proto"
)

// TestGroupChangeKeepsAWriteMeanwhile: a loop's change of a group's
// status (a repair hold, a provider's failure) made while another write
// of the record lands between its read and its write reads the record
// again: the other write is kept, with the change on top of it. Without
// the compare, the loop's stale copy undid an operator's commit.
func TestGroupChangeKeepsAWriteMeanwhile(t *testing.T) {
	cli := testEtcd(t)
	fence := testLeader(t, cli, nil)
	old := &pb.Group{Spec: &pb.GroupSpec{Name: "w", Size: 2, Template: &pb.InstanceTemplate{Version: "v1"}}, SpecRevision: 6}
	if err := GroupSave(callCtx(t), fence, old); err != nil {
		t.Fatal(err)
	}
	committed := &pb.Group{Spec: &pb.GroupSpec{Name: "w", Size: 3, Template: &pb.InstanceTemplate{Version: "v2"}}, SpecRevision: 7}
	calls := 0
	err := GroupChange(callCtx(t), fence, "w", func(g *pb.Group) {
		calls++
		if calls == 1 {
			// Another write lands after this change read the record.
			data, err := proto.Marshal(committed)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := cli.Put(callCtx(t), groupKey("w"), string(data)); err != nil {
				t.Fatal(err)
			}
		}
		g.RepairHeld = "held"
	})
	if err != nil {
		t.Fatal(err)
	}
	if calls != 2 {
		t.Errorf("the change was made %d times, want twice (once more on the record written meanwhile)", calls)
	}
	got, err := GroupLoad(callCtx(t), cli, "w")
	if err != nil {
		t.Fatal(err)
	}
	want := proto.Clone(committed).(*pb.Group)
	want.RepairHeld = "held"
	if d := cmp.Diff(want, got, protocmp.Transform()); d != "" {
		t.Errorf("the group after the change (-want +got):\n%s", d)
	}

	// A group gone meanwhile is not written back.
	if _, err := cli.Delete(callCtx(t), groupKey("w")); err != nil {
		t.Fatal(err)
	}
	if err := GroupChange(callCtx(t), fence, "w", func(g *pb.Group) { t.Error("a change of a group that is gone was made") }); err != nil {
		t.Fatal(err)
	}
	if g, err := GroupLoad(callCtx(t), cli, "w"); err != nil || g != nil {
		t.Errorf("the group after a change of it while gone: %v, %v; want none", g, err)
	}
}
