package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/proto"

	"github.com/curatorproject/curator/curator/spec"
	pb "github.com/curatorproject/curator/proto"
)

// TestDevDomains: --domains N splits --addresses into N ranges, domains
// a, b, c, ...: the provider's pools and the groups' provider.process
// domains, over which the groups spread; a split too small for the
// groups, or with the docker provider, is refused.
func TestDevDomains(t *testing.T) {
	c := &devConfig{managers: 3, workers: 2, addresses: "127.0.183.10-127.0.183.39", domains: 3, provider: "process"}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	ranges, err := c.ranges()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"a": "127.0.183.10-127.0.183.19", "b": "127.0.183.20-127.0.183.29", "c": "127.0.183.30-127.0.183.39"}
	if diff := cmp.Diff(want, ranges); diff != "" {
		t.Errorf("ranges (-want +got):\n%s", diff)
	}
	addrs, pools, err := c.pools()
	if err != nil || len(addrs) != 0 || len(pools) != 3 || len(pools["b"]) != 10 || pools["b"][0] != "127.0.183.20:7000" {
		t.Errorf("pools: %v, %v, %v; want none whole and 10 addresses in each of a, b, c from 127.0.183.10:7000", addrs, pools, err)
	}
	if got := c.domainsWords(); !strings.Contains(got, "over 3 failure domains (a 127.0.183.10-127.0.183.19, b") {
		t.Errorf("domainsWords = %q", got)
	}
	groups := devGroups(c, func() *pb.ProviderSpec {
		return &pb.ProviderSpec{Kind: &pb.ProviderSpec_Process{Process: &pb.ProcessProviderSpec{Domains: ranges, Port: devPort, Dir: "/tmp/dev"}}}
	})
	for _, g := range groups {
		if diff := cmp.Diff([]string{"a", "b", "c"}, g.Domains); diff != "" {
			t.Errorf("group %s: domains (-want +got):\n%s", g.Name, diff)
		}
		if err := spec.ValidateGroupSpec(g); err != nil {
			t.Errorf("group %s: %v", g.Name, err)
		}
		out, err := spec.MarshalGroupSpec(g)
		if err != nil {
			t.Fatal(err)
		}
		if again, err := spec.ParseGroupSpec(out); err != nil || !proto.Equal(again, g) {
			t.Errorf("group %s printed as\n%s\nreads back as %v, %v", g.Name, out, again, err)
		}
	}

	none := &devConfig{managers: 3, workers: 2, addresses: devDefaultAddresses, provider: "process"}
	if addrs, pools, err := none.pools(); err != nil || len(addrs) != 241 || pools != nil || none.domainsWords() != "" {
		t.Errorf("no --domains: pools %d addresses, %v, %v; words %q", len(addrs), pools, err, none.domainsWords())
	}

	for _, tc := range []struct {
		c    devConfig
		want string
	}{
		{devConfig{managers: 3, addresses: devDefaultAddresses, domains: 1, provider: "process"}, "--domains 1: want 2 to 16"},
		{devConfig{managers: 3, addresses: devDefaultAddresses, domains: 17, provider: "process"}, "--domains 17: want 2 to 16"},
		{devConfig{managers: 3, addresses: devDefaultAddresses, domains: -1, provider: "process"}, "--domains -1"},
		{devConfig{managers: 3, workers: 4, addresses: "127.0.183.10-127.0.183.17", domains: 3, provider: "process"}, "split 3 ways gives 127.0.183.16-127.0.183.17, too small for its share of 3 managers and 4 workers"},
		{devConfig{managers: 1, addresses: "127.0.183.10-127.0.183.11", domains: 3, provider: "process"}, "2 addresses cannot be split into 3 ranges"},
		{devConfig{managers: 3, addresses: devDefaultAddresses, domains: 2, provider: "docker"}, "--domains splits the process provider's --addresses"},
	} {
		if err := tc.c.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: Validate = %v, want an error containing %q", tc.c, err, tc.want)
		}
	}

	// A dir's cluster restarts with the domains it was made with; another
	// --domains is refused.
	dir := t.TempDir()
	if err := devSettingsOf(c).save(dir); err != nil {
		t.Fatal(err)
	}
	s, err := loadDevSettings(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(s.flags(), "--domains 3") {
		t.Errorf("settings' flags %q do not say --domains 3", s.flags())
	}
	other := devConfig{managers: 3, workers: 2, addresses: c.addresses, domains: 2, given: map[string]bool{"domains": true}}
	if err := s.apply(&other, dir); err == nil || !strings.Contains(err.Error(), "--domains 2: "+dir+" holds a dev cluster made with --domains 3 ("+filepath.Join(dir, devSettingsFile)+")") {
		t.Errorf("apply of --domains 2 over a cluster of 3: %v", err)
	}
	plain := devConfig{managers: 3, workers: 2, addresses: c.addresses}
	if err := s.apply(&plain, dir); err != nil || plain.domains != 3 {
		t.Errorf("apply without --domains: %v, domains %d; want the recorded 3", err, plain.domains)
	}
}
