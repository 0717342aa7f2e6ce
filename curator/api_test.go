package curator

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/testing/protocmp"

	"github.com/curatorproject/curator/consensus"
	"github.com/curatorproject/curator/curator/spec"
	"github.com/curatorproject/curator/curator/store"
	"github.com/curatorproject/curator/pki"
	pb "github.com/curatorproject/curator/proto"
	"github.com/curatorproject/curator/supervisor"
)

func callCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	t.Cleanup(cancel)
	return ctx
}

// TestAuthorization is who may call what in-process: the management API,
// the node API and etcd, with each kind of credential, and what only a
// test inside the package can forge (a certificate presented whatever the
// server asks for, a forwarded identity). The whole matrix on the real
// binary, every surface a node serves, is TestAuthorizationMatrix in
// test/authz_test.go.
func TestAuthorization(t *testing.T) {
	c := newTestCluster(t)
	c.startLeader()
	adminCert := c.adminCert()
	admin, anon := c.dialFirst()
	worker, _ := c.register(anon, c.token(admin, "worker"), "worker")
	manager, _ := c.register(anon, c.token(admin, "manager"), "manager")

	foreign, err := pki.NewCA("foreign CA")
	if err != nil {
		t.Fatal(err)
	}
	foreignCert := c.tlsCert(foreign, worker.id, pki.RoleNode)
	foreignAdmin := c.tlsCert(foreign, "admin", pki.RoleAdmin)

	// refused marks a failed TLS handshake: gRPC reports Unavailable.
	const refused = codes.Unavailable
	for _, tc := range []struct {
		name string
		cert *tls.Certificate
		// Expected codes of Management.ListNodes and Curator.GetManagers;
		// whether an etcd Get with this certificate works.
		mgmt, node codes.Code
		etcd       bool
	}{
		{"no certificate", nil, codes.PermissionDenied, codes.PermissionDenied, false},
		{"worker node", worker.tlsCert(), codes.PermissionDenied, codes.OK, false},
		{"manager node", manager.tlsCert(), codes.PermissionDenied, codes.OK, false},
		{"first node", c.first.tlsCert(), codes.PermissionDenied, codes.OK, false},
		{"admin", &adminCert, codes.OK, codes.PermissionDenied, false},
		// A Go TLS client does not send a certificate that chains to none
		// of the CAs the server names in its request: it calls as
		// anonymous.
		{"foreign CA node", &foreignCert, codes.PermissionDenied, codes.PermissionDenied, false},
		{"foreign CA admin", &foreignAdmin, codes.PermissionDenied, codes.PermissionDenied, false},
		// A client that presents it anyway fails the handshake.
		{"foreign CA node, presented", &foreignCert, refused, refused, false},
		{"foreign CA admin, presented", &foreignAdmin, refused, refused, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel() // the etcd refusals each wait for a timeout
			conn := dial(t, c.first.address, tc.cert, c.root.Cert)
			if strings.HasSuffix(tc.name, ", presented") {
				conn = dialPresenting(t, c.first.address, *tc.cert, c.root.Cert)
			}
			_, err := pb.NewManagementClient(conn).ListNodes(callCtx(t), &pb.ListNodesRequest{})
			if got := status.Code(err); got != tc.mgmt {
				t.Errorf("ListNodes: %v (%v), want %v", got, err, tc.mgmt)
			}
			_, err = pb.NewCuratorClient(conn).GetManagers(callCtx(t), &pb.GetManagersRequest{})
			if got := status.Code(err); got != tc.node {
				t.Errorf("GetManagers: %v (%v), want %v", got, err, tc.node)
			}
			if got := etcdWorks(t, c, tc.cert); got != tc.etcd {
				t.Errorf("etcd Get works = %v, want %v", got, tc.etcd)
			}
		})
	}
	t.Run("etcd CA certificate reaches etcd", func(t *testing.T) {
		// The positive control of the etcd column.
		cert := c.tlsCert(c.etcdCA, "client", pki.RoleConsensus)
		if !etcdWorks(t, c, &cert) {
			t.Error("etcd refused a certificate from the etcd CA")
		}
	})

	t.Run("no certificate may register", func(t *testing.T) {
		// A bad token, but it gets as far as the handler: not refused by
		// authorization.
		_, err := registerKey(anon, worker.key, "garbage", "x", "127.0.77.250:7000")
		if got := status.Code(err); got != codes.InvalidArgument {
			t.Errorf("Register without a certificate: %v (%v), want InvalidArgument", got, err)
		}
	})

	t.Run("only a manager may forward for someone else", func(t *testing.T) {
		// A forwarded identity is believed from a consensus member only:
		// a worker that claims to forward for the admin is refused.
		for _, tc := range []struct {
			name string
			cert *tls.Certificate
			want codes.Code
		}{
			{"worker", worker.tlsCert(), codes.PermissionDenied},
			{"admin", &adminCert, codes.PermissionDenied},
			{"no certificate", nil, codes.PermissionDenied},
			{"manager", manager.tlsCert(), codes.OK},
		} {
			conn := dial(t, c.first.address, tc.cert, c.root.Cert)
			ctx := metadata.AppendToOutgoingContext(callCtx(t), forwardedForKey, "admin")
			_, err := pb.NewManagementClient(conn).ListNodes(ctx, &pb.ListNodesRequest{})
			if got := status.Code(err); got != tc.want {
				t.Errorf("%s forwarding for admin: %v (%v), want %v", tc.name, got, err, tc.want)
			}
		}
	})

	t.Run("removed node is refused", func(t *testing.T) {
		gone, _ := c.register(anon, c.token(admin, "worker"), "gone")
		conn := dial(t, c.first.address, gone.tlsCert(), c.root.Cert)
		cur := pb.NewCuratorClient(conn)
		if _, err := cur.GetManagers(callCtx(t), &pb.GetManagersRequest{}); err != nil {
			t.Fatalf("GetManagers before removal: %v", err)
		}
		// Deleted behind the leader's back, straight in etcd: the leader
		// learns it from its registry watch, within moments.
		if _, err := c.cli.Delete(callCtx(t), store.Keys.Node(gone.id)); err != nil {
			t.Fatal(err)
		}
		var err error
		waitFor(t, "the removed node is refused", func() bool {
			_, err = cur.GetManagers(callCtx(t), &pb.GetManagersRequest{})
			return status.Code(err) != codes.OK
		})
		if got := status.Code(err); got != codes.PermissionDenied {
			t.Errorf("GetManagers after removal: %v (%v), want PermissionDenied", got, err)
		}
	})
}

// dialPresenting is dial with a client that presents cert whatever CAs
// the server asks for.
func dialPresenting(t *testing.T, address string, cert tls.Certificate, roots ...*x509.Certificate) *grpc.ClientConn {
	t.Helper()
	pool := x509.NewCertPool()
	for _, r := range roots {
		pool.AddCert(r)
	}
	cfg := &tls.Config{
		MinVersion: tls.VersionTLS13,
		RootCAs:    pool,
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			return &cert, nil
		},
	}
	conn, err := grpc.NewClient(address, grpc.WithTransportCredentials(credentials.NewTLS(cfg)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// etcdWorks says whether an etcd Get with cert (none if nil), trusting the
// etcd CA, succeeds.
func etcdWorks(t *testing.T, c *testCluster, cert *tls.Certificate) bool {
	t.Helper()
	pool := x509.NewCertPool()
	pool.AddCert(c.etcdCA.Cert)
	cfg := &tls.Config{MinVersion: tls.VersionTLS13, RootCAs: pool}
	if cert != nil {
		cfg.Certificates = []tls.Certificate{*cert}
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{c.etcdURL}, TLS: cfg, Logger: nopLogger()})
	if err != nil {
		return false
	}
	defer cli.Close()
	// A refused handshake shows as a timeout: the client retries until
	// its deadline. A second is ample for a Get that works.
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_, err = cli.Get(ctx, store.Keys.Cluster())
	return err == nil
}

// TestRegister joins nodes with good, bad, foreign and rotated tokens over
// real gRPC, from a client without a certificate.
func TestRegister(t *testing.T) {
	c := newTestCluster(t)
	c.startLeader()
	admin, anon := c.dialFirst()
	workerToken := c.token(admin, "worker")
	managerToken := c.token(admin, "manager")

	worker, wresp := c.register(anon, workerToken, "w1")
	t.Run("worker token", func(t *testing.T) {
		id, err := pki.NodeID(worker.key.Public())
		if err != nil {
			t.Fatal(err)
		}
		if wresp.NodeId != id {
			t.Errorf("node ID %s, want %s (derived from the key)", wresp.NodeId, id)
		}
		if err := pki.Verify(worker.cert, c.root.Cert); err != nil {
			t.Errorf("node certificate: %v", err)
		}
		if gotID, role, err := pki.Identity(worker.cert); err != nil || gotID != id || role != pki.RoleNode {
			t.Errorf("certificate identity = %s, %s, %v; want %s, %s", gotID, role, err, id, pki.RoleNode)
		}
		if !bytes.Equal(wresp.CaCert, pki.EncodeCert(c.root.Cert)) {
			t.Error("the response does not carry the cluster CA")
		}
		if wresp.ClusterId != "test" {
			t.Errorf("cluster ID %q, want test", wresp.ClusterId)
		}
		if diff := cmp.Diff([]string{c.first.address}, wresp.Managers); diff != "" {
			t.Errorf("managers (-want +got):\n%s", diff)
		}
		n := c.loadNode(id)
		if diff := cmp.Diff([]pb.Role{pb.Role_ROLE_WORKER}, n.Roles); diff != "" {
			t.Errorf("roles (-want +got):\n%s", diff)
		}
		if n.Name != "w1" || n.Address != worker.address || n.Consensus != nil {
			t.Errorf("node record %v", n)
		}
	})

	t.Run("manager token", func(t *testing.T) {
		m, resp := c.register(anon, managerToken, "m1")
		n := c.loadNode(m.id)
		if diff := cmp.Diff([]pb.Role{pb.Role_ROLE_CONSENSUS, pb.Role_ROLE_WORKER}, n.Roles); diff != "" {
			t.Errorf("roles (-want +got):\n%s", diff)
		}
		if n.Consensus == nil {
			t.Fatal("no consensus join parameters")
		}
		etcdCert, err := pki.DecodeCert(n.Consensus.EtcdCert)
		if err != nil {
			t.Fatal(err)
		}
		if err := pki.Verify(etcdCert, c.etcdCA.Cert); err != nil {
			t.Errorf("etcd certificate does not chain to the etcd CA: %v", err)
		}
		if _, role, _ := pki.Identity(etcdCert); role != pki.RoleConsensus {
			t.Errorf("etcd certificate role %q", role)
		}
		members, err := consensus.Members(callCtx(t), c.cli)
		if err != nil {
			t.Fatal(err)
		}
		ip, port, _ := spec.SplitAddress(m.address)
		var learner *consensus.Member
		for i := range members {
			if members[i].ID == n.Consensus.MemberId {
				learner = &members[i]
			}
		}
		if learner == nil {
			t.Fatalf("member %x is not in etcd: %+v", n.Consensus.MemberId, members)
		}
		want := consensus.Member{ID: n.Consensus.MemberId, PeerURL: consensus.PeerURL(ip.String(), port), IsLearner: true}
		if diff := cmp.Diff(want, *learner); diff != "" {
			t.Errorf("etcd member (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff([]string{c.first.address, m.address}, resp.Managers, sortStrings()); diff != "" {
			t.Errorf("managers (-want +got):\n%s", diff)
		}
	})

	for _, tc := range []struct {
		name, token string
		want        codes.Code
	}{
		{"malformed token", "CUR1-nothex-secret", codes.InvalidArgument},
		{"empty token", "", codes.InvalidArgument},
		{"foreign CA fingerprint", foreignToken(t, workerToken), codes.PermissionDenied},
		{"wrong secret", wrongSecret(t, workerToken), codes.PermissionDenied},
	} {
		t.Run(tc.name, func(t *testing.T) {
			key, _ := newKey(t)
			_, err := registerKey(anon, key, tc.token, "bad-"+tc.name, freeAddress(t))
			if got := status.Code(err); got != tc.want {
				t.Errorf("Register: %v (%v), want %v", got, err, tc.want)
			}
		})
	}

	t.Run("same key again is idempotent", func(t *testing.T) {
		before, err := store.NodeList(callCtx(t), c.cli)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := registerKey(anon, worker.key, workerToken, "w1", worker.address)
		if err != nil {
			t.Fatalf("Register again: %v", err)
		}
		if resp.NodeId != worker.id {
			t.Errorf("node ID %s, want %s", resp.NodeId, worker.id)
		}
		after, err := store.NodeList(callCtx(t), c.cli)
		if err != nil {
			t.Fatal(err)
		}
		if len(after) != len(before) {
			t.Errorf("%d nodes before, %d after", len(before), len(after))
		}
	})

	t.Run("name taken", func(t *testing.T) {
		key, _ := newKey(t)
		_, err := registerKey(anon, key, workerToken, "w1", freeAddress(t))
		if got := status.Code(err); got != codes.AlreadyExists {
			t.Errorf("Register: %v (%v), want AlreadyExists", got, err)
		}
	})

	t.Run("address taken", func(t *testing.T) {
		key, _ := newKey(t)
		_, err := registerKey(anon, key, workerToken, "w-other", worker.address)
		if got := status.Code(err); got != codes.AlreadyExists {
			t.Errorf("Register: %v (%v), want AlreadyExists", got, err)
		}
	})

	t.Run("address still named, for a provider's machine", func(t *testing.T) {
		// A group's machine at the address of a machine gone a moment
		// ago waits for the stale record to go instead of giving up.
		before, err := store.NodeList(callCtx(t), c.cli)
		if err != nil {
			t.Fatal(err)
		}
		key, _ := newKey(t)
		der, err := x509.MarshalPKIXPublicKey(key.Public())
		if err != nil {
			t.Fatal(err)
		}
		_, err = pb.NewCuratorClient(anon).Register(callCtx(t), &pb.RegisterRequest{
			Token: workerToken, PublicKey: der, Name: "w-machine", Address: worker.address,
			Group: "workers", InstanceId: "proc-0000aaaa",
		})
		if got := status.Code(err); got != codes.Unavailable {
			t.Fatalf("Register: %v (%v), want Unavailable", got, err)
		}
		var reasons []string
		for _, d := range status.Convert(err).Details() {
			if info, ok := d.(*errdetails.ErrorInfo); ok {
				reasons = append(reasons, info.Reason)
			}
		}
		if diff := cmp.Diff([]string{spec.AddressHeldReason}, reasons); diff != "" {
			t.Errorf("error details (-want +got):\n%s", diff)
		}
		if msg := status.Convert(err).Message(); !strings.Contains(msg, worker.id) {
			t.Errorf("message %q does not name node %s", msg, worker.id)
		}
		after, err := store.NodeList(callCtx(t), c.cli)
		if err != nil {
			t.Fatal(err)
		}
		if len(after) != len(before) {
			t.Errorf("%d nodes before, %d after", len(before), len(after))
		}
	})

	t.Run("rotated token", func(t *testing.T) {
		resp, err := pb.NewManagementClient(admin).RotateToken(callCtx(t), &pb.RotateTokenRequest{Role: "worker"})
		if err != nil {
			t.Fatal(err)
		}
		if resp.Token == workerToken {
			t.Fatal("rotation returned the old token")
		}
		if got := c.token(admin, "worker"); got != resp.Token {
			t.Errorf("token show after rotation = %s, want %s", got, resp.Token)
		}
		if got := c.token(admin, "manager"); got != managerToken {
			t.Error("rotating the worker token changed the manager token")
		}
		key, _ := newKey(t)
		_, err = registerKey(anon, key, workerToken, "w-old", freeAddress(t))
		if got := status.Code(err); got != codes.PermissionDenied {
			t.Errorf("Register with the old token: %v (%v), want PermissionDenied", got, err)
		}
		c.register(anon, resp.Token, "w-new")
		// The node that joined with the old token keeps its access.
		conn := dial(t, c.first.address, worker.tlsCert(), c.root.Cert)
		if _, err := pb.NewCuratorClient(conn).GetManagers(callCtx(t), &pb.GetManagersRequest{}); err != nil {
			t.Errorf("GetManagers by a node that joined before the rotation: %v", err)
		}
	})

	t.Run("bad token role", func(t *testing.T) {
		_, err := pb.NewManagementClient(admin).RotateToken(callCtx(t), &pb.RotateTokenRequest{Role: "admin"})
		if got := status.Code(err); got != codes.InvalidArgument {
			t.Errorf("RotateToken(admin): %v (%v), want InvalidArgument", got, err)
		}
	})
}

func sortStrings() cmp.Option {
	return cmp.Transformer("sort", func(in []string) []string {
		out := append([]string(nil), in...)
		for i := range out {
			for j := i + 1; j < len(out); j++ {
				if out[j] < out[i] {
					out[i], out[j] = out[j], out[i]
				}
			}
		}
		return out
	})
}

// freeAddress is an unused node address.
func freeAddress(t *testing.T) string {
	t.Helper()
	ip := nextIP(t)
	return net.JoinHostPort(ip, strconv.Itoa(freeBasePort(t, ip)))
}

// foreignToken is tok with the fingerprint of another CA.
func foreignToken(t *testing.T, tok string) string {
	t.Helper()
	good, err := pki.ParseToken(tok)
	if err != nil {
		t.Fatal(err)
	}
	other, err := pki.NewCA("foreign CA")
	if err != nil {
		t.Fatal(err)
	}
	return pki.Token{CAFingerprint: pki.Fingerprint(other.Cert), Secret: good.Secret}.String()
}

// wrongSecret is tok with a fresh secret.
func wrongSecret(t *testing.T, tok string) string {
	t.Helper()
	good, err := pki.ParseToken(tok)
	if err != nil {
		t.Fatal(err)
	}
	root, err := pki.NewCA("x")
	if err != nil {
		t.Fatal(err)
	}
	fresh, err := pki.NewToken(root.Cert)
	if err != nil {
		t.Fatal(err)
	}
	return pki.Token{CAFingerprint: good.CAFingerprint, Secret: fresh.Secret}.String()
}

// heartbeater sends heartbeats on one stream while it is switched on.
type heartbeater struct {
	on     atomic.Bool
	cancel context.CancelFunc
	done   chan error
}

func startHeartbeats(t *testing.T, conn *grpc.ClientConn) *heartbeater {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	stream, err := pb.NewCuratorClient(conn).Heartbeat(ctx)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	h := &heartbeater{cancel: cancel, done: make(chan error, 1)}
	h.on.Store(true)
	go func() {
		tick := time.NewTicker(testHeartbeat)
		defer tick.Stop()
		for {
			if h.on.Load() {
				if err := stream.Send(&pb.HeartbeatRequest{Version: "test"}); err != nil {
					h.done <- err
					return
				}
			}
			select {
			case <-ctx.Done():
				h.done <- nil
				return
			case <-tick.C:
			}
		}
	}()
	t.Cleanup(func() {
		cancel()
		<-h.done
	})
	return h
}

// TestHeartbeats: a node that sends heartbeats is ready; one that stops is
// down after DownAfter; it is ready again once it resumes.
func TestHeartbeats(t *testing.T) {
	c := newTestCluster(t)
	c.startLeader()
	admin, anon := c.dialFirst()
	n, _ := c.register(anon, c.token(admin, "worker"), "w1")
	if got := c.loadNode(n.id).Status; got != pb.NodeStatus_NODE_STATUS_UNKNOWN {
		t.Errorf("status of a new node = %v, want UNKNOWN", got)
	}

	h := startHeartbeats(t, dial(t, c.first.address, n.tlsCert(), c.root.Cert))
	c.waitStatus(n.id, pb.NodeStatus_NODE_STATUS_READY)

	h.on.Store(false)
	stopped := time.Now()
	c.waitStatus(n.id, pb.NodeStatus_NODE_STATUS_DOWN)
	if took := time.Since(stopped); took < testDownAfter-testHeartbeat {
		t.Errorf("down %v after the last heartbeat, before DownAfter (%v)", took, testDownAfter)
	}
	rec := c.loadNode(n.id)
	if rec.StatusChanged == nil || rec.StatusChanged.AsTime().Before(stopped) {
		t.Errorf("status_changed %v is not after heartbeats stopped (%v)", rec.StatusChanged, stopped)
	}

	h.on.Store(true)
	c.waitStatus(n.id, pb.NodeStatus_NODE_STATUS_READY)

	// ListNodes shows the heartbeat.
	resp, err := pb.NewManagementClient(admin).ListNodes(callCtx(t), &pb.ListNodesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range resp.Nodes {
		if v.Node.Id == n.id && v.LastHeartbeat == nil {
			t.Error("ListNodes shows no last heartbeat for the node")
		}
	}
}

// TestFollowerForwards runs two curators on one etcd: calls to the follower
// are answered by the leader, unary and streaming.
func TestFollowerForwards(t *testing.T) {
	c := newTestCluster(t)
	leader := c.startLeader()
	admin, anon := c.dialFirst()
	m2, _ := c.register(anon, c.token(admin, "manager"), "m2")
	follower, _ := c.startCurator(m2, c.etcdClient())

	adminCert := c.adminCert()
	followerAdmin := dial(t, m2.address, &adminCert, c.root.Cert)
	var got *pb.ListNodesResponse
	waitFor(t, "the follower answers ListNodes", func() bool {
		var err error
		got, err = pb.NewManagementClient(followerAdmin).ListNodes(callCtx(t), &pb.ListNodesRequest{})
		return err == nil
	})
	if follower.IsLeader() || !leader.IsLeader() {
		t.Fatalf("leader leads: %v, follower leads: %v", leader.IsLeader(), follower.IsLeader())
	}
	// Statuses may change between two calls (the health loop); compare
	// until two answers agree.
	var diff string
	waitFor(t, "the follower's and the leader's answers agree", func() bool {
		want, err := pb.NewManagementClient(admin).ListNodes(callCtx(t), &pb.ListNodesRequest{})
		if err != nil {
			t.Fatal(err)
		}
		got, err = pb.NewManagementClient(followerAdmin).ListNodes(callCtx(t), &pb.ListNodesRequest{})
		if err != nil {
			t.Fatal(err)
		}
		diff = cmp.Diff(want, got, protocmp.Transform())
		return diff == ""
	})
	if len(got.Nodes) != 2 {
		t.Errorf("ListNodes through the follower: %d nodes, want 2", len(got.Nodes))
	}

	// Health and reflection are the follower's own answers: it serves the
	// management API by forwarding.
	waitFor(t, "the follower's management service is SERVING", func() bool {
		resp, err := healthpb.NewHealthClient(followerAdmin).Check(callCtx(t), &healthpb.HealthCheckRequest{Service: pb.Management_ServiceDesc.ServiceName})
		return err == nil && resp.Status == healthpb.HealthCheckResponse_SERVING
	})
	if got := listServices(t, followerAdmin); !slices.Contains(got, pb.Management_ServiceDesc.ServiceName) {
		t.Errorf("the follower's reflection lists %v, want the management service", got)
	}

	// The node API through the follower: a unary call and the heartbeat
	// stream.
	w, _ := c.register(anon, c.token(admin, "worker"), "w1")
	wConn := dial(t, m2.address, w.tlsCert(), c.root.Cert)
	mg, err := pb.NewCuratorClient(wConn).GetManagers(callCtx(t), &pb.GetManagersRequest{})
	if err != nil {
		t.Fatalf("GetManagers through the follower: %v", err)
	}
	if mg.Leader != c.first.id {
		t.Errorf("GetManagers through the follower: leader %s, want %s", mg.Leader, c.first.id)
	}
	startHeartbeats(t, wConn)
	c.waitStatus(w.id, pb.NodeStatus_NODE_STATUS_READY)

	// Register through the follower.
	followerAnon := dial(t, m2.address, nil, c.root.Cert)
	c.register(followerAnon, c.token(admin, "worker"), "w2")

	// A caller the leader refuses is refused through the follower too.
	_, err = pb.NewManagementClient(wConn).ListNodes(callCtx(t), &pb.ListNodesRequest{})
	if got := status.Code(err); got != codes.PermissionDenied {
		t.Errorf("worker ListNodes through the follower: %v (%v), want PermissionDenied", got, err)
	}
}

// TestFailover: a leader that stops cleanly resigns at once (long before its
// lease would expire); the follower takes over and gives every node a grace
// period of DownAfter before it marks it down.
func TestFailover(t *testing.T) {
	c := newTestCluster(t)
	// The first leader's lease is long: only a resignation explains a
	// quick takeover.
	cfg := c.curatorConfig(c.first, c.cli)
	cfg.ElectionTTL = 20 * time.Second
	first, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	stopFirst, _ := supervisor.TestHarness(t, first.Run)
	waitFor(t, "the first curator leads", first.IsLeader)

	admin, anon := c.dialFirst()
	m2, _ := c.register(anon, c.token(admin, "manager"), "m2")
	second, _ := c.startCurator(m2, c.etcdClient())
	w, _ := c.register(anon, c.token(admin, "worker"), "w1")
	startHeartbeats(t, dial(t, c.first.address, w.tlsCert(), c.root.Cert))
	c.waitStatus(w.id, pb.NodeStatus_NODE_STATUS_READY)

	stopped := time.Now()
	stopFirst()
	waitFor(t, "the second curator leads", second.IsLeader)
	if took := time.Since(stopped); took > cfg.ElectionTTL/2 {
		t.Errorf("takeover took %v: the stopped leader did not resign (its lease is %v)", took, cfg.ElectionTTL)
	}
	since := second.currentLeader().Heartbeats.LeaderSince()

	// The worker's heartbeats went to the old leader and stopped with it:
	// the new leader marks it down, but not before the grace period.
	c.waitStatus(w.id, pb.NodeStatus_NODE_STATUS_DOWN)
	changed := c.loadNode(w.id).StatusChanged.AsTime()
	if d := changed.Sub(since); d < testDownAfter {
		t.Errorf("the new leader marked the node down %v after it took over, before the grace period (%v)", d, testDownAfter)
	}

	// The follower answers as leader now.
	adminCert := c.adminCert()
	a2 := dial(t, m2.address, &adminCert, c.root.Cert)
	info, err := pb.NewManagementClient(a2).GetClusterInfo(callCtx(t), &pb.ClusterInfoRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if info.Leader != m2.id {
		t.Errorf("cluster info leader %s, want %s", info.Leader, m2.id)
	}
	// Its first answers name etcd's leader too (the one member, the first
	// node's), from the membership's hearing.
	if info.EtcdLeader != c.first.id {
		t.Errorf("cluster info etcd leader %q, want the only member's node %s", info.EtcdLeader, c.first.id)
	}
}

// TestListNodesPages: following the pages returns every node once, in ID
// order, whatever the page size; a page past the end is empty.
func TestListNodesPages(t *testing.T) {
	c := newTestCluster(t)
	c.startLeader()
	adminCert := c.adminCert()
	admin := pb.NewManagementClient(dial(t, c.first.address, &adminCert, c.root.Cert))
	anon := dial(t, c.first.address, nil, c.root.Cert)
	token := c.token(dial(t, c.first.address, &adminCert, c.root.Cert), "worker")
	want := []string{c.first.id}
	for i := range 20 {
		n, _ := c.register(anon, token, "w"+strconv.Itoa(i))
		want = append(want, n.id)
	}
	slices.Sort(want)
	for _, size := range []uint32{0, 1, 6, 7, 21, 22, 5000, 100000} {
		var got []string
		pages := 0
		req := &pb.ListNodesRequest{PageSize: size}
		for {
			resp, err := admin.ListNodes(callCtx(t), req)
			if err != nil {
				t.Fatal(err)
			}
			pages++
			if size > 0 && len(resp.Nodes) > int(size) {
				t.Errorf("page size %d: a page of %d nodes", size, len(resp.Nodes))
			}
			for _, nv := range resp.Nodes {
				got = append(got, nv.Node.Id)
			}
			if resp.NextPageToken == "" {
				break
			}
			req.PageToken = resp.NextPageToken
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("page size %d: nodes (-want +got):\n%s", size, diff)
		}
		if size > 0 && size < 21 {
			if wantPages := (len(want) + int(size) - 1) / int(size); pages != wantPages {
				t.Errorf("page size %d: %d pages, want %d", size, pages, wantPages)
			}
		}
	}
	resp, err := admin.ListNodes(callCtx(t), &pb.ListNodesRequest{PageToken: want[len(want)-1]})
	if err != nil || len(resp.Nodes) != 0 || resp.NextPageToken != "" {
		t.Errorf("page after the last node: %v, %v; want empty", resp, err)
	}
}
