package decide

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	pb "github.com/curatorproject/curator/proto"
)

// update rewrites the golden files of the traces instead of comparing:
// go test ./curator/decide -run TestRolloutTraces -update
var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// traceWorld is a group and its etcd membership as the group loop's
// actions change them, one decision at a time, for a whole rollout: a
// made machine's node joins (a learner first, in a consensus group) and
// becomes a ready voter a step later; a drain, a demotion, a destroyed
// machine and a removed record take effect at once. The leader's node
// hands the leadership to another ready voter when it is demoted.
type traceWorld struct {
	s    GroupSnapshot
	next int
	// minHealthy is the fewest healthy voters seen between two steps.
	minHealthy int
}

func (w *traceWorld) node(inst string) *GroupNode {
	i := slices.IndexFunc(w.s.Nodes, func(n GroupNode) bool { return n.InstanceID == inst })
	if i < 0 {
		return nil
	}
	return &w.s.Nodes[i]
}

// settle is what happens between two decisions: learners are promoted.
func (w *traceWorld) settle() {
	for i := range w.s.Nodes {
		n := &w.s.Nodes[i]
		if n.Learner {
			n.Learner, n.HealthyVoter, n.Since = false, true, w.s.Now
			w.s.Voters++
			w.s.HealthyVoters++
		}
	}
}

func (w *traceWorld) apply(a *GroupAction) {
	switch a.Kind {
	case GroupProvision:
		w.next++
		id := fmt.Sprintf("new%d", w.next)
		w.s.Machines = append(w.s.Machines, GroupMachine{ID: id, ConfigSHA: w.s.TargetSHA, Created: w.s.Now})
		n := GroupNode{ID: strings.ToUpper(id), InstanceID: id, Status: pb.NodeStatus_NODE_STATUS_READY, Since: w.s.Now}
		if w.s.ConsensusGroup {
			n.Consensus, n.Learner = true, true
		}
		w.s.Nodes = append(w.s.Nodes, n)
	case GroupDrain:
		w.node(a.Machine).Drained = true
	case GroupDemote:
		n := w.node(a.Machine)
		if n.HealthyVoter {
			w.s.HealthyVoters--
		}
		w.s.Voters--
		n.Consensus, n.HealthyVoter = false, false
		if n.Leader {
			n.Leader = false
			for i := range w.s.Nodes {
				if w.s.Nodes[i].HealthyVoter {
					w.s.Nodes[i].Leader = true
					break
				}
			}
		}
	case GroupDestroyMachine:
		w.s.Machines = slices.DeleteFunc(w.s.Machines, func(m GroupMachine) bool { return m.ID == a.Machine })
		if n := w.node(a.Machine); n != nil {
			n.Status = pb.NodeStatus_NODE_STATUS_DOWN
		}
	case GroupRemoveNode:
		w.s.Nodes = slices.DeleteFunc(w.s.Nodes, func(n GroupNode) bool { return n.ID == a.Node })
	}
}

// trace runs the group loop's decisions on w until the rollout is done,
// a decision is refused or nothing happens twice in a row, and returns
// one line per step.
func trace(w *traceWorld) []string {
	var lines []string
	idle := 0
	w.minHealthy = w.s.HealthyVoters
	for step := 1; step <= 60; step++ {
		w.minHealthy = min(w.minHealthy, w.s.HealthyVoters)
		a := Group(w.s)
		line := fmt.Sprintf("%02d  voters %d/%d  ", step, w.s.HealthyVoters, w.s.Voters)
		switch {
		case a == nil:
			line += "(nothing: waits)"
		default:
			line += fmt.Sprintf("%s %s [%s]: %s", a.Kind, a.Machine, a.Step, a.Reason)
		}
		lines = append(lines, line)
		if a == nil || a.Kind == GroupWait {
			if idle++; idle > 2 {
				lines = append(lines, "stuck")
				return lines
			}
		} else {
			idle = 0
		}
		if a != nil && (a.Kind == GroupRolloutDone || a.Kind == GroupRefuse || a.Kind == GroupRolloutFail) {
			return lines
		}
		if a != nil {
			w.apply(a)
		}
		w.s.Now = w.s.Now.Add(10 * time.Second)
		w.settle()
	}
	return append(lines, "no end after 60 steps")
}

// TestRolloutTraces: whole rollouts, decision by decision, against golden
// files: a consensus group rolled surge first, its healthy voters never
// below its size and the leader's node last; a worker group under each
// policy. A change of a rule shows as a diff of the trace.
func TestRolloutTraces(t *testing.T) {
	now := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	const old, neu = "0000000000000000000000000000000000000000000000000000000000000000", "1111111111111111111111111111111111111111111111111111111111111111"
	group := func(name string, size int, consensus bool) GroupSnapshot {
		s := GroupSnapshot{Name: name, Size: size, ReplaceAfter: time.Minute, JoinTimeout: 3 * time.Minute,
			Now: now, Rolling: true, TargetSHA: neu, MaxParallel: 1, ConsensusGroup: consensus,
			Monitor: 5 * time.Second, ProgressDeadline: 3 * time.Minute, MaxFailures: 1, MaxSurge: 1,
			MaxUnhealthy: size, MaxUnhealthySpec: "100%", MaxReplacements: 100, ReplacementWindow: 10 * time.Minute}
		for i := range size {
			id := string(rune('a' + i))
			s.Machines = append(s.Machines, GroupMachine{ID: id, ConfigSHA: old, Created: now.Add(-time.Hour)})
			n := GroupNode{ID: strings.ToUpper(id), InstanceID: id, Status: pb.NodeStatus_NODE_STATUS_READY, Since: now.Add(-time.Hour)}
			if consensus {
				n.Consensus, n.HealthyVoter = true, true
				s.Voters++
				s.HealthyVoters++
			}
			s.Nodes = append(s.Nodes, n)
		}
		return s
	}
	managers := group("managers", 3, true)
	managers.Nodes[0].Leader = true
	surge := group("workers", 3, false)
	surge.MaxSurge, surge.MaxUnavailable = 1, 0
	inPlace := group("workers", 3, false)
	inPlace.MaxSurge, inPlace.MaxUnavailable, inPlace.MaxParallel = 0, 1, 1
	for _, tc := range []struct {
		name string
		s    GroupSnapshot
	}{
		{"managers", managers},
		{"workers-surge", surge},
		{"workers-in-place", inPlace},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := &traceWorld{s: tc.s}
			lines := trace(w)
			if tc.s.ConsensusGroup && w.minHealthy < tc.s.Size {
				t.Errorf("the healthy voters fell to %d, below the group's size %d", w.minHealthy, tc.s.Size)
			}
			got := strings.Join(lines, "\n") + "\n"
			path := filepath.Join("testdata", "rollout-"+tc.name+".golden")
			if *update {
				if err := os.MkdirAll("testdata", 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (write it with -update)", err)
			}
			if diff := cmp.Diff(string(want), got); diff != "" {
				t.Errorf("rollout trace (-%s +got):\n%s", path, diff)
			}
			last := lines[len(lines)-1]
			if !strings.Contains(last, GroupRolloutDone.String()) {
				t.Errorf("the rollout did not end done: %s", last)
			}
		})
	}
}
