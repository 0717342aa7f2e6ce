package curator

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/curatorproject/curator/curator/spec"
	"github.com/curatorproject/curator/curator/store"
	pb "github.com/curatorproject/curator/proto"
)

// putGroup writes group g's record (and its rollout r, if any) as a
// commit would have, past the commit's checks: a binary deleted since.
func putGroup(t *testing.T, c *testCluster, g *pb.Group, r *pb.Rollout) {
	t.Helper()
	put := func(key string, m proto.Message) {
		data, err := proto.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.cli.Put(context.Background(), key, string(data)); err != nil {
			t.Fatal(err)
		}
	}
	put(store.Keys.Group(g.Spec.Name), g)
	if r != nil {
		put(store.Keys.Rollout(g.Spec.Name), r)
	}
}

// processGroup is a group of size workers on the process provider running
// binary, on a pool of one address of its own.
func processGroup(t *testing.T, name string, size uint32, binary string) *pb.Group {
	t.Helper()
	ip := nextIP(t)
	s := &pb.GroupSpec{Name: name, Size: size, Roles: []pb.Role{pb.Role_ROLE_WORKER},
		Provider: &pb.ProviderSpec{Kind: &pb.ProviderSpec_Process{Process: &pb.ProcessProviderSpec{
			Addresses: ip + "-" + ip, Port: uint32(freeBasePort(t, ip)), Dir: t.TempDir(), Binary: binary,
		}}},
		Template: &pb.InstanceTemplate{Version: "v1"},
	}
	spec.NormalizeGroupSpec(s)
	return &pb.Group{Spec: s, ConfigSha: spec.GroupConfigSHA(s.Template)}
}

// TestGroupProviderRefusal: a group whose provider cannot make a machine
// (its binary deleted after the commit) fails alone. Each refusal is an
// event of the group with the provider's reason, the group's next try
// waits for its backoff (1 s, then 2 s: not one a tick), the group loop
// never fails, and the other group, after it in name order, is served
// meanwhile. A rollout's new machine that cannot be made is a failed
// machine of the rollout, which fails.
func TestGroupProviderRefusal(t *testing.T) {
	c := newTestCluster(t)
	svc := c.startLeader()
	gone := filepath.Join(t.TempDir(), "curator-deleted")
	putGroup(t, c, processGroup(t, "a", 1, gone), nil)
	putGroup(t, c, processGroup(t, "b", 1, "/bin/true"), nil)
	rolling := processGroup(t, "c", 1, gone)
	putGroup(t, c, rolling, &pb.Rollout{Group: "c", TargetSha: rolling.ConfigSha, State: pb.RolloutState_ROLLOUT_STATE_ROLLING, Total: 1})

	waitFor(t, "group b served while group a fails", func() bool { return len(eventsOfGroup(t, c, "provision", "b")) > 0 })
	var refused []*pb.Event
	waitFor(t, "group a refused twice", func() bool {
		refused = eventsOfGroup(t, c, "provision-failed", "a")
		return len(refused) >= 2
	})
	for i, e := range refused[:2] {
		for _, want := range []string{fmt.Sprintf("group a: its provider could not make a machine (%d in a row; the group's next try in %v", i+1, time.Second<<i), gone, "no such file or directory"} {
			if !strings.Contains(e.Reason, want) {
				t.Errorf("refusal %d: reason %q lacks %q", i+1, e.Reason, want)
			}
		}
	}
	if g, err := store.GroupLoad(context.Background(), c.cli, "a"); err != nil || !strings.Contains(g.GetProviderFailing(), "no such file or directory") {
		t.Errorf("group a's record says it fails with %q (%v): want the provider's reason", g.GetProviderFailing(), err)
	}
	if gap := refused[1].Time.AsTime().Sub(refused[0].Time.AsTime()); gap < time.Second-100*time.Millisecond {
		t.Errorf("the second try %v after the first: before the group's 1 s backoff", gap)
	}
	// Not one a tick: by the third (3 s after the first), no more than three.
	time.Sleep(2 * time.Second)
	if n := len(eventsOfGroup(t, c, "provision-failed", "a")); n > 3 {
		t.Errorf("%d refusals of group a in about 3 s: its backoff does not hold", n)
	}
	waitFor(t, "the rollout of group c failed on its machine that could not be made", func() bool {
		r, _, err := store.RolloutLoad(context.Background(), c.cli, "c")
		return err == nil && r.State == pb.RolloutState_ROLLOUT_STATE_FAILED && r.Failures == 1 && strings.Contains(r.LastFailure, "could not make a machine")
	})
	if n := metricValue(t, svc.metrics.Errors.WithLabelValues("groups")); n != 0 {
		t.Errorf("the group loop failed %v times: a group's provider is not the loop's failure", n)
	}
}

// TestGroupHungProviderAlone: a group whose provider hangs (a plugin
// whose List never answers, with a minute to answer each call) holds
// itself alone: the group after it in name order is served meanwhile,
// within seconds, and the hung group's record says that its provider has
// not listed its machines.
func TestGroupHungProviderAlone(t *testing.T) {
	c := newTestCluster(t)
	svc := c.startLeader()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	s := &pb.GroupSpec{Name: "a", Size: 1, Roles: []pb.Role{pb.Role_ROLE_WORKER},
		Provider: &pb.ProviderSpec{Kind: &pb.ProviderSpec_Plugin{Plugin: &pb.PluginProviderSpec{
			Path: self, Config: map[string]string{"hang-list": "yes", "timeout": "1m"}}}},
		Template: &pb.InstanceTemplate{Version: "v1"},
	}
	spec.NormalizeGroupSpec(s)
	start := time.Now()
	putGroup(t, c, &pb.Group{Spec: s, ConfigSha: spec.GroupConfigSHA(s.Template)}, nil)
	putGroup(t, c, processGroup(t, "b", 1, "/bin/true"), nil)

	waitFor(t, "group b served while group a's provider hangs", func() bool { return len(eventsOfGroup(t, c, "provision", "b")) > 0 })
	// The plugin's calls have a minute each: a loop that waited on the
	// hung List would serve group b after it, at the earliest.
	if took := time.Since(start); took > 20*time.Second {
		t.Errorf("group b was served %v after the groups were put: the loop waited on group a's hung provider", took)
	}
	waitFor(t, "group a's record says its provider has not listed", func() bool {
		g, err := store.GroupLoad(context.Background(), c.cli, "a")
		return err == nil && strings.Contains(g.GetProviderFailing(), "has not listed the group's machines within")
	})
	if n := metricValue(t, svc.metrics.Errors.WithLabelValues("groups")); n != 0 {
		t.Errorf("the group loop failed %v times: a group's provider is not the loop's failure", n)
	}
}
