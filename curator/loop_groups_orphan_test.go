package curator

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/curatorproject/curator/curator/store"
	pb "github.com/curatorproject/curator/proto"
	"github.com/curatorproject/curator/provider"
	"github.com/curatorproject/curator/provider/process"
)

// TestGroupAdoptsOrphan: a machine made for a group by a leader that died
// before it noted anything of it (or by a provision it never heard the
// end of) is found by the group's labels and counted: the loop makes no
// other for it, and since its node never joins, it is destroyed at the
// group's join_timeout, with the reason.
func TestGroupAdoptsOrphan(t *testing.T) {
	c := newTestCluster(t)
	c.startLeader()
	cs, err := store.ClusterLoad(context.Background(), c.cli)
	if err != nil {
		t.Fatal(err)
	}
	// A machine that runs and never joins.
	sleeper := filepath.Join(t.TempDir(), "sleeper")
	if err := os.WriteFile(sleeper, []byte("#!/bin/sh\nexec sleep 60\n"), 0o700); err != nil {
		t.Fatal(err)
	}
	g := processGroup(t, "o", 1, sleeper)
	g.Spec.JoinTimeout = durationpb.New(3 * time.Second)
	pp := g.Spec.Provider.GetProcess()
	pool, err := process.PoolAddresses(pp.Addresses, int(pp.Port))
	if err != nil {
		t.Fatal(err)
	}
	p, err := process.New(process.Config{Dir: pp.Dir, Binary: sleeper, Addresses: pool})
	if err != nil {
		t.Fatal(err)
	}
	orphan, err := p.Provision(context.Background(), provider.Spec{Labels: map[string]string{
		provider.LabelCluster: cs.ClusterId, provider.LabelGroup: "o", provider.LabelConfigSHA: g.ConfigSha}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Destroy(context.Background(), orphan.ID) })
	putGroup(t, c, g, nil)

	var destroyed []*pb.Event
	waitFor(t, "the orphan destroyed at join_timeout", func() bool {
		destroyed = eventsOfGroup(t, c, "destroy-machine", "o")
		return len(destroyed) > 0
	})
	if !strings.Contains(destroyed[0].Reason, "machine "+orphan.ID) || !strings.Contains(destroyed[0].Reason, "never joined") {
		t.Errorf("the first destroy of group o: %q, want the orphan %s, never joined", destroyed[0].Reason, orphan.ID)
	}
	for _, e := range eventsOfGroup(t, c, "provision", "o") {
		if e.Time.AsTime().Before(destroyed[0].Time.AsTime()) {
			t.Errorf("group o made a machine beside its orphan: %s", e.Reason)
		}
	}
	// Its machines after: made by the group, not the orphan.
	t.Cleanup(func() {
		insts, _ := p.List(context.Background(), nil)
		for _, in := range insts {
			p.Destroy(context.Background(), in.ID)
		}
	})
}

// eventsOfGroup are the group loop's events of action of group.
func eventsOfGroup(t *testing.T, c *testCluster, action, group string) []*pb.Event {
	t.Helper()
	evs, err := store.EventList(context.Background(), c.cli, 0)
	if err != nil {
		t.Fatal(err)
	}
	var out []*pb.Event
	for _, e := range evs {
		if e.Loop == "groups" && e.Action == action && e.Group == group {
			out = append(out, e)
		}
	}
	return out
}
