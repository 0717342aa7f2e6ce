package e2e

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/curatorproject/curator/curator"
	"github.com/curatorproject/curator/curator/spec"
	"github.com/curatorproject/curator/internal/testenv"
	pb "github.com/curatorproject/curator/proto"
)

// rolloutStatusJSON is the part of `rollout status -o json` the tests read.
type rolloutStatusJSON struct {
	Group     string `json:"group"`
	TargetSHA string `json:"target_sha"`
	State     string `json:"state"`
	Reason    string `json:"reason"`
	Updated   int    `json:"updated"`
	Total     int    `json:"total"`
	Rolled    int    `json:"rolled"`
	Node      string `json:"node"`
	Step      string `json:"step"`
	// Of a rollback: the SHA whose rollout failed.
	RollbackOf  string `json:"rollback_of"`
	Failures    int    `json:"failures"`
	LastFailure string `json:"last_failure"`
}

func rolloutStatus(t *testing.T, config, group string) (rolloutStatusJSON, error) {
	t.Helper()
	var r rolloutStatusJSON
	out, _, err := cli(t, "--config", config, "rollout", "status", group, "-o", "json")
	if err != nil {
		return r, err
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		return r, fmt.Errorf("rollout status -o json: %w: %q", err, out)
	}
	return r, nil
}

// devCluster is a `curator dev` a test runs.
type devRun struct {
	t      *testing.T
	dir    string
	config string
	proc   *proc
}

// startDevCluster runs `curator dev` (bin, with env added) with managers
// and workers on addresses, in a new dir, and waits until it is up.
func startDevCluster(t *testing.T, bin string, env []string, addresses string, managers, workers int) *devRun {
	t.Helper()
	return startDevIn(t, bin, env, t.TempDir(), addresses, managers, workers)
}

// startDevIn is startDevCluster in dir, which may hold a dev cluster to
// restart, with extra flags for dev.
func startDevIn(t *testing.T, bin string, env []string, dir, addresses string, managers, workers int, extra ...string) *devRun {
	t.Helper()
	t.Cleanup(func() { killInstancesUnder(dir) })
	var stdout syncBuffer
	if env != nil {
		env = append(os.Environ(), env...)
	}
	t.Cleanup(func() {
		if t.Failed() {
			logs, _ := filepath.Glob(filepath.Join(dir, "instances", "*", "agent.log"))
			for _, l := range logs {
				dumpLog(t, &proc{name: filepath.Base(filepath.Dir(l)), log: l})
			}
			keepLogs(t, dir)
		}
	})
	p := startBinary(t, bin, env, "dev", filepath.Join(dir, "dev.log"), &stdout, append([]string{"dev",
		"--managers", fmt.Sprint(managers), "--workers", fmt.Sprint(workers), "--dir", dir, "--addresses", addresses}, extra...)...)
	waitDevUp(t, p, &stdout, 3*time.Minute)
	t.Cleanup(func() {
		p.cmd.Process.Signal(syscall.SIGTERM)
		p.wait(t, time.Minute)
	})
	return &devRun{t: t, dir: dir, config: filepath.Join(dir, "config.yaml"), proc: p}
}

// stop sends dev SIGTERM and waits until it has stopped its nodes (keeping
// them) and exited.
func (d *devRun) stop() {
	d.t.Helper()
	if err := d.proc.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		d.t.Fatal(err)
	}
	if err := d.proc.wait(d.t, time.Minute); err != nil {
		d.t.Errorf("dev after SIGTERM: %v", err)
	}
}

// commitVersion commits group with its template's version set to version
// and returns the new config SHA.
func (d *devRun) commitVersion(group, version string) string {
	d.t.Helper()
	described, _, err := cli(d.t, "--config", d.config, "group", "describe", group)
	if err != nil {
		d.t.Fatal(err)
	}
	_, release := d.committed(group)
	lines := strings.Split(described, "\n")
	for i, l := range lines {
		if strings.HasPrefix(strings.TrimSpace(l), "version:") {
			lines[i] = "  version: " + version
		}
	}
	file := filepath.Join(d.t.TempDir(), group+".yaml")
	if err := os.WriteFile(file, []byte(strings.Join(lines, "\n")), 0o600); err != nil {
		d.t.Fatal(err)
	}
	if out, stderr, err := cli(d.t, "--config", d.config, "group", "commit", file); err != nil {
		d.t.Fatalf("commit %s %s: %v\n%s%s", group, version, err, out, stderr)
	}
	return d.shaOf(strings.Join(lines, "\n"), release)
}

// committed is group's config SHA as the leader committed it, and the
// release its template records (what its machines run: the SHA covers
// its digest, which a file's template alone does not hold).
func (d *devRun) committed(group string) (string, *pb.MachineRelease) {
	d.t.Helper()
	out, _, err := cli(d.t, "--config", d.config, "group", "describe", group, "-o", "json")
	if err != nil {
		d.t.Fatalf("group describe %s: %v", group, err)
	}
	var g struct {
		ConfigSHA string `json:"config_sha"`
		Template  struct {
			Release *struct {
				Binary string `json:"binary"`
				Image  string `json:"image"`
				Digest string `json:"digest"`
			} `json:"release"`
		} `json:"template"`
	}
	if err := json.Unmarshal([]byte(out), &g); err != nil || g.ConfigSHA == "" {
		d.t.Fatalf("group describe %s -o json: %v\n%s", group, err, out)
	}
	var r *pb.MachineRelease
	if rel := g.Template.Release; rel != nil {
		r = &pb.MachineRelease{Binary: rel.Binary, Image: rel.Image, Digest: rel.Digest}
	}
	return g.ConfigSHA, r
}

// shaOf is the config SHA a commit of the group file text gets, its
// machines running release (what the group ran: a commit that keeps the
// binary keeps it). Worked out here rather than read back after the
// commit, which a fast rollback may have undone by then.
func (d *devRun) shaOf(text string, release *pb.MachineRelease) string {
	d.t.Helper()
	parsed, err := spec.ParseGroupSpec([]byte(text))
	if err != nil {
		d.t.Fatal(err)
	}
	spec.NormalizeGroupSpec(parsed)
	parsed.Template.Release = release
	return spec.GroupConfigSHA(parsed.Template)
}

// waitManagersOn waits until the managers group has three ready nodes on
// config sha and the cluster three voters and a healthy quorum.
func (d *devRun) waitManagersOn(sha string, timeout time.Duration) {
	d.t.Helper()
	testenv.Eventually(d.t, timeout, "three ready managers of the new config, three healthy voters", func() error {
		nodes, err := nodeLs(d.t, d.config)
		if err != nil {
			return err
		}
		n := 0
		for _, x := range nodes {
			if x.Group == "managers" {
				if x.ConfigSHA != sha || x.Status != "ready" {
					return fmt.Errorf("%s: %s %s", x.Name, x.ConfigSHA, x.Status)
				}
				n++
			}
		}
		info, err := clusterInfo(d.t, d.config)
		if err != nil {
			return err
		}
		if n != 3 || len(info.Voters) != 3 || !info.QuorumHealthy {
			return fmt.Errorf("%d managers, voters %v, quorum healthy %v", n, info.Voters, info.QuorumHealthy)
		}
		return nil
	})
}

// leader returns the node of the curator leader.
func (d *devRun) leader() nodeJSON {
	d.t.Helper()
	var n nodeJSON
	testenv.Eventually(d.t, time.Minute, "a curator leader", func() error {
		nodes, err := nodeLs(d.t, d.config)
		if err != nil {
			return err
		}
		for _, x := range nodes {
			if x.ManagerStatus == "leader" {
				n = x
				return nil
			}
		}
		return errors.New("no leader")
	})
	return n
}

// waitRollout waits until group's rollout is in state want.
func (d *devRun) waitRollout(group, want string, timeout time.Duration) rolloutStatusJSON {
	d.t.Helper()
	var r rolloutStatusJSON
	testenv.Eventually(d.t, timeout, "rollout of "+group+" "+want, func() error {
		var err error
		if r, err = rolloutStatus(d.t, d.config, group); err != nil {
			return err
		}
		if r.State != want {
			return fmt.Errorf("%+v", r)
		}
		return nil
	})
	return r
}

// TestRolloutManagers rolls the three managers of a dev cluster to a new
// config and kills the curator leader with -9 in the middle: the next
// leader finishes, the healthy voters never drop below two, and the
// leader's own node is always rolled last of the old ones.
func TestRolloutManagers(t *testing.T) {
	parallel(t) // its own addresses and dirs
	d := startDevCluster(t, binary, nil, "127.0.213.10-127.0.213.40", 3, 1)
	stopMonitor := monitorHealthyVoters(t, d.config, 2)
	sha := d.commitVersion("managers", "v2")
	killed := ""
	testenv.Eventually(t, 2*time.Minute, "the rollout has rolled one manager", func() error {
		r, err := rolloutStatus(t, d.config, "managers")
		if err != nil {
			return err
		}
		if r.Rolled < 1 && r.State == "rolling" {
			return fmt.Errorf("%+v", r)
		}
		return nil
	})
	if r, _ := rolloutStatus(t, d.config, "managers"); r.State == "rolling" {
		l := d.leader()
		killInstance(t, l.InstanceID)
		killed = l.Name
		t.Logf("killed the curator leader %s in the middle of the rollout (%d of %d rolled)", l.Name, r.Rolled, r.Total)
	} else {
		t.Logf("the rollout ended before the leader could be killed: %+v", r)
	}
	r := d.waitRollout("managers", "done", 3*time.Minute)
	stopMonitor()
	if r.TargetSHA != sha || r.Updated != 3 || r.Total != 3 {
		t.Errorf("rollout %+v, want 3 of 3 updated to %s", r, sha)
	}
	d.waitManagersOn(sha, 2*time.Minute)
	// The leader's own node last: a leader drains its own node only when
	// no other old node is left.
	evs, err := events(t, d.config)
	if err != nil {
		t.Fatal(err)
	}
	var drains []eventJSON
	for _, e := range evs {
		if e.Loop == "groups" && e.Action == "drain" && strings.Contains(e.Reason, "rolling group managers") {
			drains = append(drains, e)
		}
	}
	for i, e := range drains {
		if e.NodeID == e.Leader && i != len(drains)-1 {
			t.Errorf("leader %s drained its own node before the other old ones: %+v", e.Leader, drains)
		}
	}
	t.Logf("rolled 3 managers (leader killed: %q); drains %d", killed, len(drains))
}

// TestRolloutCancel: a commit followed by `rollout cancel` rolls at most
// the node in flight, and the cancel holds across a failover; a later
// commit of a new config starts a new rollout.
func TestRolloutCancel(t *testing.T) {
	parallel(t) // its own addresses and dirs
	d := startDevCluster(t, binary, nil, "127.0.214.10-127.0.214.40", 3, 2)
	sha := d.commitVersion("workers", "v2")
	if out, stderr, err := cli(t, "--config", d.config, "rollout", "cancel", "workers"); err != nil {
		t.Fatalf("rollout cancel: %v\n%s%s", err, out, stderr)
	}
	r := d.waitRollout("workers", "cancelled", 10*time.Second)
	if r.TargetSHA != sha {
		t.Errorf("cancelled rollout %+v, want target %s", r, sha)
	}
	l := d.leader()
	killInstance(t, l.InstanceID)
	testenv.Eventually(t, time.Minute, "a new leader", func() error {
		if n := d.leader(); n.ID == l.ID {
			return errors.New("the old one still")
		}
		return nil
	})
	time.Sleep(10 * time.Second) // the new leader's group loop has ticked several times
	if r := d.waitRollout("workers", "cancelled", 10*time.Second); r.TargetSHA != sha {
		t.Errorf("after the failover: %+v", r)
	}
	nodes, err := nodeLs(t, d.config)
	if err != nil {
		t.Fatal(err)
	}
	var fresh []string
	for _, n := range nodes {
		if n.Group == "workers" && n.ConfigSHA == sha {
			fresh = append(fresh, n.Name)
		}
	}
	if len(fresh) > 1 {
		t.Errorf("%d workers run the cancelled config (%v): want at most the one in flight", len(fresh), fresh)
	}
	// A new config starts a new rollout, which the old cancel does not stop.
	sha3 := d.commitVersion("workers", "v3")
	if r := d.waitRollout("workers", "done", 3*time.Minute); r.TargetSHA != sha3 {
		t.Errorf("rollout after the cancel: %+v, want done to %s", r, sha3)
	}
	// A cancel for an old SHA is refused and changes nothing.
	_, stderr, err := cli(t, "--config", d.config, "rollout", "cancel", "workers", "--sha", sha)
	if err == nil || !strings.Contains(stderr, "not to") {
		t.Errorf("cancel of an old SHA: %v %s", err, stderr)
	}
}

// TestRolloutFaults: a curator leader that dies at each rollout fault
// point (a binary built with -tags faults, the point armed in the first
// manager only, the curator leader at the start) leaves a rollout the
// next leader finishes, with no operator action.
func TestRolloutFaults(t *testing.T) {
	t.Parallel() // a place in the pool for each cluster, below
	bin := faultsBinary(t)
	for i, point := range []string{curator.FaultRolloutAfterProvision, curator.FaultRolloutSurgeLearner, curator.FaultRolloutAfterDemote, curator.FaultRolloutAfterDestroy} {
		t.Run(strings.ReplaceAll(point, "/", "-"), func(t *testing.T) {
			parallel(t) // a range of addresses each
			d := startDevCluster(t, bin, []string{curator.FaultEnv + "=" + point}, fmt.Sprintf("127.0.%d.10-127.0.%d.40", 226+i, 226+i), 3, 0)
			first := d.leader()
			// The group loop prunes a dead machine's dir, log and all:
			// keep what the log says while it is there.
			log := keepFile(t, filepath.Join(d.dir, "instances", first.InstanceID, "agent.log"))
			sha := d.commitVersion("managers", "v2")
			d.waitRollout("managers", "done", 3*time.Minute)
			if !strings.Contains(log(), "dying at "+point) {
				t.Errorf("the first leader %s did not die at %s", first.Name, point)
			}
			nodes, err := nodeLs(t, d.config)
			if err != nil {
				t.Fatal(err)
			}
			if slices.ContainsFunc(nodes, func(n nodeJSON) bool { return n.Group == "managers" && n.ConfigSHA != sha }) {
				t.Errorf("a manager of the old config is left: %+v", nodes)
			}
		})
	}
}

// keepFile reads path every 50 ms until the test ends, and returns what
// it last read: a file that is removed meanwhile is not lost.
func keepFile(t *testing.T, path string) func() string {
	var mu sync.Mutex
	var last string
	done := make(chan struct{})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		for {
			if b, err := os.ReadFile(path); err == nil {
				mu.Lock()
				last = string(b)
				mu.Unlock()
			}
			select {
			case <-done:
				return
			case <-time.After(50 * time.Millisecond):
			}
		}
	}()
	t.Cleanup(func() { close(done); <-stopped })
	return func() string {
		mu.Lock()
		defer mu.Unlock()
		return last
	}
}
