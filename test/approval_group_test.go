package e2e

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/curatorproject/curator/internal/testenv"
)

// TestGroupMachineApproved: with require-approval on, a machine the
// workers group makes (a killed worker's replacement) joins without
// waiting for an operator: the leader made it and vouches for it, and
// says so in an event.
func TestGroupMachineApproved(t *testing.T) {
	parallel(t) // its own addresses and dirs
	d := startDevCluster(t, binary, nil, "127.0.165.10-127.0.165.40", 1, 1)
	var worker nodeJSON
	testenv.Eventually(t, time.Minute, "the worker ready", func() error {
		nodes, err := nodeLs(t, d.config)
		if err != nil {
			return err
		}
		for _, n := range nodes {
			if n.Group == "workers" && n.Status == "ready" {
				worker = n
				return nil
			}
		}
		return fmt.Errorf("no ready worker: %+v", nodes)
	})
	if _, stderr, err := cli(t, "--config", d.config, "cluster", "update", "--require-approval=true"); err != nil {
		t.Fatalf("require approval: %v %s", err, stderr)
	}
	killInstance(t, worker.InstanceID)
	testenv.Eventually(t, 45*time.Second, "a new worker, ready without an approval", func() error {
		nodes, err := nodeLs(t, d.config)
		if err != nil {
			return err
		}
		if !slices.ContainsFunc(nodes, func(n nodeJSON) bool {
			return n.Group == "workers" && n.ID != worker.ID && n.Status == "ready" && n.State != "pending"
		}) {
			return fmt.Errorf("none yet: %+v", nodes)
		}
		return nil
	})
	evs, err := events(t, d.config)
	if err != nil {
		t.Fatal(err)
	}
	if countEvents(evs, func(e eventJSON) bool {
		return e.Action == "approve-group-machine" && strings.Contains(e.Reason, "group workers made its machine")
	}) != 1 {
		t.Errorf("no approve-group-machine event: %+v", evs)
	}
}
