package curator

import (
	"context"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.etcd.io/etcd/tests/v3/framework/integration"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/curatorproject/curator/curator/store"
	"github.com/curatorproject/curator/pki"
	pb "github.com/curatorproject/curator/proto"
	"github.com/curatorproject/curator/supervisor"
)

// Partitions in one process: three curators, each on its own member of a
// three-member etcd cluster from etcd's integration framework, whose
// members can be cut off from each other (InjectPartition) and whose
// clients reach them through bridges that can blackhole every byte.

const partitionTTL = 2 * time.Second

// etcdCurators is three curators on a three-member etcd cluster.
type etcdCurators struct {
	t    *testing.T
	clus *integration.Cluster
	svcs []*Service
	root *pki.CA
}

func newEtcdCurators(t *testing.T) *etcdCurators {
	t.Helper()
	// The package's TestMain checks for leaked goroutines itself.
	integration.BeforeTest(t, integration.WithoutGoLeakDetection())
	clus := integration.NewCluster(t, &integration.ClusterConfig{Size: 3, UseBridge: true})
	t.Cleanup(func() { clus.Terminate(t) })

	root, err := pki.NewCA("partition test CA")
	if err != nil {
		t.Fatal(err)
	}
	etcdCA, err := root.NewIntermediate("partition test etcd CA")
	if err != nil {
		t.Fatal(err)
	}
	tc := &testCluster{t: t, root: root, etcdCA: etcdCA}
	ec := &etcdCurators{t: t, clus: clus, root: root}
	for i := range 3 {
		key, id := newKey(t)
		ip := nextIP(t)
		address := net.JoinHostPort(ip, strconv.Itoa(freeBasePort(t, ip)))
		if i == 0 {
			ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
			first := &pb.Node{Id: id, Name: "m0", Address: address, Roles: []pb.Role{pb.Role_ROLE_CONSENSUS, pb.Role_ROLE_WORKER},
				Availability: pb.Availability_AVAILABILITY_ACTIVE}
			_, err := store.Bootstrap(ctx, clus.Client(0), store.BootstrapParams{ClusterID: "partitions", CA: root, EtcdCA: etcdCA, First: first})
			cancel()
			if err != nil {
				t.Fatal(err)
			}
		}
		svc, err := New(Config{
			NodeID: id, Address: address, Etcd: clus.Client(i),
			NodeCert: tc.nodeCert(key, id, ip), NodeKey: key, CA: root.Cert,
			ElectionTTL: partitionTTL, HeartbeatInterval: testHeartbeat, DownAfter: testDownAfter,
			Logger: zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel)).Named("m" + strconv.Itoa(i)),
		})
		if err != nil {
			t.Fatal(err)
		}
		supervisor.TestHarness(t, svc.Run)
		ec.svcs = append(ec.svcs, svc)
	}
	return ec
}

// leaders returns the indexes of the curators that say they lead.
func (ec *etcdCurators) leaders() []int {
	var out []int
	for i, s := range ec.svcs {
		if s.IsLeader() {
			out = append(out, i)
		}
	}
	return out
}

// waitLeader waits until exactly one curator leads and returns it.
func (ec *etcdCurators) waitLeader() int {
	ec.t.Helper()
	var l []int
	waitFor(ec.t, "one curator leads", func() bool { l = ec.leaders(); return len(l) == 1 })
	return l[0]
}

func (ec *etcdCurators) others(i int) []*integration.Member {
	var out []*integration.Member
	for j, m := range ec.clus.Members {
		if j != i {
			out = append(out, m)
		}
	}
	return out
}

// TestEtcdElectionCostsNoCuratorFailover: the etcd leader (not on the
// curator leader's member) is cut off from the other members; etcd elects
// another leader. The curator leader keeps its leadership (the same one,
// not a new election), no other curator ever leads, and any moment the
// leader spends in doubt is shorter than its TTL.
func TestEtcdElectionCostsNoCuratorFailover(t *testing.T) {
	ec := newEtcdCurators(t)
	l := ec.waitLeader()
	e := ec.clus.WaitLeader(t)
	if e == l {
		to := (l + 1) % 3
		ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
		_, err := ec.clus.Client(e).MoveLeader(ctx, uint64(ec.clus.Members[to].ID()))
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		e = ec.clus.WaitLeader(t)
	}
	if e == l {
		t.Fatalf("etcd leadership did not move off the curator leader's member %d", l)
	}
	st := ec.svcs[l].currentLeader()

	ec.clus.Members[e].InjectPartition(t, ec.others(e)...)
	var doubt time.Duration
	const poll = 5 * time.Millisecond
	for deadline := time.Now().Add(3 * partitionTTL); time.Now().Before(deadline); time.Sleep(poll) {
		for _, i := range ec.leaders() {
			if i != l {
				t.Fatalf("curator %d leads while etcd elects a leader: the curator leader %d should have kept it", i, l)
			}
		}
		if ec.svcs[l].currentLeader() != st {
			t.Fatalf("curator %d's leadership ended and began again: an etcd election cost a curator failover", l)
		}
		if !ec.svcs[l].IsLeader() {
			doubt += poll
		}
	}
	ec.clus.Members[e].RecoverPartition(t, ec.others(e)...)
	if doubt >= partitionTTL {
		t.Errorf("the curator leader was in doubt for about %v, more than its TTL %v", doubt, partitionTTL)
	}
	waitFor(t, "the curator leader serves again", ec.svcs[l].IsLeader)
	if ec.svcs[l].currentLeader() != st {
		t.Error("the curator leader's leadership is not the one it had")
	}
	t.Logf("etcd leader %d cut off; curator leader %d kept its leadership, in doubt for about %v", e, l, doubt)
}

// TestCuratorLeaderCutOffStopsBeforeAnotherLeads: every byte between the
// curator leader and its etcd member is lost (the member itself stays in
// the quorum). Its lease expires in etcd and another curator leads; at no
// moment do two curators say they lead. When the bytes flow again the old
// leader learns its lease is gone and follows.
func TestCuratorLeaderCutOffStopsBeforeAnotherLeads(t *testing.T) {
	ec := newEtcdCurators(t)
	l := ec.waitLeader()
	ec.clus.Members[l].Bridge().Blackhole()
	cut := time.Now()
	var stopped, next time.Time
	newLeader := -1
	for deadline := time.Now().Add(4 * partitionTTL); newLeader < 0; time.Sleep(2 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no other curator leads %v after the leader was cut off (leaders: %v)", 4*partitionTTL, ec.leaders())
		}
		ls := ec.leaders()
		if len(ls) > 1 {
			t.Fatalf("curators %v say they lead at once, %v after the leader was cut off", ls, time.Since(cut))
		}
		if stopped.IsZero() && !ec.svcs[l].IsLeader() {
			stopped = time.Now()
		}
		if len(ls) == 1 && ls[0] != l {
			newLeader, next = ls[0], time.Now()
		}
	}
	if stopped.IsZero() || !stopped.Before(next) {
		t.Errorf("the cut-off leader stopped at %v, the next led at %v (since the cut)", stopped.Sub(cut), next.Sub(cut))
	}
	ec.clus.Members[l].Bridge().Unblackhole()
	waitFor(t, "the old leader learns its lease is gone", func() bool { return ec.svcs[l].currentLeader() == nil })
	if ls := ec.leaders(); len(ls) != 1 || ls[0] != newLeader {
		t.Errorf("after healing, leaders are %v; want only %d", ls, newLeader)
	}
	t.Logf("leader %d cut off: it stopped %v after, curator %d led %v after", l, stopped.Sub(cut).Round(time.Millisecond), newLeader, next.Sub(cut).Round(time.Millisecond))
}

// TestRefusalIsNotKeptWaitingOnEtcd: a manager whose etcd member is cut
// off from the others (its writes hang) answers a refused call at once,
// and records the refusal in the audit trail once it is back.
func TestRefusalIsNotKeptWaitingOnEtcd(t *testing.T) {
	ec := newEtcdCurators(t)
	f := (ec.waitLeader() + 1) % 3
	key, err := pki.NewKey()
	if err != nil {
		t.Fatal(err)
	}
	cert, err := ec.root.Issue(pki.CertRequest{PublicKey: key.Public(), NodeID: "who-reader", Role: pki.RoleAdmin, OperatorRole: pki.OperatorReader})
	if err != nil {
		t.Fatal(err)
	}
	tlsCert := pki.TLSCertificate(cert, key)
	conn := dial(t, ec.svcs[f].cfg.Address, &tlsCert, ec.root.Cert)

	ec.clus.Members[f].InjectPartition(t, ec.others(f)...)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	asked := time.Now()
	_, err = pb.NewManagementClient(conn).RotateToken(ctx, &pb.RotateTokenRequest{Role: "worker"})
	answered := time.Since(asked)
	if status.Code(err) != codes.PermissionDenied {
		t.Fatalf("a reader's RotateToken on a cut-off manager: %v after %v, want PermissionDenied", err, answered)
	}
	if answered > time.Second {
		t.Errorf("a reader's RotateToken on a cut-off manager was refused after %v, want at once", answered)
	}
	// Kept cut off long enough that the first write of the entry fails.
	time.Sleep(2 * time.Second)
	ec.clus.Members[f].RecoverPartition(t, ec.others(f)...)
	waitFor(t, "the refusal is in the audit trail", func() bool {
		entries, _, err := store.AuditList(context.Background(), ec.clus.Client(f), 0, 0)
		for _, e := range entries {
			if err == nil && e.Name == "who-reader" && e.Call == "RotateToken" && e.Recorder == ec.svcs[f].cfg.NodeID && strings.HasPrefix(e.Outcome, "PermissionDenied") {
				return true
			}
		}
		return false
	})
}

// TestRefusalsWaitingAreBounded: refusals beyond the queue are counted as
// not recorded, not held.
func TestRefusalsWaitingAreBounded(t *testing.T) {
	s := &Service{cfg: Config{NodeID: "n1", Logger: zap.NewNop(), Now: time.Now}, metrics: NewMetrics(nil), refusals: make(chan *pb.AuditEntry, 2)}
	denied := status.Error(codes.PermissionDenied, "no")
	for range 5 {
		s.auditRefusal(context.Background(), identity{role: pki.RoleAdmin, opRole: pki.OperatorReader, name: "r"}, managementPrefix+"RotateToken", nil, denied)
	}
	if n, lost := len(s.refusals), metricValue(t, s.metrics.RefusalsUnaudited); n != 2 || lost != 3 {
		t.Errorf("5 refusals on a queue of 2: %d waiting, %v lost; want 2 and 3", n, lost)
	}
}
