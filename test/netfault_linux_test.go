package e2e

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
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

// netFault is one test's nftables table.
type netFault struct {
	t     *testing.T
	table string // "inet NAME"
	mu    sync.Mutex
	// rules are the drops in force, by comment ("manager-1 -> manager-2"),
	// in the order they were added.
	rules []string
}

// requireNetFault skips t unless this process can run nodes under other
// uids and drop their packets with nft.
func requireNetFault(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("partition tests need root: each node runs under a uid of its own and nft drops its packets")
	}
	if _, err := exec.LookPath("nft"); err != nil {
		t.Skipf("partition tests need nft (nftables) to drop packets between nodes: %v", err)
	}
}

// newNetFault creates t's table, with an empty output chain, and deletes it
// when t ends, whatever happened. It skips t if nft cannot create a table
// (no nf_tables in the kernel, or no CAP_NET_ADMIN).
func newNetFault(t *testing.T, subnet string) *netFault {
	t.Helper()
	requireNetFault(t)
	removeStaleNetFaultTables(t)
	name := netFaultTablePrefix + strconv.Itoa(os.Getpid()) + "_" + strings.ReplaceAll(strings.Trim(subnet, "."), ".", "_")
	f := &netFault{t: t, table: "inet " + name}
	// output holds the drops; probe only counts (see count).
	script := fmt.Sprintf("table %s {\n"+
		"\tchain output {\n\t\ttype filter hook output priority filter; policy accept;\n\t}\n"+
		"\tchain probe {\n\t\ttype filter hook output priority filter - 1; policy accept;\n\t}\n"+
		"}\n", f.table)
	if out, err := nftInput(script, "-f", "-"); err != nil {
		t.Skipf("partition tests need nft to create a table: %v: %s", err, out)
	}
	t.Cleanup(func() {
		f.mu.Lock()
		partitioned := len(f.rules) > 0
		f.mu.Unlock()
		if t.Failed() && partitioned {
			t.Logf("nft ruleset of %s when the test ended:\n%s", f.table, f.ruleset())
		}
		if out, err := nft("delete", "table", f.table); err != nil {
			t.Errorf("delete nft table %s: %v: %s", f.table, err, out)
		}
	})
	return f
}

// nft runs nft with args and returns what it printed.
func nft(args ...string) (string, error) {
	return nftInput("", args...)
}

// nftInput is nft with input on its stdin (for `nft -f -`).
func nftInput(input string, args ...string) (string, error) {
	cmd := exec.Command("nft", args...)
	cmd.Stdin = strings.NewReader(input)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return strings.TrimSpace(out.String()), err
}

// removeStaleNetFaultTables deletes the tables of test binaries that died
// before their cleanup ran, so that no partition outlives its test.
func removeStaleNetFaultTables(t *testing.T) {
	t.Helper()
	out, err := nft("list", "tables", "inet")
	if err != nil {
		return
	}
	re := regexp.MustCompile(`table inet (` + netFaultTablePrefix + `(\d+)_\S+)`)
	for _, m := range re.FindAllStringSubmatch(out, -1) {
		pid, _ := strconv.Atoi(m[2])
		if pid == os.Getpid() || syscall.Kill(pid, 0) != syscall.ESRCH {
			continue
		}
		if out, err := nft("delete", "table", "inet", m[1]); err != nil {
			t.Logf("could not delete the stale nft table %s: %v: %s", m[1], err, out)
		} else {
			t.Logf("deleted the nft table %s of test process %d, which is gone", m[1], pid)
		}
	}
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
	comment := from.name + " -> " + to.name
	script := fmt.Sprintf("add rule %s output meta skuid %d ip daddr %s counter drop comment %q\n",
		f.table, from.uid, to.ip, comment)
	if out, err := nftInput(script, "-f", "-"); err != nil {
		f.t.Fatalf("nft: drop %s: %v: %s", comment, err, out)
	}
	f.mu.Lock()
	f.rules = append(f.rules, comment)
	f.mu.Unlock()
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
	ruleset := f.ruleset()
	if out, err := nft("flush", "chain", f.table, "output"); err != nil {
		f.t.Fatalf("nft: flush %s output: %v: %s", f.table, err, out)
	}
	f.mu.Lock()
	rules := f.rules
	f.rules = nil
	f.mu.Unlock()
	dropped := map[string]int{}
	re := regexp.MustCompile(`counter packets (\d+) bytes \d+ drop comment "([^"]*)"`)
	for _, m := range re.FindAllStringSubmatch(ruleset, -1) {
		n, _ := strconv.Atoi(m[1])
		dropped[m[2]] += n
	}
	total := 0
	for _, r := range rules {
		total += dropped[r]
	}
	if len(rules) > 0 && total == 0 {
		f.t.Fatalf("the partition dropped no packet: its rules did not match the nodes' traffic:\n%s", ruleset)
	}
	return dropped
}

// count counts, for d, the packets each of from sends to each of to (to
// its gRPC port), and returns the counts by from's name and to's name.
// Nothing is dropped.
func (f *netFault) count(from, to []endpoint, d time.Duration) map[string]map[string]int {
	f.t.Helper()
	var script strings.Builder
	for _, a := range from {
		for _, b := range to {
			fmt.Fprintf(&script, "add rule %s probe meta skuid %d ip daddr %s tcp dport %d counter comment %q\n",
				f.table, a.uid, b.ip, port, a.name+" -> "+b.name)
		}
	}
	if out, err := nftInput(script.String(), "-f", "-"); err != nil {
		f.t.Fatalf("nft: add counters: %v: %s", err, out)
	}
	time.Sleep(d)
	out, err := nft("list", "chain", f.table, "probe")
	if err != nil {
		f.t.Fatalf("nft: list %s probe: %v: %s", f.table, err, out)
	}
	if out, err := nft("flush", "chain", f.table, "probe"); err != nil {
		f.t.Fatalf("nft: flush %s probe: %v: %s", f.table, err, out)
	}
	counts := map[string]map[string]int{}
	re := regexp.MustCompile(`counter packets (\d+) bytes \d+ comment "([^"]*) -> ([^"]*)"`)
	for _, m := range re.FindAllStringSubmatch(out, -1) {
		n, _ := strconv.Atoi(m[1])
		if counts[m[2]] == nil {
			counts[m[2]] = map[string]int{}
		}
		counts[m[2]][m[3]] += n
	}
	return counts
}

// ruleset is the table as nft lists it, with its counters.
func (f *netFault) ruleset() string {
	out, err := nft("list", "table", f.table)
	if err != nil {
		return fmt.Sprintf("(nft list table %s: %v: %s)", f.table, err, out)
	}
	return out
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
