package consensus

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"testing"
	"time"

	"github.com/curatorproject/curator/internal/testenv"
	"github.com/curatorproject/curator/pki"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"
)

// Test timings: short etcd ticks, so that elections and learner catch-up
// take milliseconds.
const (
	testTickMs     = 50
	testElectionMs = 500
	testTimeout    = 30 * time.Second
)

// testIPs hands every test node its own loopback address, 127.0.55.1 and
// up, so that nodes of this package never share an address. Ports are then
// picked free on that address.
var testIPs = testenv.NewLoopback(55, 3)

func nextIP(t *testing.T) string { return testIPs.Next(t) }

// freeBasePort returns a base port on ip whose etcd peer and client ports
// (base+1, base+2) are free right now.
func freeBasePort(t *testing.T, ip string) int {
	return testenv.FreePorts(t, ip, 2) - peerPortOffset
}

// testPKI is the cluster CA and its etcd intermediate.
type testPKI struct {
	root, etcd *pki.CA
}

func newTestPKI(t *testing.T) *testPKI {
	t.Helper()
	root, err := pki.NewCA("test cluster CA")
	if err != nil {
		t.Fatal(err)
	}
	etcd, err := root.NewIntermediate("test etcd CA")
	if err != nil {
		t.Fatal(err)
	}
	return &testPKI{root: root, etcd: etcd}
}

// issue returns a certificate and key (PEM) from ca for nodeID at ip.
func (p *testPKI) issue(t *testing.T, ca *pki.CA, nodeID, role, ip string) (certPEM, keyPEM []byte) {
	t.Helper()
	key, err := pki.NewKey()
	if err != nil {
		t.Fatal(err)
	}
	cert, err := ca.Issue(pki.CertRequest{PublicKey: key.Public(), NodeID: nodeID, Role: role, IPs: []net.IP{net.ParseIP(ip)}})
	if err != nil {
		t.Fatal(err)
	}
	keyPEM, err = pki.EncodeKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pki.EncodeCert(cert), keyPEM
}

// tlsCert returns a tls.Certificate from ca for a client.
func (p *testPKI) tlsCert(t *testing.T, ca *pki.CA, role string) tls.Certificate {
	t.Helper()
	certPEM, keyPEM := p.issue(t, ca, "client", role, "127.0.0.1")
	c, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// testNode is one node's Service and the goroutine running it.
type testNode struct {
	t    *testing.T
	id   string
	ip   string
	port int
	cfg  Config
	svc  *Service

	cancel context.CancelFunc
	errc   chan error // Run's result
}

// newNode creates a node with its own address, data dir and etcd
// certificate. It is not running.
func (p *testPKI) newNode(t *testing.T, id string, mode StartMode, join *JoinParams) *testNode {
	t.Helper()
	ip := nextIP(t)
	return p.newNodeAt(t, id, ip, freeBasePort(t, ip), mode, join)
}

// newNodeAt is newNode at a given address.
func (p *testPKI) newNodeAt(t *testing.T, id, ip string, port int, mode StartMode, join *JoinParams) *testNode {
	t.Helper()
	certPEM, keyPEM := p.issue(t, p.etcd, id, pki.RoleConsensus, ip)
	cfg := Config{
		NodeID:         id,
		DataDir:        filepath.Join(t.TempDir(), id),
		ListenIP:       ip,
		Port:           port,
		Mode:           mode,
		Join:           join,
		CertPEM:        certPEM,
		KeyPEM:         keyPEM,
		CAPEM:          pki.EncodeCert(p.etcd.Cert),
		Logger:         zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel)).Named(id),
		ReadyTimeout:   testTimeout,
		StatusInterval: 50 * time.Millisecond,
		TickMs:         testTickMs,
		ElectionMs:     testElectionMs,
	}
	n := &testNode{t: t, id: id, ip: ip, port: port, cfg: cfg}
	n.svc = n.mustNew(cfg)
	t.Cleanup(func() { n.stop() })
	return n
}

func (n *testNode) mustNew(cfg Config) *Service {
	n.t.Helper()
	svc, err := New(cfg)
	if err != nil {
		n.t.Fatal(err)
	}
	return svc
}

// start runs the node's Service in a goroutine this node owns.
func (n *testNode) start() {
	n.t.Helper()
	if n.errc != nil {
		n.t.Fatalf("node %s already started", n.id)
	}
	ctx, cancel := context.WithCancel(context.Background())
	n.cancel, n.errc = cancel, make(chan error, 1)
	go func() { n.errc <- n.svc.Run(ctx) }()
}

// stop cancels Run and returns what it returned (nil if it was not
// running).
func (n *testNode) stop() error {
	if n.errc == nil {
		return nil
	}
	n.cancel()
	var err error
	select {
	case err = <-n.errc:
	case <-time.After(testTimeout):
		n.t.Errorf("node %s: Run did not return within %v of its context being cancelled", n.id, testTimeout)
	}
	n.errc = nil
	if errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}

// wait returns what Run returned on its own, failing the test if it keeps
// running past the deadline.
func (n *testNode) wait(d time.Duration) error {
	n.t.Helper()
	select {
	case err := <-n.errc:
		n.errc = nil
		return err
	case <-time.After(d):
		n.t.Fatalf("node %s: Run still running after %v", n.id, d)
		return nil
	}
}

// waitState waits until the node's status is want, failing fast if Run ends.
func (n *testNode) waitState(want State) Status {
	n.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	w := n.svc.Watch()
	for {
		st, err := w.Get(ctx)
		if err != nil {
			n.t.Fatalf("node %s: state %v, want %v: %v", n.id, n.svc.Status().State, want, err)
		}
		if st.State == want {
			return st
		}
		select {
		case err := <-n.errc:
			n.errc = nil
			n.t.Fatalf("node %s: Run returned %v while waiting for state %v", n.id, err, want)
		default:
		}
	}
}

func (n *testNode) peerURL() string   { return PeerURL(n.ip, n.port) }
func (n *testNode) clientURL() string { return ClientURL(n.ip, n.port) }

// client returns a cluster client with a fresh etcd certificate, closed at
// the end of the test.
func (p *testPKI) client(t *testing.T, nodes ...*testNode) *clientv3.Client {
	t.Helper()
	var eps []string
	for _, n := range nodes {
		eps = append(eps, n.clientURL())
	}
	cli, err := NewClient(eps, p.tlsCert(t, p.etcd, pki.RoleConsensus), p.etcd.Cert)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

// newCluster bootstraps a cluster of size voters: the first node founds
// it, every other one joins as a learner and is promoted.
func (p *testPKI) newCluster(t *testing.T, size int) []*testNode {
	t.Helper()
	first := p.newNode(t, "n0", ModeBootstrap, nil)
	first.start()
	first.waitState(Voter)
	nodes := []*testNode{first}
	for i := 1; i < size; i++ {
		nodes = append(nodes, p.join(t, fmt.Sprintf("n%d", i), nodes))
	}
	return nodes
}

// join adds a node to the cluster of nodes as a learner, starts it and
// promotes it once it runs as a learner.
func (p *testPKI) join(t *testing.T, id string, nodes []*testNode) *testNode {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	cli := p.client(t, nodes...)
	ip := nextIP(t)
	port := freeBasePort(t, ip)
	params, memberID, err := AddLearner(ctx, cli, id, PeerURL(ip, port))
	if err != nil {
		t.Fatal(err)
	}
	n := p.newNodeAt(t, id, ip, port, ModeJoin, &params)
	n.start()
	st := n.waitState(Learner)
	if st.MemberID != memberID {
		t.Fatalf("learner %s runs as member %x, was added as %x", id, st.MemberID, memberID)
	}
	if err := PromoteLearner(ctx, cli, memberID); err != nil {
		t.Fatal(err)
	}
	n.waitState(Voter)
	return n
}

// leaderNode returns the node that leads etcd.
func leaderNode(t *testing.T, cli *clientv3.Client, nodes []*testNode) *testNode {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	id, err := Leader(ctx, cli)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes {
		if n.svc.Status().MemberID == id {
			return n
		}
	}
	t.Fatalf("leader %x is none of the nodes", id)
	return nil
}

// put writes a key through cli, failing the test on error.
func put(t *testing.T, cli *clientv3.Client, key, value string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	if _, err := cli.Put(ctx, key, value); err != nil {
		t.Fatalf("put %s: %v", key, err)
	}
}

// get reads a key through cli.
func get(t *testing.T, cli *clientv3.Client, key string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	resp, err := cli.Get(ctx, key)
	if err != nil {
		t.Fatalf("get %s: %v", key, err)
	}
	if len(resp.Kvs) == 0 {
		return ""
	}
	return string(resp.Kvs[0].Value)
}

// caPool is a pool of the given CA certificates.
func caPool(certs ...*x509.Certificate) *x509.CertPool {
	pool := x509.NewCertPool()
	for _, c := range certs {
		pool.AddCert(c)
	}
	return pool
}
