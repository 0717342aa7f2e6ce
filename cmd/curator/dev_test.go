package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

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

// TestDevForced: `dev --force-new-cluster` forces the one manager left
// (the one stopped on purpose when the others died: they are given up,
// not started), and refuses when none is left or more than one could be.
func TestDevForced(t *testing.T) {
	in := func(id, group string) provider.Instance {
		return provider.Instance{ID: id, Labels: map[string]string{provider.LabelGroup: group}}
	}
	for _, tc := range []struct {
		name          string
		stopped, dead []provider.Instance
		want          string
		givenUp       []string
		wantErr       string
	}{
		{name: "one manager left", stopped: []provider.Instance{in("w1", devWorkers), in("m2", devManagers), in("w2", devWorkers)}, want: "m2"},
		{name: "one manager left, dead", dead: []provider.Instance{in("w1", devWorkers), in("m2", devManagers)}, want: "m2"},
		{name: "one stopped, two dead", stopped: []provider.Instance{in("m2", devManagers), in("w1", devWorkers)}, dead: []provider.Instance{in("m3", devManagers), in("m1", devManagers), in("w2", devWorkers)},
			want: "m2", givenUp: []string{"m1", "m3"}},
		{name: "no manager left", stopped: []provider.Instance{in("w1", devWorkers)}, wantErr: "restore a backup"},
		{name: "two managers left", stopped: []provider.Instance{in("m1", devManagers), in("m2", devManagers), in("w1", devWorkers)}, wantErr: "2 managers are left (managers-m1, managers-m2)"},
		{name: "two dead", dead: []provider.Instance{in("m1", devManagers), in("m2", devManagers)}, wantErr: "2 managers are left (managers-m1, managers-m2)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, givenUp, err := devForced(tc.stopped, tc.dead)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("devForced: %q, %v; want an error containing %q", got, err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Errorf("devForced: %q, %v; want %q", got, err, tc.want)
			}
			if diff := cmp.Diff(tc.givenUp, givenUp); diff != "" {
				t.Errorf("given up (-want +got):\n%s", diff)
			}
		})
	}
}

// TestDevSettings: a dir's settings make dev restart its cluster as it
// was made; a flag given that disagrees is refused, naming the flag, the
// recorded value and the file, and changes nothing; a dir that holds a
// cluster is listed as such.
func TestDevSettings(t *testing.T) {
	dir := t.TempDir()
	if s, err := loadDevSettings(dir); err != nil || s != nil {
		t.Fatalf("settings of an empty dir: %v, %v; want none", s, err)
	}
	if found := devHolds(dir); len(found) != 0 {
		t.Errorf("an empty dir holds %v", found)
	}
	made := &devConfig{managers: 1, workers: 2, addresses: "127.0.9.1-127.0.9.9"}
	if err := devSettingsOf(made).save(dir); err != nil {
		t.Fatal(err)
	}
	s, err := loadDevSettings(dir)
	if err != nil || s == nil {
		t.Fatalf("loadDevSettings: %v, %v", s, err)
	}
	if found := devHolds(dir); len(found) != 1 || !strings.Contains(found[0], devSettingsFile) {
		t.Errorf("a dir with settings holds %v", found)
	}
	for _, tc := range []struct {
		name    string
		c       devConfig
		wantErr string
	}{
		{"no flags", devConfig{managers: 3, workers: 2, addresses: devDefaultAddresses}, ""},
		{"flags that agree", devConfig{managers: 1, workers: 2, addresses: "127.0.9.1-127.0.9.9", given: map[string]bool{"managers": true, "workers": true, "addresses": true}}, ""},
		{"managers", devConfig{managers: 3, workers: 2, addresses: devDefaultAddresses, given: map[string]bool{"managers": true}}, "--managers 3: " + dir + " holds a dev cluster made with --managers 1 (" + dir + "/dev.json)"},
		{"addresses", devConfig{managers: 1, workers: 2, addresses: "127.0.8.1-127.0.8.9", given: map[string]bool{"addresses": true}}, "--addresses 127.0.8.1-127.0.8.9: " + dir + " holds a dev cluster made with --addresses 127.0.9.1-127.0.9.9"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := tc.c
			err := s.apply(&c, dir)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("apply: %v, want an error containing %q", err, tc.wantErr)
				}
				if c.managers != tc.c.managers || c.workers != tc.c.workers || c.addresses != tc.c.addresses {
					t.Errorf("a refused apply changed the config: %+v", c)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if c.managers != 1 || c.workers != 2 || c.addresses != "127.0.9.1-127.0.9.9" {
				t.Errorf("after apply: managers %d, workers %d, addresses %s; want the recorded 1, 2, 127.0.9.1-127.0.9.9", c.managers, c.workers, c.addresses)
			}
		})
	}
	if err := os.WriteFile(filepath.Join(dir, devSettingsFile), []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := loadDevSettings(dir); err == nil || !strings.Contains(err.Error(), devSettingsFile) {
		t.Errorf("loadDevSettings of a broken file: %v, want an error naming it", err)
	}
}
