package store

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"regexp"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/tests/v3/framework/integration"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"

	pb "github.com/curatorproject/curator/proto"
)

// startRegistry runs a registry view of c's etcd until the test ends.
func startRegistry(t *testing.T, cli *clientv3.Client) *Registry {
	t.Helper()
	reg := NewRegistry(cli)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- reg.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Errorf("registry: %v", err)
		}
	})
	if err := reg.WaitLoaded(callCtx(t)); err != nil {
		t.Fatal(err)
	}
	return reg
}

// assertRegistryIsEtcd waits until reg has seen etcd's current revision
// and compares everything it derives with what etcd holds.
func assertRegistryIsEtcd(t *testing.T, cli *clientv3.Client, reg *Registry) {
	t.Helper()
	resp, err := cli.Get(callCtx(t), nodePrefix, clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		t.Fatal(err)
	}
	if err := reg.CaughtUp(callCtx(t), resp.Header.Revision); err != nil {
		t.Fatal(err)
	}
	want, err := NodeList(callCtx(t), cli)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, reg.Nodes(), protocmp.Transform()); diff != "" {
		t.Fatalf("registry view differs from etcd (-etcd +view):\n%s", diff)
	}
	wantManagers := Managers(slices.Values(want))
	if diff := cmp.Diff(wantManagers, reg.ManagerList(), cmp.Comparer(func(a, b []string) bool { return slices.Equal(a, b) })); diff != "" && !(len(wantManagers) == 0 && len(reg.ManagerList()) == 0) {
		t.Errorf("managers (-etcd +view):\n%s", diff)
	}
	var wantMembership []*pb.Node
	for _, n := range want {
		if MembershipChange(nil, n) {
			wantMembership = append(wantMembership, n)
		}
	}
	if diff := cmp.Diff(wantMembership, reg.MembershipNodes(), protocmp.Transform(), cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("membership nodes (-etcd +view):\n%s", diff)
	}
	if reg.Count() != len(want) {
		t.Errorf("count() = %d, want %d", reg.Count(), len(want))
	}
	wantPeers := map[string]string{}
	for _, n := range want {
		if u, ok := NodePeerURL(n); ok {
			wantPeers[u] = n.Id
		}
	}
	for u, id := range wantPeers {
		if got := reg.NodeByPeerURL(u); got != id {
			t.Errorf("nodeByPeerURL(%s) = %q, want %q", u, got, id)
		}
	}
	for _, n := range want {
		if got := reg.Node(n.Id); !proto.Equal(got, n) {
			t.Errorf("node(%s) = %v, want %v", n.Id, got, n)
		}
		if got := reg.NodeNamed(n.Name); got.GetId() != n.Id {
			t.Errorf("nodeNamed(%s) = %s, want %s", n.Name, got.GetId(), n.Id)
		}
		if got := reg.NodeAt(n.Address); got.GetId() != n.Id {
			t.Errorf("nodeAt(%s) = %s, want %s", n.Address, got.GetId(), n.Id)
		}
	}
}

// randomNodeWrite puts or deletes one of a small set of node records, so
// that writers collide on the same keys.
func randomNodeWrite(ctx context.Context, cli *clientv3.Client, r *rand.Rand) error {
	k := r.IntN(40)
	id := fmt.Sprintf("node%02d", k)
	if r.IntN(4) == 0 {
		_, err := cli.Delete(ctx, nodeKey(id))
		return err
	}
	// Addresses are unique to a node (Register sees to it); the port
	// moves, and the peer URL with it.
	n := &pb.Node{Id: id, Name: id, Address: net.JoinHostPort("127.0.9."+strconv.Itoa(k+1), strconv.Itoa(7000+10*r.IntN(50))),
		Status: pb.NodeStatus(r.IntN(4)), Labels: map[string]string{"w": strconv.Itoa(r.IntN(1000))}}
	if r.IntN(3) == 0 {
		n.Roles = []pb.Role{pb.Role_ROLE_CONSENSUS, pb.Role_ROLE_WORKER}
	}
	data, err := proto.Marshal(n)
	if err != nil {
		return err
	}
	_, err = cli.Put(ctx, nodeKey(id), string(data))
	return err
}

// TestRegistryFollowsConcurrentWrites: four writers put and delete the
// same node records at once; the view ends up exactly what etcd holds,
// with its indexes (managers, peer URLs).
func TestRegistryFollowsConcurrentWrites(t *testing.T) {
	cli := testEtcd(t)
	reg := startRegistry(t, cli)
	assertRegistryIsEtcd(t, cli, reg)

	var wg sync.WaitGroup
	errs := make(chan error, 5)
	// A reader meanwhile: the sorted IDs are kept as nodes come and go
	// (not sorted again).
	stop := make(chan struct{})
	var readers sync.WaitGroup
	readers.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			l := reg.Nodes()
			for i := 1; i < len(l); i++ {
				if l[i-1].Id >= l[i].Id {
					errs <- fmt.Errorf("Nodes() not sorted or repeated at %d: %s, %s", i, l[i-1].Id, l[i].Id)
					return
				}
			}
			time.Sleep(time.Millisecond)
		}
	})
	for w := range 4 {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(w), 1))
			cli := cli
			for range 150 {
				if err := randomNodeWrite(callCtx(t), cli, r); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(stop)
	readers.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	assertRegistryIsEtcd(t, cli, reg)
}

// TestRegistryReloadsAfterCompaction: a watch that resumes from a revision
// etcd has compacted away fails, and the view reloads from etcd whole.
func TestRegistryReloadsAfterCompaction(t *testing.T) {
	cli := testEtcd(t)
	reg := NewRegistry(cli)
	rev, err := reg.load(callCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(7, 7))
	for range 100 {
		if err := randomNodeWrite(callCtx(t), cli, r); err != nil {
			t.Fatal(err)
		}
	}
	resp, err := cli.Get(callCtx(t), "any")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Compact(callCtx(t), resp.Header.Revision); err != nil {
		t.Fatal(err)
	}
	if err := reg.follow(callCtx(t), rev); err == nil || !regexpMatch(`compaction`, err.Error()) {
		t.Fatalf("follow from a compacted revision: %v, want a compaction error", err)
	}
	// run reloads, then follows from the new revision.
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- reg.Run(ctx) }()
	defer func() { cancel(); <-done }()
	assertRegistryIsEtcd(t, cli, reg)
	for range 50 {
		if err := randomNodeWrite(callCtx(t), cli, r); err != nil {
			t.Fatal(err)
		}
	}
	assertRegistryIsEtcd(t, cli, reg)
}

// TestRegistryWakesOnlyWhoIsConcerned: subscribers are woken only by what
// their filter takes, and the manager list follows the records.
func TestRegistryWakesOnlyWhoIsConcerned(t *testing.T) {
	cli := testEtcd(t)
	reg := startRegistry(t, cli)
	put := func(n *pb.Node) {
		t.Helper()
		data, err := proto.Marshal(n)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := cli.Put(callCtx(t), nodeKey(n.Id), string(data))
		if err != nil {
			t.Fatal(err)
		}
		if err := reg.CaughtUp(callCtx(t), resp.Header.Revision); err != nil {
			t.Fatal(err)
		}
	}
	worker := &pb.Node{Id: "w1", Address: "127.0.9.1:7000", Roles: []pb.Role{pb.Role_ROLE_WORKER}}
	other := &pb.Node{Id: "w2", Address: "127.0.9.2:7000", Roles: []pb.Role{pb.Role_ROLE_WORKER}}
	put(worker)
	put(other)
	membership, unsubscribe := reg.Subscribe(MembershipChange)
	defer unsubscribe()
	kicked := func() bool {
		select {
		case <-membership:
			return true
		default:
			return false
		}
	}
	other.Status = pb.NodeStatus_NODE_STATUS_READY
	put(other)
	if kicked() {
		t.Fatal("a worker's status change woke the membership loops")
	}
	other.Roles = []pb.Role{pb.Role_ROLE_CONSENSUS, pb.Role_ROLE_WORKER}
	put(other)
	if !kicked() {
		t.Fatal("w2 promoted: the membership loops not woken")
	}
	n, mgrs := reg.NodeAndManagers("w2")
	if n.GetStatus() != pb.NodeStatus_NODE_STATUS_READY || !slices.Contains(mgrs, other.Address) {
		t.Errorf("w2 = %v, managers = %v, want it ready and its address among them", n, mgrs)
	}
	if got := reg.ManagerList(); !slices.Equal(got, mgrs) {
		t.Errorf("managers = %v, want %v", got, mgrs)
	}
}

func regexpMatch(pattern, s string) bool { return regexp.MustCompile(pattern).MatchString(s) }

// testEtcd is a one-member etcd cluster (etcd's own test cluster) for the
// test, and a client of it.
func testEtcd(t *testing.T) *clientv3.Client {
	t.Helper()
	integration.BeforeTest(t)
	clus := integration.NewCluster(t, &integration.ClusterConfig{Size: 1})
	t.Cleanup(func() { clus.Terminate(t) })
	return clus.Client(0)
}

// testLeader is testEtcd with a leadership of node-0 on it (its election
// key put) and reg's fence of it (reg may be nil).
func testLeader(t *testing.T, cli *clientv3.Client, reg *Registry) *Fence {
	t.Helper()
	put, err := cli.Put(callCtx(t), "/test/election", "leader")
	if err != nil {
		t.Fatal(err)
	}
	return NewFence(cli, "node-0", "/test/election", put.Header.Revision, reg)
}

const testTimeout = 30 * time.Second

func callCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	t.Cleanup(cancel)
	return ctx
}
