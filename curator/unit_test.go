package curator

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/curatorproject/curator/curator/spec"
	"github.com/curatorproject/curator/curator/store"
	"github.com/curatorproject/curator/pki"
	pb "github.com/curatorproject/curator/proto"
)

func TestNodeResolve(t *testing.T) {
	nodes := []*pb.Node{
		{Id: "abcdef0000000000000000aa", Name: "alpha"},
		{Id: "abcdef1111111111111111bb", Name: "beta"},
		{Id: "zzzzzz2222222222222222cc", Name: "abcdef0000000000000000aa-not"},
		// A node whose name is another node's ID prefix: names win over
		// prefixes.
		{Id: "qqqqqq3333333333333333dd", Name: "zzz"},
	}
	for _, tc := range []struct {
		name, query string
		wantID      string
		wantErr     error
	}{
		{"exact ID", "abcdef0000000000000000aa", "abcdef0000000000000000aa", nil},
		{"exact ID with spaces", "  abcdef1111111111111111bb ", "abcdef1111111111111111bb", nil},
		{"name", "beta", "abcdef1111111111111111bb", nil},
		{"unique prefix", "abcdef1", "abcdef1111111111111111bb", nil},
		{"name before prefix", "zzz", "qqqqqq3333333333333333dd", nil},
		{"ambiguous prefix", "abcdef", "", spec.ErrInvalid},
		{"unknown", "nope", "", spec.ErrNotFound},
		{"empty", "", "", spec.ErrInvalid},
		{"blank", "   ", "", spec.ErrInvalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n, err := store.NodeResolve(nodes, tc.query)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("nodeResolve(%q) error = %v, want %v", tc.query, err, tc.wantErr)
			}
			if tc.wantErr != nil {
				return
			}
			if n.Id != tc.wantID {
				t.Errorf("nodeResolve(%q) = %s, want %s", tc.query, n.Id, tc.wantID)
			}
		})
	}
	t.Run("ambiguous names both IDs", func(t *testing.T) {
		_, err := store.NodeResolve(nodes, "abcdef")
		for _, id := range []string{"abcdef0000000000000000aa", "abcdef1111111111111111bb"} {
			if err == nil || !strings.Contains(err.Error(), id) {
				t.Errorf("error %v does not name %s", err, id)
			}
		}
	})
}

func TestAuthorize(t *testing.T) {
	anon := identity{}
	admin := identity{role: pki.RoleAdmin, opRole: pki.OperatorAdmin, name: "admin"}
	node := identity{role: pki.RoleNode, nodeID: "n1"}
	other := identity{role: pki.RoleConsensus, nodeID: "n1"}
	methods := []string{
		"/curator.v1.Management/ListNodes",
		"/curator.v1.Management/RotateToken",
		"/curator.v1.Curator/Register",
		"/curator.v1.Curator/Heartbeat",
		"/curator.v1.Curator/GetManagers",
		"/curator.v1.Other/Call",
		"/curator.v1.ManagementX/ListNodes",
		"/grpc.health.v1.Health/Check",
		"/grpc.reflection.v1.ServerReflection/ServerReflectionInfo",
	}
	// want[identity][method] is whether the call is allowed.
	for _, tc := range []struct {
		id   identity
		want []bool
	}{
		{anon, []bool{false, false, true, false, false, false, false, false, false}},
		{admin, []bool{true, true, true, false, false, false, false, true, true}},
		{node, []bool{false, false, true, true, true, false, false, true, true}},
		{other, []bool{false, false, true, false, false, false, false, false, false}},
	} {
		t.Run(tc.id.String(), func(t *testing.T) {
			var got []bool
			for _, m := range methods {
				err := authorize(tc.id, m)
				if err != nil && !errors.Is(err, spec.ErrDenied) {
					t.Errorf("authorize(%s, %s) = %v, not ErrDenied", tc.id, m, err)
				}
				got = append(got, err == nil)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("allowed per method %v (-want +got):\n%s", methods, diff)
			}
		})
	}
}

func TestParseIdentity(t *testing.T) {
	for _, id := range []identity{
		{},
		{role: pki.RoleAdmin, opRole: pki.OperatorReader, serial: "1f", name: "wall"},
		{role: pki.RoleAdmin, opRole: pki.OperatorAdmin, serial: "abc", name: "a:b"},
		{role: pki.RoleNode, nodeID: "abc"},
	} {
		got, err := parseIdentity(id.forwarded())
		if err != nil || got != id {
			t.Errorf("parseIdentity(%q) = %v, %v; want %v", id.forwarded(), got, err, id)
		}
	}
	// A follower of before operator roles forwards a bare "admin": the
	// full admin it was.
	if got, err := parseIdentity("admin"); err != nil || got.opRole != pki.OperatorAdmin {
		t.Errorf("parseIdentity(admin) = %+v, %v; want an admin of role admin", got, err)
	}
	for _, bad := range []string{"", "node:", "consensus", "root", "admin:root:1:x", "admin:reader:1:", "admin:reader"} {
		if _, err := parseIdentity(bad); !errors.Is(err, spec.ErrDenied) {
			t.Errorf("parseIdentity(%q) = %v, want ErrDenied", bad, err)
		}
	}
}

func TestTokenRole(t *testing.T) {
	cs := &pb.ClusterState{WorkerTokenSecret: "workersecret", ManagerTokenSecret: "managersecret"}
	for _, tc := range []struct {
		secret string
		role   spec.JoinRole
		ok     bool
	}{
		{"workersecret", "worker", true},
		{"managersecret", "manager", true},
		{"", "", false},
		{"workersecre", "", false},
		{"WORKERSECRET", "", false},
	} {
		role, ok := spec.TokenRole(cs, tc.secret)
		if role != tc.role || ok != tc.ok {
			t.Errorf("TokenRole(%q) = %q, %v; want %q, %v", tc.secret, role, ok, tc.role, tc.ok)
		}
	}
}

func TestParseJoinRole(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want spec.JoinRole
		err  error
	}{
		{"worker", "worker", nil},
		{"manager", "manager", nil},
		{" Manager ", "manager", nil},
		{"WORKER", "worker", nil},
		{"", "", spec.ErrInvalid},
		{"admin", "", spec.ErrInvalid},
		{"workers", "", spec.ErrInvalid},
	} {
		got, err := spec.ParseJoinRole(tc.in)
		if got != tc.want || !errors.Is(err, tc.err) {
			t.Errorf("ParseJoinRole(%q) = %q, %v; want %q, %v", tc.in, got, err, tc.want, tc.err)
		}
	}
}

func TestSplitAddress(t *testing.T) {
	ip, port, err := spec.SplitAddress("127.0.0.2:7000")
	if err != nil || ip.String() != "127.0.0.2" || port != 7000 {
		t.Errorf("SplitAddress(127.0.0.2:7000) = %v, %d, %v", ip, port, err)
	}
	if ip, port, err := spec.SplitAddress("[::1]:65532"); err != nil || ip.String() != "::1" || port != 65532 {
		t.Errorf("SplitAddress([::1]:65532) = %v, %d, %v", ip, port, err)
	}
	for _, bad := range []string{
		"", "127.0.0.2", "127.0.0.2:", ":7000", "localhost:7000", "example.com:7000",
		"127.0.0.2:0", "127.0.0.2:-1", "127.0.0.2:65533", "127.0.0.2:65535", "127.0.0.2:70000",
		"127.0.0.2:http", "::1:7000", "127.0.0.2:7000:1",
	} {
		if ip, port, err := spec.SplitAddress(bad); err == nil {
			t.Errorf("SplitAddress(%q) = %v, %d, nil; want an error", bad, ip, port)
		} else if !strings.Contains(err.Error(), bad) {
			t.Errorf("SplitAddress(%q): error %q does not quote the address", bad, err)
		}
	}
}

func TestConfigValidate(t *testing.T) {
	root, err := pki.NewCA("test CA")
	if err != nil {
		t.Fatal(err)
	}
	key, err := pki.NewKey()
	if err != nil {
		t.Fatal(err)
	}
	cert, err := root.Issue(pki.CertRequest{PublicKey: key.Public(), NodeID: "n1", Role: pki.RoleNode})
	if err != nil {
		t.Fatal(err)
	}
	good := Config{
		NodeID: "n1", Address: "127.0.0.2:7000", Etcd: &clientv3.Client{},
		NodeCert: cert, NodeKey: key, CA: root.Cert,
	}.withDefaults()
	if err := good.Validate(); err != nil {
		t.Fatalf("good config: %v", err)
	}
	for _, tc := range []struct {
		name   string
		change func(*Config)
		want   string // in the error
	}{
		{"no node ID", func(c *Config) { c.NodeID = "" }, "node ID"},
		{"bad address", func(c *Config) { c.Address = "host:7000" }, "not an IP"},
		{"no etcd", func(c *Config) { c.Etcd = nil }, "etcd"},
		{"no cert", func(c *Config) { c.NodeCert = nil }, "certificate"},
		{"no key", func(c *Config) { c.NodeKey = nil }, "certificate"},
		{"no CA", func(c *Config) { c.CA = nil }, "certificate"},
		{"TTL under a second", func(c *Config) { c.ElectionTTL = 500 * time.Millisecond }, "--election-ttl"},
		{"TTL not whole seconds", func(c *Config) { c.ElectionTTL = 1500 * time.Millisecond }, "--election-ttl"},
		{"no heartbeat interval", func(c *Config) { c.HeartbeatInterval = -time.Second }, "down-after"},
		{"down-after not longer than interval", func(c *Config) { c.DownAfter = c.HeartbeatInterval }, "down-after"},
		{"reap-after not longer than down-after", func(c *Config) { c.ReapAfter = c.DownAfter }, "--reap-after"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := good
			tc.change(&c)
			err := c.Validate()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Validate() = %v, want an error mentioning %q", err, tc.want)
			}
		})
	}
	t.Run("all errors at once", func(t *testing.T) {
		err := Config{}.Validate()
		for _, want := range []string{"node ID", "IP:PORT", "etcd", "certificate", "--election-ttl", "--down-after", "--reap-after"} {
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("Config{}.Validate() = %v, want it to mention %q", err, want)
			}
		}
	})
	t.Run("New applies defaults", func(t *testing.T) {
		c := good
		c.ElectionTTL, c.HeartbeatInterval, c.DownAfter = 0, 0, 0
		s, err := New(c)
		if err != nil {
			t.Fatal(err)
		}
		got := []time.Duration{s.cfg.ElectionTTL, s.cfg.HeartbeatInterval, s.cfg.DownAfter}
		want := []time.Duration{DefaultElectionTTL, DefaultHeartbeatInterval, DefaultDownAfter}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("defaults (-want +got):\n%s", diff)
		}
	})
}
