package curator

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	"github.com/curatorproject/curator/curator/spec"
	"github.com/curatorproject/curator/curator/store"
	"github.com/curatorproject/curator/pki"
	pb "github.com/curatorproject/curator/proto"
)

// etcdCalls counts a curator's calls to etcd by the call of its own API
// they were made for (grpc.Method of the context: "" for its loops) and
// etcd's method.
type etcdCalls struct {
	mu sync.Mutex
	n  map[[2]string]int
}

func (e *etcdCalls) intercept(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	for_, _ := grpc.Method(ctx)
	e.mu.Lock()
	e.n[[2]string{for_, method}]++
	e.mu.Unlock()
	return invoker(ctx, method, req, reply, cc, opts...)
}

// of returns the calls made for the API call apiMethod, by etcd method.
func (e *etcdCalls) of(apiMethod string) map[string]int {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := map[string]int{}
	for k, n := range e.n {
		if k[0] == apiMethod {
			out[k[1]] += n
		}
	}
	return out
}

// countingClient is an etcd client of the test cluster's etcd, as the
// curator's, whose calls (its own, and those of connections it dials to
// each member) calls counts.
func (c *testCluster) countingClient(calls *etcdCalls) *clientv3.Client {
	c.t.Helper()
	calls.n = map[[2]string]int{}
	cert := c.tlsCert(c.etcdCA, "client", pki.RoleConsensus)
	roots := x509.NewCertPool()
	roots.AddCert(c.etcdCA.Cert)
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   []string{c.etcdURL},
		TLS:         &tls.Config{MinVersion: tls.VersionTLS13, Certificates: []tls.Certificate{cert}, RootCAs: roots},
		DialTimeout: 5 * time.Second,
		DialOptions: []grpc.DialOption{grpc.WithChainUnaryInterceptor(calls.intercept)},
		Logger:      nopLogger(),
	})
	if err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(func() { cli.Close() })
	return cli
}

// TestListNodesPageAsksEtcdOnce: a page of ListNodes costs one etcd call
// of its own (the member list, for MANAGER STATUS), not that, etcd's
// status and a status of every member (who etcd hears from): a listing of
// 10,000 nodes is six pages. Every operator's call also reads whether its
// certificate was revoked (a Range).
func TestListNodesPageAsksEtcdOnce(t *testing.T) {
	c := newTestCluster(t)
	calls := &etcdCalls{}
	c.leadWith(c.curatorConfig(c.first, c.countingClient(calls)))
	admin, anon := c.dialFirst()
	token := c.token(admin, "worker")
	want := []string{c.first.id}
	for i := range 5 {
		n, _ := c.register(anon, token, "w"+strconv.Itoa(i))
		want = append(want, n.id)
	}
	var got []string
	pages := 0
	req := &pb.ListNodesRequest{PageSize: 2}
	for {
		resp, err := pb.NewManagementClient(admin).ListNodes(callCtx(t), req)
		if err != nil {
			t.Fatal(err)
		}
		pages++
		for _, nv := range resp.Nodes {
			got = append(got, nv.Node.Id)
		}
		if resp.NextPageToken == "" {
			break
		}
		req.PageToken = resp.NextPageToken
	}
	if len(got) != len(want) || pages != 3 {
		t.Fatalf("listed %d nodes in %d pages, want %d in 3", len(got), pages, len(want))
	}
	wantCalls := map[string]int{"/etcdserverpb.Cluster/MemberList": pages, "/etcdserverpb.KV/Range": pages}
	if diff := cmp.Diff(wantCalls, calls.of("/curator.v1.Management/ListNodes")); diff != "" {
		t.Errorf("etcd calls of %d pages of ListNodes (-want +got):\n%s", pages, diff)
	}
}

// TestListNodesPageBytes: a page stops at MaxListPageBytes of nodes,
// whatever the size asked for (nodes with many long labels), and the
// pages list every node once: a client with gRPC's default 4 MiB limit
// lists such a fleet too.
func TestListNodesPageBytes(t *testing.T) {
	const fleet = 400 // of about 8 KiB each: 3 MiB and more in all
	c := newTestCluster(t)
	svc := c.startLeader()
	st := svc.currentLeader()
	key, _ := newKey(t)
	pub, err := x509.MarshalPKIXPublicKey(key.Public())
	if err != nil {
		t.Fatal(err)
	}
	labels := map[string]string{}
	for i := range spec.MaxNodeLabels {
		labels[fmt.Sprintf("label-%02d-%s", i, strings.Repeat("k", spec.MaxNameLength-9))] = strings.Repeat("v", spec.MaxNameLength)
	}
	var batch []*pb.Node
	for i := range fleet {
		batch = append(batch, &pb.Node{
			Id: fmt.Sprintf("big%021d", i), Name: fmt.Sprintf("big-%d", i), Address: fmt.Sprintf("10.0.%d.%d:7000", i/200, i%200+1),
			State: pb.NodeState_NODE_STATE_UP, Roles: []pb.Role{pb.Role_ROLE_WORKER}, PublicKey: pub, Labels: labels,
		})
		if len(batch) == store.MaxNodesPerTxn/4 || i == fleet-1 {
			if err := store.NodeJoinAll(t.Context(), st.Lead.Fence, batch); err != nil {
				t.Fatal(err)
			}
			batch = nil
		}
	}
	waitFor(t, "the registry holds the fleet", func() bool { return st.Reg.Count() > fleet })
	admin, _ := c.dialFirst()
	m := pb.NewManagementClient(admin)
	seen := map[string]bool{}
	req := &pb.ListNodesRequest{PageSize: MaxListPageSize}
	pages := 0
	for {
		resp, err := m.ListNodes(callCtx(t), req)
		if err != nil {
			t.Fatalf("page %d: %v", pages+1, err)
		}
		pages++
		if size := proto.Size(resp); size > MaxListPageBytes+64<<10 {
			t.Errorf("page %d: %d bytes, want at most about %d", pages, size, MaxListPageBytes)
		}
		for _, v := range resp.Nodes {
			if seen[v.Node.Id] {
				t.Errorf("node %s listed twice", v.Node.Id)
			}
			seen[v.Node.Id] = true
		}
		if resp.NextPageToken == "" {
			break
		}
		req.PageToken = resp.NextPageToken
	}
	if len(seen) != fleet+1 || pages < 2 {
		t.Errorf("%d nodes in %d pages, want the %d in two or more", len(seen), pages, fleet+1)
	}
}
