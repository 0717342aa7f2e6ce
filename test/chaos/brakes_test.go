package chaos

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	pb "github.com/curatorproject/curator/proto"
)

// The brakes under fire (docs/groups.md, "Groups" and "When a rollout goes
// wrong"): a bad template committed to a group fails and rolls back by
// itself while the old machines serve, and more of a group frozen than
// its max_unhealthy, past replace_after, destroys nothing and heals by
// itself once let go. The schedule's other faults go on meanwhile; what
// they take down themselves is not held against the curator.

const (
	// badGrace is what a bad template's rollout has beyond its
	// progress_deadline to fail and roll back: the group loop's ticks, a
	// leader change or two, the rollback's own machines.
	badGrace = time.Minute
	// struckBefore: a node hit this long before a bad commit may still be
	// on its way down (its record ready a while longer): it counts among
	// the schedule's.
	struckBefore = 20 * time.Second
	// healBound: the frozen nodes of a group are ready again within this
	// of being let go.
	healBound = 30 * time.Second
)

// strike is a fault the schedule made on a node: when, which, its group.
type strike struct {
	at        time.Time
	id, group string
	// kill: the node was killed for good (kill, kill-leader).
	kill bool
}

// badWatch is a bad template's rollout, from its commit until it has
// rolled back.
type badWatch struct {
	group, sha string
	began      time.Time
	// min is size - max_unavailable (the size, for a consensus group,
	// which always surges); floor is the fewest ready nodes off the bad
	// config the group had at the commit, if fewer.
	min, floor int
	// deadline: the rollback done within this of the commit.
	deadline time.Duration
	failed   time.Time
	done     bool
	least    int // the fewest good nodes seen, -1 before the first sample
	samples  int
}

// groupFreeze is a group-wide freeze under way.
type groupFreeze struct {
	group   string
	began   time.Time
	ceiling int // max_unhealthy as a count of the size
	size    int
	nodes   []frozenNode
	// allDown is since when the monitor has seen every frozen node down
	// (zero: not all of them at its last look); downFor the longest such
	// span. A leader that has just taken over judges the nodes it has
	// not heard from only after its failover's hold (up to six times
	// down-after), so that under leader kills the frozen nodes may not be
	// down long enough for the ceiling to be reached.
	allDown time.Time
	downFor time.Duration
}

type frozenNode struct{ name, id, instance string }

// ceilingOf is a group's max_unhealthy as a count for size machines: a
// count as given, or a percentage of the size rounded down and never
// below one (docs/groups.md).
func ceilingOf(maxUnhealthy string, size int) (int, error) {
	if p, ok := strings.CutSuffix(maxUnhealthy, "%"); ok {
		v, err := strconv.Atoi(p)
		if err != nil {
			return 0, fmt.Errorf("max_unhealthy %q: %w", maxUnhealthy, err)
		}
		return max(1, size*v/100), nil
	}
	v, err := strconv.Atoi(maxUnhealthy)
	if err != nil {
		return 0, fmt.Errorf("max_unhealthy %q: %w", maxUnhealthy, err)
	}
	return v, nil
}

// groupTargets picks k nodes of group for a group-wide fault: from the
// step's pick on among its nodes that may be hit (by name, wrapping),
// none drained (a rollout takes a drained node away on purpose, hold or
// not). Voters among them only while the healthy voters left keep a
// majority: the faults never take the quorum.
func (v faultView) groupTargets(group string, k int, pick uint32) ([]*pb.NodeView, string) {
	var cands []*pb.NodeView
	for _, n := range v.ready {
		if n.GetNode().GetGroup() == group && n.GetNode().GetAvailability() != pb.Availability_AVAILABILITY_DRAIN {
			cands = append(cands, n)
		}
	}
	if len(cands) < k {
		return nil, fmt.Sprintf("group %s has %d nodes that may be hit, %d wanted", group, len(cands), k)
	}
	var out []*pb.NodeView
	voters := 0
	for i := range k {
		n := cands[(int(pick%uint32(len(cands)))+i)%len(cands)]
		out = append(out, n)
		if v.isVoter(n) {
			voters++
		}
	}
	if voters > 0 && !v.spares(voters) {
		return nil, fmt.Sprintf("%d voters of %d would leave %d healthy, short of a majority", voters, len(v.voters), v.healthy-voters)
	}
	return out, ""
}

// goodNodes counts group's nodes that serve off the bad config sha:
// ready, not drained, on another config. unknown: some node of the group
// is unknown (a leader that took over a moment ago has not heard from it
// yet), and the count says nothing.
func goodNodes(nodes []*pb.NodeView, group, sha string) (good int, unknown bool) {
	for _, n := range nodes {
		nd := n.GetNode()
		if nd.GetGroup() != group {
			continue
		}
		switch {
		case nd.GetStatus() == pb.NodeStatus_NODE_STATUS_UNKNOWN:
			unknown = true
		case nd.GetStatus() == pb.NodeStatus_NODE_STATUS_READY && nd.GetAvailability() != pb.Availability_AVAILABILITY_DRAIN && nd.GetConfigSha() != sha:
			good++
		}
	}
	return good, unknown
}

// brakeSpec is the groups' spec in the suite: replace_after of
// replaceAfter, so that a group-wide freeze outlasts it in seconds; and
// managers with max_unhealthy 1, so that more than it (two) frozen keep
// the quorum (40% of five, the default, is two: three frozen would take
// it).
func brakeSpec(g *pb.GroupSpec) {
	g.ReplaceAfter = durationpb.New(replaceAfter)
	if g.GetName() == "managers" {
		g.MaxUnhealthy = "1"
	}
}

// busy says why the schedule makes no commit to group now (empty: it
// may): a bad template's rollout not rolled back yet (a commit would
// carry the bad template on, or be the target of its rollback); and,
// but for a bad template (whose new machines never get ready, so that
// its rollout drains no old node), a freeze of the group: a good
// rollout may drain a frozen node still shown ready and then take its
// machine away on purpose, and a smaller size takes the frozen ones
// first, neither of them a repair that the ceiling holds.
func (r *runner) busy(group string, bad bool) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if w := r.watches[group]; w != nil {
		return fmt.Sprintf("group %s has a bad template %s not rolled back yet", group, short(w.sha))
	}
	if _, ok := r.freezes[group]; ok && !bad {
		return fmt.Sprintf("group %s is frozen", group)
	}
	return ""
}

// strikeNode notes a fault on node n.
func (r *runner) strikeNode(n *pb.NodeView, kill bool) {
	r.mu.Lock()
	r.struck = append(r.struck, strike{at: time.Now(), id: n.GetNode().GetId(), group: n.GetNode().GetGroup(), kill: kill})
	r.mu.Unlock()
}

// killWindow is how long a machine killed for good counts as unhealthy
// to the schedule: down after 5 s, replaced replace_after later, and
// the replacement's time to join.
const killWindow = 30 * time.Second

// killHolds says why killing node n for good would hold its group's
// repairs for good ("" if it would not): more of its machines killed
// within killWindow than its max_unhealthy. The group then replaces none
// of them, by design (docs/groups.md, "Repairs": machines killed together
// are held until they run again), and the run could not converge. A
// freeze tests the ceiling instead, whose machines come back.
func (r *runner) killHolds(n *pb.NodeView) string {
	group := n.GetNode().GetGroup()
	g, err := call(func(ctx context.Context) (*pb.GroupView, error) { return r.cl.GetGroup(ctx, group) })
	if err != nil {
		return fmt.Sprintf("group %s: %v", group, err)
	}
	spec := g.GetGroup().GetSpec()
	ceiling, err := ceilingOf(spec.GetMaxUnhealthy(), int(spec.GetSize()))
	if err != nil {
		return err.Error()
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	killed := map[string]bool{}
	for _, s := range r.struck {
		if s.kill && s.group == group && time.Since(s.at) < killWindow {
			killed[s.id] = true
		}
	}
	if len(killed)+1 > ceiling {
		return fmt.Sprintf("group %s had %d of its machines killed in the last %s, max_unhealthy %d: one more would hold its repairs for good", group, len(killed), killWindow, ceiling)
	}
	return ""
}

// struckSince counts the distinct nodes of group the schedule hit since
// t, and those it holds now. The caller holds r.mu.
func (r *runner) struckSince(group string, t time.Time) int {
	ids := map[string]bool{}
	for _, s := range r.struck {
		if s.group == group && !s.at.Before(t) {
			ids[s.id] = true
		}
	}
	if f := r.freezes[group]; f != nil {
		for _, n := range f.nodes {
			ids[n.id] = true
		}
	}
	return len(ids)
}

// commitBad commits a bad template to group (args: [--no-such-flag], a
// version of its own) and watches its rollout: the monitor checks that
// it fails and rolls back within progress_deadline and badGrace, and
// that the group's ready nodes off the bad config never drop below size
// - max_unavailable (the size, for a consensus group) but for those the
// schedule took down itself.
func (r *runner) commitBad(group string) string {
	if why := r.busy(group, true); why != "" {
		return "skipped: " + why
	}
	g, err := call(func(ctx context.Context) (*pb.GroupView, error) { return r.cl.GetGroup(ctx, group) })
	if err != nil {
		return fmt.Sprintf("commit %s: not done: %v", group, err)
	}
	nodes, err := call(r.cl.ListNodes)
	if err != nil {
		return fmt.Sprintf("commit %s: not done: %v", group, err)
	}
	spec := g.GetGroup().GetSpec()
	size := int(spec.GetSize())
	want := size
	if !slices.Contains(spec.GetRoles(), pb.Role_ROLE_CONSENSUS) {
		want = size - int(spec.GetRollout().GetMaxUnavailable())
	}
	base, _ := goodNodes(nodes, group, "")
	r.rollNo++
	spec.Template.Version = fmt.Sprintf("chaos-%d-bad", r.rollNo)
	spec.Template.Args = []string{"--no-such-flag"}
	v, err := call(func(ctx context.Context) (*pb.GroupView, error) {
		v, _, err := r.cl.CommitGroup(ctx, spec)
		return v, err
	})
	if err != nil {
		return fmt.Sprintf("commit %s: not done: %v", group, err)
	}
	w := &badWatch{group: group, sha: v.GetGroup().GetConfigSha(), began: time.Now(), min: want, floor: min(want, base),
		deadline: spec.GetRollout().GetProgressDeadline().AsDuration() + badGrace, least: -1}
	r.mu.Lock()
	r.watches[group] = w
	r.mu.Unlock()
	return fmt.Sprintf("committed a bad template to %s: config %s, %d of size %d ready (at least %d to stay, less what the schedule takes down)",
		group, short(w.sha), base, size, w.floor)
}

// watchBad is the monitor's look at the bad templates' rollouts, with
// the nodes it read: the old machines serve, and each rollout fails and
// rolls back within its deadline.
func (r *runner) watchBad(nodes []*pb.NodeView) {
	r.mu.Lock()
	watches := make([]*badWatch, 0, len(r.watches))
	for _, w := range r.watches {
		watches = append(watches, w)
	}
	r.mu.Unlock()
	for _, w := range watches {
		if nodes != nil {
			good, unknown := goodNodes(nodes, w.group, w.sha)
			r.mu.Lock()
			floor := w.floor - r.struckSince(w.group, w.began.Add(-struckBefore))
			r.mu.Unlock()
			if !unknown {
				w.samples++
				if w.least < 0 || good < w.least {
					w.least = good
				}
				if good < floor {
					r.breakf("group %s: %d ready nodes off its bad config %s, want at least %d (size - max_unavailable %d, less the schedule's faults on it)",
						w.group, good, short(w.sha), floor, w.min)
					r.endWatch(w)
					continue
				}
			}
		}
		ro, err := call(func(ctx context.Context) (*pb.Rollout, error) { return r.cl.GetRollout(ctx, w.group) })
		if err == nil && ro.GetRollbackOf() == w.sha {
			if w.failed.IsZero() {
				w.failed = time.Now()
				r.logf("group %s: the bad template's rollout failed after %s: %s", w.group, w.failed.Sub(w.began).Round(time.Millisecond), ro.GetReason())
			}
			if ro.GetState() == pb.RolloutState_ROLLOUT_STATE_DONE {
				w.done = true
				r.logf("group %s: rolled back from the bad template %s after %s (%d samples, at least %d ready off it, size - max_unavailable %d)",
					w.group, short(w.sha), time.Since(w.began).Round(time.Millisecond), w.samples, w.least, w.min)
				r.endWatch(w)
				continue
			}
		}
		if time.Since(w.began) > w.deadline {
			r.breakf("group %s: the bad template %s not failed and rolled back within %s (progress_deadline + %s): rollout %v, %v",
				w.group, short(w.sha), w.deadline, badGrace, ro, err)
			r.endWatch(w)
		}
	}
}

func (r *runner) endWatch(w *badWatch) {
	r.mu.Lock()
	if r.watches[w.group] == w {
		delete(r.watches, w.group)
	}
	r.mu.Unlock()
}

// watching says whether a bad template's rollout is watched.
func (r *runner) watching() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.watches) > 0
}

// freezeGroup freezes more of the step's group than its max_unhealthy
// for the step's hold, then checks the brakes held (endFreeze).
func (r *runner) freezeGroup(ctx context.Context, s step) string {
	group := s.Kind.group()
	if why := r.busy(group, false); why != "" {
		return "skipped: " + why
	}
	g, err := call(func(ctx context.Context) (*pb.GroupView, error) { return r.cl.GetGroup(ctx, group) })
	if err != nil {
		return fmt.Sprintf("freeze %s: not done: %v", group, err)
	}
	switch {
	case g.GetRolloutState() == "rolling" || g.GetRolloutState() == "paused":
		// A rollout drains and takes away nodes on purpose, hold or not.
		return fmt.Sprintf("skipped: group %s has a rollout %s", group, g.GetRolloutState())
	case g.GetGroup().GetRepairHeld() != "":
		return fmt.Sprintf("skipped: group %s's repairs are held already", group)
	}
	size := int(g.GetGroup().GetSpec().GetSize())
	ceiling, err := ceilingOf(g.GetGroup().GetSpec().GetMaxUnhealthy(), size)
	if err != nil {
		return fmt.Sprintf("freeze %s: not done: %v", group, err)
	}
	v, err := r.faultView()
	if err != nil {
		return "skipped: " + err.Error()
	}
	targets, why := v.groupTargets(group, ceiling+1, s.Pick)
	if targets == nil {
		return "skipped: " + why
	}
	f := &groupFreeze{group: group, began: time.Now(), ceiling: ceiling, size: size}
	for _, n := range targets {
		fn := frozenNode{name: n.GetNode().GetName(), id: n.GetNode().GetId(), instance: n.GetNode().GetInstanceId()}
		if err := r.m.freeze(ctx, fn.instance); err != nil {
			r.thawAll(f)
			return fmt.Sprintf("freeze %s: not done: %s: %v", group, fn.name, err)
		}
		r.strikeNode(n, false)
		f.nodes = append(f.nodes, fn)
		r.mu.Lock()
		r.held[fn.name] = heldFault{kind: stepStop, instance: fn.instance}
		r.mu.Unlock()
	}
	r.mu.Lock()
	r.freezes[group] = f
	r.mu.Unlock()
	r.holds.Add(1)
	go func() {
		defer r.holds.Done()
		time.Sleep(s.Hold)
		r.endFreeze(f)
	}()
	names := make([]string, len(f.nodes))
	for i, n := range f.nodes {
		names[i] = n.name
	}
	return fmt.Sprintf("froze %d of group %s's %d (max_unhealthy %s: %d) for %s: %s", len(f.nodes), group, size,
		g.GetGroup().GetSpec().GetMaxUnhealthy(), ceiling, s.Hold, strings.Join(names, ", "))
}

// watchFreezes is the monitor's look at the frozen nodes, with the nodes
// it read: how long they have been down together.
func (r *runner) watchFreezes(nodes []*pb.NodeView) {
	status := map[string]pb.NodeStatus{}
	for _, n := range nodes {
		status[n.GetNode().GetId()] = n.GetNode().GetStatus()
	}
	now := time.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, f := range r.freezes {
		all := true
		for _, n := range f.nodes {
			all = all && status[n.id] == pb.NodeStatus_NODE_STATUS_DOWN
		}
		switch {
		case !all:
			f.allDown = time.Time{}
		case f.allDown.IsZero():
			f.allDown = now
		default:
			f.downFor = max(f.downFor, now.Sub(f.allDown))
		}
	}
}

// thawAll lets f's nodes go.
func (r *runner) thawAll(f *groupFreeze) {
	for _, n := range f.nodes {
		r.release(n.name)
	}
}

// endFreeze checks, before the frozen nodes are let go, that every one
// of their machines is still there and that no event says the group
// destroyed one, and says whether the group held its repairs (the freeze
// reached the ceiling: the nodes were due for replacement); then lets
// them go and checks that they are ready again, the same nodes, within
// healBound.
func (r *runner) endFreeze(f *groupFreeze) {
	held := time.Since(f.began)
	for _, n := range f.nodes {
		if !r.m.alive(n.instance) {
			r.breakf("group %s: the machine %s of %s, frozen with %d of the group's %d (max_unhealthy %d), was destroyed while frozen %s",
				f.group, n.instance, n.name, len(f.nodes), f.size, f.ceiling, held.Round(time.Millisecond))
		}
	}
	events, err := call(func(ctx context.Context) ([]*pb.Event, error) { return r.cl.ListEvents(ctx, 0) })
	if err != nil {
		r.breakf("group %s: no events at the end of its freeze: %v", f.group, err)
	}
	said := false
	for _, ev := range events {
		if ev.GetTime().AsTime().Before(f.began) || ev.GetLoop() != "groups" {
			continue
		}
		if ev.GetAction() == "repair-hold" && strings.HasPrefix(ev.GetReason(), "group "+f.group+":") {
			said = true
		}
		if ev.GetAction() != "destroy-machine" {
			continue
		}
		for _, n := range f.nodes {
			if ev.GetNodeId() == n.id || strings.Contains(ev.GetReason(), n.instance) {
				r.breakf("group %s: %s destroyed the machine of the frozen %s: %s", f.group, ev.GetAction(), n.name, ev.GetReason())
			}
		}
	}
	if !said && err == nil {
		if g, err := call(func(ctx context.Context) (*pb.GroupView, error) { return r.cl.GetGroup(ctx, f.group) }); err == nil && g.GetGroup().GetRepairHeld() != "" {
			said = true // held since before the freeze began
		}
	}
	r.mu.Lock()
	downFor := f.downFor
	r.mu.Unlock()
	// Whether the ceiling was reached is said, not required: it is the
	// group loop's liveness, not its safety. A leader that took over
	// judges the nodes it has not heard from after its failover's hold
	// (up to six times down-after), and the loop acts for one group at a
	// time, so that a slow action of another group (a demotion's move of
	// the etcd leader, up to 10 s) holds it back.
	switch {
	case said:
		r.logf("group %s: its repairs held (repair-hold), the frozen nodes down together for %s", f.group, downFor.Round(time.Millisecond))
	case err == nil:
		r.logf("group %s: frozen %s, its frozen nodes down together for %s, and no repair-hold said: the ceiling was not reached (nothing destroyed either)",
			f.group, held.Round(time.Millisecond), downFor.Round(time.Millisecond))
	}
	r.thawAll(f)
	thawed := time.Now()
	r.mu.Lock()
	delete(r.freezes, f.group)
	r.mu.Unlock()
	// The same nodes ready again, but for those the schedule hit since,
	// those the group took away after the thaw as extra machines (a
	// rollout's or rollback's surge goes first to a node not ready yet)
	// and, when the loop never held its repairs, those it replaced after
	// the thaw: a node whose partner came back first is then the one
	// unhealthy node of its group, down for longer than replace_after,
	// and the rules replace it (a hold, once said, restarts the frozen
	// nodes' clocks instead).
	var last error
	for time.Since(thawed) < healBound {
		var replaced []string
		if replaced, last = r.healed(f, thawed, !said); last == nil {
			for _, why := range replaced {
				r.logf("group %s: a frozen node taken away after the thaw: %s", f.group, why)
			}
			r.logf("group %s healed %s after its thaw (frozen %s)", f.group, time.Since(thawed).Round(time.Millisecond), held.Round(time.Millisecond))
			return
		}
		time.Sleep(500 * time.Millisecond)
	}
	r.breakf("group %s: not healed %s after its thaw: %v", f.group, healBound, last)
}

// healed says which of f's nodes is not ready again (nil: all are), but
// for those the schedule hit since thawed and those whose machine the
// group loop took away since thawed, as one of more machines than the
// group's size or, if replaceable, as a repair; it returns those.
func (r *runner) healed(f *groupFreeze, thawed time.Time, replaceable bool) (replacedAfter []string, _ error) {
	nodes, err := call(r.cl.ListNodes)
	if err != nil {
		return nil, err
	}
	events, err := call(func(ctx context.Context) ([]*pb.Event, error) { return r.cl.ListEvents(ctx, 0) })
	if err != nil {
		return nil, err
	}
	replaced := map[string]string{}
	for _, ev := range events {
		if ev.GetLoop() != "groups" || ev.GetAction() != "destroy-machine" || ev.GetTime().AsTime().Before(thawed) {
			continue
		}
		repair := strings.Contains(ev.GetReason(), "has been down for")
		extra := strings.Contains(ev.GetReason(), " machines, wants ")
		if (repair && replaceable) || extra {
			replaced[ev.GetNodeId()] = ev.GetReason()
		}
	}
	r.mu.Lock()
	hitSince := map[string]bool{}
	for _, s := range r.struck {
		if !s.at.Before(thawed) {
			hitSince[s.id] = true
		}
	}
	r.mu.Unlock()
	for _, n := range f.nodes {
		if hitSince[n.id] {
			continue
		}
		i := slices.IndexFunc(nodes, func(x *pb.NodeView) bool { return x.GetNode().GetId() == n.id })
		if why, ok := replaced[n.id]; ok && i < 0 {
			replacedAfter = append(replacedAfter, n.name+": "+why)
			continue
		}
		if i < 0 {
			return nil, fmt.Errorf("%s has no record", n.name)
		}
		if st := nodes[i].GetNode().GetStatus(); st != pb.NodeStatus_NODE_STATUS_READY {
			return nil, fmt.Errorf("%s is %s", n.name, st)
		}
	}
	return replacedAfter, nil
}
