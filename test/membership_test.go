package e2e

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/curatorproject/curator/internal/testenv"
)

// TestDemoteRightAfterAVoterDies: three voters; one is killed with
// SIGKILL and at once the etcd leader is demoted. The demote is refused
// within seconds, naming the killed node (etcd no longer hears from it),
// never waiting on a transfer of etcd leadership to it; nothing changes;
// and the killed node is marked down at down-after, not once a demote
// in flight lets go of the health loop.
func TestDemoteRightAfterAVoterDies(t *testing.T) {
	parallel(t) // its own addresses and dirs
	c := newCluster(t, "127.0.135.")
	c.build(3, 0)
	names := []string{"manager-1", "manager-2", "manager-3"}
	ids := mgmtIDs(t, c, names...)
	mgmtWaitVoters(t, c, ids, names...)
	var info *mgmtInfo
	testenv.Eventually(t, 30*time.Second, "etcd leader apart from the curator leader", func() error {
		var err error
		if info, err = mgmtClusterInfo(t, c); err != nil {
			return err
		}
		if info.EtcdLeader == "" || info.EtcdLeader == info.Leader {
			return fmt.Errorf("curator leader %s, etcd leader %q", info.Leader, info.EtcdLeader)
		}
		return nil
	})
	curatorLeader, etcdLeader := mgmtNameOf(ids, info.Leader), mgmtNameOf(ids, info.EtcdLeader)
	var victim string
	for _, name := range names {
		if name != curatorLeader && name != etcdLeader {
			victim = name
		}
	}
	t.Logf("curator leader %s, etcd leader %s: killing %s, then demoting %s", curatorLeader, etcdLeader, victim, etcdLeader)

	p := c.nodes[victim].proc
	killed := time.Now()
	if err := p.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = p.wait(t, 10*time.Second)

	asked := time.Now()
	_, stderr, err := cli(t, "--config", c.config, "node", "demote", etcdLeader)
	took := time.Since(asked)
	t.Logf("demote of %s answered after %v: %v", etcdLeader, took.Round(time.Millisecond), strings.TrimSpace(stderr))
	if err == nil {
		t.Errorf("the demote of %s, with %s just killed, succeeded: a quorum of two with a dead voter", etcdLeader, victim)
	}
	for _, want := range []string{"FailedPrecondition", ids[victim]} {
		if !strings.Contains(stderr, want) {
			t.Errorf("the demote's refusal %q does not say %q", strings.TrimSpace(stderr), want)
		}
	}
	if took > 5*time.Second {
		t.Errorf("the demote answered after %v, want within 5s", took)
	}

	// When it was marked down is the record's, not when a poll saw it.
	var markedDown time.Time
	testenv.Eventually(t, 30*time.Second, victim+" marked down", func() error {
		var nodes []struct {
			Name          string     `json:"name"`
			Status        string     `json:"status"`
			StatusChanged *time.Time `json:"status_changed"`
		}
		if err := mgmtJSON(t, c, &nodes, "node", "ls", "-o", "json"); err != nil {
			return err
		}
		for _, n := range nodes {
			if n.Name != victim {
				continue
			}
			if n.Status != "down" || n.StatusChanged == nil {
				return fmt.Errorf("status %q", n.Status)
			}
			markedDown = *n.StatusChanged
			return nil
		}
		return fmt.Errorf("%s is not listed", victim)
	})
	bound := downAfter + time.Second
	if d := markedDown.Sub(killed); d > bound {
		t.Errorf("%s marked down %v after the kill, want within %v (down-after %v)", victim, d.Round(time.Millisecond), bound, downAfter)
	} else {
		t.Logf("%s marked down %v after the kill", victim, d.Round(time.Millisecond))
	}
	info, err = mgmtClusterInfo(t, c)
	if err != nil {
		t.Fatal(err)
	}
	if info.EtcdLeader == ids[victim] {
		t.Errorf("etcd leadership went to the killed %s", victim)
	}
	if len(info.Voters) != 3 {
		t.Errorf("voters after the refused demote: %v, want all three", info.Voters)
	}
	nodes, err := mgmtNodes(t, c)
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := mgmtFind(nodes, etcdLeader); n.Demoting || !slices.Contains(n.Roles, "consensus") {
		t.Errorf("%s after the refused demote: roles %v, demoting %v; want it unchanged", etcdLeader, n.Roles, n.Demoting)
	}
}
