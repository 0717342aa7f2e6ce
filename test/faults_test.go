package e2e

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/curatorproject/curator/internal/testenv"
)

// Fault tests: a binary built with -tags faults dies (exit status 99) at a
// named point in the middle of a membership change, as if its machine died
// there. It is restarted without the fault, and the cluster must finish
// the change on its own: no operator command after the crash.

const (
	faultEnv      = "CURATOR_FAULT"
	faultExitCode = 99
	// convergeTimeout bounds each wait for the cluster to finish a change
	// after a crash.
	convergeTimeout = 60 * time.Second
)

var (
	faultsBinaryOnce sync.Once
	faultsBinaryPath string
	faultsBinaryErr  error
)

// faultsBinary builds the curator with -tags faults, once, beside the
// binary TestMain built (TestMain removes that folder).
func faultsBinary(t *testing.T) string {
	t.Helper()
	faultsBinaryOnce.Do(func() {
		path := filepath.Join(filepath.Dir(binary), "curator-faults")
		if faultsBinaryErr = testenv.GoBuild(path, "./cmd/curator", "-tags", "faults"); faultsBinaryErr == nil {
			faultsBinaryPath = path
		}
	})
	if faultsBinaryErr != nil {
		t.Fatal(faultsBinaryErr)
	}
	return faultsBinaryPath
}

// environWithout is this process's environment without key: a node
// restarted "without the fault" must not inherit one by accident.
func environWithout(key string) []string {
	return slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, key+"=") })
}

// startFaults is start for the faults binary: it runs it with fault (if
// not empty) as CURATOR_FAULT and env added, logs to logPath and is killed
// when the test ends.
func startFaults(t *testing.T, fault string, env map[string]string, name, logPath string, args ...string) *proc {
	t.Helper()
	base := environWithout(faultEnv)
	if fault != "" {
		base = append(base, faultEnv+"="+fault)
	}
	return startBinary(t, faultsBinary(t), withEnv(base, env), name, logPath, nil, args...)
}

// faultAgent is cluster.agentEnv with the faults binary and fault (may be
// empty) in the environment.
func (c *cluster) faultAgent(fault, name string, env map[string]string, verb string, args ...string) *node {
	c.t.Helper()
	return c.agentWith(func(logPath string, argv ...string) *proc {
		return startFaults(c.t, fault, env, name, logPath, argv...)
	}, name, verb, args...)
}

// faulty is an agentStarter of the faults binary with fault.
func (c *cluster) faulty(fault string) agentStarter {
	return func(name string, env map[string]string, verb string, args ...string) *node {
		return c.faultAgent(fault, name, env, verb, args...)
	}
}

// faultInit is cluster.init with the faults binary.
func (c *cluster) faultInit(fault, name string, host int) *node {
	c.t.Helper()
	return c.initWith(c.faulty(fault), name, host)
}

// faultJoin is cluster.join with the faults binary.
func (c *cluster) faultJoin(fault, name string, host int, token string, manager *node) *node {
	c.t.Helper()
	return c.joinWith(c.faulty(fault), name, host, token, manager)
}

// waitFault waits for p to die at its fault point.
func waitFault(t *testing.T, p *proc, point string) {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		t.Fatalf("%s did not die at %s", p.name, point)
	}
	var exit *exec.ExitError
	if !errors.As(p.err, &exit) || exit.ExitCode() != faultExitCode {
		t.Fatalf("%s ended with %v, want exit status %d at %s", p.name, p.err, faultExitCode, point)
	}
	data, _ := os.ReadFile(p.log)
	if !strings.Contains(string(data), "CURATOR_FAULT: dying at "+point) {
		t.Errorf("%s's log does not say it died at %s", p.name, point)
	}
}

// operatorCommand starts an operator command as a process, so that the
// test can stop it: a command cut short by a crash would retry on the next
// manager and finish the change itself, which is exactly what these tests
// must rule out.
func (c *cluster) operatorCommand(name, config string, args ...string) *proc {
	c.t.Helper()
	return start(c.t, name, filepath.Join(c.dir, name+".log"), nil, append([]string{"--config", config}, args...)...)
}

// stopProc kills p if it still runs.
func stopProc(p *proc) {
	_ = p.cmd.Process.Kill()
	<-p.done
}

// eventJSON is the part of `events -o json` the tests read.
type eventJSON struct {
	Time   *time.Time `json:"time"`
	Loop   string     `json:"loop"`
	NodeID string     `json:"node_id"`
	Action string     `json:"action"`
	Reason string     `json:"reason"`
	Leader string     `json:"leader"`
}

func events(t *testing.T, config string) ([]eventJSON, error) {
	t.Helper()
	out, _, err := cli(t, "--config", config, "events", "-o", "json", "--limit", "0")
	if err != nil {
		return nil, err
	}
	var evs []eventJSON
	if err := json.Unmarshal([]byte(out), &evs); err != nil {
		return nil, fmt.Errorf("events -o json: %w: %q", err, out)
	}
	return evs, nil
}

// findEvent returns the first event about nodeID that matches one of the
// loop/action pairs in want.
func findEvent(evs []eventJSON, nodeID string, want ...[2]string) (eventJSON, bool) {
	for _, ev := range evs {
		if ev.NodeID != nodeID {
			continue
		}
		for _, w := range want {
			if ev.Loop == w[0] && ev.Action == w[1] {
				return ev, true
			}
		}
	}
	return eventJSON{}, false
}

// nodeID returns name's ID, from node ls.
func (c *cluster) nodeID(name string) string {
	c.t.Helper()
	nodes, err := nodeLs(c.t, c.config)
	if err != nil {
		c.t.Fatal(err)
	}
	n, ok := byName(nodes, name)
	if !ok {
		c.t.Fatalf("%s is not registered", name)
	}
	return n.ID
}

// nameOf returns the name of node id, for logs (id itself if unknown).
func (c *cluster) nameOf(id string) string {
	c.t.Helper()
	nodes, err := nodeLs(c.t, c.config)
	if err != nil {
		return id
	}
	for _, n := range nodes {
		if n.ID == id {
			return n.Name
		}
	}
	return id
}

// isVoterWithRole says whether node id is an etcd voter with the consensus
// role, and if not, why.
func isVoterWithRole(info *clusterInfoJSON, nodes []nodeJSON, id string) error {
	if !slices.Contains(info.Voters, id) {
		return fmt.Errorf("%s is not among the voters %v (learners %v)", id, info.Voters, info.Learners)
	}
	for _, n := range nodes {
		if n.ID == id {
			if !slices.Contains(n.Roles, "consensus") {
				return fmt.Errorf("%s votes but has roles %v", n.Name, n.Roles)
			}
			return nil
		}
	}
	return fmt.Errorf("%s is not registered", id)
}

// TestFaultPromoteAfterMemberAdd: the only manager dies right after it adds
// a new consensus member to etcd as a learner, before it writes the role.
// A learner does not vote, so the manager restarts alone; with no operator
// action, the change is finished and the node ends a voter with the role.
func TestFaultPromoteAfterMemberAdd(t *testing.T) {
	parallel(t) // its own addresses and dirs
	point := "promote/after-member-add"

	t.Run("node promote", func(t *testing.T) {
		c := newCluster(t, "127.0.220.")
		m1 := c.faultInit(point, "manager-1", 10)
		c.faultJoin("", "worker-1", 11, c.token("worker"), m1)
		c.waitReady(30*time.Second, "manager-1", "worker-1")
		workerID := c.nodeID("worker-1")

		promote := c.operatorCommand("promote", c.writeConfig(m1.listen), "node", "promote", "worker-1")
		waitFault(t, m1.proc, point)
		stopProc(promote)
		crashed := time.Now()

		// The member exists, the role does not: the restarted leader's
		// consensus sync grants it (the member is the truth), the node
		// starts etcd as a learner, and the learner loop makes it a voter.
		c.faultAgent("", "manager-1", nil, "run")
		testenv.Eventually(t, convergeTimeout, "worker-1 is a voter with the consensus role", func() error {
			info, err := clusterInfo(t, c.config)
			if err != nil {
				return err
			}
			nodes, err := nodeLs(t, c.config)
			if err != nil {
				return err
			}
			if err := isVoterWithRole(info, nodes, workerID); err != nil {
				return err
			}
			if len(info.Voters) != 2 || len(info.Learners) != 0 || !info.QuorumHealthy {
				return fmt.Errorf("cluster info %+v: want 2 voters, no learner, quorum healthy", info)
			}
			return nil
		})
		t.Logf("converged %v after the crash", time.Since(crashed).Round(time.Millisecond))
		evs, err := events(t, c.config)
		if err != nil {
			t.Fatal(err)
		}
		ev, ok := findEvent(evs, workerID, [2]string{"consensus-sync", "grant-role"})
		if !ok {
			t.Fatalf("no consensus-sync grant-role event for worker-1 (%s): %+v", workerID, evs)
		}
		if ev.Reason == "" {
			t.Errorf("grant-role event without a reason: %+v", ev)
		}
		if _, ok := findEvent(evs, workerID, [2]string{"learners", "promote"}); !ok {
			t.Errorf("no learners promote event for worker-1: %+v", evs)
		}
	})

	t.Run("join with the manager token", func(t *testing.T) {
		c := newCluster(t, "127.0.221.")
		m1 := c.faultInit(point, "manager-1", 10)
		// Register adds the learner and dies before it writes the node:
		// the joiner's call fails as Unavailable, and it keeps retrying
		// (for --join-timeout) with the same key.
		m2 := c.faultJoin("", "manager-2", 11, c.token("manager"), m1)
		waitFault(t, m1.proc, point)
		crashed := time.Now()
		if m2.proc.exited() {
			t.Fatalf("the joiner gave up when the manager died mid-call: %v", m2.proc.err)
		}

		// The restarted leader finds a learner no node owns. Whichever
		// comes first, the sync removing it or the joiner's retry (which
		// adds the same learner again, idempotently), the node ends
		// registered once, with the role, and a voter.
		c.faultAgent("", "manager-1", nil, "run")
		var m2ID string
		testenv.Eventually(t, convergeTimeout, "manager-2 is a voter with the consensus role", func() error {
			if m2.proc.exited() {
				t.Fatalf("manager-2 exited: %v", m2.proc.err)
			}
			nodes, err := nodeLs(t, c.config)
			if err != nil {
				return err
			}
			n, ok := byName(nodes, "manager-2")
			if !ok {
				return errors.New("manager-2 is not registered")
			}
			m2ID = n.ID
			if len(nodes) != 2 {
				return fmt.Errorf("%d nodes, want 2: %+v", len(nodes), nodes)
			}
			info, err := clusterInfo(t, c.config)
			if err != nil {
				return err
			}
			if err := isVoterWithRole(info, nodes, m2ID); err != nil {
				return err
			}
			if len(info.Voters) != 2 || len(info.Learners) != 0 || !info.QuorumHealthy {
				return fmt.Errorf("cluster info %+v: want 2 voters, no learner, quorum healthy", info)
			}
			return allReady(nodes, "manager-1", "manager-2")
		})
		t.Logf("converged %v after the crash", time.Since(crashed).Round(time.Millisecond))
		evs, err := events(t, c.config)
		if err != nil {
			t.Fatal(err)
		}
		if ev, ok := findEvent(evs, "", [2]string{"consensus-sync", "remove-member"}); ok {
			t.Logf("the sync removed the orphaned learner before the retry re-added it: %s", ev.Reason)
		} else {
			t.Log("the joiner's retry adopted the orphaned learner before the sync looked")
		}
	})
}

// TestFaultDemoteAfterMemberRemove: the curator leader dies right after it
// removes a demoted node's etcd member, before it clears the role. Every
// manager runs with the fault, so whichever leads is the one that dies.
//
// With four managers, three voters remain and two of them live: another
// curator takes over and finishes the demotion before the crashed one is
// back. With three, the crash leaves one live voter of two, a cluster
// without quorum until the crashed manager returns; then whichever curator
// wins finishes it. Either way the crashed manager, restarted without the
// fault, is a voter again, and nobody ran a command after the crash.
func TestFaultDemoteAfterMemberRemove(t *testing.T) {
	parallel(t) // its own addresses and dirs
	point := "demote/after-member-remove"
	for _, tc := range []struct {
		managers int
		subnet   string
	}{
		{4, "127.0.222."},
		{3, "127.0.223."},
	} {
		t.Run(fmt.Sprintf("%d managers", tc.managers), func(t *testing.T) {
			c := newCluster(t, tc.subnet)
			c.buildWith(c.faulty(point), tc.managers, 0)
			var names []string
			for i := 1; i <= tc.managers; i++ {
				names = append(names, fmt.Sprintf("manager-%d", i))
			}
			nodes := c.waitReady(30*time.Second, names...)
			var info *clusterInfoJSON
			testenv.Eventually(t, 30*time.Second, "all managers vote, quorum healthy", func() error {
				var err error
				if info, err = clusterInfo(t, c.config); err != nil {
					return err
				}
				if len(info.Voters) != tc.managers || len(info.Learners) != 0 || !info.QuorumHealthy || info.Leader == "" {
					return fmt.Errorf("cluster info %+v", info)
				}
				return nil
			})
			var leader, victim *node
			var victimID string
			for _, n := range nodes {
				switch {
				case n.ID == info.Leader:
					leader = c.nodes[n.Name]
				case victim == nil:
					victim, victimID = c.nodes[n.Name], n.ID
				}
			}
			if leader == nil || victim == nil {
				t.Fatalf("leader %s: no leader or no other manager among %+v", info.Leader, nodes)
			}
			var survivors []string
			for _, name := range names {
				if c.nodes[name] != leader && c.nodes[name] != victim {
					survivors = append(survivors, c.nodes[name].listen)
				}
			}
			t.Logf("leader %s demotes %s (%s); etcd leader %s", leader.name, victim.name, victimID, info.EtcdLeader)

			demote := c.operatorCommand("demote", c.writeConfig(leader.listen), "node", "demote", victim.name)
			waitFault(t, leader.proc, point)
			stopProc(demote)
			crashed := time.Now()

			// finished checks that the demotion is done: the victim has no
			// consensus role, the voters are the others, quorum holds, and
			// a loop (not an API call) recorded finishing it.
			var finisher eventJSON
			finished := func(config string, wantLeaderNot string) error {
				info, err := clusterInfo(t, config)
				if err != nil {
					return err
				}
				if info.Leader == "" || info.Leader == wantLeaderNot {
					return fmt.Errorf("leader %q", info.Leader)
				}
				nodes, err := nodeLs(t, config)
				if err != nil {
					return err
				}
				for _, n := range nodes {
					if n.ID == victimID && slices.Contains(n.Roles, "consensus") {
						return fmt.Errorf("%s still has roles %v", victim.name, n.Roles)
					}
				}
				if slices.Contains(info.Voters, victimID) || slices.Contains(info.Learners, victimID) {
					return fmt.Errorf("%s is still an etcd member: %+v", victim.name, info)
				}
				if len(info.Voters) != tc.managers-1 || !info.QuorumHealthy {
					return fmt.Errorf("cluster info %+v: want %d voters, quorum healthy", info, tc.managers-1)
				}
				evs, err := events(t, config)
				if err != nil {
					return err
				}
				ev, ok := findEvent(evs, victimID, [2]string{"demotions", "demote"}, [2]string{"consensus-sync", "clear-role"})
				if !ok {
					return fmt.Errorf("no event finishing the demotion of %s", victim.name)
				}
				finisher = ev
				return nil
			}
			if len(survivors) >= 2 {
				// Quorum survives the crash: another curator finishes.
				crashedID, config := info.Leader, c.writeConfig(survivors...)
				testenv.Eventually(t, convergeTimeout, "another curator finishes the demotion", func() error {
					return finished(config, crashedID)
				})
				t.Logf("finished without the crashed leader %v after the crash, by %s: %s %s: %s",
					time.Since(crashed).Round(time.Millisecond), c.nameOf(finisher.Leader), finisher.Loop, finisher.Action, finisher.Reason)
			}

			// The crashed manager comes back, without the fault, and votes
			// again; the demotion is finished (if it was not already).
			c.faultAgent("", leader.name, nil, "run")
			testenv.Eventually(t, convergeTimeout, "the demotion finished and the crashed manager votes again", func() error {
				if err := finished(c.config, ""); err != nil {
					return err
				}
				info, err := clusterInfo(t, c.config)
				if err != nil {
					return err
				}
				nodes, err := nodeLs(t, c.config)
				if err != nil {
					return err
				}
				for _, n := range nodes {
					if c.nodes[n.Name] == leader {
						if err := isVoterWithRole(info, nodes, n.ID); err != nil {
							return err
						}
					}
				}
				// The demoted node stays, as a worker.
				return allReady(nodes, names...)
			})
			t.Logf("converged %v after the crash; the demotion was finished by %s: %s %s: %s",
				time.Since(crashed).Round(time.Millisecond), c.nameOf(finisher.Leader), finisher.Loop, finisher.Action, finisher.Reason)
		})
	}
}
