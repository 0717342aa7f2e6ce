package node

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/testing/protocmp"

	"github.com/curatorproject/curator/consensus"
	"github.com/curatorproject/curator/pki"
	pb "github.com/curatorproject/curator/proto"
)

// snapshot reads every file under dir, for "changed nothing" checks.
func snapshot(t *testing.T, dir string) map[string]string {
	t.Helper()
	files := map[string]string{}
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(path)
		files[strings.TrimPrefix(path, dir)] = string(data)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

func TestInit(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "n1")
	res, err := Init(InitConfig{DataDir: dir, Address: "127.0.0.9:7000", Name: "first"})
	if err != nil {
		t.Fatal(err)
	}
	st, err := loadState(dir)
	if err != nil {
		t.Fatal(err)
	}
	if st.NodeID != res.NodeID || st.ClusterID != res.ClusterID || st.Address != "127.0.0.9:7000" || st.Name != "first" {
		t.Errorf("state %+v does not match init's result %+v", st, res)
	}
	id, err := loadIdentity(dir)
	if err != nil {
		t.Fatal(err)
	}
	if nodeID, role, err := pki.Identity(id.cert); err != nil || nodeID != res.NodeID || role != pki.RoleNode {
		t.Errorf("node certificate names %q as %q (%v), want %s as node", nodeID, role, err, res.NodeID)
	}
	if err := pki.Verify(id.cert, id.ca); err != nil {
		t.Errorf("node certificate does not verify against the CA: %v", err)
	}
	join, err := loadConsensus(dir)
	if err != nil || join == nil || len(join.Peers) != 1 || join.Peers[0].NodeId != res.NodeID {
		t.Errorf("consensus join = %v, %v: want the first node as its only peer", join, err)
	}
	if b, err := loadBootstrap(dir); err != nil || b == nil || b.ClusterID != res.ClusterID {
		t.Errorf("bootstrap record = %+v, %v", b, err)
	}
	for _, tok := range []string{res.WorkerToken, res.ManagerToken} {
		parsed, err := pki.ParseToken(tok)
		if err != nil || parsed.VerifyCA(id.ca) != nil {
			t.Errorf("token %q: %v; it must name this cluster's CA", tok, err)
		}
	}
	if res.WorkerToken == res.ManagerToken {
		t.Error("worker and manager tokens are the same")
	}
	if _, err := os.Stat(res.AdminConfig); err != nil {
		t.Errorf("admin config: %v", err)
	}
	if info, err := os.Stat(pki.KeyPath(dir, nodeCertName)); err != nil || info.Mode().Perm() != 0o600 {
		t.Errorf("node key mode = %v, %v; want 0600", info.Mode().Perm(), err)
	}

	// Init again: refused, nothing changed.
	before := snapshot(t, dir)
	if _, err := Init(InitConfig{DataDir: dir, Address: "127.0.0.9:7000"}); !errors.Is(err, ErrAlreadyInitialised) {
		t.Errorf("second init: %v, want ErrAlreadyInitialised", err)
	}
	if diff := cmp.Diff(before, snapshot(t, dir)); diff != "" {
		t.Errorf("second init changed the data dir (-before +after):\n%s", diff)
	}
}

func TestInitRefusesBadInput(t *testing.T) {
	for _, tc := range []struct {
		name    string
		cfg     func(dir string) InitConfig
		prepare func(dir string)
		want    string
	}{
		{"no data dir", func(string) InitConfig { return InitConfig{Address: "127.0.0.9:7000"} }, nil, "--data-dir"},
		{"no address", func(d string) InitConfig { return InitConfig{DataDir: d} }, nil, "--listen"},
		{"host name", func(d string) InitConfig { return InitConfig{DataDir: d, Address: "localhost:7000"} }, nil, "not an IP"},
		{"port too high", func(d string) InitConfig { return InitConfig{DataDir: d, Address: "127.0.0.9:65534"} }, nil, "port"},
		{"leftover etcd data", func(d string) InitConfig { return InitConfig{DataDir: d, Address: "127.0.0.9:7000"} },
			func(d string) {
				if err := os.MkdirAll(filepath.Join(d, etcdDir, "member"), 0o700); err != nil {
					t.Fatal(err)
				}
			}, "earlier init did not finish"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "n")
			if tc.prepare != nil {
				tc.prepare(dir)
			}
			_, err := Init(tc.cfg(dir))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Init: %v, want an error saying %q", err, tc.want)
			}
			if Initialised(dir) {
				t.Error("a refused init left a node behind")
			}
		})
	}
}

func TestJoinRefusesBadInputLocally(t *testing.T) {
	ca, err := pki.NewCA("test")
	if err != nil {
		t.Fatal(err)
	}
	tok, err := pki.NewToken(ca.Cert)
	if err != nil {
		t.Fatal(err)
	}
	good := JoinConfig{Address: "127.0.0.9:7000", Token: tok.String(), Managers: []string{"127.0.0.8:7000"}, Timeout: time.Second}
	for _, tc := range []struct {
		name   string
		modify func(*JoinConfig)
		want   string
	}{
		{"malformed token", func(c *JoinConfig) { c.Token = "CUR1-nope" }, "CUR1-<fingerprint>-<secret>"},
		{"no manager", func(c *JoinConfig) { c.Managers = nil }, "--manager"},
		{"bad manager", func(c *JoinConfig) { c.Managers = []string{"nowhere"} }, "IP:PORT"},
		{"bad listen", func(c *JoinConfig) { c.Address = "127.0.0.9" }, "--listen"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := good
			cfg.DataDir = filepath.Join(t.TempDir(), "n")
			tc.modify(&cfg)
			_, _, err := Join(context.Background(), cfg)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Join: %v, want an error saying %q", err, tc.want)
			}
			if Initialised(cfg.DataDir) {
				t.Error("a refused join left a node behind")
			}
		})
	}
	t.Run("already a node", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "n")
		if _, err := Init(InitConfig{DataDir: dir, Address: "127.0.0.9:7000"}); err != nil {
			t.Fatal(err)
		}
		cfg := good
		cfg.DataDir = dir
		if _, _, err := Join(context.Background(), cfg); err == nil || !strings.Contains(err.Error(), "agent run") {
			t.Fatalf("Join on a node's data dir: %v, want a pointer to `agent run`", err)
		}
	})
}

func TestVerifyPinned(t *testing.T) {
	ca, err := pki.NewCA("cluster")
	if err != nil {
		t.Fatal(err)
	}
	other, err := pki.NewCA("other")
	if err != nil {
		t.Fatal(err)
	}
	key, err := pki.NewKey()
	if err != nil {
		t.Fatal(err)
	}
	issue := func(by *pki.CA) []byte {
		c, err := by.Issue(pki.CertRequest{PublicKey: key.Public(), NodeID: "n", Role: pki.RoleNode, IPs: []net.IP{net.ParseIP("127.0.0.1")}})
		if err != nil {
			t.Fatal(err)
		}
		return c.Raw
	}
	tok, err := pki.NewToken(ca.Cert)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		raw  [][]byte
		want string // "" for success
	}{
		{"leaf and pinned CA", [][]byte{issue(ca), ca.Cert.Raw}, ""},
		{"no CA sent", [][]byte{issue(ca)}, "wrong token or wrong cluster"},
		{"another cluster", [][]byte{issue(other), other.Cert.Raw}, "wrong token or wrong cluster"},
		{"pinned CA, leaf from another", [][]byte{issue(other), ca.Cert.Raw}, "not from the cluster's CA"},
		{"nothing", nil, "no certificate"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := verifyPinned(tok, tc.raw)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("verifyPinned: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("verifyPinned: %v, want %q", err, tc.want)
			}
		})
	}
}

func TestRoleGone(t *testing.T) {
	local := &pb.ConsensusJoin{MemberId: 5}
	withRole := func(member uint64) *pb.Node {
		return &pb.Node{Roles: []pb.Role{pb.Role_ROLE_CONSENSUS, pb.Role_ROLE_WORKER}, Consensus: &pb.ConsensusJoin{MemberId: member}}
	}
	for _, tc := range []struct {
		name    string
		local   *pb.ConsensusJoin
		desired *pb.Node
		want    bool
	}{
		{"still has it", local, withRole(5), false},
		{"taken", local, &pb.Node{Roles: []pb.Role{pb.Role_ROLE_WORKER}}, true},
		{"role without join parameters", local, &pb.Node{Roles: []pb.Role{pb.Role_ROLE_CONSENSUS}}, true},
		{"given again as another member", local, withRole(9), true},
		{"first node before its member ID was known", &pb.ConsensusJoin{}, withRole(9), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := roleGone(tc.local, tc.desired); got != tc.want {
				t.Errorf("roleGone = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestConsensusFileRoundTrip(t *testing.T) {
	dir := t.TempDir()
	if j, err := loadConsensus(dir); err != nil || j != nil {
		t.Fatalf("no file: %v, %v; want nil, nil", j, err)
	}
	want := &pb.ConsensusJoin{MemberId: 7, EtcdClusterId: 9, Peers: []*pb.ConsensusPeer{{NodeId: "a", PeerUrl: "https://127.0.0.1:7001"}}, EtcdCert: []byte("c")}
	if err := saveConsensus(dir, want); err != nil {
		t.Fatal(err)
	}
	got, err := loadConsensus(dir)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got, protocmp.Transform()); diff != "" {
		t.Errorf("round trip (-want +got):\n%s", diff)
	}
	if err := os.WriteFile(filepath.Join(dir, consensusFile), []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := loadConsensus(dir); err == nil || !strings.Contains(err.Error(), "corrupt") {
		t.Errorf("corrupt file: %v, want an error saying so", err)
	}
}

func TestWipeKeepsAdmin(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "n1")
	if _, err := Init(InitConfig{DataDir: dir, Address: "127.0.0.9:7000"}); err != nil {
		t.Fatal(err)
	}
	a := &Agent{cfg: Config{DataDir: dir}}
	if err := a.Wipe(); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 || entries[0].Name() != AdminDir {
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		t.Errorf("after wipe the data dir holds %v, want only %s", names, AdminDir)
	}
	if Initialised(dir) {
		t.Error("a wiped data dir still holds a node")
	}
}

// TestForceNewClusterRefusedAtStart: --force-new-cluster on a manager's
// data dir whose etcd never ran (or a worker's, which holds no manager) is
// refused when the agent is made, before anything starts, saying what to
// do instead, and changes nothing.
func TestForceNewClusterRefusedAtStart(t *testing.T) {
	manager := filepath.Join(t.TempDir(), "manager")
	if _, err := Init(InitConfig{DataDir: manager, Address: "127.0.0.9:7000", Name: "first"}); err != nil {
		t.Fatal(err)
	}
	before := snapshot(t, manager)
	_, err := New(Config{DataDir: manager, ForceNewCluster: true})
	if !errors.Is(err, consensus.ErrNotVoter) || !strings.Contains(err.Error(), "etcd never ran") || !strings.Contains(err.Error(), "curator agent restore") {
		t.Errorf("New: %v, want ErrNotVoter saying the etcd never ran and what to do", err)
	}
	if diff := cmp.Diff(before, snapshot(t, manager)); diff != "" {
		t.Errorf("the refused start changed the data dir (-before +after):\n%s", diff)
	}
}
