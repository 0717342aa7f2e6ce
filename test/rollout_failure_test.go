package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/curatorproject/curator/curator"
	"github.com/curatorproject/curator/curator/spec"
	"github.com/curatorproject/curator/internal/testenv"
	pb "github.com/curatorproject/curator/proto"
)

// describe is group's spec as `group describe` prints it, and parsed.
func (d *devRun) describe(group string) (string, *pb.GroupSpec) {
	d.t.Helper()
	described, _, err := cli(d.t, "--config", d.config, "group", "describe", group)
	if err != nil {
		d.t.Fatal(err)
	}
	parsed, err := spec.ParseGroupSpec([]byte(described))
	if err != nil {
		d.t.Fatal(err)
	}
	return described, parsed
}

// commitArgs commits group with its template's args set to args (YAML
// flow list, such as "[--no-such-flag]") and returns the new config SHA
// and the one it had.
func (d *devRun) commitArgs(group, args string) (sha, was string) {
	d.t.Helper()
	described, _ := d.describe(group)
	was, release := d.committed(group)
	lines := strings.Split(described, "\n")
	for i, l := range lines {
		if strings.HasPrefix(l, "  args:") {
			lines[i] = "  args: " + args
		}
	}
	text := strings.Join(lines, "\n")
	file := filepath.Join(d.t.TempDir(), group+".yaml")
	if err := os.WriteFile(file, []byte(text), 0o600); err != nil {
		d.t.Fatal(err)
	}
	if out, stderr, err := cli(d.t, "--config", d.config, "group", "commit", file); err != nil {
		d.t.Fatalf("commit %s args %s: %v\n%s%s", group, args, err, out, stderr)
	}
	return d.shaOf(text, release), was
}

// commitPolicy commits group with max_parallel and the rollout's
// max_unavailable set (the template unchanged: no rollout).
func (d *devRun) commitPolicy(group string, maxParallel, maxUnavailable int) {
	d.t.Helper()
	spec, _, err := cli(d.t, "--config", d.config, "group", "describe", group)
	if err != nil {
		d.t.Fatal(err)
	}
	for old, new := range map[string]string{
		"max_parallel: 1\n":      fmt.Sprintf("max_parallel: %d\n", maxParallel),
		"  max_unavailable: 0\n": fmt.Sprintf("  max_unavailable: %d\n", maxUnavailable),
	} {
		if !strings.Contains(spec, old) {
			d.t.Fatalf("group describe %s has no %q:\n%s", group, old, spec)
		}
		spec = strings.Replace(spec, old, new, 1)
	}
	file := filepath.Join(d.t.TempDir(), group+".yaml")
	if err := os.WriteFile(file, []byte(spec), 0o600); err != nil {
		d.t.Fatal(err)
	}
	if out, stderr, err := cli(d.t, "--config", d.config, "group", "commit", file); err != nil {
		d.t.Fatalf("commit %s: %v\n%s%s", group, err, out, stderr)
	}
}

// servingFloor is how many of group's machines a rollout keeps ready
// throughout, from its spec: size - max_unavailable for workers, the
// size for consensus members (which always surge).
func (d *devRun) servingFloor(group string) int {
	d.t.Helper()
	_, parsed := d.describe(group)
	if slices.Contains(parsed.GetRoles(), pb.Role_ROLE_CONSENSUS) {
		return int(parsed.GetSize())
	}
	return int(parsed.GetSize()) - int(parsed.GetRollout().GetMaxUnavailable())
}

// monitorReadyOn checks, every 200 ms until stopped, that group has at
// least min nodes on config sha that serve: ready and not drained (a
// rollout drains a node before its machine goes). A monitor that took
// no sample says so: it could not have failed.
func monitorReadyOn(t *testing.T, config, group, sha string, min int) (stop func()) {
	t.Helper()
	done, finished := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(finished)
		samples, least := 0, -1
		for {
			select {
			case <-done:
				t.Logf("group %s: %d samples, at least %d ready on %s (want %d)", group, samples, least, sha[:12], min)
				if samples == 0 {
					t.Errorf("group %s: no sample of its nodes on %s was taken", group, sha[:12])
				}
				return
			case <-time.After(200 * time.Millisecond):
			}
			nodes, err := nodeLs(t, config)
			if err != nil {
				continue // a call that fails says nothing of the nodes
			}
			n, unknown := 0, false
			for _, x := range nodes {
				if x.Group == group && x.ConfigSHA == sha && x.Status == "ready" && x.Availability != "drain" {
					n++
				}
				// A leader that took over a moment ago shows the nodes it
				// has not heard from yet as unknown: such a sample says
				// nothing of them, as a call that fails does not.
				unknown = unknown || x.Group == group && x.Status == "unknown"
			}
			if unknown {
				continue
			}
			samples++
			if least < 0 || n < least {
				least = n
			}
			if n < min {
				t.Errorf("group %s: only %d ready nodes on the old config %s: want at least %d at all times (%+v)", group, n, sha[:12], min, nodes)
				return
			}
		}
	}()
	return func() { close(done); <-finished }
}

// TestRolloutBadTemplate commits a template whose machines cannot start
// (`args: [--no-such-flag]`): the rollout fails with the machine's last
// words, rolls the group back to its previous config by itself, and the
// old machines serve throughout (never fewer than size -
// max_unavailable ready and not drained on the old config, read from
// the group's spec: all of them, by default; with max_unavailable 1 and
// max_parallel 2 the rollout may drain an old worker beside its first
// new machine, if that one has not died yet, down to the floor). Managers: the old ones serve
// throughout and the quorum is never lost (every voter healthy). With
// the curator leader killed just after the commit, the next leader finds
// the failure itself and rolls back. With the leader dying just after it
// turned the failed rollout into its rollback (a fault point), the events
// that say why are there all the same: they went in that transaction.
func TestRolloutBadTemplate(t *testing.T) {
	parallel(t) // its own addresses and dirs
	for _, tc := range []struct {
		name, group   string
		subnet        string
		managers, wks int
		size          int
		// maxParallel and maxUnavailable, when set, are committed first.
		maxParallel, maxUnavailable int
		killLeader                  bool
		// fault, when set, is the fault point the curators die at.
		fault string
	}{
		{name: "workers", group: "workers", subnet: "127.0.243", managers: 3, wks: 2, size: 2},
		{name: "managers", group: "managers", subnet: "127.0.244", managers: 3, size: 3},
		{name: "workers, leader killed", group: "workers", subnet: "127.0.245", managers: 3, wks: 2, size: 2, killLeader: true},
		{name: "workers, leader dies at the rollback", group: "workers", subnet: "127.0.235", managers: 3, wks: 2, size: 2, fault: curator.FaultRolloutAfterRollBack},
		{name: "workers, max_unavailable 1", group: "workers", subnet: "127.0.246", managers: 1, wks: 3, size: 3, maxParallel: 2, maxUnavailable: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bin, env := binary, []string(nil)
			if tc.fault != "" {
				bin, env = faultsBinary(t), []string{curator.FaultEnv + "=" + tc.fault}
			}
			d := startDevCluster(t, bin, env, tc.subnet+".10-"+tc.subnet+".40", tc.managers, tc.wks)
			var leaderLog func() string
			if tc.fault != "" {
				// The group loop prunes a dead machine's dir, log and all:
				// keep what the log says while it is there.
				leaderLog = keepFile(t, filepath.Join(d.dir, "instances", d.leader().InstanceID, "agent.log"))
			}
			if tc.maxParallel > 0 {
				d.commitPolicy(tc.group, tc.maxParallel, tc.maxUnavailable)
			}
			_, old := d.commitArgs(tc.group, "[]") // the same: no rollout
			floor := d.servingFloor(tc.group)
			if want := tc.size - tc.maxUnavailable; floor != want {
				t.Fatalf("group %s serves at least %d by its spec, want %d", tc.group, floor, want)
			}
			stop := monitorReadyOn(t, d.config, tc.group, old, floor)
			if tc.group == "managers" {
				// Every voter healthy throughout: the quorum never lost.
				defer monitorHealthyVoters(t, d.config, tc.managers)()
			}
			start := time.Now()
			bad, _ := d.commitArgs(tc.group, "[--no-such-flag]")
			if tc.killLeader {
				l := d.leader()
				killInstance(t, l.InstanceID)
				t.Logf("killed the curator leader %s just after the commit", l.Name)
			}
			var r rolloutStatusJSON
			testenv.Eventually(t, 90*time.Second, "the rollout failed and rolled back", func() error {
				var err error
				if r, err = rolloutStatus(t, d.config, tc.group); err != nil {
					return err
				}
				if r.TargetSHA != old || r.RollbackOf != bad || r.State != "done" {
					return fmt.Errorf("%+v", r)
				}
				return nil
			})
			stop()
			t.Logf("failed and rolled back in %v: %s", time.Since(start).Round(100*time.Millisecond), r.Reason)
			if leaderLog != nil && !strings.Contains(leaderLog(), "dying at "+tc.fault) {
				t.Errorf("the curator leader did not die at %s", tc.fault)
			}
			if !strings.Contains(r.Reason, "no-such-flag") {
				t.Errorf("the rollback's reason does not give the machine's last words: %q", r.Reason)
			}
			described, _, err := cli(t, "--config", d.config, "group", "describe", tc.group)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(described, "  args: []") {
				t.Errorf("after the rollback the group's template is not the old one:\n%s", described)
			}
			nodes, err := nodeLs(t, d.config)
			if err != nil {
				t.Fatal(err)
			}
			n := 0
			for _, x := range nodes {
				if x.Group == tc.group {
					n++
					if x.ConfigSHA != old || x.Status != "ready" {
						t.Errorf("after the rollback: %+v", x)
					}
				}
			}
			if n != tc.size {
				t.Errorf("%d nodes in group %s after the rollback, want %d", n, tc.group, tc.size)
			}
			evs, err := events(t, d.config)
			if err != nil {
				t.Fatal(err)
			}
			var seen []string
			for _, e := range evs {
				if e.Loop == "groups" && (e.Action == "rollout-failed" || e.Action == "rollback-rollout") {
					seen = append(seen, e.Action)
				}
			}
			if !slices.Contains(seen, "rollout-failed") || !slices.Contains(seen, "rollback-rollout") {
				t.Errorf("events of the failure: %v, want rollout-failed and rollback-rollout", seen)
				for _, e := range evs {
					t.Logf("event %+v", e)
				}
			}
		})
	}
}

// groupNamed is group name as `group ls -o json` gives it.
func groupNamed(t *testing.T, config, name string) (groupJSON, error) {
	t.Helper()
	groups, err := groupLs(t, config)
	if err != nil {
		return groupJSON{}, err
	}
	for _, g := range groups {
		if g.Name == name {
			return g, nil
		}
	}
	return groupJSON{}, fmt.Errorf("no group %s in %+v", name, groups)
}

// TestRolloutPauseInSurge pauses a manager rollout while its surge member
// is there (the group one over its size): the pause keeps it (nothing is
// demoted or destroyed while paused), `rollout status` names only a node
// or machine that exists and counts what `group ls` (the dashboard's
// source) counts, and a resume finishes the rollout.
func TestRolloutPauseInSurge(t *testing.T) {
	parallel(t) // its own addresses and dirs
	d := startDevCluster(t, binary, nil, "127.0.247.10-127.0.247.40", 3, 0)
	defer monitorHealthyVoters(t, d.config, 3)()
	sha := d.commitVersion("managers", "v2")
	testenv.Eventually(t, time.Minute, "the surge member made", func() error {
		g, err := groupNamed(t, d.config, "managers")
		if err != nil {
			return err
		}
		if g.Machines < 4 {
			return fmt.Errorf("%d machines", g.Machines)
		}
		return nil
	})
	if out, stderr, err := cli(t, "--config", d.config, "rollout", "pause", "managers"); err != nil {
		t.Fatalf("rollout pause: %v\n%s%s", err, out, stderr)
	}
	r := d.waitRollout("managers", "paused", 10*time.Second)
	held := time.Now()
	for time.Since(held) < 12*time.Second {
		g, err := groupNamed(t, d.config, "managers")
		if err == nil && g.Machines != 4 {
			t.Fatalf("paused in the surge, the group has %d machines: want the 4 it had (%+v)", g.Machines, g)
		}
		r, err := rolloutStatus(t, d.config, "managers")
		if err == nil && r.State == "paused" {
			if g.RolloutUpdated != r.Updated {
				t.Errorf("group ls counts %d updated, rollout status %d", g.RolloutUpdated, r.Updated)
			}
			if r.Node != "" {
				nodes, _ := nodeLs(t, d.config)
				if !slices.ContainsFunc(nodes, func(n nodeJSON) bool { return n.ID == r.Node || n.InstanceID == r.Node }) {
					t.Errorf("rollout status names %s, which is no node: %+v", r.Node, nodes)
				}
			}
		}
		time.Sleep(500 * time.Millisecond)
	}
	evs, err := events(t, d.config)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range evs {
		if e.Loop == "groups" && e.Time.After(held) && (e.Action == "demote" || e.Action == "destroy-machine" || e.Action == "drain") {
			t.Errorf("while paused: %+v", e)
		}
	}
	t.Logf("paused at %+v; kept 4 machines for 12 s", r)
	if out, stderr, err := cli(t, "--config", d.config, "rollout", "resume", "managers"); err != nil {
		t.Fatalf("rollout resume: %v\n%s%s", err, out, stderr)
	}
	d.waitRollout("managers", "done", 3*time.Minute)
	d.waitManagersOn(sha, time.Minute)
}

// historyRow is one row of `rollout history -o json`.
type historyRow struct {
	SHA        string `json:"sha"`
	State      string `json:"state"`
	RollbackOf string `json:"rollback_of"`
	Current    bool   `json:"current"`
}

// TestRolloutUndoRestart: `rollout history` lists a group's configs,
// `rollout undo --to PREFIX` goes back to one (an unknown or malformed
// prefix refused, nothing changed), `rollout restart` starts a cancelled
// rollout again, and the rollout a rollback undid.
func TestRolloutUndoRestart(t *testing.T) {
	parallel(t) // its own addresses and dirs
	d := startDevCluster(t, binary, nil, "127.0.224.10-127.0.224.40", 3, 2)
	_, v1 := d.commitArgs("workers", "[]")
	v2 := d.commitVersion("workers", "v2")
	d.waitRollout("workers", "done", 2*time.Minute)
	out, stderr, err := cli(t, "--config", d.config, "rollout", "history", "workers", "-o", "json")
	if err != nil {
		t.Fatalf("rollout history: %v %s", err, stderr)
	}
	var rows []historyRow
	if err := json.Unmarshal([]byte(out), &rows); err != nil {
		t.Fatal(err)
	}
	if want := []historyRow{{SHA: v2, State: "done", Current: true}, {SHA: v1, State: "committed"}}; !slices.Equal(rows, want) {
		t.Errorf("history %+v, want %+v", rows, want)
	}
	for _, bad := range []struct{ to, want string }{
		{"0000", "no config SHA of group workers begins with 0000"},
		{"zz", "hex digits"},
	} {
		if _, stderr, err := cli(t, "--config", d.config, "rollout", "undo", "workers", "--to", bad.to); err == nil || !strings.Contains(stderr, bad.want) {
			t.Errorf("undo --to %s: %v %q, want %q", bad.to, err, stderr, bad.want)
		}
	}
	if out, stderr, err := cli(t, "--config", d.config, "rollout", "undo", "workers", "--to", v1[:8]); err != nil {
		t.Fatalf("undo --to %s: %v\n%s%s", v1[:8], err, out, stderr)
	}
	if r := d.waitRollout("workers", "done", 2*time.Minute); r.TargetSHA != v1 {
		t.Errorf("after undo: %+v, want done on %s", r, v1)
	}

	// A cancelled rollout, restarted, finishes.
	v3 := d.commitVersion("workers", "v3")
	if _, stderr, err := cli(t, "--config", d.config, "rollout", "cancel", "workers", "--sha", v3[:10]); err != nil {
		t.Fatalf("cancel --sha %s: %v %s", v3[:10], err, stderr)
	}
	d.waitRollout("workers", "cancelled", 10*time.Second)
	if _, stderr, err := cli(t, "--config", d.config, "rollout", "restart", "workers"); err != nil {
		t.Fatalf("restart: %v %s", err, stderr)
	}
	if r := d.waitRollout("workers", "done", 2*time.Minute); r.TargetSHA != v3 {
		t.Errorf("after restart: %+v, want done on %s", r, v3)
	}
	// A done rollout is not restarted.
	if _, stderr, err := cli(t, "--config", d.config, "rollout", "restart", "workers"); err == nil || !strings.Contains(stderr, "only a cancelled or failed one") {
		t.Errorf("restart of a done rollout: %v %q", err, stderr)
	}

	// The rollout a rollback undid, restarted, fails and rolls back again.
	bad, _ := d.commitArgs("workers", "[--no-such-flag]")
	testenv.Eventually(t, time.Minute, "rolled back", func() error {
		r, err := rolloutStatus(t, d.config, "workers")
		if err != nil || r.State != "done" || r.RollbackOf != bad {
			return fmt.Errorf("%+v %v", r, err)
		}
		return nil
	})
	if _, stderr, err := cli(t, "--config", d.config, "rollout", "restart", "workers"); err != nil {
		t.Fatalf("restart of the rolled back rollout: %v %s", err, stderr)
	}
	testenv.Eventually(t, time.Minute, "restarted, failed and rolled back again", func() error {
		out, _, err := cli(t, "--config", d.config, "rollout", "history", "workers", "-o", "json")
		if err != nil {
			return err
		}
		var rows []historyRow
		if err := json.Unmarshal([]byte(out), &rows); err != nil {
			return err
		}
		failed := 0
		for _, r := range rows {
			if r.SHA == bad && r.State == "failed" {
				failed++
			}
		}
		if !rows[0].Current || rows[0].RollbackOf != bad || rows[0].State != "done" || failed != 2 {
			return fmt.Errorf("history %+v", rows)
		}
		return nil
	})
}
