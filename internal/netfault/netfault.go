// Package netfault makes partitions between processes of one host, as a
// real network makes them: an nftables table whose rules drop packets
// silently (no RST, no ICMP) on the output hook, so that a process learns
// of a partition only from its own timeouts, and a TCP connection across
// it stays open, retransmitting, until something notices. The end-to-end
// tests (each node under a uid of its own: FromUID) and the chaos suite
// (a manager's process moved into a cgroup of its own: Cgroup) share it.
//
// Loopback traffic passes the output hook once, at its sender: a rule
// for A→B and one for B→A cut a link both ways, one of them alone is
// one-way loss. It needs root and nft (Available).
package netfault

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// Available says why this process cannot make partitions (nil: it
// can): it must be root, with nft installed.
func Available() error {
	if os.Geteuid() != 0 {
		return errors.New("partitions need root: nft drops the nodes' packets")
	}
	if _, err := exec.LookPath("nft"); err != nil {
		return fmt.Errorf("partitions need nft (nftables) to drop packets between nodes: %w", err)
	}
	return nil
}

// Table is one test's nftables table: a chain `output` of drops and a
// chain `probe` that only counts (Count), each rule with a counter and a
// comment that names it.
type Table struct {
	name string // "inet NAME"
	mu   sync.Mutex
	// rules are the drops in force, by comment, in the order added.
	rules []string
}

// New creates the table prefix+PID_+suffix, with empty chains, after
// deleting the tables of prefix whose process is gone (a test binary
// that died before its clean-up): no partition outlives its test. The
// caller deletes it (Delete). stale lists the tables deleted.
func New(prefix, suffix string) (t *Table, stale []string, err error) {
	if err := Available(); err != nil {
		return nil, nil, err
	}
	stale = removeStale(prefix)
	name := prefix + strconv.Itoa(os.Getpid()) + "_" + suffix
	t = &Table{name: "inet " + name}
	script := fmt.Sprintf("table %s {\n"+
		"\tchain output {\n\t\ttype filter hook output priority filter; policy accept;\n\t}\n"+
		"\tchain probe {\n\t\ttype filter hook output priority filter - 1; policy accept;\n\t}\n"+
		"}\n", t.name)
	if out, err := nftInput(script, "-f", "-"); err != nil {
		return nil, stale, fmt.Errorf("nft: create table %s (is nf_tables in the kernel, and CAP_NET_ADMIN here?): %w: %s", t.name, err, out)
	}
	return t, stale, nil
}

// Name is the table's name, as nft takes it ("inet NAME").
func (t *Table) Name() string { return t.name }

// Drop adds a rule that drops what match matches (an nft expression,
// like FromUID(a)+" "+ToIP(b)), named comment.
func (t *Table) Drop(match, comment string) error {
	script := fmt.Sprintf("add rule %s output %s counter drop comment %q\n", t.name, match, comment)
	if out, err := nftInput(script, "-f", "-"); err != nil {
		return fmt.Errorf("nft: drop %s: %w: %s", comment, err, out)
	}
	t.mu.Lock()
	t.rules = append(t.rules, comment)
	t.mu.Unlock()
	return nil
}

// Pass adds a rule that lets what match matches through, past the
// drops added after it, named comment.
func (t *Table) Pass(match, comment string) error {
	script := fmt.Sprintf("add rule %s output %s accept comment %q\n", t.name, match, comment)
	if out, err := nftInput(script, "-f", "-"); err != nil {
		return fmt.Errorf("nft: pass %s: %w: %s", comment, err, out)
	}
	return nil
}

// Dropping says whether a drop is in force.
func (t *Table) Dropping() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.rules) > 0
}

var dropCounts = regexp.MustCompile(`counter packets (\d+) bytes \d+ drop comment "([^"]*)"`)

// Heal removes every drop and returns how many packets each one dropped,
// by its comment, and their total.
func (t *Table) Heal() (dropped map[string]int, total int, err error) {
	ruleset, err := nft("list", "table", t.name)
	if err != nil {
		return nil, 0, fmt.Errorf("nft: list %s: %w: %s", t.name, err, ruleset)
	}
	if out, err := nft("flush", "chain", t.name, "output"); err != nil {
		return nil, 0, fmt.Errorf("nft: flush %s output: %w: %s", t.name, err, out)
	}
	t.mu.Lock()
	rules := t.rules
	t.rules = nil
	t.mu.Unlock()
	dropped = map[string]int{}
	for _, m := range dropCounts.FindAllStringSubmatch(ruleset, -1) {
		n, _ := strconv.Atoi(m[1])
		dropped[m[2]] += n
	}
	for _, r := range rules {
		total += dropped[r]
	}
	return dropped, total, nil
}

// Counter adds a rule to the probe chain that counts what match
// matches, named comment; Counts reads them.
func (t *Table) Counter(match, comment string) error {
	script := fmt.Sprintf("add rule %s probe %s counter comment %q\n", t.name, match, comment)
	if out, err := nftInput(script, "-f", "-"); err != nil {
		return fmt.Errorf("nft: count %s: %w: %s", comment, err, out)
	}
	return nil
}

var probeCounts = regexp.MustCompile(`counter packets (\d+) bytes \d+ comment "([^"]*)"`)

// Counts returns what each counter counted, by comment, and removes
// them.
func (t *Table) Counts() (map[string]int, error) {
	out, err := nft("list", "chain", t.name, "probe")
	if err != nil {
		return nil, fmt.Errorf("nft: list %s probe: %w: %s", t.name, err, out)
	}
	if out, err := nft("flush", "chain", t.name, "probe"); err != nil {
		return nil, fmt.Errorf("nft: flush %s probe: %w: %s", t.name, err, out)
	}
	counts := map[string]int{}
	for _, m := range probeCounts.FindAllStringSubmatch(out, -1) {
		n, _ := strconv.Atoi(m[1])
		counts[m[2]] += n
	}
	return counts, nil
}

// Ruleset is the table as nft lists it, with its counters.
func (t *Table) Ruleset() string {
	out, err := nft("list", "table", t.name)
	if err != nil {
		return fmt.Sprintf("(nft list table %s: %v: %s)", t.name, err, out)
	}
	return out
}

// Delete deletes the table, and with it every drop.
func (t *Table) Delete() error {
	if out, err := nft("delete", "table", t.name); err != nil {
		return fmt.Errorf("nft: delete table %s: %w: %s", t.name, err, out)
	}
	return nil
}

// FromUID matches what a process of uid sends.
func FromUID(uid uint32) string { return fmt.Sprintf("meta skuid %d", uid) }

// ToIP matches what is sent to ip.
func ToIP(ip string) string { return "ip daddr " + ip }

// removeStale deletes the tables of prefix whose process is gone, and
// returns their names.
func removeStale(prefix string) []string {
	out, err := nft("list", "tables", "inet")
	if err != nil {
		return nil
	}
	var gone []string
	re := regexp.MustCompile(`table inet (` + regexp.QuoteMeta(prefix) + `(\d+)_\S+)`)
	for _, m := range re.FindAllStringSubmatch(out, -1) {
		pid, _ := strconv.Atoi(m[2])
		if pid == os.Getpid() || syscall.Kill(pid, 0) != syscall.ESRCH {
			continue
		}
		if _, err := nft("delete", "table", "inet", m[1]); err == nil {
			gone = append(gone, m[1])
		}
	}
	return gone
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
