package docker

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/curatorproject/curator/provider"
	"github.com/curatorproject/curator/provider/providertest"
)

// curatorCLI runs the curator binary on the host with args, against the
// cluster of config, and returns its standard output.
func curatorCLI(config string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, curatorBin, append([]string{"--config", config}, args...)...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("curator %s: %v: %s", strings.Join(args, " "), err, stderr.String())
	}
	return string(out), nil
}

// A cluster of three managers in containers, made the way an operator
// would: init, the manager token read on the host with the CLI, two joins.
func TestThreeManagers(t *testing.T) {
	p := newTestProvider(t, func(c *Config) { c.HostDir = t.TempDir() })
	start := time.Now()
	labels := map[string]string{provider.LabelCluster: "c1", provider.LabelGroup: "managers", provider.LabelConfigSHA: "sha1"}

	first := providertest.Provision(t, p, provider.Spec{
		Labels: labels,
		Args:   []string{"agent", "init", "--listen", "{{address}}", "--data-dir", "{{data-dir}}", "--election-ttl", "1s"},
	})
	// The data dir is bind-mounted: the admin config is on the host, and
	// names the node at its container's address.
	config := filepath.Join(p.hostDataDir(first.ID), "admin", "config.yaml")
	waitFor(t, "the admin config "+config, func() error {
		_, err := os.Stat(config)
		return err
	})
	var token string
	waitFor(t, "the manager token", func() (err error) {
		token, err = curatorCLI(config, "token", "show", "manager")
		return err
	})
	token = strings.TrimSpace(token)

	var wg sync.WaitGroup
	joined := make([]provider.Instance, 2)
	errs := make([]error, 2)
	for i := range joined {
		wg.Go(func() {
			joined[i], errs[i] = p.Provision(context.Background(), provider.Spec{
				Labels: labels,
				Args: []string{"agent", "join", "--listen", "{{address}}", "--data-dir", "{{data-dir}}",
					"--manager", first.Address, "--election-ttl", "1s"},
				Env: map[string]string{"CURATOR_JOIN_TOKEN": token},
			})
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("Provision join %d: %v", i, err)
		}
	}

	type node struct {
		Name          string `json:"name"`
		Address       string `json:"address"`
		Status        string `json:"status"`
		ManagerStatus string `json:"manager_status"`
	}
	var nodes []node
	waitFor(t, "three ready voters", func() error {
		out, err := curatorCLI(config, "node", "ls", "-o", "json")
		if err != nil {
			return err
		}
		nodes = nil
		if err := json.Unmarshal([]byte(out), &nodes); err != nil {
			return fmt.Errorf("node ls: %w: %s", err, out)
		}
		if len(nodes) != 3 {
			return fmt.Errorf("%d nodes: %+v", len(nodes), nodes)
		}
		for _, n := range nodes {
			if n.Status != "ready" || (n.ManagerStatus != "leader" && n.ManagerStatus != "reachable") {
				return fmt.Errorf("not all ready voters: %+v", nodes)
			}
		}
		return nil
	})
	t.Logf("three ready voters %v after the first Provision: %+v", time.Since(start).Round(time.Millisecond), nodes)

	want := map[string]bool{first.Address: true, joined[0].Address: true, joined[1].Address: true}
	for _, n := range nodes {
		if !want[n.Address] {
			t.Errorf("node %s at %s, not at a container's address %v", n.Name, n.Address, want)
		}
	}
	if len(want) != 3 {
		t.Errorf("addresses %v: want three", want)
	}
	for addr := range want {
		// A node's own view of its promotion may lag the leader's.
		waitFor(t, "/healthz of "+addr+" to say voter", func() error {
			h, err := getHealthz(addr)
			if err == nil && h.Consensus != "voter" {
				err = fmt.Errorf("consensus %q", h.Consensus)
			}
			return err
		})
	}
	if got := providertest.List(t, p, map[string]string{provider.LabelGroup: "managers"}); len(got) != 3 {
		t.Errorf("List of the managers = %v, want three", got)
	}

	// Destroy them all at once, as a group's teardown would.
	start = time.Now()
	for _, in := range append(joined, first) {
		wg.Go(func() {
			if err := p.Destroy(context.Background(), in.ID); err != nil {
				t.Errorf("Destroy %s: %v", in.ID, err)
			}
		})
	}
	wg.Wait()
	t.Logf("Destroy of the three took %v", time.Since(start).Round(time.Millisecond))
	if got := providertest.List(t, p, nil); len(got) != 0 {
		t.Errorf("List after Destroy = %v, want none", got)
	}
}
