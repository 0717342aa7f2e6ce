package curator

import (
	"context"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/curatorproject/curator/consensus"
	"github.com/curatorproject/curator/curator/spec"
	pb "github.com/curatorproject/curator/proto"
	"github.com/curatorproject/curator/supervisor"
)

// BenchmarkSyncConverge measures how long the consensus sync takes to
// finish a half-applied change, against real etcd, in two modes run side by
// side in one go:
//
//   - event-driven: this curator's loop, woken by etcd watch events on the
//     node records and resynced every DefaultSyncInterval (etcd's member list
//     has no watch);
//   - poll-5s: a fixed 5 s poll (as Monogon's curator runs), one change a look.
//
// Each iteration plants the two half-applied changes a crash can leave, in
// both clusters: an etcd member whose node lacks the role (a promote that
// died after adding the learner), then, once that is repaired, a role
// whose member is gone (a demote that died after removing the member). Neither shows in a watch of the node records:
// membership changes are seen by the resync. Each change comes after a
// random pause, so that it falls anywhere in the poll's period. It reports
// p50 and p99 of each mode and the ratio of the p99s.
//
//	go test -run '^$' -bench BenchmarkSyncConverge -benchtime 15x ./curator/
func BenchmarkSyncConverge(b *testing.B) {
	type mode struct {
		name    string
		cfg     func(*Config)
		c       *testCluster
		worker  *testNode
		samples []time.Duration
	}
	modes := []*mode{
		{name: "event-driven", cfg: func(c *Config) {}},
		{name: "poll-5s", cfg: func(c *Config) { c.PollOnly, c.SyncInterval = true, 5*time.Second }},
	}
	for _, m := range modes {
		m.c = newTestCluster(b)
		cfg := m.c.curatorConfig(m.c.first, m.c.cli)
		cfg.LearnerDownLimit = time.Hour // the planted learner never starts
		m.cfg(&cfg)
		svc, err := New(cfg)
		if err != nil {
			b.Fatal(err)
		}
		supervisor.TestHarness(b, svc.Run)
		waitFor(b, "the curator leads", svc.IsLeader)
		adminCert := m.c.adminCert()
		admin := dial(b, m.c.first.address, &adminCert, m.c.root.Cert)
		anon := dial(b, m.c.first.address, nil, m.c.root.Cert)
		m.worker, _ = m.c.register(anon, m.c.token(admin, "worker"), "w1")
	}

	hasRole := func(m *mode) bool { return slices.Contains(m.c.loadNode(m.worker.id).Roles, pb.Role_ROLE_CONSENSUS) }
	// converge waits until cond holds in every mode, polling etcd every
	// 2 ms, and records each mode's time from its planted change.
	converge := func(planted []time.Time, cond func(*mode) bool) {
		done := make([]bool, len(modes))
		deadline := time.Now().Add(30 * time.Second)
		for left := len(modes); left > 0; {
			if time.Now().After(deadline) {
				b.Fatal("no convergence in 30s")
			}
			for i, m := range modes {
				if !done[i] && cond(m) {
					done[i] = true
					left--
					m.samples = append(m.samples, time.Since(planted[i]))
				}
			}
			time.Sleep(2 * time.Millisecond)
		}
	}
	ctx := context.Background()

	// A crash comes at any moment, not just after a poll: plant each change
	// after a random pause, so the poll's phase is uniform, as it is for a
	// real crash.
	pause := func() { time.Sleep(rand.N(5 * time.Second)) }

	b.ResetTimer()
	for range b.N {
		pause()
		// Member without role: add the worker as a learner behind the
		// curator's back, in both clusters.
		members := make([]uint64, len(modes))
		planted := make([]time.Time, len(modes))
		for i, m := range modes {
			ip, port, _ := spec.SplitAddress(m.worker.address)
			_, id, err := consensus.AddLearner(ctx, m.c.cli, m.worker.id, consensus.PeerURL(ip.String(), port))
			if err != nil {
				b.Fatal(err)
			}
			members[i], planted[i] = id, time.Now()
		}
		converge(planted, hasRole)
		pause()
		// Role without member: remove the member behind its back.
		for i, m := range modes {
			if err := consensus.RemoveMember(ctx, m.c.cli, members[i]); err != nil {
				b.Fatal(err)
			}
			planted[i] = time.Now()
		}
		converge(planted, func(m *mode) bool { return !hasRole(m) })
	}
	b.StopTimer()

	pct := func(s []time.Duration, p float64) time.Duration {
		s = slices.Clone(s)
		slices.Sort(s)
		i := int(p*float64(len(s)) + 0.5)
		return s[min(max(i-1, 0), len(s)-1)]
	}
	for _, m := range modes {
		b.ReportMetric(pct(m.samples, 0.5).Seconds(), m.name+"-p50-s")
		b.ReportMetric(pct(m.samples, 0.99).Seconds(), m.name+"-p99-s")
	}
	ev, poll := pct(modes[0].samples, 0.99), pct(modes[1].samples, 0.99)
	b.ReportMetric(float64(poll)/float64(ev), "poll/event-p99-ratio")
	b.Logf("%d changes each: event-driven p50 %v p99 %v; poll-5s p50 %v p99 %v; p99 ratio %.1fx",
		len(modes[0].samples), pct(modes[0].samples, 0.5), ev, pct(modes[1].samples, 0.5), poll, float64(poll)/float64(ev))
}
