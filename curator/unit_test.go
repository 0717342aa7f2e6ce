package curator

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/curatorproject/curator/pki"
	pb "github.com/curatorproject/curator/proto"
)

func TestDecideStatus(t *testing.T) {
	const downAfter = 5 * time.Second
	t0 := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	const (
		unknown = pb.NodeStatus_NODE_STATUS_UNKNOWN
		ready   = pb.NodeStatus_NODE_STATUS_READY
		down    = pb.NodeStatus_NODE_STATUS_DOWN
	)
	for _, tc := range []struct {
		name        string
		cur         pb.NodeStatus
		last        time.Time
		seen        bool
		leaderSince time.Time
		now         time.Time
		want        pb.NodeStatus
	}{
		{"fresh heartbeat makes ready", unknown, at(10 * time.Second), true, t0, at(11 * time.Second), ready},
		{"down node with fresh heartbeat is ready", down, at(10 * time.Second), true, t0, at(10 * time.Second), ready},
		{"heartbeat just under the limit", ready, at(10 * time.Second), true, t0, at(15*time.Second - time.Nanosecond), ready},
		{"heartbeat exactly at the limit is down", ready, at(10 * time.Second), true, t0, at(15 * time.Second), down},
		{"stale heartbeat is down", ready, at(10 * time.Second), true, t0, at(30 * time.Second), down},
		// The grace period of a new leader: no heartbeat seen since it
		// took over at t0.
		{"new leader, unseen, in grace: unknown kept", unknown, time.Time{}, false, t0, at(4 * time.Second), unknown},
		{"new leader, unseen, in grace: ready kept", ready, time.Time{}, false, t0, at(4 * time.Second), ready},
		{"new leader, unseen, in grace: down kept", down, time.Time{}, false, t0, at(time.Second), down},
		{"new leader, unseen, past one down-after: ready kept", ready, time.Time{}, false, t0, at(9 * time.Second), ready},
		{"new leader, unseen, grace (twice down-after) over", ready, time.Time{}, false, t0, at(10 * time.Second), down},
		{"new leader, unseen, long after", unknown, time.Time{}, false, t0, at(time.Hour), down},
		// A heartbeat older than the leadership (a clock oddity) counts
		// from the leadership.
		{"heartbeat before leadership, in grace", ready, at(-time.Minute), true, t0, at(2 * time.Second), ready},
		{"heartbeat before leadership, grace over", ready, at(-time.Minute), true, t0, at(10 * time.Second), down},
		{"seen by this leader, then silent", ready, at(time.Second), true, t0, at(6 * time.Second), down},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := decideStatus(tc.cur, tc.last, tc.seen, tc.leaderSince, tc.now, downAfter)
			if got != tc.want {
				t.Errorf("decideStatus = %v, want %v", got, tc.want)
			}
		})
	}
}

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
		{"ambiguous prefix", "abcdef", "", ErrInvalid},
		{"unknown", "nope", "", ErrNotFound},
		{"empty", "", "", ErrInvalid},
		{"blank", "   ", "", ErrInvalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n, err := nodeResolve(nodes, tc.query)
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
		_, err := nodeResolve(nodes, "abcdef")
		for _, id := range []string{"abcdef0000000000000000aa", "abcdef1111111111111111bb"} {
			if err == nil || !strings.Contains(err.Error(), id) {
				t.Errorf("error %v does not name %s", err, id)
			}
		}
	})
}

func TestAuthorize(t *testing.T) {
	anon := identity{}
	admin := identity{role: pki.RoleAdmin}
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
				if err != nil && !errors.Is(err, ErrDenied) {
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
	for _, id := range []identity{{}, {role: pki.RoleAdmin}, {role: pki.RoleNode, nodeID: "abc"}} {
		got, err := parseIdentity(id.String())
		if err != nil || got != id {
			t.Errorf("parseIdentity(%q) = %v, %v; want %v", id.String(), got, err, id)
		}
	}
	for _, bad := range []string{"", "node:", "consensus", "root"} {
		if _, err := parseIdentity(bad); !errors.Is(err, ErrDenied) {
			t.Errorf("parseIdentity(%q) = %v, want ErrDenied", bad, err)
		}
	}
}

func TestTokenRole(t *testing.T) {
	cs := &pb.ClusterState{WorkerTokenSecret: "workersecret", ManagerTokenSecret: "managersecret"}
	for _, tc := range []struct {
		secret string
		role   joinRole
		ok     bool
	}{
		{"workersecret", "worker", true},
		{"managersecret", "manager", true},
		{"", "", false},
		{"workersecre", "", false},
		{"WORKERSECRET", "", false},
	} {
		role, ok := tokenRole(cs, tc.secret)
		if role != tc.role || ok != tc.ok {
			t.Errorf("tokenRole(%q) = %q, %v; want %q, %v", tc.secret, role, ok, tc.role, tc.ok)
		}
	}
}

func TestParseJoinRole(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want joinRole
		err  error
	}{
		{"worker", "worker", nil},
		{"manager", "manager", nil},
		{" Manager ", "manager", nil},
		{"WORKER", "worker", nil},
		{"", "", ErrInvalid},
		{"admin", "", ErrInvalid},
		{"workers", "", ErrInvalid},
	} {
		got, err := parseJoinRole(tc.in)
		if got != tc.want || !errors.Is(err, tc.err) {
			t.Errorf("parseJoinRole(%q) = %q, %v; want %q, %v", tc.in, got, err, tc.want, tc.err)
		}
	}
}

func TestSplitAddress(t *testing.T) {
	ip, port, err := SplitAddress("127.0.0.2:7000")
	if err != nil || ip.String() != "127.0.0.2" || port != 7000 {
		t.Errorf("SplitAddress(127.0.0.2:7000) = %v, %d, %v", ip, port, err)
	}
	if ip, port, err := SplitAddress("[::1]:65532"); err != nil || ip.String() != "::1" || port != 65532 {
		t.Errorf("SplitAddress([::1]:65532) = %v, %d, %v", ip, port, err)
	}
	for _, bad := range []string{
		"", "127.0.0.2", "127.0.0.2:", ":7000", "localhost:7000", "example.com:7000",
		"127.0.0.2:0", "127.0.0.2:-1", "127.0.0.2:65533", "127.0.0.2:65535", "127.0.0.2:70000",
		"127.0.0.2:http", "::1:7000", "127.0.0.2:7000:1",
	} {
		if ip, port, err := SplitAddress(bad); err == nil {
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
		{"TTL under a second", func(c *Config) { c.ElectionTTL = 500 * time.Millisecond }, "election TTL"},
		{"TTL not whole seconds", func(c *Config) { c.ElectionTTL = 1500 * time.Millisecond }, "election TTL"},
		{"no heartbeat interval", func(c *Config) { c.HeartbeatInterval = -time.Second }, "down-after"},
		{"down-after not longer than interval", func(c *Config) { c.DownAfter = c.HeartbeatInterval }, "down-after"},
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
		for _, want := range []string{"node ID", "IP:PORT", "etcd", "certificate", "election TTL", "down-after"} {
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
