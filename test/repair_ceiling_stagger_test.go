package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/curatorproject/curator/internal/testenv"
)

// TestRepairCeilingStaggered: the repair ceiling over the group, not over
// one health tick. A dev cluster (heartbeat interval 1 s, down-after 5 s:
// replace_after's floor 6 s) with a workers group of four, max_unhealthy
// 40% (1 of 4):
//   - replace_after 1ns is refused at commit, the floor named, and the
//     group keeps its replace_after;
//   - at the floor, three of the four are frozen (SIGSTOP) one after
//     another: the first, then the other two, 300 ms apart, 3.8 s after
//     the first was marked down. When the first is due for replacement
//     (6 s after its mark) the other two have been silent for more than
//     two heartbeat intervals but are not marked down yet: counted only
//     once marked, the first would be destroyed alone, within the
//     ceiling. They are counted, so the group holds (repair-hold, once),
//     destroys none of the three for twice replace_after past their all
//     being down, and once let go (SIGCONT) recovers by itself
//     (repair-resume), the same four machines ready.
func TestRepairCeilingStaggered(t *testing.T) {
	parallel(t) // its own addresses and dirs
	d := startDevCluster(t, binary, nil, "127.0.125.10-127.0.125.40", 1, 4)
	var workers []nodeJSON
	testenv.Eventually(t, time.Minute, "four workers ready", func() error {
		nodes, err := nodeLs(t, d.config)
		if err != nil {
			return err
		}
		workers = slices.DeleteFunc(nodes, func(n nodeJSON) bool { return n.Group != "workers" || n.Status != "ready" })
		if len(workers) != 4 {
			return fmt.Errorf("%d ready", len(workers))
		}
		return nil
	})
	slices.SortFunc(workers, func(a, b nodeJSON) int { return strings.Compare(a.Name, b.Name) })

	// The floor: 1ns refused, nothing stored.
	spec, _, err := cli(t, "--config", d.config, "group", "describe", "workers")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(spec, "replace_after: 1m0s") || !strings.Contains(spec, "max_unhealthy: 40%") {
		t.Fatalf("group describe has no replace_after: 1m0s and max_unhealthy: 40%%:\n%s", spec)
	}
	commit := func(replaceAfter string) (string, error) {
		file := filepath.Join(t.TempDir(), "workers.yaml")
		if err := os.WriteFile(file, []byte(strings.Replace(spec, "replace_after: 1m0s", "replace_after: "+replaceAfter, 1)), 0o600); err != nil {
			t.Fatal(err)
		}
		out, stderr, err := cli(t, "--config", d.config, "group", "commit", file)
		return out + stderr, err
	}
	const refusal = "replace_after: 1ns is below its floor 6s (the cluster's --down-after 5s plus --heartbeat-interval 1s)"
	if out, err := commit("1ns"); err == nil || !strings.Contains(out, refusal) {
		t.Errorf("commit of replace_after 1ns: %v %s, want refused with %q", err, out, refusal)
	}
	if now, _, err := cli(t, "--config", d.config, "group", "describe", "workers"); err != nil || !strings.Contains(now, "replace_after: 1m0s") {
		t.Errorf("after the refused commit, group describe (%v):\n%s\nwant replace_after: 1m0s kept", err, now)
	}
	if out, err := commit("6s"); err != nil {
		t.Fatalf("commit of replace_after 6s, the floor: %v %s", err, out)
	}

	pids := func(inst string) []string {
		out, _ := exec.Command("pgrep", "-f", "--", "/instances/"+inst+"/data").Output()
		return strings.Fields(string(out))
	}
	signal := func(n nodeJSON, sig syscall.Signal) {
		for _, pid := range pids(n.InstanceID) {
			var p int
			fmt.Sscan(pid, &p)
			if err := syscall.Kill(p, sig); err != nil {
				t.Errorf("signal %v to %s: %v", sig, n.Name, err)
			}
		}
	}
	hit := workers[:3]
	released := false
	release := func() {
		if !released {
			released = true
			for _, n := range hit {
				signal(n, syscall.SIGCONT)
			}
		}
	}
	t.Cleanup(release)
	machines := func() []string {
		var out []string
		for _, n := range workers {
			if _, err := os.Stat(filepath.Join(d.dir, "instances", n.InstanceID)); err == nil && len(pids(n.InstanceID)) > 0 {
				out = append(out, n.InstanceID)
			}
		}
		return out
	}
	mustAll := func(what string) {
		t.Helper()
		if got := machines(); len(got) != len(workers) {
			t.Fatalf("%s: only %v of the workers' machines are left: the group destroyed one", what, got)
		}
	}

	// The first, then the other two once it is marked down.
	began := time.Now()
	signal(hit[0], syscall.SIGSTOP)
	var markedAt time.Time
	testenv.Eventually(t, 20*time.Second, hit[0].Name+" marked down", func() error {
		evs, err := events(t, d.config)
		if err != nil {
			return err
		}
		for _, e := range evs {
			if e.Loop == "health" && strings.Contains(e.Action, "mark-down") && e.Time != nil && e.Time.After(began) &&
				(e.NodeID == hit[0].ID || strings.Contains(e.Reason, hit[0].ID)) {
				markedAt = *e.Time
				return nil
			}
		}
		return fmt.Errorf("no mark-down yet")
	})
	t.Logf("%s marked down %s after its freeze", hit[0].Name, markedAt.Sub(began).Round(time.Millisecond))
	time.Sleep(time.Until(markedAt.Add(3800 * time.Millisecond)))
	signal(hit[1], syscall.SIGSTOP)
	time.Sleep(300 * time.Millisecond)
	signal(hit[2], syscall.SIGSTOP)
	t.Logf("%s and %s frozen %s and %s after the first's mark", hit[1].Name, hit[2].Name,
		3800*time.Millisecond, 4100*time.Millisecond)

	// Every machine stays until twice replace_after past all three down.
	var allDown time.Time
	for time.Since(began) < time.Minute && (allDown.IsZero() || time.Since(allDown) < 12*time.Second) {
		mustAll(fmt.Sprintf("after %s", time.Since(began).Round(time.Second)))
		if allDown.IsZero() {
			if nodes, err := nodeLs(t, d.config); err == nil && countDown(nodes, hit) == len(hit) {
				allDown = time.Now()
				t.Logf("the three down %s after the first's mark", allDown.Sub(markedAt).Round(time.Millisecond))
			}
		}
		time.Sleep(300 * time.Millisecond)
	}
	if allDown.IsZero() {
		t.Fatal("the three frozen workers were never all down")
	}
	evs, err := events(t, d.config)
	if err != nil {
		t.Fatal(err)
	}
	holds := countEvents(evs, func(e eventJSON) bool {
		return e.Action == "repair-hold" && strings.Contains(e.Reason, "of its 4 machines are unhealthy") && strings.Contains(e.Reason, "max_unhealthy 40% (1 of size 4)")
	})
	if holds != 1 {
		t.Errorf("%d repair-hold events with the numbers, want 1: %+v", holds, evs)
	}
	if n := countEvents(evs, func(e eventJSON) bool { return e.Loop == "groups" && e.Action == "destroy-machine" }); n != 0 {
		t.Errorf("%d machines destroyed while held", n)
	}

	release()
	let := time.Now()
	testenv.Eventually(t, 30*time.Second, "the workers recover by themselves", func() error {
		nodes, err := nodeLs(t, d.config)
		if err != nil {
			return err
		}
		ready := 0
		for _, n := range nodes {
			if n.Status == "ready" && slices.ContainsFunc(workers, func(w nodeJSON) bool { return w.ID == n.ID }) {
				ready++
			}
		}
		if ready != len(workers) {
			return fmt.Errorf("%d of the four ready", ready)
		}
		evs, err := events(t, d.config)
		if err != nil {
			return err
		}
		if n := countEvents(evs, func(e eventJSON) bool { return e.Action == "repair-resume" }); n != 1 {
			return fmt.Errorf("%d repair-resume events, want 1", n)
		}
		return nil
	})
	t.Logf("recovered %s after the workers were let go", time.Since(let).Round(time.Millisecond))
	mustAll("after the recovery")
}
