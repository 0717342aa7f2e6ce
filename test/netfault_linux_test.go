package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/curatorproject/curator/internal/netfault"
)

// Partitions between node processes on one host, as a real network makes
// them: packets are dropped silently (no RST, no ICMP), so a node learns of
// a partition only from its own timeouts, and a TCP connection across it
// stays open, retransmitting, until something notices.
//
// Every node runs under a uid of its own, and an nftables table that
// belongs to one test drops, on the output hook, what one node's uid sends
// to another node's address: `meta skuid A ip daddr B drop`. Loopback
// traffic passes the output hook once, at its sender, so a rule for A→B
// and one for B→A cut a link both ways, and one of them alone is one-way
// loss. A node's traffic to itself (its agent to its own curator, its
// curator to its own etcd) is never dropped.
//
// The test process and the operator CLI it runs are root and never
// filtered: the test sees every node, as an operator on a separate
// management network would.

// netFaultTablePrefix starts the name of every table these tests create;
// the rest is the test binary's pid and the test's subnet.
const netFaultTablePrefix = "curator_test_"

// netFault is one test's nftables table (internal/netfault).
type netFault struct {
	t   *testing.T
	tab *netfault.Table
}

// requireNetFault skips t unless this process can run nodes under other
// uids and drop their packets with nft.
func requireNetFault(t *testing.T) {
	t.Helper()
	if err := netfault.Available(); err != nil {
		t.Skipf("partition tests: each node runs under a uid of its own: %v", err)
	}
}

// newNetFault creates t's table, with an empty output chain, and deletes it
// when t ends, whatever happened. It skips t if nft cannot create a table
// (no nf_tables in the kernel, or no CAP_NET_ADMIN).
func newNetFault(t *testing.T, subnet string) *netFault {
	t.Helper()
	requireNetFault(t)
	tab, stale, err := netfault.New(netFaultTablePrefix, strings.ReplaceAll(strings.Trim(subnet, "."), ".", "_"))
	for _, name := range stale {
		t.Logf("deleted the nft table %s of a test process that is gone", name)
	}
	if err != nil {
		t.Skipf("partition tests need nft to create a table: %v", err)
	}
	f := &netFault{t: t, tab: tab}
	t.Cleanup(func() {
		if t.Failed() && tab.Dropping() {
			t.Logf("nft ruleset of %s when the test ended:\n%s", tab.Name(), tab.Ruleset())
		}
		if err := tab.Delete(); err != nil {
			t.Error(err)
		}
	})
	return f
}

// endpoint is what a rule needs of a node: the uid its processes run
// under and the address it listens on.
type endpoint struct {
	name string
	uid  uint32
	ip   string
}

// drop drops everything from sends to to: one-way loss.
func (f *netFault) drop(from, to endpoint) {
	f.t.Helper()
	if err := f.tab.Drop(netfault.FromUID(from.uid)+" "+netfault.ToIP(to.ip), from.name+" -> "+to.name); err != nil {
		f.t.Fatal(err)
	}
}

// cut drops everything between a and b, both ways.
func (f *netFault) cut(a, b endpoint) {
	f.t.Helper()
	f.drop(a, b)
	f.drop(b, a)
}

// heal removes every drop and returns how many packets each one dropped,
// by its comment. It fails the test if none dropped anything: the
// partition was not real, and neither is anything the test saw.
func (f *netFault) heal() map[string]int {
	f.t.Helper()
	ruleset := f.tab.Ruleset()
	partitioned := f.tab.Dropping()
	dropped, total, err := f.tab.Heal()
	if err != nil {
		f.t.Fatal(err)
	}
	if partitioned && total == 0 {
		f.t.Fatalf("the partition dropped no packet: its rules did not match the nodes' traffic:\n%s", ruleset)
	}
	return dropped
}

// count counts, for d, the packets each of from sends to each of to (to
// its gRPC port), and returns the counts by from's name and to's name.
// Nothing is dropped.
func (f *netFault) count(from, to []endpoint, d time.Duration) map[string]map[string]int {
	f.t.Helper()
	for _, a := range from {
		for _, b := range to {
			match := fmt.Sprintf("%s %s tcp dport %d", netfault.FromUID(a.uid), netfault.ToIP(b.ip), port)
			if err := f.tab.Counter(match, a.name+" -> "+b.name); err != nil {
				f.t.Fatal(err)
			}
		}
	}
	time.Sleep(d)
	byComment, err := f.tab.Counts()
	if err != nil {
		f.t.Fatal(err)
	}
	counts := map[string]map[string]int{}
	for comment, n := range byComment {
		a, b, _ := strings.Cut(comment, " -> ")
		if counts[a] == nil {
			counts[a] = map[string]int{}
		}
		counts[a][b] += n
	}
	return counts
}

// uidBase is the first of the uids the nodes of a test run under: node k
// (in the order they start) of subnet 127.0.N. runs as uidBase + N*1000 + k,
// so no two tests' nodes share a uid, and a uid says whose node it is.
const uidBase = 2_000_000

// netCluster is a cluster whose nodes run under uids of their own, with a
// table to partition them.
type netCluster struct {
	*cluster
	net  *netFault
	uids map[string]uint32
}

// binaryShared makes the folder of the binary TestMain built open to the
// nodes' uids (os.MkdirTemp makes it 0700).
var binaryShared sync.Once

// newNetCluster is newCluster for partition tests. It skips t if it cannot
// make partitions.
func newNetCluster(t *testing.T, subnet string) *netCluster {
	t.Helper()
	f := newNetFault(t, subnet)
	octet, err := strconv.Atoi(strings.Split(strings.Trim(subnet, "."), ".")[2])
	if err != nil {
		t.Fatalf("subnet %q: %v", subnet, err)
	}
	var shareErr error
	binaryShared.Do(func() { shareErr = os.Chmod(filepath.Dir(binary), 0o711) })
	if shareErr != nil {
		t.Fatal(shareErr)
	}
	c := &netCluster{cluster: newCluster(t, subnet), net: f, uids: map[string]uint32{}}
	// t.TempDir makes its folders 0700: the nodes must pass through them
	// to their data dirs.
	for _, d := range []string{filepath.Dir(c.dir), c.dir} {
		if err := os.Chmod(d, 0o711); err != nil {
			t.Fatal(err)
		}
	}
	c.agentAttr = func(n *node) *syscall.SysProcAttr {
		uid, ok := c.uids[n.name]
		if !ok {
			uid = uint32(uidBase + octet*1000 + len(c.uids) + 1)
			c.uids[n.name] = uid
		}
		if err := os.MkdirAll(n.dataDir, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(n.dataDir, int(uid), int(uid)); err != nil {
			t.Fatal(err)
		}
		attr := nodeProcAttr()
		// No supplementary groups: root's would let a node read what it
		// should not.
		attr.Credential = &syscall.Credential{Uid: uid, Gid: uid}
		return attr
	}
	return c
}

// endpoint returns what a rule needs of the node name.
func (c *netCluster) endpoint(name string) endpoint {
	c.t.Helper()
	n, ok := c.nodes[name]
	if !ok || n.listen == "" {
		c.t.Fatalf("no node %s", name)
	}
	ip, _, _ := strings.Cut(n.listen, ":")
	return endpoint{name: name, uid: c.uids[name], ip: ip}
}

// cut cuts a off from every one of others, both ways.
func (c *netCluster) cut(a string, others ...string) {
	c.t.Helper()
	for _, b := range others {
		c.net.cut(c.endpoint(a), c.endpoint(b))
	}
	c.t.Logf("partition: %s cut off from %s", a, strings.Join(others, ", "))
}

// dropFrom drops what from sends to every one of to; what they send to
// from still arrives.
func (c *netCluster) dropFrom(from string, to ...string) {
	c.t.Helper()
	for _, b := range to {
		c.net.drop(c.endpoint(from), c.endpoint(b))
	}
	c.t.Logf("partition: everything %s sends to %s is lost (one way)", from, strings.Join(to, ", "))
}

// heartbeatCounts counts, for two seconds, the packets each of nodes
// sends to each of managers' gRPC port. An agent's heartbeat stream
// carries a heartbeat every interval, while its other streams (its watch)
// are quiet, so the busiest manager is where its heartbeats go.
func (c *netCluster) heartbeatCounts(nodes, managers []string) map[string]map[string]int {
	c.t.Helper()
	var from, to []endpoint
	for _, n := range nodes {
		from = append(from, c.endpoint(n))
	}
	for _, m := range managers {
		to = append(to, c.endpoint(m))
	}
	counts := c.net.count(from, to, 2*time.Second)
	c.t.Logf("packets sent to each manager in 2s: %v", counts)
	return counts
}

// heal ends every partition and logs what each rule dropped.
func (c *netCluster) heal() {
	c.t.Helper()
	dropped := c.net.heal()
	var parts []string
	for rule, n := range dropped {
		parts = append(parts, fmt.Sprintf("%s: %d", rule, n))
	}
	c.t.Logf("healed; packets dropped by rule: %s", strings.Join(parts, "; "))
}
