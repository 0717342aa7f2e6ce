package leader

import (
	"errors"
	"testing"

	"github.com/moby/moby/client"
	"go.etcd.io/etcd/client/v3/concurrency"
	"go.etcd.io/etcd/tests/v3/framework/integration"
	"go.uber.org/zap/zaptest"

	"github.com/curatorproject/curator/curator/spec"
	"github.com/curatorproject/curator/curator/store"
	"github.com/curatorproject/curator/provider"
	"github.com/curatorproject/curator/provider/process"
)

// TestDeposedPartsChangeNothing: the parts that own an effect outside
// etcd check the fence before the call, so a leadership that is over
// (its election key gone) makes no machine, destroys none, and changes
// nothing in the Swarm, whatever a loop of it still runs.
func TestDeposedPartsChangeNothing(t *testing.T) {
	integration.BeforeTest(t, integration.WithoutGoLeakDetection())
	clus := integration.NewCluster(t, &integration.ClusterConfig{Size: 1})
	t.Cleanup(func() { clus.Terminate(t) })
	cli := clus.Client(0)
	ctx := callCtx(t)

	// A real election won, and its key deleted: the leadership is over.
	sess, err := concurrency.NewSession(cli)
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	e := concurrency.NewElection(sess, "/curator/test-election")
	if err := e.Campaign(ctx, "n1"); err != nil {
		t.Fatal(err)
	}
	fence := store.NewFence(cli, "n1", e.Key(), e.Rev(), nil)
	if err := fence.Check(ctx); err != nil {
		t.Fatalf("the fence of a won election: %v", err)
	}
	if _, err := cli.Delete(ctx, e.Key()); err != nil {
		t.Fatal(err)
	}

	m := &machines{fence: fence, lg: zaptest.NewLogger(t)}
	defer m.close()
	p, err := process.New(process.Config{Dir: t.TempDir(), Addresses: []string{"127.0.0.1:1"}})
	if err != nil {
		t.Fatal(err)
	}
	labels := map[string]string{provider.LabelCluster: "deposed", provider.LabelGroup: "g"}
	if _, err := m.provision(ctx, p, provider.Spec{Labels: labels, Args: []string{"version"}}); !errors.Is(err, spec.ErrNotLeader) {
		t.Errorf("provision by a deposed leader = %v, want ErrNotLeader", err)
	}
	if got, err := p.List(ctx, labels); err != nil || len(got) != 0 {
		t.Errorf("machines after a deposed leader's provision = %v, %v; want none", got, err)
	}
	if err := m.destroy(ctx, p, "any"); !errors.Is(err, spec.ErrNotLeader) {
		t.Errorf("destroy by a deposed leader = %v, want ErrNotLeader", err)
	}

	// An engine that does not exist: a call that reached it would fail
	// with a connection error, not the fence's.
	engine, err := client.New(client.WithHost("unix://" + t.TempDir() + "/no-engine.sock"))
	if err != nil {
		t.Fatal(err)
	}
	defer engine.Close()
	sw := &swarmEngine{fence: fence, cfg: &Config{Docker: engine, SwarmTimeout: testTimeout, Logger: zaptest.NewLogger(t)}}
	if err := sw.remove(ctx, "any"); !errors.Is(err, spec.ErrNotLeader) {
		t.Errorf("Swarm node removal by a deposed leader = %v, want ErrNotLeader", err)
	}
}
