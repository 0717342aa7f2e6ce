package e2e

import (
	"fmt"
	"maps"
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

// startDevDomains starts `curator dev` in dir with args, and returns its
// client config once its managers are up, and what stops it (SIGTERM,
// which stops its nodes and keeps them).
func startDevDomains(t *testing.T, dir, name string, args ...string) (config string, stop func()) {
	t.Helper()
	var stdout syncBuffer
	dev := start(t, name, filepath.Join(dir, name+".log"), &stdout, append([]string{"dev", "--dir", dir}, args...)...)
	stop = func() {
		_ = dev.cmd.Process.Signal(syscall.SIGTERM)
		<-dev.done
	}
	t.Cleanup(func() {
		stop()
		stopDevNodes(t, dir)
	})
	waitDevUp(t, dev, &stdout, 2*time.Minute)
	return filepath.Join(dir, "config.yaml"), stop
}

// wantSpread checks that the cluster's three managers are one in each of
// domains a, b and c, each at an address that starts with its domain's
// prefix (prefixes), as node ls and group ls say.
func wantSpread(t *testing.T, config string, prefixes map[string]string) {
	t.Helper()
	if got := managersByDomain(t, config, 3); !maps.Equal(got, map[string]int{"a": 1, "b": 1, "c": 1}) {
		t.Errorf("managers by domain %v, want one in each of a, b, c", got)
	}
	nodes, err := nodeLs(t, config)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes {
		if p, ok := prefixes[n.Domain]; !ok || !strings.HasPrefix(n.Address, p) {
			t.Errorf("node %s at %s in domain %q, whose addresses start with %q", n.Name, n.Address, n.Domain, p)
		}
	}
	testenv.Eventually(t, 30*time.Second, "group ls: the managers' machines one in each domain", func() error {
		groups, err := groupLs(t, config)
		if err != nil {
			return err
		}
		i := slices.IndexFunc(groups, func(g groupJSON) bool { return g.Name == "managers" })
		if i < 0 {
			return fmt.Errorf("group ls has no managers: %+v", groups)
		}
		if diff := cmp.Diff(map[string]int{"a": 1, "b": 1, "c": 1}, groups[i].DomainMachines); diff != "" {
			return fmt.Errorf("managers' domain_machines (-want +got):\n%s", diff)
		}
		return nil
	})
	if w := domainsWarning(t, config); len(w) != 0 {
		t.Errorf("cluster info with a manager in each domain warns %q", w)
	}
}

// managersByDomain waits until the cluster's managers are ready, count
// of them, each with its domain, and returns how many are in each, as
// node ls says.
func managersByDomain(t *testing.T, config string, count int) map[string]int {
	t.Helper()
	var by map[string]int
	testenv.Eventually(t, time.Minute, fmt.Sprintf("%d ready managers", count), func() error {
		nodes, err := nodeLs(t, config)
		if err != nil {
			return err
		}
		by = map[string]int{}
		for _, n := range nodes {
			if n.Group == "managers" && n.Status == "ready" {
				by[n.Domain]++
			}
		}
		if n := len(nodes); n != count || sum(by) != count {
			return fmt.Errorf("%d ready managers of %d nodes, by domain %v", sum(by), n, by)
		}
		if by[""] > 0 {
			// The group loop records a node's domain once its machine
			// is listed: a pass after the node joins.
			return fmt.Errorf("%d ready managers of no domain yet", by[""])
		}
		return nil
	})
	return by
}

func sum(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

// domainsWarning returns cluster info's warnings that losing a domain
// loses the quorum.
func domainsWarning(t *testing.T, config string) []string {
	t.Helper()
	info, err := clusterInfo(t, config)
	if err != nil {
		t.Fatal(err)
	}
	return slices.DeleteFunc(slices.Clone(info.Warnings), func(w string) bool { return !strings.Contains(w, "loses the quorum") })
}

// TestProcessDomainsSpread: a process provider's address ranges are
// failure domains. `curator dev --domains 3` gives its managers group
// three ranges; its three managers go one to each (node ls names each
// node's domain, group ls counts the group's machines by domain), and
// cluster info does not warn of the domains. A group file whose ranges
// overlap, or that names a domain of no range, is refused and changes
// nothing. The cluster stopped and started again (every process new,
// the leader's among them) knows each machine's domain as before.
func TestProcessDomainsSpread(t *testing.T) {
	parallel(t) // its own addresses and dirs
	dir := t.TempDir()
	config, stop := startDevDomains(t, dir, "dev", "--managers", "3", "--workers", "0", "--domains", "3", "--addresses", "127.0.181.10-127.0.181.39")
	// dev splits the range into a .10-.19, b .20-.29, c .30-.39.
	prefixes := map[string]string{"a": "127.0.181.1", "b": "127.0.181.2", "c": "127.0.181.3"}
	wantSpread(t, config, prefixes)

	// Bad ranges: refused, nothing changed.
	before, _, err := cli(t, "--config", config, "group", "describe", "managers")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(before, "a: 127.0.181.10-127.0.181.19") {
		t.Errorf("group describe managers does not show domain a's range:\n%s", before)
	}
	for _, tc := range []struct{ name, old, new, want string }{
		{"overlap", "b: 127.0.181.20-127.0.181.29", "b: 127.0.181.15-127.0.181.29", "provider.process.domains.b: 127.0.181.15-127.0.181.29 overlaps domain a's 127.0.181.10-127.0.181.19"},
		{"unknown domain", "domains: [a, b, c]", "domains: [a, b, z]", `domains: "z" is not one of provider.process.domains (a, b, c)`},
	} {
		bad := strings.Replace(before, tc.old, tc.new, 1)
		if bad == before {
			t.Fatalf("%s: group describe has no %q:\n%s", tc.name, tc.old, before)
		}
		path := filepath.Join(t.TempDir(), "managers.yaml")
		if err := os.WriteFile(path, []byte(bad), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, stderr, err := cli(t, "--config", config, "group", "commit", path); err == nil || !strings.Contains(stderr, tc.want) {
			t.Errorf("%s: group commit: %v, %q; want a refusal with %q", tc.name, err, stderr, tc.want)
		}
	}
	if after, _, err := cli(t, "--config", config, "group", "describe", "managers"); err != nil || after != before {
		t.Errorf("refused commits changed the group (%v):\n%s\nwas:\n%s", err, after, before)
	}

	// Stopped and started again, with no flag but the dir.
	stop()
	config, _ = startDevDomains(t, dir, "dev-again")
	if said := readFile(t, filepath.Join(dir, "dev-again.log")); !strings.Contains(said, "--domains 3") {
		t.Errorf("dev started again does not say the cluster was made with --domains 3:\n%s", said)
	}
	wantSpread(t, config, prefixes)
}

// TestProcessDomainsWarning: three managers over two domains cannot
// spread so that losing one keeps the quorum: cluster info says so,
// naming the domain of two (either: the third manager's placement breaks
// the tie by the consensus members the domains hold as it is made).
func TestProcessDomainsWarning(t *testing.T) {
	parallel(t) // its own addresses and dirs
	config, _ := startDevDomains(t, t.TempDir(), "dev", "--managers", "3", "--workers", "0", "--domains", "2", "--addresses", "127.0.182.10-127.0.182.29")
	got := managersByDomain(t, config, 3)
	if len(got) != 2 || got["a"]+got["b"] != 3 || got["a"] == 0 || got["b"] == 0 {
		t.Fatalf("managers by domain %v, want two in one of a and b, one in the other", got)
	}
	most := "a"
	if got["b"] == 2 {
		most = "b"
	}
	w := domainsWarning(t, config)
	if len(w) != 1 || !strings.Contains(w[0], "domain "+most+" holds 2 of the 3 voters: losing it loses the quorum") {
		t.Errorf("cluster info warns %q, want that domain %s holds 2 of the 3 voters", w, most)
	}
}
