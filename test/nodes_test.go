package e2e

// Node management through the CLI, against real processes: promote and
// demote (of a follower, of the etcd leader, of the curator leader with
// handoff), the guards that refuse what would lose quorum or data, forced
// removal of a dead manager, drain, approval, labels and agent leave.
//
// Each test shares one cluster across its subtests, in order: a subtest
// starts from where the one before it left the cluster, so a failed
// subtest stops the rest.

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/curatorproject/curator/internal/testenv"
)

// mgmtNode is a node as `node ls -o json` shows it, without the fields that
// change on their own (heartbeats, times), so that two listings of an
// unchanged cluster are equal.
type mgmtNode struct {
	ID            string            `json:"id"`
	Name          string            `json:"name"`
	Address       string            `json:"address"`
	State         string            `json:"state"`
	Status        string            `json:"status"`
	Availability  string            `json:"availability"`
	Roles         []string          `json:"roles"`
	ManagerStatus string            `json:"manager_status"`
	Labels        map[string]string `json:"labels"`
	Demoting      bool              `json:"demoting"`
	LastHeartbeat *time.Time        `json:"last_heartbeat"`
}

// mgmtInfo is `cluster info -o json`.
type mgmtInfo struct {
	Leader          string   `json:"leader"`
	Voters          []string `json:"voters"`
	Learners        []string `json:"learners"`
	EtcdLeader      string   `json:"etcd_leader"`
	QuorumHealthy   bool     `json:"quorum_healthy"`
	MaxVoters       uint32   `json:"max_voters"`
	RequireApproval bool     `json:"require_approval"`
	Warnings        []string `json:"warnings"`
}

// mgmtEvent is one entry of `events -o json`.
type mgmtEvent struct {
	Loop   string `json:"loop"`
	NodeID string `json:"node_id"`
	Action string `json:"action"`
	Reason string `json:"reason"`
	Leader string `json:"leader"`
}

// mgmtRun runs an operator command against c and returns its stdout,
// failing the test if it fails.
func mgmtRun(t *testing.T, c *cluster, args ...string) string {
	t.Helper()
	out, _, err := cli(t, append([]string{"--config", c.config}, args...)...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// mgmtJSON runs an operator command against c and decodes its stdout.
func mgmtJSON(t *testing.T, c *cluster, v any, args ...string) error {
	t.Helper()
	out, _, err := cli(t, append([]string{"--config", c.config}, args...)...)
	if err != nil {
		return err
	}
	if err := json.Unmarshal([]byte(out), v); err != nil {
		return fmt.Errorf("curator %s: %w: %q", strings.Join(args, " "), err, out)
	}
	return nil
}

// mgmtNodes lists c's nodes, sorted by name, each with its roles sorted.
func mgmtNodes(t *testing.T, c *cluster) ([]mgmtNode, error) {
	t.Helper()
	var nodes []mgmtNode
	if err := mgmtJSON(t, c, &nodes, "node", "ls", "-o", "json"); err != nil {
		return nil, err
	}
	for _, n := range nodes {
		slices.Sort(n.Roles)
	}
	slices.SortFunc(nodes, func(a, b mgmtNode) int { return strings.Compare(a.Name, b.Name) })
	return nodes, nil
}

func mgmtClusterInfo(t *testing.T, c *cluster) (*mgmtInfo, error) {
	t.Helper()
	var info mgmtInfo
	if err := mgmtJSON(t, c, &info, "cluster", "info", "-o", "json"); err != nil {
		return nil, err
	}
	return &info, nil
}

func mgmtEvents(t *testing.T, c *cluster) ([]mgmtEvent, error) {
	t.Helper()
	var events []mgmtEvent
	err := mgmtJSON(t, c, &events, "events", "-o", "json", "--limit", "0")
	return events, err
}

func mgmtFind(nodes []mgmtNode, name string) (mgmtNode, bool) {
	for _, n := range nodes {
		if n.Name == name {
			return n, true
		}
	}
	return mgmtNode{}, false
}

// mgmtIDs maps node names to IDs, failing the test if one is not listed.
func mgmtIDs(t *testing.T, c *cluster, names ...string) map[string]string {
	t.Helper()
	nodes, err := mgmtNodes(t, c)
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string]string{}
	for _, name := range names {
		n, ok := mgmtFind(nodes, name)
		if !ok {
			t.Fatalf("%s is not listed: %+v", name, nodes)
		}
		ids[name] = n.ID
	}
	return ids
}

// mgmtNameOf names node id for messages: by ids, else the ID itself.
func mgmtNameOf(ids map[string]string, id string) string {
	for name, i := range ids {
		if i == id {
			return name
		}
	}
	return id
}

// mgmtWaitVoters waits until the etcd voters are exactly the named nodes,
// with no learner and a healthy quorum, and returns cluster info.
func mgmtWaitVoters(t *testing.T, c *cluster, ids map[string]string, names ...string) *mgmtInfo {
	t.Helper()
	var want []string
	for _, name := range names {
		want = append(want, ids[name])
	}
	slices.Sort(want)
	var info *mgmtInfo
	testenv.Eventually(t, 60*time.Second, fmt.Sprintf("voters are exactly %v", names), func() error {
		var err error
		if info, err = mgmtClusterInfo(t, c); err != nil {
			return err
		}
		if !slices.Equal(info.Voters, want) || len(info.Learners) != 0 || !info.QuorumHealthy {
			return fmt.Errorf("voters %v, learners %v, quorum healthy %v; want voters %v (%v), no learner, quorum healthy",
				info.Voters, info.Learners, info.QuorumHealthy, want, names)
		}
		return nil
	})
	return info
}

// mgmtWaitNode waits until node name is listed and ok says it is where it
// should be, and returns it.
func mgmtWaitNode(t *testing.T, c *cluster, name, what string, ok func(mgmtNode) error) mgmtNode {
	t.Helper()
	var got mgmtNode
	testenv.Eventually(t, 30*time.Second, name+" "+what, func() error {
		nodes, err := mgmtNodes(t, c)
		if err != nil {
			return err
		}
		n, found := mgmtFind(nodes, name)
		if !found {
			return fmt.Errorf("%s is not listed", name)
		}
		got = n
		return ok(n)
	})
	return got
}

// mgmtWaitGone waits until node name is no longer listed.
func mgmtWaitGone(t *testing.T, c *cluster, name string) {
	t.Helper()
	testenv.Eventually(t, 30*time.Second, name+" gone from node ls", func() error {
		nodes, err := mgmtNodes(t, c)
		if err != nil {
			return err
		}
		if n, found := mgmtFind(nodes, name); found {
			return fmt.Errorf("%s is still listed: %+v", name, n)
		}
		return nil
	})
}

// mgmtSnapshot is what an operator sees of a cluster, less what changes on
// its own (heartbeats, times, where etcd leadership sits).
type mgmtSnapshot struct {
	Nodes           []mgmtNode
	Leader          string
	Voters          []string
	Learners        []string
	QuorumHealthy   bool
	MaxVoters       uint32
	RequireApproval bool
	Warnings        []string
}

func mgmtSnap(t *testing.T, c *cluster) mgmtSnapshot {
	t.Helper()
	nodes, err := mgmtNodes(t, c)
	if err != nil {
		t.Fatal(err)
	}
	info, err := mgmtClusterInfo(t, c)
	if err != nil {
		t.Fatal(err)
	}
	for i := range nodes {
		nodes[i].LastHeartbeat = nil // changes every heartbeat
	}
	return mgmtSnapshot{
		Nodes: nodes, Leader: info.Leader, Voters: info.Voters, Learners: info.Learners,
		QuorumHealthy: info.QuorumHealthy, MaxVoters: info.MaxVoters, RequireApproval: info.RequireApproval,
		Warnings: info.Warnings,
	}
}

// mgmtRefused runs an operator command that must fail with stderr holding
// every one of want, and checks that it changed nothing.
func mgmtRefused(t *testing.T, c *cluster, args []string, want ...string) {
	t.Helper()
	before := mgmtSnap(t, c)
	out, stderr, err := cli(t, append([]string{"--config", c.config}, args...)...)
	if err == nil {
		t.Errorf("curator %s succeeded, want a refusal; it said %q", strings.Join(args, " "), out)
	}
	for _, w := range want {
		if !strings.Contains(stderr, w) {
			t.Errorf("curator %s: stderr %q does not say %q", strings.Join(args, " "), strings.TrimSpace(stderr), w)
		}
	}
	if diff := cmp.Diff(before, mgmtSnap(t, c)); diff != "" {
		t.Errorf("curator %s was refused but changed the cluster (-before +after):\n%s", strings.Join(args, " "), diff)
	}
}

// mgmtHostPort is n's address with port p in place of the gRPC port.
func mgmtHostPort(t *testing.T, n *node, p int) string {
	t.Helper()
	host, _, err := net.SplitHostPort(n.listen)
	if err != nil {
		t.Fatal(err)
	}
	return net.JoinHostPort(host, fmt.Sprint(p))
}

// mgmtWaitPortClosed waits until nothing accepts connections on addr.
func mgmtWaitPortClosed(t *testing.T, addr, what string) {
	t.Helper()
	testenv.Eventually(t, 30*time.Second, what+" stops accepting connections on "+addr, func() error {
		conn, err := net.DialTimeout("tcp", addr, 500*time.Millisecond)
		if err != nil {
			return nil
		}
		conn.Close()
		return errors.New("still accepts connections")
	})
}

func mgmtPortOpen(addr string) bool {
	conn, err := net.DialTimeout("tcp", addr, 500*time.Millisecond)
	if err != nil {
		return false
	}
	conn.Close()
	return true
}

// mgmtLeave runs `curator agent leave` on name's data dir.
func mgmtLeave(t *testing.T, c *cluster, name string, force bool) (stdout, stderr string, err error) {
	t.Helper()
	args := []string{"agent", "leave", "--data-dir", c.nodes[name].dataDir}
	if force {
		args = append(args, "--force")
	}
	return cli(t, args...)
}

// mgmtAssertLeft checks that name's agent exited 0 after a leave and left
// nothing in its data dir but the admin folder.
func mgmtAssertLeft(t *testing.T, c *cluster, name string) {
	t.Helper()
	n := c.nodes[name]
	if err := n.proc.wait(t, 30*time.Second); err != nil {
		t.Errorf("%s after leave: %v, want exit status 0", name, err)
	}
	// A leave is no refusal: the agent does not warn that the cluster
	// refuses it.
	if log, err := os.ReadFile(n.proc.log); err != nil {
		t.Error(err)
	} else if strings.Contains(string(log), "refuses this node") {
		t.Errorf("%s's log warns of a refusal after a normal leave", name)
	}
	entries, err := os.ReadDir(n.dataDir)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	var left []string
	for _, e := range entries {
		if e.Name() != "admin" {
			left = append(left, e.Name())
		}
	}
	if len(left) > 0 {
		t.Errorf("%s left %v in its data dir %s; want nothing but admin/", name, left, n.dataDir)
	}
}

// TestNodePromoteDemote starts one manager and workers, then: labels,
// approval, the last-voter guard, promote of two workers to voters, demote
// of a follower, of the etcd leader, and of the curator leader (handoff).
func TestNodePromoteDemote(t *testing.T) {
	parallel(t) // its own addresses and dirs
	began := time.Now()
	c := newCluster(t, "127.0.210.")
	m1 := c.init("manager-1", 10)
	workerToken := c.token("worker")
	c.join("worker-1", 11, workerToken, m1)
	c.waitReady(30*time.Second, "manager-1", "worker-1")
	ids := mgmtIDs(t, c, "manager-1", "worker-1")
	t.Logf("cluster of 1 manager and 1 worker up in %s", time.Since(began).Round(time.Millisecond))

	// The follower and the etcd leader are known once the promotions are
	// done; "demote a follower" finds them.
	var follower, etcdLeader string
	steps := []struct {
		name string
		run  func(t *testing.T)
	}{
		{"labels", func(t *testing.T) {
			mgmtRun(t, c, "node", "update", "worker-1", "--label-add", "tier=web", "--label-add", "zone=a")
			n := mgmtWaitNode(t, c, "worker-1", "has labels tier and zone", func(mgmtNode) error { return nil })
			if diff := cmp.Diff(map[string]string{"tier": "web", "zone": "a"}, n.Labels); diff != "" {
				t.Errorf("labels after --label-add (-want +got):\n%s", diff)
			}
			mgmtRun(t, c, "node", "update", "worker-1", "--label-rm", "zone")
			n = mgmtWaitNode(t, c, "worker-1", "is listed", func(mgmtNode) error { return nil })
			if diff := cmp.Diff(map[string]string{"tier": "web"}, n.Labels); diff != "" {
				t.Errorf("labels after --label-rm zone (-want +got):\n%s", diff)
			}
		}},
		{"demote of the last voter is refused", func(t *testing.T) {
			mgmtRefused(t, c, []string{"node", "demote", "manager-1"}, "FailedPrecondition", "last etcd voter")
		}},
		{"approval", func(t *testing.T) {
			mgmtRun(t, c, "cluster", "update", "--require-approval=true")
			info, err := mgmtClusterInfo(t, c)
			if err != nil {
				t.Fatal(err)
			}
			if !info.RequireApproval {
				t.Fatalf("cluster info says require_approval false after --require-approval=true")
			}
			c.join("worker-2", 12, workerToken, m1)
			c.join("stranger", 13, workerToken, m1)
			for _, name := range []string{"worker-2", "stranger"} {
				n := mgmtWaitNode(t, c, name, "pending", func(n mgmtNode) error {
					if n.State != "pending" {
						return fmt.Errorf("state %q", n.State)
					}
					return nil
				})
				if len(n.Roles) != 0 {
					t.Errorf("pending node %s has roles %v, want none", name, n.Roles)
				}
			}
			mgmtRefused(t, c, []string{"node", "promote", "worker-2"}, "FailedPrecondition", "pending approval")

			mgmtRun(t, c, "node", "approve", "worker-2")
			mgmtWaitNode(t, c, "worker-2", "up, ready, a worker", func(n mgmtNode) error {
				if n.State != "up" || n.Status != "ready" || !slices.Equal(n.Roles, []string{"worker"}) {
					return fmt.Errorf("state %q, status %q, roles %v", n.State, n.Status, n.Roles)
				}
				return nil
			})
			mgmtRun(t, c, "node", "rm", "stranger")
			mgmtWaitGone(t, c, "stranger")
			// A removed node's agent is refused from then on; it has
			// nothing more to show here.
			if p := c.nodes["stranger"].proc; !p.exited() {
				_ = p.cmd.Process.Kill()
			}
			mgmtRun(t, c, "cluster", "update", "--require-approval=false")
			ids["worker-2"] = mgmtIDs(t, c, "worker-2")["worker-2"]
		}},
		{"promote", func(t *testing.T) {
			for _, name := range []string{"worker-1", "worker-2"} {
				start := time.Now()
				out := mgmtRun(t, c, "node", "promote", name, "--wait")
				if !strings.Contains(out, "etcd voter") {
					t.Errorf("node promote %s --wait said %q, want it to say the node is an etcd voter", name, out)
				}
				t.Logf("promote %s --wait took %s", name, time.Since(start).Round(time.Millisecond))
			}
			mgmtWaitVoters(t, c, ids, "manager-1", "worker-1", "worker-2")
			nodes, err := mgmtNodes(t, c)
			if err != nil {
				t.Fatal(err)
			}
			for _, name := range []string{"worker-1", "worker-2"} {
				if n, _ := mgmtFind(nodes, name); !slices.Equal(n.Roles, []string{"consensus", "worker"}) || n.ManagerStatus != "reachable" {
					t.Errorf("%s: roles %v, manager status %q; want consensus and worker, reachable", name, n.Roles, n.ManagerStatus)
				}
			}
		}},
		{"demote a follower", func(t *testing.T) {
			// The leader keeps etcd leadership off its own node: wait for
			// that, so that the follower chosen is neither leader.
			var info *mgmtInfo
			testenv.Eventually(t, 30*time.Second, "etcd leader apart from the curator leader", func() error {
				var err error
				if info, err = mgmtClusterInfo(t, c); err != nil {
					return err
				}
				if info.EtcdLeader == "" || info.EtcdLeader == info.Leader {
					return fmt.Errorf("curator leader %s, etcd leader %q", info.Leader, info.EtcdLeader)
				}
				return nil
			})
			if info.Leader != ids["manager-1"] {
				t.Fatalf("curator leader is %s, want manager-1 (%s)", mgmtNameOf(ids, info.Leader), ids["manager-1"])
			}
			etcdLeader = mgmtNameOf(ids, info.EtcdLeader)
			follower = "worker-1"
			if etcdLeader == "worker-1" {
				follower = "worker-2"
			}
			t.Logf("curator leader manager-1, etcd leader %s: demoting %s", etcdLeader, follower)
			etcdClient := mgmtHostPort(t, c.nodes[follower], port+2)
			if !mgmtPortOpen(etcdClient) {
				t.Fatalf("%s: its etcd does not accept connections on %s before the demotion", follower, etcdClient)
			}
			// The follower's etcd credential reaches manager-1's etcd now...
			cred := readEtcdCredential(t, c.nodes[follower].dataDir)
			m1etcd := "https://" + mgmtHostPort(t, c.nodes["manager-1"], port+2)
			if err := etcdGet(cred, m1etcd); err != nil {
				t.Fatalf("%s's etcd certificate does not reach manager-1's etcd before the demotion: %v", follower, err)
			}
			start := time.Now()
			out := mgmtRun(t, c, "node", "demote", follower)
			t.Logf("demote %s took %s: %s", follower, time.Since(start).Round(time.Millisecond), strings.TrimSpace(out))
			// ...and not once it is demoted: the leader revoked it.
			testenv.Eventually(t, 10*time.Second, follower+"'s etcd certificate refused", func() error {
				if err := etcdGet(cred, m1etcd); err == nil {
					return errors.New("still accepted")
				}
				return nil
			})
			mgmtWaitVoters(t, c, ids, "manager-1", etcdLeader)
			n := mgmtWaitNode(t, c, follower, "a ready worker", func(n mgmtNode) error {
				if !slices.Equal(n.Roles, []string{"worker"}) || n.Status != "ready" || n.Demoting {
					return fmt.Errorf("roles %v, status %q, demoting %v", n.Roles, n.Status, n.Demoting)
				}
				return nil
			})
			if n.ManagerStatus != "" && n.ManagerStatus != "none" {
				t.Errorf("%s: manager status %q after demotion, want none", follower, n.ManagerStatus)
			}
			mgmtWaitPortClosed(t, etcdClient, follower+"'s etcd")
			if p := c.nodes[follower].proc; p.exited() {
				t.Fatalf("%s exited after its demotion (%v); want it to run on as a worker", follower, p.err)
			}
		}},
		{"promote past the voter limit is refused", func(t *testing.T) {
			mgmtRun(t, c, "cluster", "update", "--max-voters", "2")
			mgmtRefused(t, c, []string{"node", "promote", follower}, "FailedPrecondition", "past the limit of 2", "--max-voters")
			mgmtRun(t, c, "cluster", "update", "--max-voters", "7")
		}},
		{"demote the etcd leader", func(t *testing.T) {
			// Placement keeps etcd leadership off the curator leader's
			// node, and there is one other voter.
			testenv.Eventually(t, 30*time.Second, etcdLeader+" is etcd leader", func() error {
				info, err := mgmtClusterInfo(t, c)
				if err != nil {
					return err
				}
				if info.EtcdLeader != ids[etcdLeader] {
					return fmt.Errorf("etcd leader is %q", mgmtNameOf(ids, info.EtcdLeader))
				}
				return nil
			})
			start := time.Now()
			out := mgmtRun(t, c, "node", "demote", etcdLeader)
			t.Logf("demote of etcd leader %s took %s: %s", etcdLeader, time.Since(start).Round(time.Millisecond), strings.TrimSpace(out))
			mgmtWaitVoters(t, c, ids, "manager-1")
			testenv.Eventually(t, 10*time.Second, "manager-1 etcd leader", func() error {
				info, err := mgmtClusterInfo(t, c)
				if err != nil {
					return err
				}
				if info.EtcdLeader != ids["manager-1"] {
					return fmt.Errorf("etcd leader is %q", mgmtNameOf(ids, info.EtcdLeader))
				}
				return nil
			})
			mgmtWaitNode(t, c, etcdLeader, "a ready worker", func(n mgmtNode) error {
				if !slices.Equal(n.Roles, []string{"worker"}) || n.Status != "ready" {
					return fmt.Errorf("roles %v, status %q", n.Roles, n.Status)
				}
				return nil
			})
			mgmtWaitPortClosed(t, mgmtHostPort(t, c.nodes[etcdLeader], port+2), etcdLeader+"'s etcd")
		}},
		{"demote the curator leader", func(t *testing.T) {
			// A second voter to hand over to: the follower demoted above,
			// promoted again.
			start := time.Now()
			mgmtRun(t, c, "node", "promote", follower, "--wait")
			t.Logf("promote again of %s --wait took %s", follower, time.Since(start).Round(time.Millisecond))
			mgmtWaitVoters(t, c, ids, "manager-1", follower)

			start = time.Now()
			out := mgmtRun(t, c, "node", "demote", "manager-1")
			t.Logf("demote of curator leader manager-1 took %s: %s", time.Since(start).Round(time.Millisecond), strings.TrimSpace(out))
			if !strings.Contains(out, "resigned") || !strings.Contains(out, "next leader finished") {
				t.Errorf("demote of the curator leader said %q; want it to say the leader resigned and the next one finished", out)
			}
			info := mgmtWaitVoters(t, c, ids, follower)
			if info.Leader != ids[follower] {
				t.Errorf("curator leader is %s after the handoff, want %s (%s), the only voter", mgmtNameOf(ids, info.Leader), follower, ids[follower])
			}
			mgmtWaitNode(t, c, "manager-1", "a ready worker", func(n mgmtNode) error {
				if !slices.Equal(n.Roles, []string{"worker"}) || n.Status != "ready" || n.Demoting {
					return fmt.Errorf("roles %v, status %q, demoting %v", n.Roles, n.Status, n.Demoting)
				}
				return nil
			})
			if m1.proc.exited() {
				t.Errorf("manager-1 exited after its demotion (%v); want it to run on as a worker", m1.proc.err)
			}
			mgmtWaitPortClosed(t, mgmtHostPort(t, m1, port+2), "manager-1's etcd")
			events, err := mgmtEvents(t, c)
			if err != nil {
				t.Fatal(err)
			}
			// The new leader finishes the demotion: its demotion loop
			// ("demote"), or its consensus sync if the member went first
			// ("clear-role").
			if !slices.ContainsFunc(events, func(e mgmtEvent) bool {
				return (e.Action == "demote" || e.Action == "clear-role") && e.NodeID == ids["manager-1"] && e.Leader == ids[follower]
			}) {
				t.Errorf("no event of %s finishing the demotion of manager-1 (%s): %+v", follower, ids["manager-1"], events)
			}
			for _, e := range events {
				if e.Action == "move-etcd-leader" && e.NodeID == ids["manager-1"] && e.Leader == ids[follower] {
					// The placement loop must not hand etcd leadership to a
					// node on its way out: the member would be removed while
					// it leads etcd, stalling writes for seconds.
					t.Errorf("the new leader moved etcd leadership onto manager-1 while it was being demoted: %s", e.Reason)
				}
			}
		}},
	}
	for _, s := range steps {
		if !t.Run(s.name, s.run) {
			return
		}
	}
	t.Logf("all steps in %s", time.Since(began).Round(time.Millisecond))
}

// TestNodeGuardsRemoveLeave starts three managers and two workers, kills a
// manager and a worker, and checks that each guard refuses and changes
// nothing; then removes the dead with node rm, drains, joins a manager-only
// node, and lets nodes leave until the last manager refuses to.
func TestNodeGuardsRemoveLeave(t *testing.T) {
	parallel(t) // its own addresses and dirs
	began := time.Now()
	c := newCluster(t, "127.0.211.")
	m1 := c.build(3, 2)
	managerToken := c.token("manager")
	all := []string{"manager-1", "manager-2", "manager-3", "worker-1", "worker-2"}
	c.waitReady(30*time.Second, all...)
	ids := mgmtIDs(t, c, all...)
	mgmtWaitVoters(t, c, ids, "manager-1", "manager-2", "manager-3")
	t.Logf("cluster of 3 managers and 2 workers up in %s", time.Since(began).Round(time.Millisecond))

	steps := []struct {
		name string
		run  func(t *testing.T)
	}{
		{"guards", func(t *testing.T) {
			info, err := mgmtClusterInfo(t, c)
			if err != nil {
				t.Fatal(err)
			}
			if info.Leader != ids["manager-1"] {
				t.Fatalf("curator leader is %s, want manager-1", mgmtNameOf(ids, info.Leader))
			}
			for _, name := range []string{"manager-3", "worker-1"} {
				p := c.nodes[name].proc
				if err := p.cmd.Process.Kill(); err != nil {
					t.Fatal(err)
				}
				<-p.done
			}
			testenv.Eventually(t, 30*time.Second, "manager-3 and worker-1 down, the others ready", func() error {
				nodes, err := mgmtNodes(t, c)
				if err != nil {
					return err
				}
				for _, n := range nodes {
					want := "ready"
					if n.Name == "manager-3" || n.Name == "worker-1" {
						want = "down"
					}
					if n.Status != want {
						return fmt.Errorf("%s is %q, want %s", n.Name, n.Status, want)
					}
				}
				return nil
			})
			for _, tc := range []struct {
				name string
				args []string
				want []string
			}{
				{"demote of a healthy voter while another is down", []string{"node", "demote", "manager-2"},
					[]string{"FailedPrecondition", "majority", ids["manager-3"]}},
				{"promote of a down node", []string{"node", "promote", "worker-1"},
					[]string{"FailedPrecondition", "not ready"}},
				{"rm of a ready node", []string{"node", "rm", "worker-2"},
					[]string{"FailedPrecondition", "is ready", "--force"}},
				{"rm of a consensus node", []string{"node", "rm", "manager-3"},
					[]string{"FailedPrecondition", "consensus role", "--force"}},
				{"rm of the curator leader's node", []string{"node", "rm", "manager-1", "--force"},
					[]string{"FailedPrecondition", "curator leader"}},
				{"max voters below the members", []string{"cluster", "update", "--max-voters", "1"},
					[]string{"FailedPrecondition", "3 consensus members"}},
				{"bad availability", []string{"node", "update", "worker-2", "--availability", "bogus"},
					[]string{`"bogus"`, "active, pause, drain"}},
				{"promote of an unknown node", []string{"node", "promote", "no-such-node"},
					[]string{"NotFound", "no-such-node"}},
			} {
				t.Run(tc.name, func(t *testing.T) { mgmtRefused(t, c, tc.args, tc.want...) })
			}
		}},
		{"promote and demote while a voter is down", func(t *testing.T) {
			// manager-3 is still dead. A fourth voter leaves 3 of 4
			// healthy, a majority; taking it out again leaves 2 of 3.
			mgmtRun(t, c, "node", "promote", "worker-2", "--wait")
			mgmtWaitVoters(t, c, ids, "manager-1", "manager-2", "manager-3", "worker-2")
			mgmtRun(t, c, "node", "demote", "worker-2")
			mgmtWaitVoters(t, c, ids, "manager-1", "manager-2", "manager-3")
			mgmtWaitNode(t, c, "worker-2", "a ready worker again", func(n mgmtNode) error {
				if slices.Contains(n.Roles, "consensus") || n.Status != "ready" {
					return fmt.Errorf("roles %v, status %s", n.Roles, n.Status)
				}
				return nil
			})
		}},
		{"rm --force of the dead manager", func(t *testing.T) {
			mgmtRun(t, c, "node", "rm", "manager-3", "--force")
			mgmtWaitGone(t, c, "manager-3")
			info := mgmtWaitVoters(t, c, ids, "manager-1", "manager-2")
			for _, w := range info.Warnings {
				if strings.Contains(w, "no known node") {
					t.Errorf("cluster info warns %q after the dead manager was removed", w)
				}
			}
			// A dead worker without a role goes without --force.
			mgmtRun(t, c, "node", "rm", "worker-1")
			mgmtWaitGone(t, c, "worker-1")
		}},
		{"drain", func(t *testing.T) {
			mgmtRun(t, c, "node", "update", "worker-2", "--availability", "drain")
			mgmtWaitNode(t, c, "worker-2", "drained", func(n mgmtNode) error {
				if n.Availability != "drain" {
					return fmt.Errorf("availability %q", n.Availability)
				}
				return nil
			})

			// A manager-only node: drain from the start.
			m4 := c.agent("manager-4", "join", "--listen", c.addr(15), "--name", "manager-4",
				"--token", managerToken, "--manager", m1.listen, "--availability", "drain")
			m4.listen = c.addr(15)
			seen := 0
			testenv.Eventually(t, 60*time.Second, "manager-4 ready", func() error {
				if p := c.nodes["manager-4"].proc; p.exited() {
					t.Fatalf("manager-4 exited: %v", p.err)
				}
				nodes, err := mgmtNodes(t, c)
				if err != nil {
					return err
				}
				n, ok := mgmtFind(nodes, "manager-4")
				if !ok {
					return errors.New("not listed yet")
				}
				seen++
				if n.Availability != "drain" {
					t.Fatalf("manager-4 listed with availability %q (listing %d), want drain from the first", n.Availability, seen)
				}
				if n.Status != "ready" {
					return fmt.Errorf("status %q", n.Status)
				}
				return nil
			})
			t.Logf("manager-4 listed %d times before ready, drain each time", seen)
			ids["manager-4"] = mgmtIDs(t, c, "manager-4")["manager-4"]
			mgmtWaitVoters(t, c, ids, "manager-1", "manager-2", "manager-4")
		}},
		{"leave of a follower manager", func(t *testing.T) {
			start := time.Now()
			out, _, err := mgmtLeave(t, c, "manager-2", false)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("agent leave manager-2 took %s: %s", time.Since(start).Round(time.Millisecond), strings.TrimSpace(out))
			mgmtAssertLeft(t, c, "manager-2")
			mgmtWaitGone(t, c, "manager-2")
			mgmtWaitVoters(t, c, ids, "manager-1", "manager-4")
		}},
		{"leave of the curator leader", func(t *testing.T) {
			start := time.Now()
			out, _, err := mgmtLeave(t, c, "manager-1", false)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("agent leave manager-1 (the curator leader) took %s: %s", time.Since(start).Round(time.Millisecond), strings.TrimSpace(out))
			mgmtAssertLeft(t, c, "manager-1")
			// The admin config names manager-1 alone; the CLI finds
			// manager-4 through its manager cache.
			mgmtWaitGone(t, c, "manager-1")
			info := mgmtWaitVoters(t, c, ids, "manager-4")
			if info.Leader != ids["manager-4"] {
				t.Errorf("curator leader is %s, want manager-4", mgmtNameOf(ids, info.Leader))
			}
		}},
		{"a worker outlives every manager it knew", func(t *testing.T) {
			// worker-2 joined through manager-1; manager-1 and manager-2
			// are gone. Its manager list on disk follows the cluster, so it
			// restarts from disk and reaches manager-4.
			w := c.nodes["worker-2"]
			testenv.Eventually(t, 20*time.Second, "worker-2's manager list follows the cluster", func() error {
				data, err := os.ReadFile(filepath.Join(w.dataDir, "managers.json"))
				if err != nil {
					return err
				}
				if !strings.Contains(string(data), c.nodes["manager-4"].listen) || strings.Contains(string(data), m1.listen) {
					return fmt.Errorf("worker-2's managers.json is %s: want manager-4 (%s) and not manager-1 (%s)", data, c.nodes["manager-4"].listen, m1.listen)
				}
				return nil
			})
			if err := w.proc.cmd.Process.Signal(syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
			if err := w.proc.wait(t, 20*time.Second); err != nil {
				t.Fatalf("worker-2 after SIGTERM: %v", err)
			}
			restarted := time.Now()
			c.agent("worker-2", "run")
			mgmtWaitNode(t, c, "worker-2", "ready with a heartbeat after its restart", func(n mgmtNode) error {
				if n.Status != "ready" || n.LastHeartbeat == nil || n.LastHeartbeat.Before(restarted) {
					return fmt.Errorf("status %s, last heartbeat %v", n.Status, n.LastHeartbeat)
				}
				return nil
			})
		}},
		{"leave of a worker", func(t *testing.T) {
			out, _, err := mgmtLeave(t, c, "worker-2", false)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("agent leave worker-2: %s", strings.TrimSpace(out))
			mgmtAssertLeft(t, c, "worker-2")
			mgmtWaitGone(t, c, "worker-2")
		}},
		{"leave of the last manager", func(t *testing.T) {
			before := mgmtSnap(t, c)
			_, stderr, err := mgmtLeave(t, c, "manager-4", false)
			if err == nil {
				t.Fatal("agent leave of the last manager without --force succeeded")
			}
			if !strings.Contains(stderr, "destroys the cluster") || !strings.Contains(stderr, "--force") {
				t.Errorf("stderr %q does not say that leaving destroys the cluster, and that --force does it anyway", strings.TrimSpace(stderr))
			}
			if p := c.nodes["manager-4"].proc; p.exited() {
				t.Fatalf("manager-4 exited after a refused leave: %v", p.err)
			}
			if diff := cmp.Diff(before, mgmtSnap(t, c)); diff != "" {
				t.Errorf("a refused leave changed the cluster (-before +after):\n%s", diff)
			}
			if _, _, err := mgmtLeave(t, c, "manager-4", true); err != nil {
				t.Fatal(err)
			}
			mgmtAssertLeft(t, c, "manager-4")
		}},
	}
	for _, s := range steps {
		if !t.Run(s.name, s.run) {
			return
		}
	}
	t.Logf("all steps in %s", time.Since(began).Round(time.Millisecond))
}
