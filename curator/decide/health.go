package decide

import (
	"fmt"
	"slices"
	"time"

	pb "github.com/curatorproject/curator/proto"
)

// HealthNode is a node as the health loop sees it.
type HealthNode struct {
	ID     string
	Status pb.NodeStatus
	Last   time.Time
	Seen   bool
	// Created is when the node joined.
	Created time.Time
}

// HealthAction is one status change of a health tick.
type HealthAction struct {
	NodeID string
	To     pb.NodeStatus
	Reason string
	// OwnSilence: a down for a node this leader heard since it took over
	// and then stopped hearing; the failover's hold does not hold it.
	OwnSilence bool
}

// HealthDecision is what one health tick changes.
type HealthDecision struct {
	// Changes are every status change to make, written together.
	Changes []HealthAction
	// Held, when set, says why the changes to down were held back.
	Held string
	// Heard is how many nodes were heard from within downAfter.
	Heard int
	// Arrived is how many nodes this leader heard from since it took
	// over, and LastArrival when that count last grew (the takeover when
	// it never did).
	Arrived     int
	LastArrival time.Time
	// Settling is true while the failover's hold lasts.
	Settling bool
}

// HealthMemory is what the health loop carries from one tick to the next.
type HealthMemory struct {
	// HoldSince is when the loop first held nodes back from down for
	// hearing too few (zero when it does not).
	HoldSince time.Time
	// Since is the takeover the arrivals count from; Arrived and
	// ArrivedAt are the last tick's decision's.
	Since     time.Time
	Arrived   int
	ArrivedAt time.Time
	// Settled is when the failover's hold ended (zero while it lasts).
	Settled time.Time
}

// Remember is mem after the tick that decided d, under a leader that took
// over at leaderSince.
func (mem HealthMemory) Remember(d HealthDecision, leaderSince time.Time) HealthMemory {
	mem.Since, mem.Arrived, mem.ArrivedAt = leaderSince, d.Arrived, d.LastArrival
	return mem
}

// SettleLimit is the ceiling on the failover's hold: however long the
// arrivals go on, a leader judges its nodes at most this long after it
// took over (or came back from doubt).
func SettleLimit(downAfter time.Duration) time.Duration { return 6 * downAfter }

// ArrivalsQuiet is how long no node may arrive (be heard for the first
// time by this leader) for the arrivals to count as over: a third of
// downAfter, well over the spread of an agent's reconnection at rest.
func ArrivalsQuiet(downAfter time.Duration) time.Duration { return downAfter / 3 }

// Health returns every status change to make. It is the health rule
// of HealthStatus applied to each node, with two guards against a leader
// mistaking its own view for the fleet's:
//
//   - the failover's hold: a leader marks none of the nodes it has not
//     heard yet down while nodes are still arriving (heard by it for the
//     first time since it took over, or turned away at its door, knocked:
//     a session set-up it paced, a TLS handshake it shed; the last less
//     than ArrivalsQuiet ago) and some have not, for at most SettleLimit.
//     A node it heard and then stopped hearing is not held: its silence
//     is its own. After a failover the streams move to it as fast as the
//     machines allow, which at fleet scale takes longer than the grace. The hold ends when the arrivals end: a node seen by this
//     leader is then judged by its last heartbeat, and one not seen by
//     its silence since the takeover, so a dead machine is down within
//     downAfter of the hold's end at most, whatever the fleet's size;
//   - hearing few: a leader that hears from no more than half of the nodes
//     does not mark several of them down at once, for one more downAfter
//     from mem.HoldSince. A fleet-wide failure is rare; a leader that cannot
//     hear the fleet (its own network failing) is not. Past the extra wait
//     the nodes are marked down: they really are silent.
func Health(nodes []HealthNode, leaderSince, now time.Time, downAfter time.Duration, knocked time.Time, mem HealthMemory) HealthDecision {
	var d HealthDecision
	downs := 0
	for _, n := range nodes {
		if n.Seen && now.Sub(n.Last) < downAfter {
			d.Heard++
		}
		if HeardSince(n.Last, n.Seen, leaderSince) {
			d.Arrived++
		}
	}
	d.LastArrival = leaderSince
	if mem.Since.Equal(leaderSince) && mem.ArrivedAt.After(leaderSince) {
		d.LastArrival = mem.ArrivedAt
	}
	if !mem.Since.Equal(leaderSince) || d.Arrived > mem.Arrived {
		if d.Arrived > 0 {
			d.LastArrival = now
		}
	}
	// Nodes turned away at the door since the takeover are still on
	// their way: the hold lasts while they knock.
	activity := d.LastArrival
	if knocked.After(activity) {
		activity = knocked
	}
	d.Settling = d.Arrived < len(nodes) && now.Sub(activity) < ArrivalsQuiet(downAfter) && now.Sub(leaderSince) < SettleLimit(downAfter)
	for _, n := range nodes {
		// A node that joined after this leader took over gets its grace
		// from its joining.
		graceFrom := leaderSince
		if n.Created.After(graceFrom) {
			graceFrom = n.Created
		}
		want := HealthStatus(n.Status, n.Last, n.Seen, graceFrom, now, downAfter)
		if want == n.Status {
			continue
		}
		reason := fmt.Sprintf("node %s sends heartbeats", n.ID)
		if n.Status == pb.NodeStatus_NODE_STATUS_DOWN {
			reason = fmt.Sprintf("node %s sends heartbeats again", n.ID)
		}
		if want == pb.NodeStatus_NODE_STATUS_DOWN {
			downs++
			reason = fmt.Sprintf("node %s sent no heartbeat to this leader in the %s since it took over (limit %s)", n.ID, now.Sub(graceFrom).Round(time.Millisecond), downAfter)
			if n.Seen && n.Last.After(graceFrom) {
				reason = fmt.Sprintf("node %s sent no heartbeat since %s (limit %s)", n.ID, n.Last.Format(time.RFC3339Nano), downAfter)
			}
		}
		own := want == pb.NodeStatus_NODE_STATUS_DOWN && HeardSince(n.Last, n.Seen, leaderSince)
		d.Changes = append(d.Changes, HealthAction{NodeID: n.ID, To: want, Reason: reason, OwnSilence: own})
	}
	if downs == 0 {
		return d
	}
	switch {
	case d.Settling:
		// Only the nodes this leader has not heard yet wait: a node
		// whose stream reached this leader and then went silent is
		// silent on its own account, whatever the others do (a machine
		// that dies during a long wave of arrivals is down within
		// downAfter of its last heartbeat, not at the end of the wave).
		unheard := 0
		for _, a := range d.Changes {
			if a.To == pb.NodeStatus_NODE_STATUS_DOWN && !a.OwnSilence {
				unheard++
			}
		}
		if unheard == 0 {
			return d
		}
		d.Held = fmt.Sprintf("holding %d nodes back from down: streams are still moving to this leader (%d of %d nodes heard since it took over, the last %s ago)", unheard, d.Arrived, len(nodes), now.Sub(d.LastArrival).Round(time.Millisecond))
		if activity.After(d.LastArrival) {
			d.Held += fmt.Sprintf("; nodes are still knocking: the last turned away %s ago", now.Sub(activity).Round(time.Millisecond))
		}
		d.Changes = slices.DeleteFunc(d.Changes, func(a HealthAction) bool { return a.To == pb.NodeStatus_NODE_STATUS_DOWN && !a.OwnSilence })
		return d
	case downs >= 2 && 2*d.Heard <= len(nodes) && (mem.HoldSince.IsZero() || now.Sub(mem.HoldSince) < downAfter):
		d.Held = fmt.Sprintf("holding %d nodes back from down: this leader hears from only %d of %d nodes, which is more likely its own view than a fleet-wide failure; they are marked down if still silent after another %s", downs, d.Heard, len(nodes), downAfter)
	default:
		return d
	}
	d.Changes = slices.DeleteFunc(d.Changes, func(a HealthAction) bool { return a.To == pb.NodeStatus_NODE_STATUS_DOWN })
	return d
}
