//go:build linux || darwin || dragonfly || freebsd || netbsd || openbsd

package process

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/zap/zaptest"

	"github.com/curatorproject/curator/provider"
	"github.com/curatorproject/curator/provider/providertest"
)

// domainAddrs are the pools of TestDomains' domains: two addresses in a,
// one in b.
var domainAddrs = map[string][]string{
	"a": {"127.0.183.30:7000", "127.0.183.31:7000"},
	"b": {"127.0.183.40:7000"},
}

func newDomainsProvider(t *testing.T, dir string) *Provider {
	t.Helper()
	return newProviderOf(t, Config{Dir: dir, Binary: sleeperBin, Domains: domainAddrs, Logger: zaptest.NewLogger(t)})
}

// TestDomains: a machine is made from its domain's pool, and no other; a
// full domain is full even with room in another; a spec of no domain
// takes any; a spec of a domain the provider has not makes nothing; and
// a provider on the same dir made later (a new leader) lists each
// machine in its domain.
func TestDomains(t *testing.T) {
	dir := t.TempDir()
	p := newDomainsProvider(t, dir)
	ctx := context.Background()
	in := func(d string) provider.Spec {
		s := sleeperSpec("workers")
		s.Domain = d
		return s
	}

	b := providertest.Provision(t, p, in("b"))
	if b.Domain != "b" || b.Address != domainAddrs["b"][0] {
		t.Errorf("Provision in b: domain %q, address %s; want b, %s", b.Domain, b.Address, domainAddrs["b"][0])
	}
	_, err := p.Provision(ctx, in("b"))
	if !errors.Is(err, ErrPoolExhausted) || !strings.Contains(err.Error(), "domain b: all 1 addresses in use") {
		t.Errorf("Provision in full domain b = %v; want ErrPoolExhausted naming domain b", err)
	}
	a := providertest.Provision(t, p, in("a"))
	chosen := providertest.Provision(t, p, in(""))
	if a.Domain != "a" || chosen.Domain != "a" {
		t.Errorf("Provision in a, then in no domain with b full: domains %q and %q, want a and a", a.Domain, chosen.Domain)
	}

	before, err := os.ReadDir(p.instancesDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{"c", "B"} {
		if in, err := p.Provision(ctx, in(d)); !errors.Is(err, ErrUnknownDomain) || !strings.Contains(err.Error(), "not one of the provider's (a, b)") {
			t.Errorf("Provision in domain %s, not one of the provider's = %+v, %v; want ErrUnknownDomain naming a, b", d, in, err)
		}
	}
	if after, err := os.ReadDir(p.instancesDir()); err != nil || len(after) != len(before) {
		t.Errorf("the refused Provisions left %d instance dirs, want %d (err %v)", len(after), len(before), err)
	}

	want := map[string]string{b.ID: "b", a.ID: "a", chosen.ID: "a"}
	got := map[string]string{}
	for _, in := range providertest.List(t, newDomainsProvider(t, dir), nil) {
		got[in.ID] = in.Domain
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("a new provider lists the machines in domains (-want +got):\n%s", diff)
	}
}

// TestNoDomains: a provider of one pool refuses a spec that names a
// domain, and lists its machines in none.
func TestNoDomains(t *testing.T) {
	p := newTestProvider(t, t.TempDir(), testAddrs[:1], 0)
	s := sleeperSpec("workers")
	s.Domain = "a"
	if in, err := p.Provision(context.Background(), s); !errors.Is(err, ErrUnknownDomain) || !strings.Contains(err.Error(), "no domains") {
		t.Errorf("Provision in domain a of a provider of no domains = %+v, %v; want ErrUnknownDomain", in, err)
	}
	in := providertest.Provision(t, p, sleeperSpec("workers"))
	if in.Domain != "" {
		t.Errorf("Provision of a provider of no domains: domain %q, want none", in.Domain)
	}
}
