package e2e

import (
	"fmt"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Partition tests: a cluster of three managers and two workers, each node
// a process under a uid of its own, is put through a frozen leader and
// silent network partitions (netfault_linux_test.go). While the fault
// lasts, a watch (partition_watch_linux_test.go) lists the nodes every
// 150 ms and reads every manager's /healthz every 50 ms; every live node
// must stay ready the whole time, and after the fault ends everything must
// be ready again within healTimeout.
//
// A live node here is one that can reach a majority of the managers: a
// node cut off from the majority (or frozen) may legitimately be marked
// down; each test names it, and only it, as exempt.

const (
	// The holds: how long each fault lasts.
	frozenHold       = 60 * time.Second
	isolatedHold     = 30 * time.Second
	etcdLeaderHold   = 20 * time.Second
	followerPathHold = 50 * time.Second
	oneWayHold       = 20 * time.Second

	// healTimeout: after a fault ends, everything is ready within it.
	healTimeout = 10 * time.Second
	// failoverTimeout bounds the wait for another manager to lead.
	failoverTimeout = electionTTL + 8*time.Second
	// Writes after one-way loss heals: within writesRecoverTimeout,
	// fastWrites writes in a row each take less than fastWrite (or twice
	// the slowest write before the fault, if longer).
	writesRecoverTimeout = 20 * time.Second
	fastWrite            = time.Second
	fastWrites           = 5
)

// baseline is a settled cluster, before any fault.
type baseline struct {
	all      []string          // every node's name
	managers []string          // the managers' names
	workers  []string          // the workers' names
	ids      map[string]string // node IDs by name
	byID     map[string]string // node names by ID
	// leader is the curator leader's name, etcdLeader the etcd leader's
	// (never the same node: the placement loop sees to that).
	leader, etcdLeader string
}

// otherManagers returns b's managers but the named ones.
func (b *baseline) otherManagers(but ...string) []string {
	return slices.DeleteFunc(slices.Clone(b.managers), func(m string) bool { return slices.Contains(but, m) })
}

// others returns every node of b but the named ones.
func (b *baseline) others(but ...string) []string {
	return slices.DeleteFunc(slices.Clone(b.all), func(m string) bool { return slices.Contains(but, m) })
}

// startPartitionCluster builds three managers and two workers on subnet,
// each under a uid of its own, and waits until the cluster has settled:
// every node ready, three voters, a healthy quorum, a curator leader, and
// the etcd leader on another node. It skips t if it cannot make partitions.
func startPartitionCluster(t *testing.T, subnet string) (*netCluster, *baseline) {
	t.Helper()
	c := newNetCluster(t, subnet)
	c.build(3, 2)
	b := &baseline{
		managers: []string{"manager-1", "manager-2", "manager-3"},
		workers:  []string{"worker-1", "worker-2"},
	}
	b.all = slices.Concat(b.managers, b.workers)
	// Settled means the same for a second: the placement loop that moved
	// etcd leadership off the curator leader has recorded its move (its
	// event comes once the move is done), and none is under way.
	var seen string
	var seenSince time.Time
	took, err := waitFor(60*time.Second, func() error {
		nodes, err := nodeLs(t, c.config)
		if err != nil {
			return err
		}
		if err := allReady(nodes, b.all...); err != nil {
			return err
		}
		info, err := clusterInfo(t, c.config)
		if err != nil {
			return err
		}
		if len(info.Voters) != 3 || len(info.Learners) != 0 || !info.QuorumHealthy {
			return fmt.Errorf("cluster info %+v: want 3 voters, no learner, quorum healthy", info)
		}
		if info.Leader == "" || info.EtcdLeader == "" || info.Leader == info.EtcdLeader {
			return fmt.Errorf("curator leader %q, etcd leader %q: want two nodes", info.Leader, info.EtcdLeader)
		}
		b.ids, b.byID = map[string]string{}, map[string]string{}
		for _, n := range nodes {
			b.ids[n.Name], b.byID[n.ID] = n.ID, n.Name
		}
		b.leader, b.etcdLeader = b.byID[info.Leader], b.byID[info.EtcdLeader]
		if now := b.leader + " " + b.etcdLeader; now != seen {
			seen, seenSince = now, time.Now()
		}
		if time.Since(seenSince) < time.Second {
			return fmt.Errorf("curator leader %s, etcd leader %s for %s only", b.leader, b.etcdLeader, time.Since(seenSince).Round(time.Millisecond))
		}
		return nil
	})
	if err != nil {
		t.Fatalf("the cluster did not settle within %s: %v", took.Round(time.Millisecond), err)
	}
	t.Logf("settled: curator leader %s, etcd leader %s; uids %v", b.leader, b.etcdLeader, c.uids)
	return c, b
}

// waitLeader waits for the cluster info to name a curator leader other than
// old, and returns its name; the test fails if none comes in time.
func (w *watch) waitLeader(b *baseline, old string) string {
	w.t.Helper()
	var leader string
	took, err := waitFor(failoverTimeout, func() error {
		info, err := clusterInfo(w.t, w.config)
		if err != nil {
			return err
		}
		if info.Leader == "" || info.Leader == b.ids[old] {
			return fmt.Errorf("curator leader %q", w.name(info.Leader))
		}
		leader = b.byID[info.Leader]
		return nil
	})
	if err != nil {
		w.t.Errorf("no curator leader but %s %s after the fault: %v", old, took.Round(time.Millisecond), err)
		return ""
	}
	w.t.Logf("%s leads %s after the fault", leader, took.Round(time.Millisecond))
	return leader
}

// hold lets the fault last until it began d ago. The watch checks the
// cluster meanwhile.
func hold(t *testing.T, began time.Time, d time.Duration) {
	t.Helper()
	time.Sleep(time.Until(began.Add(d)))
	t.Logf("held the fault %s", time.Since(began).Round(time.Millisecond))
}

// converge checks that everything is ready again within healTimeout of
// the fault's end: every node ready, a curator leader, three voters and a
// healthy quorum.
func (c *netCluster) converge(w *watch, b *baseline, ended time.Time) {
	c.t.Helper()
	_, err := waitFor(healTimeout-time.Since(ended), func() error {
		nodes, err := nodeLs(c.t, w.config)
		if err != nil {
			return err
		}
		if err := allReady(nodes, b.all...); err != nil {
			return err
		}
		info, err := clusterInfo(c.t, w.config)
		if err != nil {
			return err
		}
		if info.Leader == "" || len(info.Voters) != 3 || !info.QuorumHealthy {
			return fmt.Errorf("curator leader %q, %d voters, quorum healthy %v", w.name(info.Leader), len(info.Voters), info.QuorumHealthy)
		}
		return nil
	})
	took := time.Since(ended).Round(time.Millisecond)
	switch {
	case err != nil:
		c.t.Errorf("not converged %s after the fault ended (limit %s): %v", took, healTimeout, err)
		return
	case took > healTimeout:
		c.t.Errorf("converged only %s after the fault ended (limit %s)", took, healTimeout)
		return
	}
	c.t.Logf("converged: everything ready %s after the fault ended", took)
}

// alive fails the test for every node process that exited: no fault here
// may crash a node.
func (c *netCluster) alive(b *baseline) {
	c.t.Helper()
	for _, name := range b.all {
		if p := c.nodes[name].proc; p.exited() {
			c.t.Errorf("%s exited: %v", name, p.err)
		}
	}
}

// TestPartitionFrozenLeader freezes the curator leader's process with
// SIGSTOP for frozenHold: another manager leads, every other node stays
// ready the whole time (the frozen one may be marked down), and after
// SIGCONT everything is ready within healTimeout.
func TestPartitionFrozenLeader(t *testing.T) {
	inChain(t, partitionChain) // its nodes' uids and nftables drops
	c, b := startPartitionCluster(t, "127.0.230.")
	w := c.watch(b, b.leader)
	victim := c.nodes[b.leader].proc

	t.Logf("SIGSTOP to curator leader %s for %s", b.leader, frozenHold)
	if err := victim.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = victim.cmd.Process.Signal(syscall.SIGCONT) })
	fault := w.markFault()
	w.waitLeader(b, b.leader)
	hold(t, fault, frozenHold)
	if err := victim.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	c.converge(w, b, time.Now())
	w.report()
	c.alive(b)
	// Once resumed, the old leader found its lease gone and stepped down
	// (the watch checked it stopped saying it leads), and wrote nothing:
	// it woke to every node silent for frozenHold, which its health loop
	// would have marked down, were its writes not fenced and its loops
	// not idle.
	c.noEventsBy(b, b.leader, fault)
}

// noEventsBy fails the test for every event the named node recorded as
// leader after since: its leadership ended at the fault.
func (c *netCluster) noEventsBy(b *baseline, name string, since time.Time) {
	c.t.Helper()
	evs, err := events(c.t, c.config)
	if err != nil {
		c.t.Errorf("events: %v", err)
		return
	}
	for _, ev := range evs {
		if ev.Leader == b.ids[name] && ev.Time != nil && ev.Time.After(since) {
			c.t.Errorf("%s recorded an event as leader after its leadership ended: %+v", name, ev)
		}
	}
}

// TestPartitionLeaderIsolated cuts the curator leader off from the other
// managers for isolatedHold; the workers still reach every manager.
// Another manager leads, every node but the old leader stays ready (it
// cannot reach the new leader, so it may be marked down), cluster info
// says quorum is healthy (two of three voters are), and after healing
// everything is ready within healTimeout. The watch also checks that the
// old and the new leader never both say they lead for more than a moment.
func TestPartitionLeaderIsolated(t *testing.T) {
	inChain(t, partitionChain) // its nodes' uids and nftables drops
	c, b := startPartitionCluster(t, "127.0.231.")
	w := c.watch(b, b.leader)

	c.cut(b.leader, b.otherManagers(b.leader)...)
	fault := w.markFault()
	w.waitLeader(b, b.leader)
	hold(t, fault, isolatedHold)
	c.heal()
	c.converge(w, b, time.Now())
	w.report()
	c.alive(b)
}

// TestPartitionEtcdLeaderCut cuts the etcd leader (which is not the
// curator leader) off from the other managers for etcdLeaderHold. etcd
// elects another leader among the two that still see each other, and that
// must cost no curator failover: the curator leader stays the same the
// whole time (per cluster info and per every manager's /healthz), no node
// but the cut-off one is marked down, and the placement loop never moves
// etcd leadership onto the cut-off node.
func TestPartitionEtcdLeaderCut(t *testing.T) {
	inChain(t, partitionChain) // its nodes' uids and nftables drops
	c, b := startPartitionCluster(t, "127.0.232.")
	w := c.watch(b, b.etcdLeader)

	t.Logf("cutting etcd leader %s off; curator leader is %s", b.etcdLeader, b.leader)
	c.cut(b.etcdLeader, b.otherManagers(b.etcdLeader)...)
	fault := w.markFault()
	hold(t, fault, etcdLeaderHold)
	c.heal()
	c.converge(w, b, time.Now())
	w.report()
	c.alive(b)

	for _, id := range w.leaderIDs() {
		if id != b.ids[b.leader] {
			t.Errorf("cluster info named %s as curator leader: losing the etcd leader cost a curator failover (leaders: %s)", w.name(id), w.leaderLog())
		}
	}
	claims, denials := w.leaderClaims()
	for _, m := range b.otherManagers(b.leader) {
		if claims[m] > 0 {
			t.Errorf("%s said it leads in %d /healthz rounds: losing the etcd leader cost a curator failover", m, claims[m])
		}
	}
	// While etcd elects a leader no lease renewal succeeds, and the curator
	// leader is in doubt for a moment: it answers nothing, and says it does
	// not lead, but keeps its leadership (no one else leads, above). That
	// moment must stay short: within two election TTLs (one, on a quiet
	// machine; etcd's election takes longer on a busy one, and the doubt
	// lasts until it is over).
	if maxDoubt := int(2 * electionTTL / healthzPollEvery); denials[b.leader] > maxDoubt {
		t.Errorf("curator leader %s said it does not lead in %d /healthz rounds (more than %s)", b.leader, denials[b.leader], 2*electionTTL)
	} else if denials[b.leader] > 0 {
		t.Logf("curator leader %s was in doubt for %d /healthz rounds during etcd's election, and kept its leadership", b.leader, denials[b.leader])
	}
	evs, err := events(t, w.config)
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range evs {
		if ev.Loop == "placement" && ev.NodeID == b.ids[b.etcdLeader] && ev.Time != nil && ev.Time.After(fault) {
			t.Errorf("placement chose the cut-off node %s at %s: %s %s", b.etcdLeader, w.rel(*ev.Time), ev.Action, ev.Reason)
		}
	}
}

// TestPartitionFollowerOnlyPath leaves each worker one path to the
// cluster, through a follower, for followerPathHold: each worker is cut off
// from the curator leader and from one follower. The follower left is the
// one it sends fewer packets to, so the manager its heartbeat stream goes
// to is cut off: that stream dies silently, and the agent must move to the
// follower left, which forwards its heartbeats to the leader. Every node
// stays ready the whole time.
func TestPartitionFollowerOnlyPath(t *testing.T) {
	inChain(t, partitionChain) // its nodes' uids and nftables drops
	c, b := startPartitionCluster(t, "127.0.233.")
	followers := b.otherManagers(b.leader)
	counts := c.heartbeatCounts(b.workers, b.managers)
	w := c.watch(b)

	for _, worker := range b.workers {
		path := followers[0]
		if counts[worker][followers[1]] < counts[worker][path] {
			path = followers[1]
		}
		t.Logf("%s's only path is now follower %s", worker, path)
		c.cut(worker, b.otherManagers(path)...)
	}
	fault := w.markFault()
	hold(t, fault, followerPathHold)
	c.heal()
	c.converge(w, b, time.Now())
	w.report()
	c.alive(b)
}

// write is one label update the one-way test timed.
type write struct {
	began time.Time
	took  time.Duration
	err   error
}

// TestPartitionOneWayFromLeader drops everything the curator leader sends
// to the other nodes (what they send it still arrives) for oneWayHold.
// Every node but the leader stays ready; after healing everything is ready
// within healTimeout, and within writesRecoverTimeout writes are fast
// again: fastWrites label updates in a row, each under fastWrite or
// twice the slowest of fastWrites before the fault, whichever is longer
// (on a busy machine a write, a CLI process included, takes longer, and
// fast again means as fast as before). Writes are timed from the start
// of the fault, one after another.
func TestPartitionOneWayFromLeader(t *testing.T) {
	inChain(t, partitionChain) // its nodes' uids and nftables drops
	c, b := startPartitionCluster(t, "127.0.234.")
	w := c.watch(b, b.leader)

	fast, slowest := fastWrite, time.Duration(0)
	for i := range fastWrites {
		began := time.Now()
		if _, _, err := cli(t, "--config", w.config, "node", "update", b.workers[0], "--label-add", fmt.Sprintf("probe=before-%d", i)); err != nil {
			t.Fatalf("a write before the fault: %v", err)
		}
		slowest = max(slowest, time.Since(began))
	}
	fast = max(fast, 2*slowest)
	t.Logf("the slowest of %d writes before the fault took %s: fast means under %s", fastWrites, slowest.Round(time.Millisecond), fast.Round(time.Millisecond))

	c.dropFrom(b.leader, b.others(b.leader)...)
	fault := w.markFault()
	healedc := make(chan time.Time, 1)
	writesc := make(chan []write, 1)
	stop := make(chan struct{})
	t.Cleanup(func() { close(stop) })
	go func() {
		var writes []write
		var healed time.Time
		streak := 0
		for i := 1; ; i++ {
			select {
			case healed = <-healedc:
			case <-stop:
				return
			default:
			}
			if !healed.IsZero() && (streak >= fastWrites || time.Since(healed) > writesRecoverTimeout) {
				writesc <- writes
				return
			}
			began := time.Now()
			_, _, err := cli(t, "--config", w.config, "node", "update", b.workers[0], "--label-add", fmt.Sprintf("probe=%d", i))
			wr := write{began: began, took: time.Since(began), err: err}
			writes = append(writes, wr)
			if !healed.IsZero() && began.After(healed) && err == nil && wr.took < fast {
				streak++
			} else {
				streak = 0
			}
			time.Sleep(100 * time.Millisecond)
		}
	}()
	hold(t, fault, oneWayHold)
	c.heal()
	healed := time.Now()
	healedc <- healed
	c.converge(w, b, healed)
	writes := <-writesc

	var during, after []string
	streak, fastFrom := 0, time.Time{}
	for _, wr := range writes {
		d := fmt.Sprintf("%s %s", w.rel(wr.began), wr.took.Round(time.Millisecond))
		if wr.err != nil {
			d += " (failed)"
		}
		if wr.began.Before(healed) {
			during = append(during, d)
			continue
		}
		after = append(after, d)
		if wr.err == nil && wr.took < fast {
			if streak++; streak == 1 {
				fastFrom = wr.began
			}
		} else {
			streak = 0
		}
	}
	t.Logf("writes during the fault (start since the fault, duration): %s", strings.Join(during, ", "))
	if streak < fastWrites {
		t.Errorf("writes not fast again %s after healing (want %d in a row under %s within %s); writes after healing: %s",
			writesRecoverTimeout, fastWrites, fast.Round(time.Millisecond), writesRecoverTimeout, strings.Join(after, ", "))
	} else {
		t.Logf("writes fast again %s after healing; writes after healing: %s",
			fastFrom.Sub(healed).Round(time.Millisecond), strings.Join(after, ", "))
	}
	w.report()
	c.alive(b)
}
