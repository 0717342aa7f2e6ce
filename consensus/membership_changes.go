package consensus

import (
	"context"
	"slices"
	"time"
)

// membershipPoll is how often MembershipChanges looks at the member's
// applied index (an atomic read), and at its membership when the index
// moved: a change is seen within it.
const membershipPoll = 2 * time.Millisecond

// MembershipChanges calls changed each time this node's etcd member
// applies a change of the cluster's membership (a member added, promoted
// or removed), until ctx ends. It reads the member's applied state in
// memory, where a change shows the moment the member applies it, instead
// of asking etcd for its member list (which has no watch). While etcd does
// not run, it waits; a run that starts anew counts as a change.
func (s *Service) MembershipChanges(ctx context.Context, changed func()) {
	tick := time.NewTicker(membershipPoll)
	defer tick.Stop()
	var (
		cur     *run
		applied uint64
		last    []memberShape
	)
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		s.mu.Lock()
		r := s.cur
		s.mu.Unlock()
		if r == nil {
			cur = nil
			continue
		}
		idx := r.etcd.Server.AppliedIndex()
		if r == cur && idx == applied {
			continue
		}
		shape := membershipShape(r)
		if r != cur || !slices.Equal(shape, last) {
			if cur != nil || last != nil {
				changed()
			}
		}
		cur, applied, last = r, idx, shape
	}
}

// memberShape is what a membership change changes of a member.
type memberShape struct {
	id      uint64
	learner bool
}

// membershipShape is run's applied membership, sorted by member ID.
func membershipShape(r *run) []memberShape {
	ms := r.etcd.Server.Cluster().Members()
	out := make([]memberShape, 0, len(ms))
	for _, m := range ms {
		out = append(out, memberShape{id: uint64(m.ID), learner: m.IsLearner})
	}
	return out
}
