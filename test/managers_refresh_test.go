package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/curatorproject/curator/client"
	"github.com/curatorproject/curator/internal/testenv"
	"github.com/curatorproject/curator/pki"
)

// TestClientsLearnNewManagers: managers that join after a client config
// was written are learned. `cluster admin-cert --out` run with that
// config writes one that names the managers of today, not the config's;
// an `events --follow` started before they joined learns them while it
// runs (client.DefaultManagersRefresh), and follows on through them when
// the one manager it knew is gone. Before, it never asked again and
// waited for that manager forever.
func TestClientsLearnNewManagers(t *testing.T) {
	parallel(t) // its own addresses and dirs
	c := newCluster(t, "127.0.145.")
	m1 := c.build(1, 0)
	old := c.writeConfig(m1.listen) // a config of an earlier day

	var out syncBuffer
	follow := start(t, "events --follow", filepath.Join(t.TempDir(), "follow.log"), &out, "--config", old, "events", "--follow", "--limit", "1")
	testenv.Eventually(t, 30*time.Second, "events --follow prints", func() error {
		if follow.exited() {
			t.Fatalf("events --follow exited: %v", follow.err)
		}
		if out.String() == "" {
			return fmt.Errorf("nothing yet")
		}
		return nil
	})

	for i, name := range []string{"manager-2", "manager-3"} {
		c.join(name, 11+i, c.token("manager"), m1)
		testenv.Eventually(t, 2*time.Minute, name+" a voter", func() error {
			info, err := clusterInfo(t, c.config)
			if err != nil {
				return err
			}
			if len(info.Voters) != 2+i {
				return fmt.Errorf("voters %v", info.Voters)
			}
			return nil
		})
	}
	all := []string{c.addr(10), c.addr(11), c.addr(12)}

	// admin-cert --out names the managers of today.
	dir := filepath.Join(t.TempDir(), "reader")
	mgmtRunWith(t, c.writeConfig(m1.listen), "cluster", "admin-cert", "--role", pki.OperatorReader, "--name", "reader", "--out", dir)
	written, err := client.LoadConfig(filepath.Join(dir, "config.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range all {
		if !strings.Contains(strings.Join(written.Managers, " "), a) {
			t.Errorf("admin-cert --out wrote a config naming %v, not %s", written.Managers, a)
		}
	}

	// The follow learns them (its manager cache, beside its own config,
	// says what it knows), and follows on through them once manager-1 is
	// gone.
	testenv.Eventually(t, client.DefaultManagersRefresh+20*time.Second, "events --follow learns the new managers", func() error {
		data, err := os.ReadFile(client.CachePath(old))
		if err != nil {
			return err
		}
		for _, a := range all {
			if !strings.Contains(string(data), a) {
				return fmt.Errorf("the cache names no %s: %s", a, data)
			}
		}
		return nil
	})
	if err := m1.proc.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	m1.proc.wait(t, 10*time.Second)
	now := c.writeConfig(c.addr(11), c.addr(12))
	testenv.Eventually(t, time.Minute, "a change made after manager-1 is gone", func() error {
		_, _, err := cli(t, "--config", now, "node", "update", "--label-add", "after=1", "manager-2")
		return err
	})
	testenv.Eventually(t, time.Minute, "events --follow prints the change", func() error {
		if follow.exited() {
			t.Fatalf("events --follow exited: %v\n%s", follow.err, out.String())
		}
		if !strings.Contains(out.String(), "UpdateNode") {
			return fmt.Errorf("events --follow printed %q; its log: %s", out.String(), readFile(t, follow.log))
		}
		return nil
	})
}
