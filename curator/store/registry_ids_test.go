package store

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"runtime"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	pb "github.com/curatorproject/curator/proto"
)

func idsNode(i int) *pb.Node {
	return &pb.Node{Id: fmt.Sprintf("n%06d", i), Name: fmt.Sprintf("name-%d", i), Address: fmt.Sprintf("10.0.0.1:%d", 10000+i)}
}

// TestRegistrySortedIDs: whatever the order of joins, removals and reads,
// a read lists every node once, in ID order.
func TestRegistrySortedIDs(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	r := NewRegistry(nil)
	have := map[string]bool{}
	for step := range 5000 {
		i := rng.IntN(400)
		n := idsNode(i)
		r.mu.Lock()
		switch op := rng.IntN(10); {
		case op < 6:
			r.applyLocked(n.Id, n, int64(step))
			have[n.Id] = true
		case op < 7:
			r.applyLocked(n.Id, nil, int64(step))
			delete(have, n.Id)
		}
		r.mu.Unlock()
		if rng.IntN(8) == 0 {
			var got []string
			for _, n := range r.Nodes() {
				got = append(got, n.Id)
			}
			want := slices.Sorted(maps.Keys(have))
			if diff := cmp.Diff(want, got); diff != "" {
				t.Fatalf("step %d: nodes (-want +got):\n%s", step, diff)
			}
			page, _ := r.NodesPage("", 10)
			if len(want) > 10 {
				want = want[:10]
			}
			var pageIDs []string
			for _, n := range page {
				pageIDs = append(pageIDs, n.Id)
			}
			if diff := cmp.Diff(want, pageIDs); diff != "" {
				t.Fatalf("step %d: first page (-want +got):\n%s", step, diff)
			}
		}
	}
}

// TestRegistryJoinsCopyNoFleet: a node joining a fleet whose IDs a
// reader has asked for costs no copy of the fleet's IDs: 2,000 joins into
// 10,000 nodes allocate megabytes, not the 320 MB of a copy each.
func TestRegistryJoinsCopyNoFleet(t *testing.T) {
	r := NewRegistry(nil)
	r.mu.Lock()
	for i := range 10000 {
		n := idsNode(2 * i)
		r.applyLocked(n.Id, n, 1)
	}
	r.mu.Unlock()
	r.Nodes() // a reader asks: the IDs are kept from now on
	joins := make([]*pb.Node, 2000)
	for i := range joins {
		joins[i] = idsNode(2*i + 1)
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	r.mu.Lock()
	for _, n := range joins {
		r.applyLocked(n.Id, n, 2)
	}
	r.mu.Unlock()
	runtime.ReadMemStats(&after)
	if mb := float64(after.TotalAlloc-before.TotalAlloc) / (1 << 20); mb > 32 {
		t.Errorf("2,000 joins into 10,000 nodes allocated %.0f MB, want no copy of the IDs each (under 32 MB)", mb)
	}
	if got := len(r.Nodes()); got != 12000 {
		t.Errorf("%d nodes listed after the joins, want 12,000", got)
	}
}
