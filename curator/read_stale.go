package curator

import (
	"sync"
	"time"

	pb "github.com/curatorproject/curator/proto"
)

// staleAge is how old a view the fault point faults.ReadStale500ms
// serves.
const staleAge = 500 * time.Millisecond

// staleViews keeps the registry views the node reads saw, to serve one
// staleAge old in their place: the planted stale read that shows the
// history checker (test/history) catches one. Only a binary built with
// -tags faults and the point armed uses it (observe); elsewhere it stays
// empty.
type staleViews struct {
	mu    sync.Mutex
	views []staleView
}

type staleView struct {
	at    time.Time
	nodes []*pb.Node
}

// at records nodes, the view now, and returns the newest view seen at
// least staleAge before now (the oldest kept while none is that old).
// The records are the registry's, shared and never changed: keeping the
// slices is enough.
func (s *staleViews) at(now time.Time, nodes []*pb.Node) []*pb.Node {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.views = append(s.views, staleView{at: now, nodes: nodes})
	// Keep the newest view that is old enough and those after it.
	keep := 0
	for i, v := range s.views {
		if now.Sub(v.at) >= staleAge {
			keep = i
		}
	}
	s.views = s.views[keep:]
	return s.views[0].nodes
}
