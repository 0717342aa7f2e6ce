package e2e

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/curatorproject/curator/internal/testenv"
)

// commitEdits commits group with the lines of its described spec whose
// key is one of edits' set to its value (indentation kept), and returns
// the new spec's text.
func (d *devRun) commitEdits(group string, edits map[string]string) string {
	d.t.Helper()
	described, _ := d.describe(group)
	lines := strings.Split(described, "\n")
	for k, v := range edits {
		found := false
		for i, l := range lines {
			if trimmed := strings.TrimLeft(l, " "); strings.HasPrefix(trimmed, k+":") {
				lines[i] = l[:len(l)-len(trimmed)] + k + ": " + v
				found = true
			}
		}
		if !found {
			d.t.Fatalf("group describe %s has no %s:\n%s", group, k, described)
		}
	}
	text := strings.Join(lines, "\n")
	d.commitText(group, text)
	return text
}

// commitText commits group file text.
func (d *devRun) commitText(group, text string) {
	d.t.Helper()
	file := filepath.Join(d.t.TempDir(), group+".yaml")
	if err := os.WriteFile(file, []byte(text), 0o600); err != nil {
		d.t.Fatal(err)
	}
	if out, stderr, err := cli(d.t, "--config", d.config, "group", "commit", file); err != nil {
		d.t.Fatalf("commit %s: %v\n%s%s\n%s", group, err, out, stderr, text)
	}
}

// readyOf are group's ready nodes, not drained, on config sha (any, if
// empty).
func readyOf(t *testing.T, config, group, sha string) ([]nodeJSON, error) {
	t.Helper()
	nodes, err := nodeLs(t, config)
	if err != nil {
		return nil, err
	}
	var out []nodeJSON
	for _, n := range nodes {
		if n.Group == group && n.Status == "ready" && n.Availability != "drain" && (sha == "" || n.ConfigSHA == sha) {
			out = append(out, n)
		}
	}
	return out, nil
}

// eventsOf are the group loop's events of action whose reason says
// what.
func eventsOf(t *testing.T, config, action, what string) ([]eventJSON, error) {
	t.Helper()
	evs, err := events(t, config)
	if err != nil {
		return nil, err
	}
	var out []eventJSON
	for _, e := range evs {
		if e.Loop == "groups" && e.Action == action && strings.Contains(e.Reason, what) {
			out = append(out, e)
		}
	}
	return out, nil
}

// TestGroupRefusalServesOthers: a group whose provider cannot make a
// machine (every address of its pool held by another program) fails
// alone. A worker of another group killed meanwhile is replaced in the
// usual time (its node down after 5 s, a new one joins); the bad group
// has an event with the provider's reason, backs off (its refusals 1 s,
// 2 s, ... apart, not one a tick) and `group ls` shows it failing; the
// leader's group loop never fails (no restart, curator_loop_errors_total
// of the loop 0).
func TestGroupRefusalServesOthers(t *testing.T) {
	parallel(t) // its own addresses and dirs
	d := startDevCluster(t, binary, nil, "127.0.120.10-127.0.120.40", 1, 2)
	d.commitEdits("workers", map[string]string{"replace_after": "10s"})
	// Another program on the bad group's one address.
	ln, err := net.Listen("tcp", "127.0.120.50:7000")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	d.commitText("bad", fmt.Sprintf(`name: bad
size: 1
roles: [worker]
provider:
  process:
    addresses: 127.0.120.50-127.0.120.50
    port: 7000
    dir: %s
template:
  version: v1
`, t.TempDir()))
	var victim nodeJSON
	testenv.Eventually(t, time.Minute, "two workers ready", func() error {
		ws, err := readyOf(t, d.config, "workers", "")
		if err != nil || len(ws) < 2 {
			return fmt.Errorf("%d ready (%v)", len(ws), err)
		}
		victim = ws[0]
		return nil
	})
	killInstance(t, victim.InstanceID)
	killed := time.Now()
	testenv.Eventually(t, 45*time.Second, "the killed worker replaced beside the failing group", func() error {
		ws, err := readyOf(t, d.config, "workers", "")
		if err != nil {
			return err
		}
		for _, w := range ws {
			if w.InstanceID == victim.InstanceID {
				return fmt.Errorf("%s still listed ready", victim.Name)
			}
		}
		if len(ws) < 2 {
			return fmt.Errorf("%d workers ready", len(ws))
		}
		return nil
	})
	t.Logf("the killed worker was replaced %v after the kill", time.Since(killed).Round(time.Second))

	testenv.Eventually(t, time.Minute, "the bad group's provider refused twice, each said in an event", func() error {
		evs, err := eventsOf(t, d.config, "provision-failed", "group bad: its provider could not make a machine (")
		if err != nil || len(evs) < 2 {
			return fmt.Errorf("%d events yet (%v)", len(evs), err)
		}
		for i, e := range evs[:2] {
			for _, want := range []string{fmt.Sprintf("(%d in a row; the group's next try in %v", i+1, time.Second<<i), "address pool exhausted"} {
				if !strings.Contains(e.Reason, want) {
					t.Errorf("refusal %d: reason %q lacks %q", i+1, e.Reason, want)
				}
			}
		}
		return nil
	})

	if g, err := groupNamed(t, d.config, "bad"); err != nil || !strings.Contains(g.ProviderFailing, "address pool exhausted") {
		t.Errorf("group ls shows group bad %+v (%v): want it failing, with the provider's reason", g, err)
	}
	out, _, err := cli(t, "--config", d.config, "group", "ls")
	if err != nil || !strings.Contains(out, "Group bad is failing: group bad: its provider could not make a machine") {
		t.Errorf("group ls says %q (%v): want group bad failing", out, err)
	}

	refused, err := eventsOf(t, d.config, "provision-failed", "group bad:")
	if err != nil {
		t.Fatal(err)
	}
	// Refusals 1, 2, 4, 8, ... s apart: within the two minutes since the
	// commit at most eight, not one every tick.
	if len(refused) > 8 {
		t.Errorf("%d refusals of group bad in %v: want its backoff's few", len(refused), time.Since(killed))
	}
	leader := d.leader()
	host, _, _ := net.SplitHostPort(leader.Address)
	body, err := httpGetOK(fmt.Sprintf("http://%s:7003/metrics", host))
	if err != nil {
		t.Fatal(err)
	}
	if n := parseMetrics(body)[`curator_loop_errors_total{loop="groups"}`]; n != 0 {
		t.Errorf("the leader's group loop failed %v times: a group's provider is not the loop's failure", n)
	}
}

// TestRolloutCancelAfterPausedFailure: a rollout failed under
// failure_action pause (its new machine exits at once), then cancelled:
// the cancel puts the previous template back (the group's config SHA is
// the old one again), and a worker killed afterwards is replaced with it,
// the group at its size again (not a crash loop of the failed template).
func TestRolloutCancelAfterPausedFailure(t *testing.T) {
	parallel(t) // its own addresses and dirs
	d := startDevCluster(t, binary, nil, "127.0.121.10-127.0.121.40", 1, 2)
	d.commitEdits("workers", map[string]string{"replace_after": "10s", "failure_action": "pause"})
	bad, was := d.commitArgs("workers", "[--no-such-flag]")
	d.waitRollout("workers", "paused", 2*time.Minute)
	out, stderr, err := cli(t, "--config", d.config, "rollout", "cancel", "workers")
	if err != nil {
		t.Fatalf("rollout cancel: %v\n%s%s", err, out, stderr)
	}
	if want := fmt.Sprintf("Rollout of group workers to %s had failed: cancelled; the group rolls back to its previous config %s.", bad[:12], was[:12]); !strings.Contains(out, want) {
		t.Errorf("rollout cancel said %q, want %q", out, want)
	}
	if g, err := groupNamed(t, d.config, "workers"); err != nil || g.ConfigSHA != was {
		t.Errorf("after the cancel the group is %+v (%v): want its config back to %s", g, err, was[:12])
	}
	d.waitRollout("workers", "done", time.Minute)

	ws, err := readyOf(t, d.config, "workers", was)
	if err != nil || len(ws) != 2 {
		t.Fatalf("%+v ready on %s (%v): want the two old workers", ws, was[:12], err)
	}
	killInstance(t, ws[0].InstanceID)
	testenv.Eventually(t, time.Minute, "the killed worker replaced with the previous template", func() error {
		now, err := readyOf(t, d.config, "workers", was)
		if err != nil {
			return err
		}
		for _, w := range now {
			if w.InstanceID == ws[0].InstanceID {
				return fmt.Errorf("%s still listed ready", ws[0].Name)
			}
		}
		if len(now) < 2 {
			return fmt.Errorf("%d workers ready on %s", len(now), was[:12])
		}
		return nil
	})
}

// TestRolloutDeadlineFrozenSurge: a rollout's surge worker joins and is
// frozen (SIGSTOP) before it has been ready for monitor: at
// progress_deadline it has failed, and it is destroyed then, at once (an
// event saying so), not kept until replace_after (2 minutes) as a node
// down in the rollback; the rollback is done well before.
func TestRolloutDeadlineFrozenSurge(t *testing.T) {
	parallel(t) // its own addresses and dirs
	d := startDevCluster(t, binary, nil, "127.0.122.10-127.0.122.40", 1, 2)
	d.commitEdits("workers", map[string]string{"replace_after": "2m0s", "monitor": "15s", "progress_deadline": "25s"})
	sha := d.commitVersion("workers", "v2")
	committed := time.Now()
	var surge nodeJSON
	testenv.Eventually(t, time.Minute, "the surge worker joined", func() error {
		ws, err := readyOf(t, d.config, "workers", sha)
		if err != nil || len(ws) == 0 {
			return fmt.Errorf("none ready on %s (%v)", sha[:12], err)
		}
		surge = ws[0]
		return nil
	})
	pids, err := exec.Command("pgrep", "-f", "--", "/instances/"+surge.InstanceID+"/data").Output()
	if err != nil {
		t.Fatalf("no process of %s: %v", surge.Name, err)
	}
	for _, pid := range strings.Fields(string(pids)) {
		var p int
		fmt.Sscan(pid, &p)
		if err := syscall.Kill(p, syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("froze the surge worker %s %v after the commit", surge.Name, time.Since(committed).Round(100*time.Millisecond))
	testenv.Eventually(t, time.Minute, "the frozen surge machine destroyed", func() error {
		if _, err := os.Stat(filepath.Join(d.dir, "instances", surge.InstanceID)); err == nil {
			return fmt.Errorf("machine %s still there", surge.InstanceID)
		}
		return nil
	})
	gone := time.Since(committed)
	t.Logf("the frozen surge machine was destroyed %v after the commit", gone.Round(100*time.Millisecond))
	evs, err := eventsOf(t, d.config, "destroy-machine", "machine "+surge.InstanceID+" failed")
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 1 || !strings.Contains(evs[0].Reason, "(progress_deadline 25s); it goes at once, and the rollout fails") {
		t.Errorf("destroy events of the failed machine: %+v", evs)
	}
	r := d.waitRollout("workers", "done", time.Minute)
	if r.RollbackOf != sha {
		t.Errorf("rollout %+v: want the rollback from %s done", r, sha[:12])
	}
	t.Logf("rolled back %v after the commit", time.Since(committed).Round(100*time.Millisecond))
}
