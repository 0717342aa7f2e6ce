package chaos

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/curatorproject/curator/client"
	pb "github.com/curatorproject/curator/proto"
)

// A power loss (stepPowerLoss): every process of the cluster killed in one
// go, dev and every agent, then `curator dev --dir DIR` as an operator
// would run it after the reboot, with no other flag (dev reads what the
// dir was made with). Nothing may be lost: the same cluster ID, every
// node that was there (by ID, ready again), the groups and their sizes, a
// label set just before, and the audit trail.

// errNoPowerLoss: the variant's dev does not restart its cluster (dev
// on Docker removes its containers when it stops).
var errNoPowerLoss = errors.New("a docker dev cluster does not restart")

// quietWait bounds how long a power loss waits for the faults that hold
// a node or a group (a stop, a freeze, a bad template's rollout) to end:
// their checks read machines a power loss would kill.
const quietWait = 90 * time.Second

// powerState is what a power loss must not lose.
type powerState struct {
	clusterID string
	nodes     map[string]string // ID → name
	groupOf   map[string]string // node ID → group
	sizes     map[string]uint32 // group → size
	// rolling: the groups with a rollout under way, which goes on once
	// the cluster is back and may replace any of their nodes.
	rolling map[string]bool
	audit   []*pb.AuditEntry
}

func (r *runner) powerState() (powerState, error) {
	info, err := call(r.cl.ClusterInfo)
	if err != nil {
		return powerState{}, err
	}
	nodes, err := call(r.cl.ListNodes)
	if err != nil {
		return powerState{}, err
	}
	groups, err := call(r.cl.ListGroups)
	if err != nil {
		return powerState{}, err
	}
	audit, err := call(func(ctx context.Context) ([]*pb.AuditEntry, error) {
		a, _, err := r.cl.Audit(ctx, 0, 0)
		return a, err
	})
	if err != nil {
		return powerState{}, err
	}
	s := powerState{clusterID: info.GetClusterId(), nodes: map[string]string{}, groupOf: map[string]string{}, sizes: map[string]uint32{},
		rolling: map[string]bool{}, audit: audit}
	for _, n := range nodes {
		s.nodes[n.GetNode().GetId()] = n.GetNode().GetName()
		s.groupOf[n.GetNode().GetId()] = n.GetNode().GetGroup()
	}
	for _, g := range groups {
		name := g.GetGroup().GetSpec().GetName()
		s.sizes[name] = g.GetGroup().GetSpec().GetSize()
		if st := g.GetRolloutState(); st == "rolling" || st == "paused" {
			s.rolling[name] = true
		}
	}
	return s, nil
}

// quiet says what still holds a node or a group ("" when nothing does).
func (r *runner) quiet() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case len(r.held) > 0:
		return fmt.Sprintf("%d nodes stopped or cut off", len(r.held))
	case len(r.freezes) > 0:
		return fmt.Sprintf("%d groups frozen", len(r.freezes))
	case len(r.watches) > 0:
		return fmt.Sprintf("%d bad templates not rolled back yet", len(r.watches))
	}
	return ""
}

func (r *runner) powerLoss(ctx context.Context) string {
	if _, err := r.m.powerOff(0); errors.Is(err, errNoPowerLoss) {
		return "skipped: " + err.Error()
	}
	for began := time.Now(); r.quiet() != ""; time.Sleep(200 * time.Millisecond) {
		if time.Since(began) > quietWait {
			return "skipped: " + r.quiet()
		}
	}
	r.mu.Lock()
	d := r.dev
	r.mu.Unlock()
	// A label on a ready node no fault hit lately (the group may replace
	// one that was, its record and label going with it).
	labelled := ""
	hit := r.hitSince(time.Now().Add(-time.Minute))
	nodes, err := call(r.cl.ListNodes)
	for _, n := range nodes {
		if n.GetNode().GetStatus() == pb.NodeStatus_NODE_STATUS_READY && !hit[n.GetNode().GetId()] {
			labelled = n.GetNode().GetId()
			break
		}
	}
	if err == nil && labelled != "" {
		if _, err := call(func(ctx context.Context) (*pb.NodeView, error) {
			return r.cl.UpdateNode(ctx, labelled, client.NodeUpdate{LabelAdd: map[string]string{"power-loss": strconv.Itoa(r.devs)}})
		}); err != nil {
			return fmt.Sprintf("power-loss: not done: label %s: %v", short(labelled), err)
		}
	}
	before, err := r.powerState()
	if err != nil {
		return fmt.Sprintf("power-loss: not done: %v", err)
	}
	r.mu.Lock()
	r.outage = true
	r.powerLosses = append(r.powerLosses, time.Now())
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		r.outage = false
		r.mu.Unlock()
	}()
	killed, err := r.m.powerOff(d.cmd.Process.Pid)
	if err != nil {
		r.breakf("power loss: %v", err)
		return fmt.Sprintf("power-loss: %v", err)
	}
	select {
	case err := <-d.exited:
		d.exited <- err
	case <-time.After(30 * time.Second):
		r.breakf("power loss: dev still runs 30 s after kill -9")
	}
	off := time.Now()
	if err := r.startDev(nil); err != nil {
		r.breakf("dev after a power loss: %v", err)
		return fmt.Sprintf("power loss: %d processes killed; dev did not come back: %v", killed, err)
	}
	up := time.Since(off)
	// The nodes restarted count as hit until they settle, like a reboot.
	settled := time.Now().Add(rebootSettle)
	r.mu.Lock()
	for id := range before.nodes {
		r.hit[id] = settled
	}
	r.mu.Unlock()
	var after powerState
	var lost error
	for began := time.Now(); time.Since(began) < time.Minute; time.Sleep(time.Second) {
		if after, err = r.powerState(); err != nil {
			lost = err
			continue
		}
		if lost = before.lost(after, r.hitSince(off.Add(-rebootSettle))); lost == nil {
			break
		}
	}
	if lost != nil {
		r.breakf("a power loss lost something: %v", lost)
	}
	if labelled != "" {
		nodes, err := call(r.cl.ListNodes)
		i := slices.IndexFunc(nodes, func(n *pb.NodeView) bool { return n.GetNode().GetId() == labelled })
		if err != nil || i < 0 || nodes[i].GetNode().GetLabels()["power-loss"] != strconv.Itoa(r.devs-1) {
			r.breakf("a power loss lost node %s's label power-loss=%d (%v)", short(labelled), r.devs-1, err)
		}
	}
	// The step ends once the nodes have settled: every node counts as
	// down until then, and the steps drawn meanwhile would all be
	// skipped.
	time.Sleep(time.Until(settled))
	return fmt.Sprintf("power loss: dev and %d agents killed at once; dev --dir restarted the cluster %s, up in %s, %d nodes and %d audit entries kept",
		killed-1, short(before.clusterID), up.Round(time.Millisecond), len(after.nodes), len(after.audit))
}

// hitSince returns the node IDs a kill (for good) hit since t: their
// group may have removed them meanwhile.
func (r *runner) hitSince(t time.Time) map[string]bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[string]bool{}
	for _, s := range r.struck {
		if !s.at.Before(t) {
			out[s.id] = true
		}
	}
	return out
}

// lost says what of s is not in after: the cluster ID, a node (but for
// those in spare, and those of a group whose rollout was under way: it
// goes on, and replaces them), a group's size, an entry of the audit
// trail.
func (s powerState) lost(after powerState, spare map[string]bool) error {
	var missing []string
	if after.clusterID != s.clusterID {
		missing = append(missing, fmt.Sprintf("the cluster ID (%s, now %s)", short(s.clusterID), short(after.clusterID)))
	}
	var ids []string
	for id := range s.nodes {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		if _, ok := after.nodes[id]; !ok && !spare[id] && !s.rolling[s.groupOf[id]] {
			missing = append(missing, "node "+s.nodes[id])
		}
	}
	if fmt.Sprint(s.sizes) != fmt.Sprint(after.sizes) { // fmt sorts map keys
		missing = append(missing, fmt.Sprintf("the groups' sizes (%v, now %v)", s.sizes, after.sizes))
	}
	// The trail keeps its newest entries: the last one before is there
	// after, with the ones before it.
	if n := len(s.audit); n > 0 {
		last := slices.IndexFunc(after.audit, func(e *pb.AuditEntry) bool { return proto.Equal(e, s.audit[n-1]) })
		switch {
		case last < 0:
			missing = append(missing, fmt.Sprintf("the audit trail's last entry (%s)", s.audit[n-1].GetCall()))
		default:
			for k := 1; k < n && k <= last; k++ {
				if !proto.Equal(s.audit[n-1-k], after.audit[last-k]) {
					missing = append(missing, fmt.Sprintf("audit entry %d of %d (%s)", n-1-k, n, s.audit[n-1-k].GetCall()))
					break
				}
			}
		}
	}
	if len(missing) > 0 {
		return errors.New(strings.Join(missing, ", "))
	}
	return nil
}

// powerOff kills dev (devPID) and every agent of the run with one kill -9,
// waits until they are gone, and returns how many it killed. With devPID
// 0 it does nothing.
func (m *processMachines) powerOff(devPID int) (int, error) {
	if devPID <= 0 {
		return 0, nil
	}
	pattern := filepath.Join(m.dir, "instances") + "/"
	out, err := exec.Command("pgrep", "-f", "--", pattern).Output()
	if err != nil {
		return 0, fmt.Errorf("no agent runs: %v", err)
	}
	pids := append([]string{strconv.Itoa(devPID)}, strings.Fields(string(out))...)
	if out, err := exec.Command("kill", append([]string{"-9"}, pids...)...).CombinedOutput(); err != nil {
		return 0, fmt.Errorf("kill -9 %v: %v: %s", pids, err, out)
	}
	m.mu.Lock()
	clear(m.frozen)
	m.mu.Unlock()
	// A process a dying leader's provider started a moment before the
	// kill (a machine being made) may have come after the list: a power
	// loss takes it too.
	for began := time.Now(); ; time.Sleep(50 * time.Millisecond) {
		out, err := exec.Command("pgrep", "-f", "--", pattern).Output()
		if err != nil {
			return len(pids), nil
		}
		if time.Since(began) > 10*time.Second {
			return len(pids), fmt.Errorf("agents still run 10 s after kill -9: %s", strings.Join(strings.Fields(string(out)), " "))
		}
		for _, pid := range strings.Fields(string(out)) {
			if !slices.Contains(pids, pid) {
				pids = append(pids, pid)
				_ = exec.Command("kill", "-9", pid).Run()
			}
		}
	}
}

// powerOff: a docker dev cluster does not restart.
func (m *dockerMachines) powerOff(int) (int, error) { return 0, errNoPowerLoss }
