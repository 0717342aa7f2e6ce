package docker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/curatorproject/curator/internal/swarmtest"
	"github.com/curatorproject/curator/provider"
	"github.com/curatorproject/curator/provider/providertest"
)

// TestEngines makes one group's machines on two real Docker engines, each
// in a network namespace of its own (internal/swarmtest), each a failure
// domain with its own subnet, routed between them: a manager on engine a
// and one on engine b form one cluster across them. List lists both with
// their domains; with engine b cut off (its link down, its dockerd
// frozen), List returns engine a's machine and names domain b
// unreachable, never a short list alone; engine b back, the same machines
// are listed, nothing made twice. Destroy finds each machine's engine by
// its ID.
func TestEngines(t *testing.T) {
	requireDocker(t)
	sw := swarmtest.Start(t, swarmtest.Config{Spare: 2, NoSwarm: true})
	ea, eb := sw.Engines[0], sw.Engines[1]
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	subnets := map[*swarmtest.Engine]string{ea: "172.31.1.0/24", eb: "172.31.2.0/24"}
	if err := sw.Route(ctx, subnets); err != nil {
		t.Fatal(err)
	}
	hostDir := t.TempDir()
	e, err := NewEngines(Config{
		Network: "cur-eng", Image: testImage, HostDir: hostDir, StopTimeout: 2 * time.Second,
		Engines: map[string]Engine{
			"a": {Host: ea.Host, Subnet: subnets[ea]},
			"b": {Host: eb.Host, Subnet: subnets[eb]},
		},
		ListTimeout: 2 * time.Second,
		Logger:      zaptest.NewLogger(t),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if _, err := e.BuildImage(ctx, curatorBin, nil); err != nil {
		t.Fatal(err)
	}
	runs, err := e.Runs(ctx)
	if err != nil {
		t.Fatalf("Runs: %v (the image loaded on every engine has one ID)", err)
	}
	t.Logf("every engine runs %s", runs.Digest)

	// Bad input changes nothing.
	if _, err := e.Provision(ctx, provider.Spec{Domain: "z"}); !errors.Is(err, ErrInvalidSpec) {
		t.Errorf("Provision on domain z: %v, want ErrInvalidSpec", err)
	}
	if err := e.Destroy(ctx, "cur-eng-z-0123abcd"); !errors.Is(err, ErrInvalidID) {
		t.Errorf("Destroy of a machine of no engine: %v, want ErrInvalidID", err)
	}

	labels := map[string]string{provider.LabelCluster: "c1", provider.LabelGroup: "managers", provider.LabelConfigSHA: "sha1"}
	spec := initSpec("managers")
	spec.Domain, spec.Manager = "a", true
	first := providertest.Provision(t, e, spec)
	if !strings.HasPrefix(first.ID, "cur-eng-a-") || first.Domain != "a" {
		t.Errorf("machine %s of domain %q: want cur-eng-a-<hex> of domain a", first.ID, first.Domain)
	}
	config := filepath.Join(hostDir, first.ID, "admin", "config.yaml")
	cli := func(args ...string) (string, error) {
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		cmd := ea.Command(cctx, curatorBin, append([]string{"--config", config}, args...)...)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			return "", fmt.Errorf("curator %s: %v: %s", strings.Join(args, " "), err, stderr.String())
		}
		return string(out), nil
	}
	var token string
	waitFor(t, "the manager token", func() (err error) {
		if _, err := os.Stat(config); err != nil {
			return err
		}
		token, err = cli("token", "show", "manager")
		return err
	})
	second := providertest.Provision(t, e, provider.Spec{
		Labels: labels, Domain: "b", Manager: true,
		Args: []string{"agent", "join", "--listen", "{{address}}", "--data-dir", "{{data-dir}}",
			"--manager", first.Address, "--election-ttl", "1s"},
		Env: map[string]string{"CURATOR_JOIN_TOKEN": strings.TrimSpace(token)},
	})
	if !strings.HasPrefix(second.ID, "cur-eng-b-") || !strings.HasPrefix(second.Address, "172.31.2.") {
		t.Errorf("machine %s at %s: want cur-eng-b-<hex> on engine b's subnet", second.ID, second.Address)
	}
	waitFor(t, "two ready managers, one on each engine", func() error {
		out, err := cli("node", "ls", "-o", "json")
		if err != nil {
			return err
		}
		var nodes []struct {
			Address string `json:"address"`
			Status  string `json:"status"`
		}
		if err := json.Unmarshal([]byte(out), &nodes); err != nil {
			return err
		}
		ready := 0
		for _, n := range nodes {
			if n.Status == "ready" {
				ready++
			}
		}
		if ready != 2 {
			return fmt.Errorf("%d ready: %s", ready, out)
		}
		return nil
	})

	ids := func(ins []provider.Instance) []string {
		var out []string
		for _, in := range ins {
			out = append(out, in.Domain+"/"+in.ID)
		}
		return out
	}
	both := []string{"a/" + first.ID, "b/" + second.ID}
	slices.Sort(both)
	if got := ids(providertest.List(t, e, labels)); !slices.Equal(got, both) {
		t.Errorf("List = %v, want %v", got, both)
	}

	if err := eb.Cut(ctx); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	got, err := e.List(ctx, labels)
	down, ok := provider.Unreachable(err)
	if !ok || len(down) != 1 || down["b"] == nil {
		t.Fatalf("List with engine b cut: %v, want an UnreachableError naming domain b", err)
	}
	if !slices.Equal(ids(got), []string{"a/" + first.ID}) {
		t.Errorf("List with engine b cut = %v, want engine a's machine", ids(got))
	}
	t.Logf("List with engine b cut took %v: %v", time.Since(start).Round(time.Millisecond), err)
	// Engine b failed its last list: the next waits for it SuspectTimeout
	// only.
	start = time.Now()
	if _, err := e.List(ctx, labels); err == nil {
		t.Error("List again with engine b cut: no error")
	}
	if took := time.Since(start); took > SuspectTimeout+time.Second {
		t.Errorf("List again with engine b cut took %v, want about SuspectTimeout %v", took, SuspectTimeout)
	}
	dctx, dcancel := context.WithTimeout(ctx, 2*time.Second)
	err = e.Destroy(dctx, second.ID)
	dcancel()
	if err == nil || errors.Is(err, ErrInvalidID) {
		t.Errorf("Destroy of engine b's machine while it is cut: %v, want its engine's error", err)
	}

	if err := eb.Heal(ctx); err != nil {
		t.Fatal(err)
	}
	if err := sw.Route(ctx, subnets); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "both machines listed again", func() error {
		got, err := e.List(ctx, labels)
		if err != nil {
			return err
		}
		if !slices.Equal(ids(got), both) {
			return fmt.Errorf("List = %v, want %v", ids(got), both)
		}
		return nil
	})

	for _, in := range []provider.Instance{second, first} {
		if err := e.Destroy(ctx, in.ID); err != nil {
			t.Errorf("Destroy %s: %v", in.ID, err)
		}
	}
	if got := providertest.List(t, e, nil); len(got) != 0 {
		t.Errorf("List after Destroy = %v, want none", ids(got))
	}
}
