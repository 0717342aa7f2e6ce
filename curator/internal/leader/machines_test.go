package leader

import (
	"cmp"
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/client"
	"go.uber.org/zap/zaptest"

	pb "github.com/curatorproject/curator/proto"
	"github.com/curatorproject/curator/provider"
	"github.com/curatorproject/curator/provider/docker"
)

// TestDockerProviderEngines: a docker group's provider.docker.engines
// make the leader's provider one of several engines, a failure domain
// each at its own host: a machine of a domain it does not name is
// refused, and, with engine a the local daemon and engine b's socket
// missing, a list names domain b unreachable, b alone (the local part
// skips where no daemon answers). The end-to-end test of domains runs
// the same docker.Engines through the docker plugin.
func TestDockerProviderEngines(t *testing.T) {
	local := cmp.Or(os.Getenv(client.EnvOverrideHost), client.DefaultDockerHost)
	missing := "unix://" + filepath.Join(t.TempDir(), "docker.sock")
	p, err := dockerProvider(&pb.DockerProviderSpec{
		Network: "curator-leader-test", Image: "curator:leader-test",
		Engines: map[string]*pb.DockerEngine{
			"a": {Host: local, Subnet: "172.31.1.0/24"},
			"b": {Host: missing, Subnet: "172.31.2.0/24"},
		},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	e, ok := p.(*docker.Engines)
	if !ok {
		t.Fatalf("provider of two engines is a %T, want *docker.Engines", p)
	}
	if got := e.Domains(); !slices.Equal(got, []string{"a", "b"}) {
		t.Errorf("domains %v, want [a b]", got)
	}
	ctx := callCtx(t)
	if _, err := p.Provision(ctx, provider.Spec{Domain: "z"}); !errors.Is(err, docker.ErrInvalidSpec) {
		t.Errorf("Provision in domain z: %v, want ErrInvalidSpec", err)
	}

	// Whether the local daemon answers, asked of a provider of its own.
	daemon, err := docker.New(docker.Config{Host: local})
	if err != nil {
		t.Fatal(err)
	}
	defer daemon.Close()
	pctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	err = daemon.Ping(pctx)
	cancel()
	if err != nil {
		t.Skipf("no Docker daemon at %s: %v", local, err)
	}
	ins, err := p.List(ctx, map[string]string{provider.LabelGroup: "none"})
	domains, ok := provider.Unreachable(err)
	if !ok || len(domains) != 1 || domains["b"] == nil || len(ins) != 0 {
		t.Errorf("List with engine b's socket missing: %v, %v; want none, and domain b alone unreachable", ins, err)
	}
}

// TestProcessProviderDomains: a group's process provider with ranges by
// domain is a provider of those domains, each range its pool at the
// spec's port; a range that makes no pool is refused, naming its domain.
func TestProcessProviderDomains(t *testing.T) {
	spec := &pb.ProcessProviderSpec{
		Domains: map[string]string{"b": "127.0.183.20-127.0.183.29", "a": "127.0.183.10-127.0.183.19"},
		Port:    7000, Dir: t.TempDir(),
	}
	p, err := processProvider(spec, zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	if got := p.Domains(); !slices.Equal(got, []string{"a", "b"}) {
		t.Errorf("domains %v, want a, b", got)
	}
	one, err := processProvider(&pb.ProcessProviderSpec{Addresses: "127.0.183.10-127.0.183.19", Port: 7000, Dir: t.TempDir()}, zaptest.NewLogger(t))
	if err != nil || len(one.Domains()) != 0 {
		t.Errorf("a provider of one range: %v, domains %v; want none", err, one.Domains())
	}
	spec.Domains["c"] = "127.0.183.40"
	if _, err := processProvider(spec, zaptest.NewLogger(t)); err == nil || !strings.Contains(err.Error(), "domain c: want FIRST-LAST") {
		t.Errorf("a bad range: %v, want an error naming domain c", err)
	}
}
