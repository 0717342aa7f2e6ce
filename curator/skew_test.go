package curator

import (
	"testing"
	"time"

	pb "github.com/curatorproject/curator/proto"
)

// TestSkewedLeaderMarksNoLiveNodeDown: a manager whose clock runs seconds
// ahead of (or behind) the others' takes over the leadership, and the
// nodes that go on beating, one through it and one through a follower,
// stay ready: the leader judges heartbeats by its own clock only, never
// against a time another manager wrote. (The chaos suite's skew step
// restarts a manager with its clock off, which then seldom leads.)
func TestSkewedLeaderMarksNoLiveNodeDown(t *testing.T) {
	for _, tc := range []struct {
		name string
		skew time.Duration
	}{
		{"ahead", 6 * testDownAfter},
		{"behind", -6 * testDownAfter},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newTestCluster(t)
			first, stopFirst := c.startCurator(c.first, c.cli)
			waitFor(t, "the first curator leads", first.IsLeader)
			admin, anon := c.dialFirst()
			m2, _ := c.register(anon, c.token(admin, "manager"), "m2")
			cfg := c.curatorConfig(m2, c.etcdClient())
			cfg.Now = func() time.Time { return time.Now().Add(tc.skew) }
			second, _ := c.runCurator(cfg)
			m3, _ := c.register(anon, c.token(admin, "manager"), "m3")
			third, _ := c.startCurator(m3, c.etcdClient())
			waitFor(t, "m2 and m3 know the leader", func() bool { return second.fwd.knownLeader() != nil && third.fwd.knownLeader() != nil })

			w1, _ := c.register(anon, c.token(admin, "worker"), "w1")
			w2, _ := c.register(anon, c.token(admin, "worker"), "w2")
			through3 := followSession(t, dial(t, m3.address, w1.tlsCert(), c.root.Cert))
			through2 := followSession(t, dial(t, m2.address, w2.tlsCert(), c.root.Cert))
			c.waitStatus(w1.id, pb.NodeStatus_NODE_STATUS_READY)
			c.waitStatus(w2.id, pb.NodeStatus_NODE_STATUS_READY)

			stopFirst()
			waitFor(t, "the skewed m2 leads", second.IsLeader)
			for _, n := range []*sessionFollower{through3, through2} {
				n.answerFrom(m2.id)
			}
			// Ten times down-after under the skewed leader, every
			// sample of the records ready.
			for end := time.Now().Add(10 * testDownAfter); time.Now().Before(end); time.Sleep(testHeartbeat / 2) {
				for _, w := range []*testNode{w1, w2} {
					if got := c.loadNode(w.id).Status; got != pb.NodeStatus_NODE_STATUS_READY {
						t.Fatalf("node %s is %s under a leader whose clock is %s off, while it beats", w.id, got, tc.skew)
					}
				}
			}
		})
	}
}
