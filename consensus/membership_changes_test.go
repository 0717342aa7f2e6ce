package consensus

import (
	"context"
	"sync/atomic"
	"testing"
	"time"
)

// TestMembershipChanges: a member added or removed is told of at once,
// from the member's applied state; writes that move the applied index
// but change no membership are not, and neither is the membership as it
// stood when the follow began.
func TestMembershipChanges(t *testing.T) {
	p := newTestPKI(t)
	nodes := p.newCluster(t, 1)
	cli := p.client(t, nodes...)
	var changes atomic.Int64
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		nodes[0].svc.MembershipChanges(ctx, func() { changes.Add(1) })
	}()
	defer func() { cancel(); <-done }()

	for i := range 50 {
		put(t, cli, "k", string(rune('a'+i%26)))
	}
	time.Sleep(20 * membershipPoll)
	if n := changes.Load(); n != 0 {
		t.Fatalf("%d membership changes told of after writes alone, want 0", n)
	}

	wait := func(want int64, what string) {
		t.Helper()
		start := time.Now()
		for changes.Load() < want {
			if time.Since(start) > time.Second {
				t.Fatalf("%s: not told of within 1s", what)
			}
			time.Sleep(membershipPoll)
		}
		t.Logf("%s: told of in %v", what, time.Since(start).Round(time.Millisecond))
	}
	actx, acancel := context.WithTimeout(context.Background(), testTimeout)
	defer acancel()
	_, id, err := AddLearner(actx, cli, "n9", PeerURL(nextIP(t), 2380))
	if err != nil {
		t.Fatal(err)
	}
	wait(1, "a learner added")
	if err := RemoveMember(actx, cli, id); err != nil {
		t.Fatal(err)
	}
	wait(2, "the learner removed")
}
