package chaos

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/curatorproject/curator/curator"
	"github.com/curatorproject/curator/internal/testenv"
	pb "github.com/curatorproject/curator/proto"
)

// The faults beside the kills and freezes: a manager restarted with
// delays armed at chosen fault points or with its clock off (the
// binary is built with -tags faults: curator/internal/faults), the host
// starved of CPU, a manager cut off from the other nodes.

// delayPresets are the delays a delay step arms (CURATOR_FAULT_DELAY),
// chosen by its pick.
var delayPresets = []string{
	// A sleep between two writes of one action: a machine made and its
	// rollout not told yet, an etcd member added or removed and its node
	// record not written yet, a member about to go.
	"rollout/after-provision=2s,promote/after-member-add=2s,demote/after-member-remove=1500ms,membership/before-member-remove=1s",
	// A slow apply of the node view, and slow watches.
	"registry/before-apply=400ms,watch/before-send=700ms",
	// Every answer late after its call took effect.
	"api/before-reply=1200ms",
	// All of them at once, shorter.
	"rollout/after-provision=1s,promote/after-member-add=1s,membership/before-member-remove=500ms,registry/before-apply=200ms,watch/before-send=300ms,api/before-reply=500ms",
}

// delayPreset is the delays a delay step of pick arms.
func delayPreset(pick uint32) string { return delayPresets[(pick>>8)%uint32(len(delayPresets))] }

// clockSkew is how far a skew step of pick sets a manager's clock off:
// 1–4 s ahead or behind (down-after is 5 s).
func clockSkew(pick uint32) time.Duration {
	d := time.Duration(1+(pick>>8)%4) * time.Second
	if (pick>>12)%2 == 1 {
		d = -d
	}
	return d
}

// starveProcs is how many processes burn a core each while the host is
// starved: twice the 2-core machine's cores.
const starveProcs = 4

// managerTarget picks a manager (a ready voter) by the step's pick,
// while the others keep a majority without it.
func (v faultView) managerTarget(s step) (*pb.NodeView, string) {
	if !v.spares(1) {
		return nil, fmt.Sprintf("no manager may be hit: %d of %d voters healthy", v.healthy, len(v.voters))
	}
	var candidates []*pb.NodeView
	for _, n := range v.ready {
		if v.isVoter(n) {
			candidates = append(candidates, n)
		}
	}
	if len(candidates) == 0 {
		return nil, "no ready voter"
	}
	return v.pick(candidates, s)
}

// restartArmed runs a skew step: the manager restarted with its clock
// off, held for the step's hold, then restarted without it (release).
func (r *runner) restartArmed(ctx context.Context, s step) string {
	env := map[string]string{curator.FaultClockSkewEnv: fmt.Sprintf("%+.0fs", clockSkew(s.Pick).Seconds())}
	v, err := r.faultView()
	if err != nil {
		return "skipped: " + err.Error()
	}
	target, why := v.managerTarget(s)
	if target == nil {
		return "skipped: " + why
	}
	name, id, node := target.GetNode().GetName(), target.GetNode().GetInstanceId(), target.GetNode().GetId()
	r.strikeNode(target, false)
	r.mu.Lock()
	r.held[name] = heldFault{kind: s.Kind, instance: id, node: node}
	r.mu.Unlock()
	if err := r.m.restart(ctx, id, env); err != nil {
		r.mu.Lock()
		delete(r.held, name)
		r.hit[node] = time.Now().Add(rebootSettle)
		r.mu.Unlock()
		if errors.Is(err, errNoRestartEnv) {
			return "skipped: " + err.Error()
		}
		return fmt.Sprintf("%s %s: not done: %v", s.Kind, name, err)
	}
	r.holds.Add(1)
	go func() {
		defer r.holds.Done()
		time.Sleep(s.Hold)
		r.release(name)
	}()
	var set []string
	for k, v := range env {
		set = append(set, k+"="+v)
	}
	return fmt.Sprintf("restarted %s with %s for %s%s", name, strings.Join(set, " "), s.Hold, why)
}

// delay runs a delay step: a manager's process (the curator leader's,
// for an even pick) given delays at fault points through its file in
// the cluster's delay directory (CURATOR_FAULT_DELAY_DIR), for the
// step's hold, then none again. The manager runs on meanwhile, slow
// where the delays are: nothing is killed, so any manager may be armed.
func (r *runner) delay(s step) string {
	pm, ok := r.m.(*processMachines)
	if !ok {
		return "skipped: a container's agent has no delay directory"
	}
	v, err := r.faultView()
	if err != nil {
		return "skipped: " + err.Error()
	}
	var target *pb.NodeView
	if s.Pick%2 == 0 {
		target = v.byID[v.leader]
	}
	if target == nil || !slices.Contains(v.ready, target) {
		var voters []*pb.NodeView
		for _, n := range v.ready {
			if v.isVoter(n) {
				voters = append(voters, n)
			}
		}
		if len(voters) == 0 {
			return "skipped: no ready voter"
		}
		target = voters[int(s.Pick>>1)%len(voters)]
	}
	name, id := target.GetNode().GetName(), target.GetNode().GetInstanceId()
	why := ""
	if target.GetNode().GetId() == v.leader {
		why = " (the curator leader)"
	}
	disarm, err := pm.arm(id, delayPreset(s.Pick))
	if err != nil {
		return fmt.Sprintf("delay %s: not done: %v", name, err)
	}
	r.strikeNode(target, false)
	r.holds.Add(1)
	go func() {
		defer r.holds.Done()
		time.Sleep(s.Hold)
		met := disarm()
		r.mu.Lock()
		r.delaysMet = append(r.delaysMet, met...)
		r.mu.Unlock()
		r.logf("delays of %s off; it met %v", name, met)
	}()
	return fmt.Sprintf("delays %s on %s for %s%s", delayPreset(s.Pick), name, s.Hold, why)
}

// delayDir is the cluster's delay directory (CURATOR_FAULT_DELAY_DIR):
// every agent of the run has it in its environment.
func (m *processMachines) delayDir() string { return filepath.Join(m.dir, "faults") }

// arm gives the instance's process delays (faults.ParseDelays' form)
// through its file in the delay directory, and returns what takes them
// off again and says which points the process delayed at meanwhile.
func (m *processMachines) arm(id, delays string) (disarm func() []string, err error) {
	pid, err := m.pid(id)
	if err != nil {
		return nil, err
	}
	logFrom := int64(-1)
	if fi, err := os.Stat(m.prov.LogFile(id)); err == nil {
		logFrom = fi.Size()
	}
	path := filepath.Join(m.delayDir(), strconv.Itoa(pid))
	if err := os.WriteFile(path, []byte(delays+"\n"), 0o644); err != nil {
		return nil, err
	}
	return func() []string {
		_ = os.Remove(path)
		return m.delaysMet(id, logFrom)
	}, nil
}

// delaysMet lists the fault points the agent of a process instance said
// it delayed at (once each an arming) in its log from offset from on:
// which of the delays armed the manager met while they were armed.
func (m *processMachines) delaysMet(id string, from int64) []string {
	b, err := os.ReadFile(m.prov.LogFile(id))
	if err != nil || from < 0 || from > int64(len(b)) {
		return nil
	}
	var met []string
	for _, line := range strings.Split(string(b[from:]), "\n") {
		if _, rest, ok := strings.Cut(line, curator.FaultDelayEnv+": "); ok {
			if point, _, ok := strings.Cut(rest, " delayed"); ok && !slices.Contains(met, point) {
				met = append(met, point)
			}
		}
	}
	slices.Sort(met)
	return met
}

// starve runs a starve step: starveProcs processes burning a core each
// for the step's hold.
func (r *runner) starve(s step) string {
	r.mu.Lock()
	if r.starving {
		r.mu.Unlock()
		return "skipped: the host is starved already"
	}
	r.starving = true
	r.starves = append(r.starves, [2]time.Time{time.Now(), time.Now().Add(s.Hold)})
	r.mu.Unlock()
	stop, err := testenv.Busy(starveProcs)
	if err != nil {
		r.mu.Lock()
		r.starving = false
		r.mu.Unlock()
		return "starve: not done: " + err.Error()
	}
	r.holds.Add(1)
	go func() {
		defer r.holds.Done()
		time.Sleep(s.Hold)
		stop()
		r.mu.Lock()
		r.starving = false
		r.mu.Unlock()
		r.logf("the host has its CPU again")
	}()
	return fmt.Sprintf("starved the host: %d processes burning a core each for %s", starveProcs, s.Hold)
}

// partition runs a partition step: a manager cut off from every other
// node for the step's hold, then healed (release).
func (r *runner) partition(ctx context.Context, s step) string {
	v, err := r.faultView()
	if err != nil {
		return "skipped: " + err.Error()
	}
	target, why := v.managerTarget(s)
	if target == nil {
		return "skipped: " + why
	}
	name, id := target.GetNode().GetName(), target.GetNode().GetInstanceId()
	if err := r.m.cut(ctx, id); errors.Is(err, errNoPartition) {
		return "skipped: " + err.Error()
	} else if err != nil {
		return fmt.Sprintf("partition %s: not done: %v", name, err)
	}
	r.strikeNode(target, false)
	r.mu.Lock()
	r.held[name] = heldFault{kind: stepCut, instance: id, node: target.GetNode().GetId()}
	r.mu.Unlock()
	r.holds.Add(1)
	go func() {
		defer r.holds.Done()
		time.Sleep(s.Hold)
		r.release(name)
	}()
	return fmt.Sprintf("cut %s off from the other nodes for %s%s", name, s.Hold, why)
}

// liveMarkedDown lists the nodes the health loop marked down (its events)
// that no fault of the schedule had hit in the 40 s before (a stop, a
// cut, a freeze, a kill, a reboot, a restart, a power loss), nor their
// group taken away (drained, demoted, its machine destroyed: a rollout
// or a scale-down): a node marked down while it ran, heartbeating,
// because of a fault elsewhere (a manager its session went through cut
// off or slow, the host starved).
// Each is said with whether the host was starved then. A liveness
// matter, counted and said, not an invariant: down-after is 5 s here,
// and a session moves to another manager only once it finds its own
// gone.
func (r *runner) liveMarkedDown(events []*pb.Event) (downs []string, starved int) {
	const window = 40 * time.Second
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, ev := range events {
		if ev.GetLoop() != "health" || !strings.Contains(ev.GetAction(), "mark-down") || ev.GetNodeId() == "" {
			continue
		}
		at := ev.GetTime().AsTime()
		if at.Before(r.began) {
			continue
		}
		within := func(t time.Time) bool { return !t.After(at) && at.Sub(t) < window }
		taken := slices.ContainsFunc(events, func(g *pb.Event) bool {
			return g.GetLoop() == "groups" && g.GetNodeId() == ev.GetNodeId() && within(g.GetTime().AsTime()) &&
				slices.Contains([]string{"drain", "demote", "destroy-machine", "remove-node"}, g.GetAction())
		})
		hit := taken || slices.ContainsFunc(r.struck, func(s strike) bool {
			return s.id == ev.GetNodeId() && !s.at.After(at) && at.Sub(s.at) < window
		}) || slices.ContainsFunc(r.powerLosses, func(t time.Time) bool { return !t.After(at) && at.Sub(t) < window })
		if hit {
			continue
		}
		during := slices.ContainsFunc(r.starves, func(w [2]time.Time) bool {
			return !at.Before(w[0]) && !at.After(w[1].Add(downAfter))
		})
		note := ""
		if during {
			starved++
			note = ", the host starved"
		}
		downs = append(downs, fmt.Sprintf("%s at %.1fs%s: %s", short(ev.GetNodeId()), at.Sub(r.began).Seconds(), note, ev.GetReason()))
	}
	return downs, starved
}
