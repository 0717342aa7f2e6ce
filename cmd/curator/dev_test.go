package main

import (
	"strings"
	"testing"

	"github.com/curatorproject/curator/curator/spec"
	pb "github.com/curatorproject/curator/proto"
	"github.com/curatorproject/curator/provider"
	"google.golang.org/protobuf/proto"
)

// dev's groups are valid specs, and committing them again (dev restarted
// on its dir) is a no-op: their printed form reads back the same.
func TestDevGroups(t *testing.T) {
	c := &devConfig{managers: 3, workers: 2, addresses: devDefaultAddresses, provider: "process"}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	groups := devGroups(c, func() *pb.ProviderSpec {
		return &pb.ProviderSpec{Kind: &pb.ProviderSpec_Process{Process: &pb.ProcessProviderSpec{
			Addresses: c.addresses, Port: devPort, Dir: "/tmp/dev", Binary: "/usr/bin/curator",
		}}}
	})
	if len(groups) != 2 || groups[0].Name != devManagers || groups[1].Name != devWorkers {
		t.Fatalf("dev's groups: %v", groups)
	}
	for _, g := range groups {
		if err := spec.ValidateGroupSpec(g); err != nil {
			t.Errorf("group %s: %v", g.Name, err)
		}
		out, err := spec.MarshalGroupSpec(g)
		if err != nil {
			t.Fatal(err)
		}
		again, err := spec.ParseGroupSpec(out)
		if err != nil {
			t.Fatalf("group %s printed as\n%s\ndoes not read back: %v", g.Name, out, err)
		}
		if spec.GroupConfigSHA(again.Template) != spec.GroupConfigSHA(g.Template) || !proto.Equal(again, g) {
			t.Errorf("group %s reads back as %v, want %v", g.Name, again, g)
		}
	}
}

func TestDevConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		c    devConfig
		want string
	}{
		{devConfig{managers: 0, workers: 1, addresses: devDefaultAddresses, provider: "process"}, "--managers 0"},
		{devConfig{managers: 8, addresses: devDefaultAddresses, provider: "process"}, "--managers 8"},
		{devConfig{managers: 1, workers: -1, addresses: devDefaultAddresses, provider: "process"}, "--workers -1"},
		{devConfig{managers: 3, workers: 2, addresses: "127.0.0.1-127.0.0.3", provider: "process"}, "holds 3 addresses"},
		{devConfig{managers: 3, workers: 2, addresses: devDefaultAddresses, provider: "vm"}, `--provider "vm": want process or docker`},
		{devConfig{managers: 3, workers: 2, addresses: devDefaultAddresses, provider: "process", forceNewCluster: true}, "give the --dir"},
		{devConfig{managers: 3, workers: 2, dir: "/d", addresses: devDefaultAddresses, provider: "docker", forceNewCluster: true}, "on the process provider"},
	} {
		if err := tc.c.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: Validate = %v, want an error containing %q", tc.c, err, tc.want)
		}
	}
}

// TestDevForced: `dev --force-new-cluster` forces the one manager left, and
// refuses when none is left or more than one is.
func TestDevForced(t *testing.T) {
	in := func(id, group string) provider.Instance {
		return provider.Instance{ID: id, Labels: map[string]string{provider.LabelGroup: group}}
	}
	for _, tc := range []struct {
		name      string
		instances []provider.Instance
		want      string
		wantErr   string
	}{
		{"one manager left", []provider.Instance{in("w1", devWorkers), in("m2", devManagers), in("w2", devWorkers)}, "m2", ""},
		{"no manager left", []provider.Instance{in("w1", devWorkers)}, "", "restore a backup"},
		{"two managers left", []provider.Instance{in("m1", devManagers), in("m2", devManagers), in("w1", devWorkers)}, "", "2 managers are left (managers-m1, managers-m2)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := devForced(tc.instances)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("devForced: %q, %v; want an error containing %q", got, err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Errorf("devForced: %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}
