package leader

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/curatorproject/curator/curator/decide"
)

func TestSwarmHolds(t *testing.T) {
	var h swarmHolds
	t0 := time.Unix(1_000_000, 0)
	a := &decide.SwarmAction{Kind: decide.SwarmDemote, NodeID: "c", SwarmID: "Sc"}
	other := &decide.SwarmAction{Kind: decide.SwarmPromote, NodeID: "w", SwarmID: "Sw"}
	boom := errors.New("engine timed out")

	if got := h.held(t0); len(got) != 0 {
		t.Fatalf("nothing failed, yet Held: %v", got)
	}
	// Each failure in a row doubles the hold, to at most swarmHoldMax.
	var waits []time.Duration
	now := t0
	for range 8 {
		wait := h.fail(a, boom, now)
		waits = append(waits, wait)
		if _, ok := h.held(now)[a.Key()]; !ok {
			t.Fatalf("failed at %v, not held then", now)
		}
		if _, ok := h.held(now.Add(wait - time.Millisecond))[a.Key()]; !ok {
			t.Fatalf("not held just before its hold of %v ends", wait)
		}
		if _, ok := h.held(now.Add(wait))[a.Key()]; ok {
			t.Fatalf("still held when its hold of %v ends", wait)
		}
		if _, ok := h.held(now)[other.Key()]; ok {
			t.Fatal("another change is held with it")
		}
		now = now.Add(wait)
	}
	want := []time.Duration{2 * time.Second, 4 * time.Second, 8 * time.Second, 16 * time.Second, 32 * time.Second, time.Minute, time.Minute, time.Minute}
	if diff := cmp.Diff(want, waits); diff != "" {
		t.Errorf("holds (-want +got):\n%s", diff)
	}
	if why := h.held(now.Add(-time.Second))[a.Key()]; !strings.Contains(why, "8 in a row") || !strings.Contains(why, boom.Error()) {
		t.Errorf("why it is held does not count the failures and name the last: %q", why)
	}
	// Going through forgets it: the next failure holds it 2 s again.
	h.done(a)
	if got := h.held(now); len(got) != 0 {
		t.Fatalf("done, yet Held: %v", got)
	}
	if wait := h.fail(a, boom, now); wait != swarmHoldFirst {
		t.Errorf("after going through, the next failure holds it %v, want %v", wait, swarmHoldFirst)
	}
}
