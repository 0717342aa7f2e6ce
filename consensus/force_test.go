package consensus

import (
	"context"
	"errors"
	"testing"
)

// TestForceNewClusterFromVoterOnly: after a cluster of two voters and a
// learner is lost, a new cluster is forced from the learner's data dir:
// refused with ErrNotVoter before etcd starts (etcd itself would panic),
// and its data is left as it was; then from a voter's: it runs alone as
// the only voter, with the data.
func TestForceNewClusterFromVoterOnly(t *testing.T) {
	p := newTestPKI(t)
	nodes := p.newCluster(t, 2)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	cli := p.client(t, nodes...)
	put(t, cli, "/k", "v")
	// A learner that runs, never promoted.
	ip := nextIP(t)
	port := freeBasePort(t, ip)
	params, _, err := AddLearner(ctx, cli, "n2", PeerURL(ip, port))
	if err != nil {
		t.Fatal(err)
	}
	learner := p.newNodeAt(t, "n2", ip, port, ModeJoin, &params)
	learner.start()
	learner.waitState(Learner)
	for _, n := range append(nodes, learner) {
		if err := n.stop(); err != nil {
			t.Fatalf("stop %s: %v", n.id, err)
		}
	}

	for _, tc := range []struct {
		name    string
		n       *testNode
		wantErr error
	}{
		{"a learner's data", learner, ErrNotVoter},
		{"a voter's data", nodes[1], nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := tc.n.cfg
			cfg.ForceNewCluster = true
			tc.n.svc = tc.n.mustNew(cfg)
			tc.n.start()
			if tc.wantErr != nil {
				if err := tc.n.wait(testTimeout); !errors.Is(err, tc.wantErr) {
					t.Fatalf("Run: %v, want %v", err, tc.wantErr)
				}
				// Refused before etcd ran: the member is still a
				// learner in its data.
				if err := checkVoterData(cfg.DataDir, tc.n.id); !errors.Is(err, ErrNotVoter) {
					t.Errorf("after the refusal: %v, want the data as it was", err)
				}
				return
			}
			tc.n.waitState(Voter)
			c := p.client(t, tc.n)
			ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
			defer cancel()
			members, err := c.MemberList(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if len(members.Members) != 1 || members.Members[0].Name != tc.n.id || members.Members[0].IsLearner {
				t.Errorf("members %v, want %s alone, a voter", members.Members, tc.n.id)
			}
			if got := get(t, c, "/k"); got != "v" {
				t.Errorf("/k = %q after the forced new cluster, want v", got)
			}
		})
	}
}
