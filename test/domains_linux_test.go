package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/curatorproject/curator/curator/spec"
	"github.com/curatorproject/curator/internal/swarmtest"
	"github.com/curatorproject/curator/internal/testenv"
	"github.com/curatorproject/curator/provider"
	"github.com/curatorproject/curator/provider/docker"
)

// domainsCluster is a cluster whose nodes are containers on three Docker
// engines, each a failure domain (a, b, c) in a network namespace of its
// own, their subnets routed between them: the test reaches the nodes from
// engine a's namespace, with the CLI run there.
type domainsCluster struct {
	t       *testing.T
	sw      *swarmtest.Cluster
	engines *docker.Engines
	subnets map[*swarmtest.Engine]string
	bin     string
	config  string
}

// cli runs the curator CLI in engine a's namespace, as the admin.
func (d *domainsCluster) cli(args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
	defer cancel()
	cmd := d.sw.Engines[0].Command(ctx, d.bin, append([]string{"--config", d.config}, args...)...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return string(out), fmt.Errorf("curator %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return string(out), nil
}

// json runs the CLI with -o json and decodes its answer into v.
func (d *domainsCluster) json(v any, args ...string) error {
	out, err := d.cli(append(args, "-o", "json")...)
	if err != nil {
		return err
	}
	if err := json.Unmarshal([]byte(out), v); err != nil {
		return fmt.Errorf("curator %s: %w: %s", strings.Join(args, " "), err, out)
	}
	return nil
}

// domainNode is the part of `node ls -o json` the test reads.
type domainNode struct {
	Name       string   `json:"name"`
	Status     string   `json:"status"`
	Roles      []string `json:"roles"`
	Group      string   `json:"group"`
	InstanceID string   `json:"instance_id"`
	Domain     string   `json:"domain"`
}

// domainGroup is the part of `group ls -o json` the test reads.
type domainGroup struct {
	Name               string            `json:"name"`
	Ready              uint32            `json:"ready"`
	RepairHeld         string            `json:"repair_held"`
	DomainMachines     map[string]uint32 `json:"domain_machines"`
	UnreachableDomains []string          `json:"unreachable_domains"`
}

// machines lists every machine of every engine, by domain/ID, as the
// engines say (an engine that does not answer fails the call).
func (d *domainsCluster) machines(ctx context.Context) ([]string, error) {
	ins, err := d.engines.List(ctx, nil)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, in := range ins {
		out = append(out, in.Domain+"/"+in.ID)
	}
	return out, nil
}

// whole says why the cluster is not three managers and three workers,
// all ready, one of each group in each domain, with the repairs on and
// every domain listed.
func (d *domainsCluster) whole() error {
	var nodes []domainNode
	if err := d.json(&nodes, "node", "ls"); err != nil {
		return err
	}
	got := map[string]int{}
	for _, n := range nodes {
		if n.Status != "ready" {
			return fmt.Errorf("node %s (%s) is %s", n.Name, n.Domain, n.Status)
		}
		got[n.Group+"/"+n.Domain]++
	}
	want := map[string]int{}
	for _, g := range []string{"managers", "workers"} {
		for _, dom := range []string{"a", "b", "c"} {
			want[g+"/"+dom] = 1
		}
	}
	if !maps.Equal(got, want) {
		return fmt.Errorf("nodes by group/domain %v, want one of each group in each domain", got)
	}
	var groups []domainGroup
	if err := d.json(&groups, "group", "ls"); err != nil {
		return err
	}
	for _, g := range groups {
		if g.Ready != 3 || g.RepairHeld != "" || len(g.UnreachableDomains) > 0 || !maps.Equal(g.DomainMachines, map[string]uint32{"a": 1, "b": 1, "c": 1}) {
			return fmt.Errorf("group %+v: want 3 ready, a machine in each domain, the repairs on", g)
		}
	}
	return nil
}

// dockerPluginPath is where the test image has the docker plugin
// (cmd/curator-provider-docker), which the leader starts in its container.
const dockerPluginPath = "/usr/local/bin/curator-provider-docker"

// TestDomainsEngineDark: three managers and three workers, as two groups
// spread over three Docker engines (each a failure domain), one manager
// and one worker on each, made by the docker plugin, which the leader
// runs in its container (the image carries it). Engine b is cut off (its
// link down, its dockerd frozen: a host gone dark): the plugin's list
// names domain b unreachable, so its two machines are held, not replaced
// (each group says so, naming the domain), and the quorum is kept by the
// other two managers. Engine b back, the group is whole again with the
// machines it had: nothing made twice.
func TestDomainsEngineDark(t *testing.T) {
	// Its own engines, network namespaces and addresses (172.31.x), one
	// engine set at a time with the other tests that start engines.
	inChain(t, engineChain)
	// The dir outlives the engines (its cleanup runs after theirs): the
	// first manager's data dir is bound into its container.
	dir, err := os.MkdirTemp("", "curator-domains-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	sw := swarmtest.Start(t, swarmtest.Config{Spare: 3, NoSwarm: true})
	ea, eb, ec := sw.Engines[0], sw.Engines[1], sw.Engines[2]
	ctx, cancel := context.WithTimeout(context.Background(), 12*time.Minute)
	defer cancel()
	d := &domainsCluster{t: t, sw: sw, subnets: map[*swarmtest.Engine]string{ea: "172.31.1.0/24", eb: "172.31.2.0/24", ec: "172.31.3.0/24"}}
	if err := sw.Route(ctx, d.subnets); err != nil {
		t.Fatal(err)
	}
	d.bin = filepath.Join(dir, "curator")
	if err := testenv.GoBuildStatic(d.bin, "./cmd/curator"); err != nil {
		t.Fatal(err)
	}
	plugin := filepath.Join(dir, "curator-provider-docker")
	if err := testenv.GoBuildStatic(plugin, "./cmd/curator-provider-docker"); err != nil {
		t.Fatal(err)
	}
	const network, image = "cur-dom", "curator:domains"
	engines := map[string]docker.Engine{}
	for name, e := range map[string]*swarmtest.Engine{"a": ea, "b": eb, "c": ec} {
		engines[name] = docker.Engine{Host: e.Host, Subnet: d.subnets[e]}
	}
	hostDir := filepath.Join(dir, "instances")
	d.engines, err = docker.NewEngines(docker.Config{Network: network, Image: image, HostDir: hostDir, Engines: engines, StopTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer d.engines.Close()
	if _, err := d.engines.BuildImage(ctx, d.bin, nil, docker.ImageFile{Source: plugin, Path: dockerPluginPath}); err != nil {
		t.Fatal(err)
	}
	runs, err := d.engines.Runs(ctx)
	if err != nil {
		t.Fatal(err)
	}

	// The groups, on the docker plugin with the three engines (a plugin
	// group names its domains): replace_after short, max_unhealthy 2 (of
	// 3), so that nothing but the domain's hold keeps a dark engine's
	// machines from being replaced.
	groupFile := func(name, roles string) string {
		var b strings.Builder
		fmt.Fprintf(&b, "name: %s\nsize: 3\nroles: [%s]\ndomains: [a, b, c]\nreplace_after: 5s\njoin_timeout: 2m\nmax_unhealthy: \"2\"\n", name, roles)
		var hosts []string
		for _, dom := range []string{"a", "b", "c"} {
			hosts = append(hosts, dom+"="+engines[dom].Host+","+engines[dom].Subnet)
		}
		fmt.Fprintf(&b, "provider:\n  plugin:\n    path: %s\n    config:\n      network: %s\n      image: %s\n      engines: %q\n", dockerPluginPath, network, image, strings.Join(hosts, " "))
		b.WriteString("template:\n  version: v1\n  args: [--heartbeat-interval, 500ms, --down-after, 3s, --election-ttl, 2s]\n")
		path := filepath.Join(dir, name+".yaml")
		if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	managersFile, workersFile := groupFile("managers", "consensus, worker"), groupFile("workers", "worker")
	raw, err := os.ReadFile(managersFile)
	if err != nil {
		t.Fatal(err)
	}
	managers, err := spec.ParseGroupSpec(raw)
	if err != nil {
		t.Fatal(err)
	}
	managers.Template.Release = spec.ReleaseOf(managers, runs.Image, runs.Digest)
	sha := spec.GroupConfigSHA(managers.Template)
	clusterID, err := spec.NewClusterID()
	if err != nil {
		t.Fatal(err)
	}

	// The first manager, a machine of the managers group on engine a,
	// made here as `curator dev` makes its first: the groups' leader
	// makes the rest.
	start := time.Now()
	first, err := d.engines.Provision(ctx, provider.Spec{
		Labels: map[string]string{provider.LabelCluster: clusterID, provider.LabelGroup: "managers", provider.LabelConfigSHA: sha},
		Args: []string{"agent", "init", "--data-dir", provider.PlaceholderDataDir, "--listen", provider.PlaceholderAddress,
			"--name", "managers-" + provider.PlaceholderInstanceID, "--cluster-id", clusterID,
			"--group", "managers", "--instance-id", provider.PlaceholderInstanceID, "--config-sha", sha,
			"--heartbeat-interval", "500ms", "--down-after", "3s", "--election-ttl", "2s"},
		Manager: true, Domain: "a",
	})
	if err != nil {
		t.Fatal(err)
	}
	d.config = filepath.Join(hostDir, first.ID, "admin", "config.yaml")
	testenv.Eventually(t, 2*time.Minute, "the first manager's admin config", func() error {
		if _, err := os.Stat(d.config); err != nil {
			return err
		}
		_, err := d.cli("cluster", "info")
		return err
	})
	for _, f := range []string{managersFile, workersFile} {
		if out, err := d.cli("group", "commit", f); err != nil {
			t.Fatal(err)
		} else {
			t.Log(strings.TrimSpace(out))
		}
	}
	testenv.Eventually(t, 6*time.Minute, "three managers and three workers, one of each in each domain", d.whole)
	t.Logf("cluster up across three engines in %v", time.Since(start).Round(time.Second))
	before, err := d.machines(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// One manager in each domain: no domain holds a majority of the
	// voters, so cluster info warns of none.
	var info struct {
		Warnings []string `json:"warnings"`
	}
	if err := d.json(&info, "cluster", "info"); err != nil {
		t.Error(err)
	} else if i := slices.IndexFunc(info.Warnings, func(w string) bool { return strings.Contains(w, "loses the quorum") }); i >= 0 {
		t.Errorf("cluster info with a manager in each domain warns: %s", info.Warnings[i])
	}
	if out, err := d.cli("group", "ls"); err == nil {
		t.Logf("group ls:\n%s", out)
	}

	// Engine b goes dark.
	if err := eb.Cut(ctx); err != nil {
		t.Fatal(err)
	}
	cut := time.Now()
	healed := false
	defer func() {
		if !healed {
			eb.Heal(context.Background())
		}
	}()
	heldBoth := func() error {
		var groups []domainGroup
		if err := d.json(&groups, "group", "ls"); err != nil {
			return err
		}
		for _, g := range groups {
			if !strings.Contains(g.RepairHeld, "domain b is dark") || !slices.Equal(g.UnreachableDomains, []string{"b"}) {
				return fmt.Errorf("group %s: repair_held %q, unreachable %v: want held, naming domain b", g.Name, g.RepairHeld, g.UnreachableDomains)
			}
		}
		return nil
	}
	testenv.Eventually(t, 2*time.Minute, "both groups held, naming domain b", heldBoth)
	t.Logf("held %v after the cut", time.Since(cut).Round(100*time.Millisecond))
	var events []struct {
		Action, Reason, Group string
	}
	if err := d.json(&events, "events", "--kind", "repair-hold"); err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(events, func(e struct{ Action, Reason, Group string }) bool {
		return e.Group == "workers" && strings.Contains(e.Reason, "domain b is dark")
	}) {
		t.Errorf("no repair-hold event of group workers naming domain b: %+v", events)
	}
	// Held for well past replace_after (and its floor), the quorum kept:
	// nothing made, no node of b removed, on the engines that answer.
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		var nodes []domainNode
		if err := d.json(&nodes, "node", "ls"); err != nil {
			t.Fatalf("node ls with engine b dark (the quorum lost?): %v", err)
		}
		if len(nodes) != 6 {
			t.Fatalf("with engine b dark, %d nodes: %+v; want the six, b's held", len(nodes), nodes)
		}
		for _, dom := range []string{"a", "c"} {
			ins, err := d.engines.Engine(dom).List(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			if len(ins) != 2 {
				t.Fatalf("with engine b dark, engine %s has %d machines: %+v; want its two, nothing made in b's stead", dom, len(ins), ins)
			}
		}
		time.Sleep(2 * time.Second)
	}
	if err := heldBoth(); err != nil {
		t.Error(err)
	}

	// Engine b back: the same six machines, all ready, the hold lifted.
	if err := eb.Heal(ctx); err != nil {
		t.Fatal(err)
	}
	healed = true
	if err := sw.Route(ctx, d.subnets); err != nil {
		t.Fatal(err)
	}
	back := time.Now()
	testenv.Eventually(t, 3*time.Minute, "the cluster whole again", d.whole)
	t.Logf("whole %v after engine b came back", time.Since(back).Round(100*time.Millisecond))
	after, err := d.machines(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(before, after) {
		t.Errorf("machines before the cut %v, after %v: want the same, nothing made twice", before, after)
	}
	if out, err := d.cli("events", "--kind", "repair-resume"); err != nil || !strings.Contains(out, "domain b is dark") {
		t.Errorf("events --kind repair-resume (%v):\n%s\nwant the resume of the hold of domain b", err, out)
	}
}
