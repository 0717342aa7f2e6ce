package curator

import (
	"context"
	"crypto"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/curatorproject/curator/consensus"
	"github.com/curatorproject/curator/curator/store"
	"github.com/curatorproject/curator/internal/testenv"
	"github.com/curatorproject/curator/pki"
	pb "github.com/curatorproject/curator/proto"
	"github.com/curatorproject/curator/supervisor"
)

// The tests of this package run real etcd (consensus.Service, with TLS) and
// real curators serving gRPC with mutual TLS on loopback. Each test cluster
// gets addresses of its own from 127.0.77.1 up, distinct from the other
// packages' tests.

const (
	// testTimeout bounds every wait for an outcome.
	testTimeout = 30 * time.Second
	// Short health timings, so that ready → down → ready takes a second.
	testHeartbeat = 100 * time.Millisecond
	testDownAfter = 500 * time.Millisecond
)

// testIPs hands out 127.0.77.1, 127.0.77.2, ... (then 127.0.78.x).
var testIPs = testenv.NewLoopback(77, 2)

func nextIP(t testing.TB) string { return testIPs.Next(t) }

// freeBasePort returns a port on ip such that it and the three after it
// (etcd peer, etcd client, HTTP) are free right now.
func freeBasePort(t testing.TB, ip string) int { return testenv.FreePorts(t, ip, 4) }

// testCluster is a one-member etcd with TLS and the cluster records of a
// bootstrapped cluster whose first node is a manager.
type testCluster struct {
	t      testing.TB
	root   *pki.CA
	etcdCA *pki.CA
	// etcdURL is the client URL of the etcd member.
	etcdURL string
	// cli is a client of etcd, with a certificate from the etcd CA.
	cli *clientv3.Client

	// first is the first node: the manager that runs etcd.
	first *testNode
	// etcd is the first node's etcd member, which every curator of the
	// test shares (in this process): it tells them of membership changes.
	etcd *consensus.Service
}

// testNode is a node's identity: its key, ID, address and certificate.
type testNode struct {
	id      string
	address string
	key     crypto.Signer
	cert    *x509.Certificate
}

func newKey(t testing.TB) (crypto.Signer, string) {
	t.Helper()
	key, err := pki.NewKey()
	if err != nil {
		t.Fatal(err)
	}
	id, err := pki.NodeID(key.Public())
	if err != nil {
		t.Fatal(err)
	}
	return key, id
}

// newTestCluster starts etcd on a fresh address and bootstraps the cluster
// records into it.
func newTestCluster(t testing.TB) *testCluster {
	t.Helper()
	root, err := pki.NewCA("test cluster CA")
	if err != nil {
		t.Fatal(err)
	}
	etcdCA, err := root.NewIntermediate("test etcd CA")
	if err != nil {
		t.Fatal(err)
	}
	c := &testCluster{t: t, root: root, etcdCA: etcdCA}

	ip := nextIP(t)
	port := freeBasePort(t, ip)
	key, id := newKey(t)
	etcdCert, err := etcdCA.Issue(pki.CertRequest{PublicKey: key.Public(), NodeID: id, Role: pki.RoleConsensus, IPs: []net.IP{net.ParseIP(ip)}})
	if err != nil {
		t.Fatal(err)
	}
	keyPEM, err := pki.EncodeKey(key)
	if err != nil {
		t.Fatal(err)
	}
	svc, err := consensus.New(consensus.Config{
		NodeID:         id,
		DataDir:        filepath.Join(t.TempDir(), "etcd"),
		ListenIP:       ip,
		Port:           port,
		Mode:           consensus.ModeBootstrap,
		CertPEM:        pki.EncodeCert(etcdCert),
		KeyPEM:         keyPEM,
		CAPEM:          pki.EncodeCert(etcdCA.Cert),
		Logger:         zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel)).Named("etcd"),
		ReadyTimeout:   testTimeout,
		StatusInterval: 50 * time.Millisecond,
		TickMs:         50,
		ElectionMs:     500,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- svc.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-errc; err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("etcd: %v", err)
		}
	})
	wctx, wcancel := context.WithTimeout(context.Background(), testTimeout)
	defer wcancel()
	w := svc.Watch()
	for {
		st, err := w.Get(wctx)
		if err != nil {
			t.Fatalf("etcd did not become a voter: %v", err)
		}
		if st.State == consensus.Voter {
			break
		}
	}
	c.etcd = svc
	c.etcdURL = consensus.ClientURL(ip, port)
	c.cli = c.etcdClient()

	address := net.JoinHostPort(ip, strconv.Itoa(port))
	pubDER, err := x509.MarshalPKIXPublicKey(key.Public())
	if err != nil {
		t.Fatal(err)
	}
	first := &pb.Node{
		Id: id, Name: "first", Address: address, PublicKey: pubDER,
		Roles:        []pb.Role{pb.Role_ROLE_CONSENSUS, pb.Role_ROLE_WORKER},
		Availability: pb.Availability_AVAILABILITY_ACTIVE,
	}
	if _, err := store.Bootstrap(wctx, c.cli, store.BootstrapParams{ClusterID: "test", CA: root, EtcdCA: etcdCA, First: first}); err != nil {
		t.Fatal(err)
	}
	c.first = &testNode{id: id, address: address, key: key, cert: c.nodeCert(key, id, ip)}
	return c
}

// etcdClient is a new etcd client with a fresh certificate from the etcd
// CA, closed when the test ends.
func (c *testCluster) etcdClient() *clientv3.Client {
	c.t.Helper()
	cli, err := consensus.NewClient([]string{c.etcdURL}, c.tlsCert(c.etcdCA, "client", pki.RoleConsensus), c.etcdCA.Cert)
	if err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(func() { cli.Close() })
	return cli
}

// nodeCert issues a node certificate from the cluster CA.
func (c *testCluster) nodeCert(key crypto.Signer, id, ip string) *x509.Certificate {
	c.t.Helper()
	cert, err := c.root.Issue(pki.CertRequest{PublicKey: key.Public(), NodeID: id, Role: pki.RoleNode, IPs: []net.IP{net.ParseIP(ip)}})
	if err != nil {
		c.t.Fatal(err)
	}
	return cert
}

// tlsCert is a fresh client certificate from ca.
func (c *testCluster) tlsCert(ca *pki.CA, name, role string) tls.Certificate {
	c.t.Helper()
	key, err := pki.NewKey()
	if err != nil {
		c.t.Fatal(err)
	}
	cert, err := ca.Issue(pki.CertRequest{PublicKey: key.Public(), NodeID: name, Role: role})
	if err != nil {
		c.t.Fatal(err)
	}
	return pki.TLSCertificate(cert, key)
}

// adminCert is an operator's certificate.
func (c *testCluster) adminCert() tls.Certificate { return c.tlsCert(c.root, "admin", pki.RoleAdmin) }

// curatorConfig is the configuration of a curator for node n.
func (c *testCluster) curatorConfig(n *testNode, cli *clientv3.Client) Config {
	return Config{
		NodeID:            n.id,
		Address:           n.address,
		Etcd:              cli,
		NodeCert:          n.cert,
		NodeKey:           n.key,
		CA:                c.root.Cert,
		ElectionTTL:       time.Second,
		HeartbeatInterval: testHeartbeat,
		DownAfter:         testDownAfter,
		Logger:            zaptest.NewLogger(c.t, zaptest.Level(zap.WarnLevel)).Named(n.id[:6]),
		MembershipChanges: c.etcd.MembershipChanges,
	}
}

// startCurator runs a curator for n in a supervisor tree of the test. stop
// ends it.
func (c *testCluster) startCurator(n *testNode, cli *clientv3.Client) (svc *Service, stop context.CancelFunc) {
	c.t.Helper()
	return c.runCurator(c.curatorConfig(n, cli))
}

// runCurator runs a curator of cfg until the test ends, or stop.
func (c *testCluster) runCurator(cfg Config) (svc *Service, stop context.CancelFunc) {
	c.t.Helper()
	svc, err := New(cfg)
	if err != nil {
		c.t.Fatal(err)
	}
	stop, _ = supervisor.TestHarness(c.t, svc.Run)
	return svc, stop
}

// leadWith runs a curator of cfg (the first node's config, changed) and
// waits until it leads.
func (c *testCluster) leadWith(cfg Config) (svc *Service, stop context.CancelFunc) {
	c.t.Helper()
	svc, stop = c.runCurator(cfg)
	waitFor(c.t, "the curator leads", svc.IsLeader)
	return svc, stop
}

// startLeader runs the first node's curator and waits until it leads.
func (c *testCluster) startLeader() *Service {
	c.t.Helper()
	svc, _ := c.leadWith(c.curatorConfig(c.first, c.cli))
	return svc
}

// dialFirst connects to the first node's curator twice: with the admin
// certificate, and with none.
func (c *testCluster) dialFirst() (admin, anon *grpc.ClientConn) {
	c.t.Helper()
	adminCert := c.adminCert()
	return dial(c.t, c.first.address, &adminCert, c.root.Cert), dial(c.t, c.first.address, nil, c.root.Cert)
}

// dial connects to a curator at address, presenting cert (none if nil) and
// trusting roots.
func dial(t testing.TB, address string, cert *tls.Certificate, roots ...*x509.Certificate) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient(address, grpc.WithTransportCredentials(credentials.NewTLS(clientTLS(cert, roots...))))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// clientTLS is a curator client's TLS configuration: cert (none if nil),
// trusting roots.
func clientTLS(cert *tls.Certificate, roots ...*x509.Certificate) *tls.Config {
	pool := x509.NewCertPool()
	for _, r := range roots {
		pool.AddCert(r)
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS13, RootCAs: pool}
	if cert != nil {
		cfg.Certificates = []tls.Certificate{*cert}
	}
	return cfg
}

// token reads a join token through the management API as admin.
func (c *testCluster) token(conn *grpc.ClientConn, role string) string {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	resp, err := pb.NewManagementClient(conn).GetToken(ctx, &pb.GetTokenRequest{Role: role})
	if err != nil {
		c.t.Fatalf("get %s token: %v", role, err)
	}
	return resp.Token
}

// register joins a new node at a fresh address through anon (a connection
// without a client certificate) and returns it with the certificate it got.
func (c *testCluster) register(anon *grpc.ClientConn, token, name string) (*testNode, *pb.RegisterResponse) {
	c.t.Helper()
	n, resp, err := c.registerRelease(anon, token, name, "test")
	if err != nil {
		c.t.Fatalf("register %s: %v", name, err)
	}
	return n, resp
}

// registerRelease is register of a node that says it runs release; it
// returns the join's error.
func (c *testCluster) registerRelease(anon *grpc.ClientConn, token, name, release string) (*testNode, *pb.RegisterResponse, error) {
	c.t.Helper()
	key, _ := newKey(c.t)
	ip := nextIP(c.t)
	address := net.JoinHostPort(ip, strconv.Itoa(freeBasePort(c.t, ip)))
	resp, err := registerKeyRelease(anon, key, token, name, address, release)
	if err != nil {
		return nil, nil, err
	}
	cert, err := pki.DecodeCert(resp.NodeCert)
	if err != nil {
		c.t.Fatal(err)
	}
	return &testNode{id: resp.NodeId, address: address, key: key, cert: cert}, resp, nil
}

func registerKey(anon *grpc.ClientConn, key crypto.Signer, token, name, address string) (*pb.RegisterResponse, error) {
	return registerKeyRelease(anon, key, token, name, address, "test")
}

func registerKeyRelease(anon *grpc.ClientConn, key crypto.Signer, token, name, address, release string) (*pb.RegisterResponse, error) {
	der, err := x509.MarshalPKIXPublicKey(key.Public())
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	return pb.NewCuratorClient(anon).Register(ctx, &pb.RegisterRequest{Token: token, PublicKey: der, Name: name, Address: address, Version: release})
}

// tlsCert is n's certificate for a client connection.
func (n *testNode) tlsCert() *tls.Certificate {
	c := pki.TLSCertificate(n.cert, n.key)
	return &c
}

// loadNode reads a node record straight from etcd.
func (c *testCluster) loadNode(id string) *pb.Node {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	n, err := store.NodeLoad(ctx, c.cli, id)
	if err != nil {
		c.t.Fatal(err)
	}
	return n
}

// waitFor polls cond until it holds, failing the test after testTimeout.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	testenv.WaitUntil(t, testTimeout, what, cond)
}

// waitStatus waits until node id's record in etcd has status want and
// returns how long that took.
func (c *testCluster) waitStatus(id string, want pb.NodeStatus) time.Duration {
	c.t.Helper()
	start := time.Now()
	waitFor(c.t, fmt.Sprintf("node %s is %v", id, want), func() bool { return c.loadNode(id).Status == want })
	return time.Since(start)
}

// nopLogger is for clients whose failures are expected.
func nopLogger() *zap.Logger { return zap.NewNop() }

// aliveAddress is an IP:PORT whose port and PORT+2 accept connections
// until the test ends: a stand-in leader that crash detection takes for
// alive.
func aliveAddress(t testing.TB) string {
	t.Helper()
	ip := nextIP(t)
	port := testenv.FreePorts(t, ip, 3)
	for _, p := range []int{port, port + 2} {
		l, err := net.Listen("tcp", net.JoinHostPort(ip, strconv.Itoa(p)))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
	}
	return net.JoinHostPort(ip, strconv.Itoa(port))
}
