package client

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/curatorproject/curator/pki"
	pb "github.com/curatorproject/curator/proto"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// fakeManagement answers ListNodes with one node named after itself, or with
// err; GetClusterInfo reports managers. It counts the calls it gets and
// checks that the caller presented an admin certificate.
type fakeManagement struct {
	pb.UnimplementedManagementServer
	name     string
	err      error
	managers []string
	calls    atomic.Int32
}

func (f *fakeManagement) ListNodes(ctx context.Context, _ *pb.ListNodesRequest) (*pb.ListNodesResponse, error) {
	if err := requireAdmin(ctx); err != nil {
		return nil, err
	}
	f.calls.Add(1)
	if f.err != nil {
		return nil, f.err
	}
	return &pb.ListNodesResponse{Nodes: []*pb.NodeView{{Node: &pb.Node{Id: f.name}}}}, nil
}

func (f *fakeManagement) GetClusterInfo(ctx context.Context, _ *pb.ClusterInfoRequest) (*pb.ClusterInfo, error) {
	if err := requireAdmin(ctx); err != nil {
		return nil, err
	}
	return &pb.ClusterInfo{ClusterId: "c1", Managers: f.managers}, nil
}

func requireAdmin(ctx context.Context) error {
	p, ok := peer.FromContext(ctx)
	if !ok {
		return status.Error(codes.Unauthenticated, "no peer")
	}
	info, ok := p.AuthInfo.(credentials.TLSInfo)
	if !ok || len(info.State.PeerCertificates) == 0 {
		return status.Error(codes.Unauthenticated, "no client certificate")
	}
	if info.State.Version != tls.VersionTLS13 {
		return status.Error(codes.Unauthenticated, "not TLS 1.3")
	}
	_, role, err := pki.Identity(info.State.PeerCertificates[0])
	if err != nil || role != pki.RoleAdmin {
		return status.Errorf(codes.PermissionDenied, "want an admin certificate, got role %q", role)
	}
	return nil
}

func newCA(t *testing.T) *pki.CA {
	t.Helper()
	ca, err := pki.NewCA("test cluster")
	if err != nil {
		t.Fatal(err)
	}
	return ca
}

// listen opens a TCP listener on ip at a free port.
func listen(t *testing.T, ip string) net.Listener {
	t.Helper()
	lis, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		t.Fatal(err)
	}
	return lis
}

// closedPort returns an address on ip where nothing listens.
func closedPort(t *testing.T, ip string) string {
	t.Helper()
	lis := listen(t, ip)
	addr := lis.Addr().String()
	lis.Close()
	return addr
}

// serve serves srv (unless nil) on lis with a server certificate from ca
// for lis's IP, accepting clients with certificates from clientCA, until
// the test ends. It returns a function that stops the server early.
func serve(t *testing.T, lis net.Listener, ca, clientCA *pki.CA, srv pb.ManagementServer, opts ...grpc.ServerOption) (stop func()) {
	t.Helper()
	key, err := pki.NewKey()
	if err != nil {
		t.Fatal(err)
	}
	ip := lis.Addr().(*net.TCPAddr).IP
	cert, err := ca.Issue(pki.CertRequest{PublicKey: key.Public(), NodeID: "server", Role: pki.RoleNode, IPs: []net.IP{ip}})
	if err != nil {
		t.Fatal(err)
	}
	opts = append(opts, grpc.Creds(credentials.NewTLS(pki.ServerTLS(pki.TLSCertificate(cert, key), clientCA.Cert))))
	s := grpc.NewServer(opts...)
	if srv != nil {
		pb.RegisterManagementServer(s, srv)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = s.Serve(lis) // returns when stopped
	}()
	stop = func() {
		s.Stop()
		<-done
	}
	t.Cleanup(stop)
	return stop
}

// startManager serves f on a free port of ip and returns its address.
func startManager(t *testing.T, ca *pki.CA, ip string, f *fakeManagement) string {
	t.Helper()
	lis := listen(t, ip)
	serve(t, lis, ca, ca, f)
	return lis.Addr().String()
}

// writeConfig writes an admin credential from ca and a config naming
// managers into a new folder, and returns the config's path.
func writeConfig(t *testing.T, ca *pki.CA, managers ...string) string {
	t.Helper()
	key, err := pki.NewKey()
	if err != nil {
		t.Fatal(err)
	}
	cert, err := ca.Issue(pki.CertRequest{PublicKey: key.Public(), NodeID: "admin", Role: pki.RoleAdmin})
	if err != nil {
		t.Fatal(err)
	}
	path, err := WriteAdminConfig(t.TempDir(), "c1", managers, ca.Cert, cert, key)
	if err != nil {
		t.Fatal(err)
	}
	return path
}

func dial(t *testing.T, path string, opts ...Option) *Client {
	t.Helper()
	cfg, err := LoadConfig(path)
	if err != nil {
		t.Fatal(err)
	}
	c, err := Dial(context.Background(), cfg, path, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func listNodeIDs(t *testing.T, c *Client) ([]string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	nodes, err := c.ListNodes(ctx)
	var ids []string
	for _, n := range nodes {
		ids = append(ids, n.GetNode().GetId())
	}
	return ids, err
}

func TestFailoverToAManagerThatAnswers(t *testing.T) {
	ca := newCA(t)
	down := closedPort(t, "127.0.0.2")
	unavailable := &fakeManagement{name: "b", err: status.Error(codes.Unavailable, "no leader yet")}
	unavailableAddr := startManager(t, ca, "127.0.0.3", unavailable)
	answering := &fakeManagement{name: "c"}
	answeringAddr := startManager(t, ca, "127.0.0.4", answering)
	answering.managers = []string{unavailableAddr, answeringAddr, "127.0.0.9:7000"}

	path := writeConfig(t, ca, down, unavailableAddr, answeringAddr)
	c := dial(t, path, WithRounds(1))
	ids, err := listNodeIDs(t, c)
	if err != nil {
		t.Fatalf("ListNodes: %v", err)
	}
	if diff := cmp.Diff([]string{"c"}, ids); diff != "" {
		t.Errorf("nodes (-want +got):\n%s", diff)
	}
	if got := unavailable.calls.Load(); got != 1 {
		t.Errorf("the Unavailable manager got %d calls, want 1", got)
	}
	// The manager that answered comes first, then what it reported, then
	// what the config named.
	wantOrder := []string{answeringAddr, unavailableAddr, "127.0.0.9:7000", down}
	if diff := cmp.Diff(wantOrder, c.Managers()); diff != "" {
		t.Errorf("Managers() (-want +got):\n%s", diff)
	}
	cached, err := readCache(CachePath(path), "c1")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{answeringAddr, unavailableAddr, "127.0.0.9:7000"}, cached); diff != "" {
		t.Errorf("cache (-want +got):\n%s", diff)
	}
	if fi, err := os.Stat(CachePath(path)); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("cache file: %v, %v; want mode 0600", fi, err)
	}
}

func TestCacheFindsManagersTheConfigDoesNotName(t *testing.T) {
	ca := newCA(t)
	// The config names only a; a reports b as a manager too.
	aLis := listen(t, "127.0.0.2")
	b := &fakeManagement{name: "b"}
	bAddr := startManager(t, ca, "127.0.0.3", b)
	a := &fakeManagement{name: "a", managers: []string{aLis.Addr().String(), bAddr}}
	stopA := serve(t, aLis, ca, ca, a)
	path := writeConfig(t, ca, aLis.Addr().String())

	c := dial(t, path)
	if ids, err := listNodeIDs(t, c); err != nil || len(ids) != 1 || ids[0] != "a" {
		t.Fatalf("first ListNodes = %v, %v; want [a]", ids, err)
	}
	c.Close()

	// a is gone: every manager the config names is. The cache still
	// knows b.
	stopA()
	c = dial(t, path, WithRounds(1))
	ids, err := listNodeIDs(t, c)
	if err != nil {
		t.Fatalf("ListNodes with the config's managers gone: %v", err)
	}
	if diff := cmp.Diff([]string{"b"}, ids); diff != "" {
		t.Errorf("nodes (-want +got):\n%s", diff)
	}
}

func TestCacheOfAnotherClusterIsIgnored(t *testing.T) {
	ca := newCA(t)
	a := &fakeManagement{name: "a"}
	aAddr := startManager(t, ca, "127.0.0.2", a)
	path := writeConfig(t, ca, aAddr)
	for name, content := range map[string]string{
		"other cluster": `{"cluster_id": "c2", "managers": ["127.0.0.9:1"]}`,
		"corrupt":       `{"managers": [`,
	} {
		t.Run(name, func(t *testing.T) {
			if err := os.WriteFile(CachePath(path), []byte(content), 0o600); err != nil {
				t.Fatal(err)
			}
			c := dial(t, path)
			if diff := cmp.Diff([]string{aAddr}, c.Managers()); diff != "" {
				t.Errorf("Managers() (-want +got):\n%s", diff)
			}
		})
	}
}

func TestAnAnswerIsReturnedWithoutTryingOthers(t *testing.T) {
	ca := newCA(t)
	first := &fakeManagement{name: "a", err: status.Error(codes.NotFound, `no node matches "x"`)}
	second := &fakeManagement{name: "b"}
	path := writeConfig(t, ca, startManager(t, ca, "127.0.0.2", first), startManager(t, ca, "127.0.0.3", second))

	c := dial(t, path)
	_, err := listNodeIDs(t, c)
	if status.Code(err) != codes.NotFound {
		t.Fatalf("ListNodes error = %v, want code NotFound", err)
	}
	if got := second.calls.Load(); got != 0 {
		t.Errorf("second manager got %d calls after the first answered NotFound, want 0", got)
	}
	if _, err := os.Stat(CachePath(path)); !os.IsNotExist(err) {
		t.Errorf("cache written after a failed call: %v", err)
	}
}

func TestServerOfAnotherCAIsRefused(t *testing.T) {
	ca, foreign := newCA(t), newCA(t)
	impostor := &fakeManagement{name: "impostor"}
	lis := listen(t, "127.0.0.2")
	// The impostor accepts our admin certificate, but its own certificate
	// comes from another CA.
	serve(t, lis, foreign, ca, impostor)
	path := writeConfig(t, ca, lis.Addr().String())

	c := dial(t, path, WithRounds(1))
	_, err := listNodeIDs(t, c)
	if !errors.Is(err, ErrNoManager) {
		t.Fatalf("ListNodes error = %v, want ErrNoManager", err)
	}
	if !strings.Contains(err.Error(), "certificate signed by unknown authority") {
		t.Errorf("error %q does not say why the server was refused", err)
	}
	if got := impostor.calls.Load(); got != 0 {
		t.Errorf("impostor got %d calls, want 0", got)
	}
}

func TestSlowManagerIsSkippedAfterTheAttemptTimeout(t *testing.T) {
	ca := newCA(t)
	// A manager that accepts connections and never says a word.
	silent := listen(t, "127.0.0.2")
	t.Cleanup(func() { silent.Close() })
	var held []net.Conn
	acceptDone := make(chan struct{})
	go func() {
		defer close(acceptDone)
		for {
			conn, err := silent.Accept()
			if err != nil {
				for _, c := range held {
					c.Close()
				}
				return
			}
			held = append(held, conn)
		}
	}()
	t.Cleanup(func() { silent.Close(); <-acceptDone })
	answering := &fakeManagement{name: "b"}
	path := writeConfig(t, ca, silent.Addr().String(), startManager(t, ca, "127.0.0.3", answering))

	// Two rounds: a machine busy enough to hold b's answer past one
	// attempt timeout still gets it from b on the second.
	c := dial(t, path, WithAttemptTimeout(time.Second), WithRounds(2))
	start := time.Now()
	ids, err := listNodeIDs(t, c)
	if err != nil || len(ids) != 1 || ids[0] != "b" {
		t.Fatalf("ListNodes = %v, %v; want [b]", ids, err)
	}
	if d := time.Since(start); d > 8*time.Second {
		t.Errorf("ListNodes took %v with a 1s attempt timeout", d)
	}
}

func TestNoManagerAnswers(t *testing.T) {
	ca := newCA(t)
	a, b := closedPort(t, "127.0.0.2"), closedPort(t, "127.0.0.3")
	path := writeConfig(t, ca, a, b)

	t.Run("rounds run out", func(t *testing.T) {
		c := dial(t, path, WithRounds(2))
		_, err := listNodeIDs(t, c)
		if !errors.Is(err, ErrNoManager) {
			t.Fatalf("error = %v, want ErrNoManager", err)
		}
		for _, addr := range []string{a, b} {
			if !strings.Contains(err.Error(), addr+": ") || !strings.Contains(err.Error(), "connection refused") {
				t.Errorf("error %q does not say what happened at %s", err, addr)
			}
		}
	})
	t.Run("context ends", func(t *testing.T) {
		c := dial(t, path, WithRounds(1000))
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		defer cancel()
		_, err := c.ListNodes(ctx)
		if !errors.Is(err, ErrNoManager) || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("error = %v, want ErrNoManager and DeadlineExceeded", err)
		}
	})
}

func TestAManagerThatComesBackIsFound(t *testing.T) {
	ca := newCA(t)
	// The port is taken back by a server after the first round failed on it.
	// An address of its own, so that nothing else takes the port between
	// closing it and listening on it again.
	lis := listen(t, "127.0.3.77")
	addr := lis.Addr().String()
	lis.Close()
	path := writeConfig(t, ca, addr)
	c := dial(t, path, WithRounds(1))
	if _, err := listNodeIDs(t, c); !errors.Is(err, ErrNoManager) {
		t.Fatalf("error = %v, want ErrNoManager while the manager is down", err)
	}
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("listen again on %s: %v", addr, err)
	}
	serve(t, lis, ca, ca, &fakeManagement{name: "back"})
	// The same client, whose connection to addr failed before, must
	// reconnect now rather than wait for gRPC's reconnect backoff.
	ids, err := listNodeIDs(t, c)
	if err != nil || len(ids) != 1 || ids[0] != "back" {
		t.Fatalf("ListNodes = %v, %v; want [back]", ids, err)
	}
}

func TestDialFailsOnBadCredentials(t *testing.T) {
	ca := newCA(t)
	path := writeConfig(t, ca, "127.0.0.2:7000")
	dir := filepath.Dir(path)
	other, err := pki.NewKey()
	if err != nil {
		t.Fatal(err)
	}
	otherPEM, err := pki.EncodeKey(other)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		breakIt func(t *testing.T)
		want    string
	}{
		{"missing CA", func(t *testing.T) { os.Remove(filepath.Join(dir, "ca.crt")) }, "cluster CA"},
		{"key of another cert", func(t *testing.T) { os.WriteFile(filepath.Join(dir, "admin.key"), otherPEM, 0o600) }, "does not match"},
		{"garbage cert", func(t *testing.T) { os.WriteFile(filepath.Join(dir, "admin.crt"), []byte("x"), 0o600) }, "admin certificate"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := writeConfig(t, ca, "127.0.0.2:7000")
			dir = filepath.Dir(path)
			tc.breakIt(t)
			cfg, err := LoadConfig(path)
			if err != nil {
				t.Fatal(err)
			}
			_, err = Dial(context.Background(), cfg, path)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Dial error = %v, want one mentioning %q", err, tc.want)
			}
		})
	}
}

// TestQuorumLossIsStated: when the managers that answer say the quorum is
// lost (Unavailable, marked QUORUM_LOST), the client's error leads with
// what they said and lists what every manager tried answered.
func TestQuorumLossIsStated(t *testing.T) {
	ca := newCA(t)
	const said = "quorum lost: etcd has no leader: 1 of its 3 voters answer, and a majority needs 2. To recover, restart the stopped managers"
	st, err := status.New(codes.Unavailable, said).WithDetails(&errdetails.ErrorInfo{Reason: quorumLostReason, Domain: errorDomain})
	if err != nil {
		t.Fatal(err)
	}
	survivor := startManager(t, ca, "127.0.0.2", &fakeManagement{name: "a", err: st.Err()})
	dead := closedPort(t, "127.0.0.3")
	c := dial(t, writeConfig(t, ca, dead, survivor), WithRounds(2))
	_, err = listNodeIDs(t, c)
	if !errors.Is(err, ErrQuorumLost) || !errors.Is(err, ErrNoManager) {
		t.Fatalf("error = %v, want ErrQuorumLost and ErrNoManager", err)
	}
	msg := err.Error()
	for _, want := range []string{
		"quorum lost: etcd has no leader: 1 of its 3 voters answer",
		"restart the stopped managers",
		survivor + ": answers, but without a quorum",
		dead + ": ",
		"connection refused",
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q does not say %q", msg, want)
		}
	}
	if strings.Count(msg, "quorum lost") != 1 {
		t.Errorf("error %q says quorum lost more than once", msg)
	}

	// A plain Unavailable (an election under way) is no quorum loss.
	plain := startManager(t, ca, "127.0.0.4", &fakeManagement{name: "b", err: status.Error(codes.Unavailable, "no curator leader is elected right now")})
	c = dial(t, writeConfig(t, ca, plain), WithRounds(1))
	if _, err := listNodeIDs(t, c); !errors.Is(err, ErrNoManager) || errors.Is(err, ErrQuorumLost) {
		t.Errorf("error = %v, want ErrNoManager and not ErrQuorumLost", err)
	}
}

// TestDemotedManagerMovesOn: a manager demoted a moment ago still forwards,
// and the leader refuses it (PermissionDenied, marked
// FORWARDER_NOT_MANAGER): the client asks the next manager; any other
// PermissionDenied is an answer.
func TestDemotedManagerMovesOn(t *testing.T) {
	ca := newCA(t)
	st, err := status.New(codes.PermissionDenied, "not a manager: node x is not a manager (any more)").WithDetails(&errdetails.ErrorInfo{Reason: notManagerReason, Domain: errorDomain})
	if err != nil {
		t.Fatal(err)
	}
	demoted := startManager(t, ca, "127.0.0.5", &fakeManagement{name: "demoted", err: st.Err()})
	good := startManager(t, ca, "127.0.0.6", &fakeManagement{name: "good"})
	c := dial(t, writeConfig(t, ca, demoted, good), WithRounds(1))
	if _, err := listNodeIDs(t, c); err != nil {
		t.Errorf("with a demoted manager first: %v, want the next manager's answer", err)
	}
	denied := startManager(t, ca, "127.0.0.7", &fakeManagement{name: "denied", err: status.Error(codes.PermissionDenied, "want an admin certificate")})
	c = dial(t, writeConfig(t, ca, denied, good), WithRounds(1))
	if _, err := listNodeIDs(t, c); status.Code(err) != codes.PermissionDenied {
		t.Errorf("a plain PermissionDenied: %v, want it returned", err)
	}
}

// TestOnlyManagerIsPinned: a client made WithOnlyManager calls that
// manager alone, even when it is unavailable and the cluster reports
// others that answer.
func TestOnlyManagerIsPinned(t *testing.T) {
	ca := newCA(t)
	other := &fakeManagement{name: "b"}
	otherAddr := startManager(t, ca, "127.0.0.3", other)
	pinned := &fakeManagement{name: "a", managers: []string{otherAddr}}
	pinnedAddr := startManager(t, ca, "127.0.0.2", pinned)
	path := writeConfig(t, ca, otherAddr, pinnedAddr)

	c := dial(t, path, WithOnlyManager(pinnedAddr), WithRounds(1))
	ids, err := listNodeIDs(t, c)
	if err != nil {
		t.Fatalf("ListNodes: %v", err)
	}
	if diff := cmp.Diff([]string{"a"}, ids); diff != "" {
		t.Errorf("nodes (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{pinnedAddr}, c.Managers()); diff != "" {
		t.Errorf("Managers() after a refresh (-want +got):\n%s", diff)
	}
	pinned.err = status.Error(codes.Unavailable, "no leader yet")
	if _, err := listNodeIDs(t, c); err == nil {
		t.Errorf("ListNodes with the pinned manager unavailable: no error, want one (not another manager's answer)")
	}
	if got := other.calls.Load(); got != 0 {
		t.Errorf("the other manager got %d calls, want 0", got)
	}
}
