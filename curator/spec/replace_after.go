package spec

import (
	"fmt"
	"time"

	pb "github.com/curatorproject/curator/proto"
)

// The floor of replace_after. A node is marked down downAfter after its
// last heartbeat, and nodes that stop together (a partition, a switch, a
// power loss) sent their last heartbeats up to an interval apart: their
// marks spread over about an interval. A group's repair ceiling
// (max_unhealthy) counts them only once they are marked (or silent for
// two intervals): with a replace_after shorter than downAfter plus an
// interval, the first of them could be replaced before the others count.
// So a commit below the floor is refused, and a group stored with less
// (before the floor, or under other timings) is repaired after the floor.

// ReplaceAfterFloor is the least replace_after of a cluster whose nodes
// are marked down downAfter after their last heartbeat and send one every
// interval (the curators' --down-after and --heartbeat-interval).
func ReplaceAfterFloor(downAfter, interval time.Duration) time.Duration {
	return downAfter + interval
}

// CheckReplaceAfterFloor refuses group spec s when its replace_after is
// below ReplaceAfterFloor, naming the field, the value, the floor and why.
func CheckReplaceAfterFloor(s *pb.GroupSpec, downAfter, interval time.Duration) error {
	floor := ReplaceAfterFloor(downAfter, interval)
	if d := s.GetReplaceAfter().AsDuration(); d < floor {
		return fmt.Errorf("replace_after: %v is below its floor %v (the cluster's --down-after %v plus --heartbeat-interval %v): "+
			"nodes that stop together are marked down up to an interval apart, and a shorter replace_after would replace the first of them "+
			"before the others count against max_unhealthy; give at least %v", d, floor, downAfter, interval, floor)
	}
	return nil
}
