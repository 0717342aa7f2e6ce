package decide

import (
	"fmt"
	"slices"
	"time"

	pb "github.com/curatorproject/curator/proto"
)

// The repair ceiling is judged over the group, not over one health tick.
// Machines that stop together (a partition, a switch, a power loss, a
// frozen host) are marked down over the spread of their last heartbeats,
// up to an interval apart and a health tick more; counted only once
// marked, the first of them would be replaced before the others count,
// and then the next, each alone within max_unhealthy. So:
//   - the ceiling counts every machine unhealthy or about to be: a node
//     not ready, a machine whose node never joined within join_timeout,
//     and a node whose record still says ready but that this leader has
//     not heard for SuspectAfter (two heartbeat intervals: a live node is
//     heard every interval);
//   - replace_after is never less than its floor (down-after plus a
//     heartbeat interval), so the marks of machines that stopped together
//     are all in before the first of them is due;
//   - a hold is lifted only once few enough are unhealthy, suspects
//     included (never merely because no repair is due this tick), and
//     every node still down then has replace_after again from the lift.
//
// A whole group found dead at once (every machine of it silent, after a
// power loss or a cut) is therefore held, whatever order its marks came
// in, as long as max_unhealthy is below the size. A machine its provider
// keeps dead (GroupSnapshot.Dead: the process provider's, after a kill or
// a power loss) counts as unhealthy from the moment it is found dead, and
// its node's removal is a repair: one killed machine is replaced as soon
// as its node is down, machines killed together are held.

// replaceAfter is the replace_after the rules use: the spec's, at least
// its floor.
func replaceAfter(s GroupSnapshot) time.Duration {
	return max(s.ReplaceAfter, s.ReplaceAfterFloor)
}

// replaceAfterWords says which replace_after the rules use, for a reason.
func replaceAfterWords(s GroupSnapshot) string {
	if s.ReplaceAfter < s.ReplaceAfterFloor {
		return fmt.Sprintf("replace_after %v, raised to its floor %v", s.ReplaceAfter, s.ReplaceAfterFloor)
	}
	return fmt.Sprintf("replace_after %v", s.ReplaceAfter)
}

// silence is how long node n has not been heard by this leader, and
// whether that makes it a suspect: its record says ready, it is not
// drained, and it has been silent for SuspectAfter (counted from its last
// heartbeat, this leader's taking over, or its becoming ready, whichever
// came last).
func silence(s GroupSnapshot, n GroupNode) (time.Duration, bool) {
	if s.SuspectAfter <= 0 || n.Status != pb.NodeStatus_NODE_STATUS_READY || n.Drained {
		return 0, false
	}
	quiet := s.Now.Sub(latest(latest(n.LastHeard, s.HeardSince), n.Since))
	return quiet, quiet >= s.SuspectAfter
}

// unhealthyMachines lists the group's machines that are unhealthy or about
// to be, by node (or machine, for one whose node never joined within
// join_timeout), and how many machines the group has.
func unhealthyMachines(s GroupSnapshot) ([]string, int) {
	nodeOf := make(map[string]GroupNode, len(s.Nodes))
	for _, n := range s.Nodes {
		if n.InstanceID != "" {
			nodeOf[n.InstanceID] = n
		}
	}
	var out []string
	dead := 0
	for _, m := range s.Dead {
		if n, ok := nodeOf[m.ID]; ok && mayComeBack(n) {
			out = append(out, fmt.Sprintf("node %s, its machine dead", n.ID))
			dead++
		}
	}
	for _, m := range s.Machines {
		n, ok := nodeOf[m.ID]
		switch {
		case ok && n.Status != pb.NodeStatus_NODE_STATUS_READY && !n.Drained:
			out = append(out, "node "+n.ID)
		case ok:
			if quiet, suspect := silence(s, n); suspect {
				out = append(out, fmt.Sprintf("node %s unheard for %v", n.ID, quiet.Round(100*time.Millisecond)))
			}
		case s.Now.Sub(m.Created) >= s.JoinTimeout:
			out = append(out, "machine "+m.ID)
		}
	}
	slices.Sort(out)
	return out, len(s.Machines) + dead
}

// mayComeBack says whether node n, whose machine died with its provider
// keeping it, would come back as it was were its machine started again:
// not when its record is refused (a manager a forced new cluster gave up
// is refused until it is wiped).
func mayComeBack(n GroupNode) bool { return !n.Refused }

// SuspectAfter is how long a node whose record says ready may go unheard
// before the repair ceiling counts it: two heartbeat intervals (a live
// node is heard every interval; a follower's report of it comes a
// twentieth of one later at most).
func SuspectAfter(interval time.Duration) time.Duration { return 2 * interval }
