package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/curatorproject/curator/provider"
	"github.com/curatorproject/curator/provider/process"
)

// TestRepairCeilingKilled is TestRepairCeilingFreeze with the two workers
// killed (SIGKILL of every process of theirs: a power loss of their host,
// an OOM kill of the tree): their provider keeps what they leave (the
// dir, the data, the address), and the leader takes them for machines
// whose nodes are down, not for machines gone. So it removes and replaces
// neither, and clears neither's dir: it holds, says repair-hold once, and
// once they are started again (as their host would on power-up) they
// rejoin from their data, the same nodes, and the group says
// repair-resume. (Before, each was removed as gone the moment its node
// was marked down, its dir cleared, and a new machine made in its place.)
func TestRepairCeilingKilled(t *testing.T) {
	parallel(t) // its own addresses and dirs
	const addresses = "127.0.168.10-127.0.168.40"
	d := startDevCluster(t, binary, nil, addresses, 1, 3)
	workers := ceilingWorkers(t, d)
	pids := func(inst string) []int {
		out, _ := exec.Command("pgrep", "-f", "--", "/instances/"+inst+"/data").Output()
		var ps []int
		for _, f := range strings.Fields(string(out)) {
			var p int
			fmt.Sscan(f, &p)
			ps = append(ps, p)
		}
		return ps
	}
	// The test starts the killed machines again with dev's own provider
	// (its dir, its copy of the binary), as a host coming back would.
	pool, err := process.PoolAddresses(addresses, 7000)
	if err != nil {
		t.Fatal(err)
	}
	p, err := process.New(process.Config{Dir: d.dir, Binary: filepath.Join(d.dir, "bin", "curator"), Addresses: pool})
	if err != nil {
		t.Fatal(err)
	}
	started := map[string]bool{}
	checkCeiling(t, d, workers, ceilingFault{
		what: "killed",
		hit: func(n nodeJSON) {
			for _, pid := range pids(n.InstanceID) {
				if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
					t.Errorf("kill %s: %v", n.Name, err)
				}
			}
		},
		release: func(n nodeJSON) {
			if started[n.InstanceID] {
				return
			}
			started[n.InstanceID] = true
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if _, err := p.Start(ctx, n.InstanceID, []string{"agent", "run", "--data-dir", provider.PlaceholderDataDir}, nil); err != nil {
				t.Errorf("start %s again: %v", n.Name, err)
			}
		},
		there: func(n nodeJSON) bool {
			_, err := os.Stat(filepath.Join(d.dir, "instances", n.InstanceID, "data"))
			return err == nil
		},
		heal: 30 * time.Second,
	})
	evs, err := events(t, d.config)
	if err != nil {
		t.Fatal(err)
	}
	provisions := 0
	for _, e := range evs {
		if e.Loop != "groups" || !strings.Contains(e.Reason, "workers") {
			continue
		}
		switch e.Action {
		case "remove-node", "prune-machine":
			t.Errorf("the group acted on its killed machines: %s: %s", e.Action, e.Reason)
		case "provision":
			provisions++
		}
	}
	if provisions != 3 {
		t.Errorf("the workers group made %d machines, want its first three only", provisions)
	}
}
