package chaos

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestScheduleReplays: a seed gives the same schedule every time, and
// another seed another one, with every kind drawn over a long run.
func TestScheduleReplays(t *testing.T) {
	a, b := schedule(7, 200), schedule(7, 200)
	if diff := cmp.Diff(a, b); diff != "" {
		t.Fatalf("seed 7 twice (-first +second):\n%s", diff)
	}
	if cmp.Equal(a, schedule(8, 200)) {
		t.Fatal("seeds 7 and 8 give the same schedule")
	}
	kinds := map[stepKind]int{}
	for _, s := range a {
		kinds[s.Kind]++
		if s.Hold <= 0 || s.Gap <= 0 {
			t.Errorf("step %v: hold and gap must be positive", s)
		}
	}
	for _, w := range weights {
		if kinds[w.kind] == 0 {
			t.Errorf("no %s in 200 steps", w.kind)
		}
	}
}
