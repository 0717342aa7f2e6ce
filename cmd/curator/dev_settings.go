package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/curatorproject/curator/client"
	"github.com/curatorproject/curator/internal/atomicfile"
)

// devSettingsFile holds, in DIR, the settings dev made its cluster with:
// a later dev on DIR restarts that cluster as it was made, whatever its
// flags' defaults.
const devSettingsFile = "dev.json"

// devSettings is what dev made a cluster with (devSettingsFile).
type devSettings struct {
	Managers  int       `json:"managers"`
	Workers   int       `json:"workers"`
	Addresses string    `json:"addresses"`
	Domains   int       `json:"domains,omitempty"`
	Created   time.Time `json:"created"`
}

// devSettingsOf is the settings of a new cluster made with c.
func devSettingsOf(c *devConfig) devSettings {
	return devSettings{Managers: c.managers, Workers: c.workers, Addresses: c.addresses, Domains: c.domains, Created: time.Now().UTC()}
}

// loadDevSettings reads dir's settings; nil when dir has none (a new dir,
// or a cluster made before dev recorded them).
func loadDevSettings(dir string) (*devSettings, error) {
	path := filepath.Join(dir, devSettingsFile)
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var s devSettings
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("%s: %w (dev writes it when it makes a cluster; restore it, or remove it to restart the cluster in %s with the flags given)", path, err, dir)
	}
	if s.Managers < 1 || s.Managers > devMaxManagers || s.Workers < 0 || s.Addresses == "" || s.Domains < 0 || s.Domains > len(devDomainNames) {
		return nil, fmt.Errorf("%s: managers %d, workers %d, addresses %q, domains %d: want 1 to %d managers, 0 or more workers, an address range and 0 to %d domains", path, s.Managers, s.Workers, s.Addresses, s.Domains, devMaxManagers, len(devDomainNames))
	}
	return &s, nil
}

// save writes s into dir, atomically.
func (s devSettings) save(dir string) error {
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.Write(filepath.Join(dir, devSettingsFile), append(b, '\n'), 0o600)
}

// flags is s as dev's flags.
func (s devSettings) flags() string {
	f := fmt.Sprintf("--managers %d --workers %d --addresses %s", s.Managers, s.Workers, s.Addresses)
	if s.Domains > 0 {
		f += fmt.Sprintf(" --domains %d", s.Domains)
	}
	return f
}

// apply makes c the settings dir's cluster was made with. A flag given
// (c.given) that disagrees is refused: the cluster restarts as it was
// made, and a silent choice of one or the other would surprise.
func (s devSettings) apply(c *devConfig, dir string) error {
	for _, f := range []struct {
		name      string
		given, is string
	}{
		{"managers", fmt.Sprint(c.managers), fmt.Sprint(s.Managers)},
		{"workers", fmt.Sprint(c.workers), fmt.Sprint(s.Workers)},
		{"addresses", c.addresses, s.Addresses},
		{"domains", fmt.Sprint(c.domains), fmt.Sprint(s.Domains)},
	} {
		if c.given[f.name] && f.given != f.is {
			return fmt.Errorf("--%s %s: %s holds a dev cluster made with --%s %s (%s): run dev on it without --%s, and it restarts as it was made (a group's size changes with 'curator group commit'), or choose another --dir",
				f.name, f.given, dir, f.name, f.is, filepath.Join(dir, devSettingsFile), f.name)
		}
	}
	c.managers, c.workers, c.addresses, c.domains = s.Managers, s.Workers, s.Addresses, s.Domains
	return nil
}

// devHolds lists what in dir says a cluster was made there: the client
// config, the cluster's CA, dev's settings. A dir with any of them and no
// node to start is not made into a new cluster (see runDev).
func devHolds(dir string) []string {
	var found []string
	for _, f := range []struct{ name, what string }{
		{client.ConfigFileName, "the client config"},
		{"ca.crt", "the cluster's CA certificate"},
		{devSettingsFile, "dev's settings"},
	} {
		if _, err := os.Stat(filepath.Join(dir, f.name)); err == nil {
			found = append(found, f.what+" "+f.name)
		}
	}
	return found
}

// errDevHoldsCluster says why dev does not make a new cluster in dir,
// which holds what found lists and no node to start.
func errDevHoldsCluster(dir string, found []string) error {
	return fmt.Errorf("%s holds a cluster (%s) but no node of it to start (%s is empty): dev does not make a new cluster over it. Put its nodes' dirs back into %s, restore a backup ('curator agent restore'), or, to give that cluster up for good, remove %s or choose another --dir",
		dir, strings.Join(found, ", "), filepath.Join(dir, "instances"), filepath.Join(dir, "instances"), dir)
}
