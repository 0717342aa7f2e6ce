package e2e

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"

	"github.com/curatorproject/curator/internal/localcluster"
	"github.com/curatorproject/curator/internal/testenv"
	"github.com/curatorproject/curator/pki"
	pb "github.com/curatorproject/curator/proto"
)

// The answers of a cell of the matrix besides gRPC codes.
const (
	reached = "reached"
	refused = "refused" // the TLS handshake fails: etcd trusts the etcd CA alone
)

// TestAuthorizationMatrix is who may reach what, on a real cluster (one
// manager and two workers, the real binary): every credential a party can
// hold against every surface a node serves, with the answer each cell
// gives. docs/architecture.md ("Who may do what") is this table in words.
//
// The surfaces are the management API and the node API (gRPC at PORT),
// the etcd client port (PORT+2) and peer port (PORT+1) of the manager,
// and its HTTP port (PORT+3: /metrics and /healthz, plain HTTP, which
// takes no credential and is open to whoever reaches the address).
func TestAuthorizationMatrix(t *testing.T) {
	parallel(t) // its own addresses and dirs
	c := newCluster(t, "127.0.175.")
	// worker-2 joins the way an operator types it, with --token on its
	// command line, and serves Go's profiles: its command line must not
	// be readable over HTTP.
	var gone *node
	c.buildWith(func(name string, env map[string]string, verb string, args ...string) *node {
		if name == "worker-2" {
			args = append(args, "--token", env[localcluster.JoinTokenEnv], "--pprof")
			env = nil
			defer func() { gone = c.nodes[name] }()
		}
		return c.agentEnv(name, env, verb, args...)
	}, 1, 2)
	m1 := c.nodes["manager-1"]
	workerToken, managerToken := c.token("worker"), c.token("manager")

	// The credentials, as each party holds them on disk.
	adminDir := filepath.Dir(c.config)
	clusterCA, err := pki.ReadCert(filepath.Join(adminDir, "ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	readCert := func(dir, name string) *tls.Certificate {
		t.Helper()
		cert, key, err := pki.ReadFiles(dir, name)
		if err != nil {
			t.Fatal(err)
		}
		tc := pki.TLSCertificate(cert, key)
		return &tc
	}
	admin := readCert(adminDir, "admin")
	managerNode := readCert(m1.dataDir, "node")
	workerNode := readCert(c.nodes["worker-1"].dataDir, "node")
	removedNode := readCert(gone.dataDir, "node")
	managerEtcd := readEtcdCredential(t, m1.dataDir)
	etcdCA, err := pki.DecodeCert(managerEtcd.ca)
	if err != nil {
		t.Fatal(err)
	}
	foreign, err := pki.NewCA("another cluster")
	if err != nil {
		t.Fatal(err)
	}
	foreignCert := func(id, role string) *tls.Certificate {
		key, err := pki.NewKey()
		if err != nil {
			t.Fatal(err)
		}
		cert, err := foreign.Issue(pki.CertRequest{PublicKey: key.Public(), NodeID: id, Role: role})
		if err != nil {
			t.Fatal(err)
		}
		tc := pki.TLSCertificate(cert, key)
		return &tc
	}
	foreignAdmin := foreignCert("admin", pki.RoleAdmin)
	foreignNode := foreignCert(removedNode.Leaf.Subject.CommonName, pki.RoleNode)

	// The pprof of worker-2: its command line is not served (it holds the
	// join token when --token is given).
	pprofURL := "http://" + mgmtHostPort(t, gone, port+3) + "/debug/pprof/"
	if code, body := httpGet(t, pprofURL); code != http.StatusOK || !strings.Contains(body, "goroutine") {
		t.Errorf("GET %s: %d, want 200 with the profiles", pprofURL, code)
	}
	if code, body := httpGet(t, pprofURL+"cmdline"); code == http.StatusOK || strings.Contains(body, workerToken) {
		t.Errorf("GET %scmdline: %d: the command line (with the join token) is served", pprofURL, code)
	}

	// worker-2 is stopped and removed: its certificate is valid still,
	// but names a node the registry no longer holds.
	_ = gone.proc.cmd.Process.Kill()
	<-gone.proc.done
	mgmtRun(t, c, "node", "rm", "--force", "worker-2")
	mgmtWaitGone(t, c, "worker-2")

	grpcAddr := m1.listen
	etcdClient := "https://" + mgmtHostPort(t, m1, port+2)
	etcdPeer := "https://" + mgmtHostPort(t, m1, port+1)
	httpBase := "http://" + mgmtHostPort(t, m1, port+3)

	type cell struct {
		mgmt, node codes.Code // Management.ListNodes, Curator.GetManagers
		etcd, peer string     // a Get on the client port; GET /version on the peer port
	}
	denied := codes.PermissionDenied
	// Three cases at a time, as go test's -parallel bounded them before
	// the package lifted it (schedule_test.go): each dials four ports.
	atOnce := make(chan struct{}, parallelDefault)
	for _, tc := range []struct {
		name string
		// cert is presented to the gRPC port and etcd's; roots are what
		// etcd's server certificate is checked against (the etcd CA, so
		// that a refusal is etcd refusing the client, not the client
		// refusing etcd).
		cert *tls.Certificate
		want cell
	}{
		{"admin", admin, cell{codes.OK, denied, refused, refused}},
		{"manager's node certificate", managerNode, cell{denied, codes.OK, refused, refused}},
		{"manager's etcd certificate", &managerEtcd.cert, cell{denied, denied, reached, reached}},
		{"worker's node certificate", workerNode, cell{denied, codes.OK, refused, refused}},
		{"removed node's certificate", removedNode, cell{denied, denied, refused, refused}},
		// A Go client leaves out a certificate of a CA the server does not
		// name (the gRPC port names the cluster CA): it calls as nobody.
		{"another CA's admin certificate", foreignAdmin, cell{denied, denied, refused, refused}},
		{"another CA's node certificate", foreignNode, cell{denied, denied, refused, refused}},
		{"no certificate", nil, cell{denied, denied, refused, refused}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel() // etcd's refusals each take a dial timeout
			atOnce <- struct{}{}
			defer func() { <-atOnce }()
			conn := grpcDial(t, grpcAddr, tc.cert, clusterCA)
			got := cell{}
			var mgmtErr, nodeErr error
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_, mgmtErr = pb.NewManagementClient(conn).ListNodes(ctx, &pb.ListNodesRequest{})
			_, nodeErr = pb.NewCuratorClient(conn).GetManagers(ctx, &pb.GetManagersRequest{})
			got.mgmt, got.node = status.Code(mgmtErr), status.Code(nodeErr)
			got.etcd, got.peer = reached, reached
			cred := etcdCredential{ca: managerEtcd.ca}
			if tc.cert != nil {
				cred.cert = *tc.cert
			}
			etcdErr := etcdGet(cred, etcdClient)
			if etcdErr != nil {
				got.etcd = refused
			}
			peerErr := peerGet(tc.cert, etcdCA, etcdPeer+"/version")
			if peerErr != nil {
				got.peer = refused
			}
			if got != tc.want {
				t.Errorf("got %+v, want %+v\nmanagement: %v\nnode: %v\netcd client: %v\netcd peer: %v", got, tc.want, mgmtErr, nodeErr, etcdErr, peerErr)
			}
			if got.mgmt == denied && !strings.Contains(status.Convert(mgmtErr).Message(), "admin certificate") {
				t.Errorf("the management API's refusal does not say what it needs: %v", mgmtErr)
			}
		})
	}

	// HTTP takes no credential: /metrics and /healthz answer anyone who
	// reaches the address, and say nothing secret.
	t.Run("http", func(t *testing.T) {
		for _, path := range []string{"/metrics", "/healthz"} {
			code, body := httpGet(t, httpBase+path)
			if code != http.StatusOK {
				t.Errorf("GET %s: %d, want 200", path, code)
			}
			for what, secret := range map[string]string{
				"the worker token":  workerToken,
				"the manager token": managerToken,
				"a token's secret":  tokenSecret(t, workerToken),
				"a private key":     "PRIVATE KEY",
			} {
				if strings.Contains(body, secret) {
					t.Errorf("GET %s shows %s", path, what)
				}
			}
		}
		if code, _ := httpGet(t, httpBase+"/debug/pprof/"); code != http.StatusNotFound {
			t.Errorf("GET /debug/pprof/ of a node without --pprof: %d, want 404", code)
		}
	})
}

// grpcDial connects to a curator at address with cert (none if nil),
// trusting roots.
func grpcDial(t *testing.T, address string, cert *tls.Certificate, roots ...*x509.Certificate) *grpc.ClientConn {
	t.Helper()
	pool := x509.NewCertPool()
	for _, r := range roots {
		pool.AddCert(r)
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS13, RootCAs: pool}
	if cert != nil {
		cfg.Certificates = []tls.Certificate{*cert}
	}
	conn, err := grpc.NewClient(address, grpc.WithTransportCredentials(credentials.NewTLS(cfg)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// peerGet makes an HTTPS GET on etcd's peer port with cert (none if nil),
// trusting root for the server.
func peerGet(cert *tls.Certificate, root *x509.Certificate, url string) error {
	pool := x509.NewCertPool()
	pool.AddCert(root)
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: pool}
	if cert != nil {
		cfg.Certificates = []tls.Certificate{*cert}
	}
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: cfg}}
	defer hc.CloseIdleConnections()
	resp, err := hc.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return nil
}

// httpGet is a plain GET: the status and the body.
func httpGet(t *testing.T, url string) (int, string) {
	t.Helper()
	var code int
	var body []byte
	testenv.Eventually(t, 10*time.Second, "GET "+url, func() error {
		resp, err := (&http.Client{Timeout: 5 * time.Second}).Get(url)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		code = resp.StatusCode
		body, err = io.ReadAll(resp.Body)
		return err
	})
	return code, string(body)
}

// tokenSecret is the secret part of a join token.
func tokenSecret(t *testing.T, token string) string {
	t.Helper()
	tok, err := pki.ParseToken(token)
	if err != nil {
		t.Fatal(err)
	}
	return tok.Secret
}
