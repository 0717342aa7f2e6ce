package curator

import (
	"context"
	"errors"
	"testing"

	"github.com/moby/moby/client"

	"github.com/curatorproject/curator/curator/spec"
	"github.com/curatorproject/curator/provider"
	"github.com/curatorproject/curator/provider/process"
)

// TestDeposedPartsChangeNothing: the parts that own an effect outside
// etcd check the fence before the call, so a leadership that is over
// (its election key gone, a new one in its place) makes no machine,
// destroys none, and changes nothing in the Swarm, whatever a loop of
// it still runs.
func TestDeposedPartsChangeNothing(t *testing.T) {
	c := newTestCluster(t)
	svc := c.startLeader()
	old := svc.currentLeader()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	if _, err := c.cli.Delete(ctx, old.Lead.Key()); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the curator leads under a new leadership", func() bool {
		st := svc.currentLeader()
		return st != nil && st != old
	})

	p, err := process.New(process.Config{Dir: t.TempDir(), Addresses: []string{"127.0.0.1:1"}})
	if err != nil {
		t.Fatal(err)
	}
	labels := map[string]string{provider.LabelCluster: "deposed", provider.LabelGroup: "g"}
	if _, err := old.Machines.provision(ctx, p, provider.Spec{Labels: labels, Args: []string{"version"}}); !errors.Is(err, spec.ErrNotLeader) {
		t.Errorf("provision by a deposed leader = %v, want ErrNotLeader", err)
	}
	if got, err := p.List(ctx, labels); err != nil || len(got) != 0 {
		t.Errorf("machines after a deposed leader's provision = %v, %v; want none", got, err)
	}
	if err := old.Machines.destroy(ctx, p, "any"); !errors.Is(err, spec.ErrNotLeader) {
		t.Errorf("destroy by a deposed leader = %v, want ErrNotLeader", err)
	}

	// An engine that does not exist: a call that reached it would fail
	// with a connection error, not the fence's.
	engine, err := client.New(client.WithHost("unix://" + t.TempDir() + "/no-engine.sock"))
	if err != nil {
		t.Fatal(err)
	}
	defer engine.Close()
	cfg := *old.Cfg
	cfg.Docker = engine
	sw := &swarmEngine{fence: old.Lead.Fence, cfg: &cfg}
	if err := sw.remove(ctx, "any"); !errors.Is(err, spec.ErrNotLeader) {
		t.Errorf("Swarm node removal by a deposed leader = %v, want ErrNotLeader", err)
	}
}
