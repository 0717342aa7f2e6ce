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

	"github.com/curatorproject/curator/internal/dockertest"
	"github.com/curatorproject/curator/internal/testenv"
)

// TestRepairCeilingFreeze: a dev cluster's workers group of three with
// max_unhealthy 1 and replace_after 6s (its floor); two of its workers frozen
// (SIGSTOP) for well over twice replace_after past their being
// marked down. The group destroys nothing the whole time (every machine
// and its process still there), says so once (repair-hold, with the
// numbers), and once the workers are let go (SIGCONT) it recovers by
// itself (repair-resume), the same three machines ready.
func TestRepairCeilingFreeze(t *testing.T) {
	parallel(t) // its own addresses and dirs
	d := startDevCluster(t, binary, nil, "127.0.164.10-127.0.164.40", 1, 3)
	workers := ceilingWorkers(t, d)
	pids := func(inst string) []string {
		out, _ := exec.Command("pgrep", "-f", "--", "/instances/"+inst+"/data").Output()
		return strings.Fields(string(out))
	}
	// dev's machines run the copy of its binary it keeps in DIR (a go
	// run build is deleted when go run exits).
	for _, pid := range pids(workers[0].InstanceID) {
		if exe, err := os.Readlink("/proc/" + pid + "/exe"); err != nil || exe != filepath.Join(d.dir, "bin", "curator") {
			t.Errorf("worker %s runs %q (%v), want dev's copy in DIR/bin/curator", workers[0].Name, exe, err)
		}
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
	checkCeiling(t, d, workers, ceilingFault{
		what:    "frozen",
		hit:     func(n nodeJSON) { signal(n, syscall.SIGSTOP) },
		release: func(n nodeJSON) { signal(n, syscall.SIGCONT) },
		there: func(n nodeJSON) bool {
			_, err := os.Stat(filepath.Join(d.dir, "instances", n.InstanceID))
			return err == nil && len(pids(n.InstanceID)) > 0
		},
		heal: 30 * time.Second,
	})
}

// TestRepairCeilingCutDocker is TestRepairCeilingFreeze with the two
// workers cut off the network rather than frozen: their containers
// disconnected from the dev cluster's Docker network (every link at
// once, packets to them lost), for well over twice replace_after
// past their being marked down, then connected again at their addresses.
// Their agents run on meanwhile, unable to reach a manager: the group
// destroys nothing, says repair-hold once, and recovers by itself. (The
// partition harness, netfault, cuts nodes by uid; a group's machines all
// run under the process provider's, so the cut here is Docker's.) It
// skips, saying why, where no Docker daemon answers.
func TestRepairCeilingCutDocker(t *testing.T) {
	inChain(t, engineChain) // Docker engines
	const (
		network = "curator-e2e-ceiling"
		subnet  = "172.30.106.0/24"
	)
	_, image := dockertest.Image(t, network, subnet, "curator-e2e-ceiling")
	t.Cleanup(func() {
		exec.Command("sh", "-c", "docker rm -f $(docker ps -aq --filter network="+network+") ; docker network rm "+network+"; docker rmi -f "+image).Run()
	})
	d := startDevIn(t, binary, nil, t.TempDir(), "127.0.166.10-127.0.166.40", 1, 3,
		"--provider", "docker", "--network", network, "--subnet", subnet, "--image", image)
	workers := ceilingWorkers(t, d)
	docker := func(args ...string) string {
		out, err := exec.Command("docker", args...).CombinedOutput()
		if err != nil {
			t.Errorf("docker %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return strings.TrimSpace(string(out))
	}
	ips := map[string]string{}
	checkCeiling(t, d, workers, ceilingFault{
		what: "cut off",
		hit: func(n nodeJSON) {
			ips[n.InstanceID] = docker("inspect", "-f", "{{(index .NetworkSettings.Networks \""+network+"\").IPAddress}}", n.InstanceID)
			docker("network", "disconnect", "--force", network, n.InstanceID)
		},
		release: func(n nodeJSON) {
			if ip := ips[n.InstanceID]; ip != "" {
				delete(ips, n.InstanceID)
				docker("network", "connect", "--ip", ip, network, n.InstanceID)
			}
		},
		there: func(n nodeJSON) bool {
			out, err := exec.Command("docker", "inspect", "-f", "{{.State.Running}}", n.InstanceID).Output()
			return err == nil && strings.TrimSpace(string(out)) == "true"
		},
		// A cut connection is found dead by its keepalives and dialled
		// again with backoff: slower than a process continued.
		heal: time.Minute,
	})
}

// ceilingWorkers waits for d's three workers and commits their group with
// replace_after 6s (the floor: dev's down-after 5s plus a heartbeat
// interval) and max_unhealthy 1.
func ceilingWorkers(t *testing.T, d *devRun) []nodeJSON {
	t.Helper()
	var workers []nodeJSON
	testenv.Eventually(t, time.Minute, "three workers ready", func() error {
		nodes, err := nodeLs(t, d.config)
		if err != nil {
			return err
		}
		workers = nil
		for _, n := range nodes {
			if n.Group == "workers" && n.Status == "ready" {
				workers = append(workers, n)
			}
		}
		if len(workers) != 3 {
			return fmt.Errorf("%d ready", len(workers))
		}
		return nil
	})
	spec, _, err := cli(t, "--config", d.config, "group", "describe", "workers")
	if err != nil {
		t.Fatal(err)
	}
	for old, new := range map[string]string{"replace_after: 1m0s": "replace_after: 6s", "max_unhealthy: 40%": "max_unhealthy: \"1\""} {
		if !strings.Contains(spec, old) {
			t.Fatalf("group describe has no %q:\n%s", old, spec)
		}
		spec = strings.Replace(spec, old, new, 1)
	}
	file := filepath.Join(t.TempDir(), "workers.yaml")
	if err := os.WriteFile(file, []byte(spec), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, stderr, err := cli(t, "--config", d.config, "group", "commit", file); err != nil {
		t.Fatalf("commit: %v %s %s", err, out, stderr)
	}
	return workers
}

// ceilingFault is how a test takes two workers away (hit) and brings
// them back (release), what says a worker's machine is still there, and
// how long the workers have to be ready again once released.
type ceilingFault struct {
	what         string
	hit, release func(n nodeJSON)
	there        func(n nodeJSON) bool
	heal         time.Duration
}

// checkCeiling hits two of the three workers, more than max_unhealthy 1,
// for twice replace_after past their being marked down: every
// machine stays the whole time, no destroy-machine event, one
// repair-hold with the numbers, group ls shows the hold; released, the
// same three are ready within f.heal and the group says repair-resume.
func checkCeiling(t *testing.T, d *devRun, workers []nodeJSON, f ceilingFault) {
	t.Helper()
	hit := workers[:2]
	for _, n := range hit {
		f.hit(n)
	}
	t.Cleanup(func() {
		for _, n := range hit {
			f.release(n)
		}
	})
	instances := func() []string {
		var out []string
		for _, n := range workers {
			if f.there(n) {
				out = append(out, n.InstanceID)
			}
		}
		return out
	}
	// Down after about 5 s, replace_after 6 s later: hold on until twice
	// replace_after past that, checking every machine is there.
	began := time.Now()
	var downAt time.Time
	for time.Since(began) < 40*time.Second && (downAt.IsZero() || time.Since(downAt) < 12*time.Second) {
		if got := instances(); len(got) != 3 {
			t.Fatalf("after %s %s only %v of the workers' machines are left: the group destroyed one", time.Since(began).Round(time.Second), f.what, got)
		}
		if downAt.IsZero() {
			nodes, err := nodeLs(t, d.config)
			if err == nil && countDown(nodes, hit) == len(hit) {
				downAt = time.Now()
				t.Logf("both %s workers down after %s", f.what, time.Since(began).Round(time.Millisecond))
			}
		}
		time.Sleep(500 * time.Millisecond)
	}
	if downAt.IsZero() {
		t.Fatalf("the %s workers were never marked down", f.what)
	}
	evs, err := events(t, d.config)
	if err != nil {
		t.Fatal(err)
	}
	holds := countEvents(evs, func(e eventJSON) bool {
		return e.Action == "repair-hold" && strings.Contains(e.Reason, "2 of its 3 machines are unhealthy") && strings.Contains(e.Reason, "max_unhealthy 1")
	})
	if holds != 1 {
		t.Errorf("%d repair-hold events with the numbers, want 1: %+v", holds, evs)
	}
	if n := countEvents(evs, func(e eventJSON) bool { return e.Loop == "groups" && e.Action == "destroy-machine" }); n != 0 {
		t.Errorf("%d machines destroyed while held", n)
	}
	if gs, err := groupLs(t, d.config); err != nil || !slices.ContainsFunc(gs, func(g groupJSON) bool { return g.Name == "workers" && g.RepairHeld != "" }) {
		t.Errorf("group ls does not show the hold: %+v, %v", gs, err)
	}

	for _, n := range hit {
		f.release(n)
	}
	released := time.Now()
	testenv.Eventually(t, f.heal, "the workers recover by themselves", func() error {
		nodes, err := nodeLs(t, d.config)
		if err != nil {
			return err
		}
		ready := 0
		for _, n := range nodes {
			if n.Group == "workers" && n.Status == "ready" && slices.ContainsFunc(workers, func(w nodeJSON) bool { return w.ID == n.ID }) {
				ready++
			}
		}
		if ready != 3 {
			return fmt.Errorf("%d of the three ready", ready)
		}
		evs, err := events(t, d.config)
		if err != nil {
			return err
		}
		if countEvents(evs, func(e eventJSON) bool { return e.Action == "repair-resume" }) != 1 {
			return fmt.Errorf("no repair-resume event yet")
		}
		return nil
	})
	t.Logf("recovered %s after the workers were released", time.Since(released).Round(time.Millisecond))
	if got := instances(); len(got) != 3 {
		t.Errorf("after the recovery the machines are %v, want the same three", got)
	}
}

// countDown counts the nodes of want that are down in nodes.
func countDown(nodes []nodeJSON, want []nodeJSON) int {
	n := 0
	for _, x := range nodes {
		if x.Status == "down" && slices.ContainsFunc(want, func(w nodeJSON) bool { return w.ID == x.ID }) {
			n++
		}
	}
	return n
}
