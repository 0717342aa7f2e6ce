package e2e

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/curatorproject/curator/internal/testenv"
)

// TestGroupMachineLeaves: `curator agent leave` on a group's machine is a
// leave, not a crash: the group loop records machine-left (not
// machine-exited, "exited before its node joined", which counts toward
// its crash backoff), and makes another machine at once.
func TestGroupMachineLeaves(t *testing.T) {
	parallel(t) // its own addresses and dirs
	d := startDevCluster(t, binary, nil, "127.0.146.10-127.0.146.30", 1, 1)
	worker := nodeOfGroup(t, d.config, "workers")
	if _, stderr, err := cli(t, "agent", "leave", "--data-dir", filepath.Join(d.dir, "instances", worker.InstanceID, "data")); err != nil {
		t.Fatalf("agent leave %s: %v\n%s", worker.Name, err, stderr)
	}
	testenv.Eventually(t, time.Minute, "the group says the machine left, and makes another", func() error {
		evs, err := events(t, d.config)
		if err != nil {
			return err
		}
		if !slices.ContainsFunc(evs, func(e eventJSON) bool {
			return e.Loop == "groups" && e.Action == "machine-left" && strings.Contains(e.Reason, worker.InstanceID)
		}) {
			var groups []string
			for _, e := range evs {
				if e.Loop == "groups" {
					groups = append(groups, e.Action+": "+e.Reason)
				}
			}
			return fmt.Errorf("no machine-left event for %s: %q", worker.InstanceID, groups)
		}
		nodes, err := nodeLs(t, d.config)
		if err != nil {
			return err
		}
		var names []string
		for _, n := range nodes {
			if n.Group == "workers" && n.Name != worker.Name {
				names = append(names, n.Name)
			}
		}
		if len(names) != 1 {
			return fmt.Errorf("workers other than %s: %v", worker.Name, names)
		}
		return allReady(nodes, names...)
	})
	evs, err := events(t, d.config)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range evs {
		if e.Action == "machine-exited" && strings.Contains(e.Reason, worker.InstanceID) {
			t.Errorf("the leave is reported as a crash: %+v", e)
		}
	}
}
