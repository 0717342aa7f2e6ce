package curator

import (
	"crypto/tls"
	"sync"
	"testing"
	"time"

	"github.com/curatorproject/curator/supervisor"
)

// TestShedHandshakeIsAKnock: a TLS handshake that waits too long for one
// of the server's handshake slots is shed, counted
// (curator_handshakes_shed_total) and noted as a knock, which the leader's
// health loop reads: a node still arriving holds a new leader's hold on
// downs (decide.Health). The test shortens the wait to a microsecond, and
// handshakes at once, several per slot, until one is shed.
func TestShedHandshakeIsAKnock(t *testing.T) {
	c := newTestCluster(t)
	svc, err := New(c.curatorConfig(c.first, c.cli))
	if err != nil {
		t.Fatal(err)
	}
	svc.shedAfter = time.Microsecond
	supervisor.TestHarness(t, svc.Run)
	waitFor(t, "the curator leads", svc.IsLeader)
	if k := svc.knocks.Last(); !k.IsZero() {
		t.Fatalf("a knock at %v before any handshake was shed", k)
	}
	// The server's work is the same whoever the client trusts.
	cfg := &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"h2"}, MinVersion: tls.VersionTLS13}
	deadline := time.Now().Add(testTimeout)
	for rounds := 1; metricValue(t, svc.metrics.HandshakesShed) == 0; rounds++ {
		if time.Now().After(deadline) {
			t.Fatalf("no handshake shed in %d rounds of %d at once, with %d slots", rounds, 8*handshakeSlots(), handshakeSlots())
		}
		var wg sync.WaitGroup
		for range 8 * handshakeSlots() {
			wg.Go(func() {
				if conn, err := tls.Dial("tcp", c.first.address, cfg); err == nil {
					conn.Close()
				}
			})
		}
		wg.Wait()
	}
	k := svc.knocks.Last()
	if k.IsZero() || time.Since(k) > testTimeout {
		t.Fatalf("a handshake was shed, and the last knock is %v: the shed is not a knock", k)
	}
	if got := svc.currentLeader().Knocks.Last(); !got.Equal(k) {
		t.Errorf("the leader's loops read the last knock as %v, the server noted %v", got, k)
	}
}
