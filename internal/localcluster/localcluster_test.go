package localcluster

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/curatorproject/curator/internal/testenv"
	pb "github.com/curatorproject/curator/proto"
)

// The bring-up itself runs against real processes in the end-to-end tests
// (test/) and `curator dev`; here, what a Config may be.

func TestMain(m *testing.M) {
	os.Exit(testenv.CheckLeaks(m.Run()))
}

func TestConfigValidate(t *testing.T) {
	start := func(context.Context, Launch) (Process, error) { return nil, nil }
	m := func(name string) Node { return Node{Name: name, Manager: true} }
	w := func(name string) Node { return Node{Name: name} }
	for _, tc := range []struct {
		name    string
		cfg     Config
		wantErr string
	}{
		{"managers then workers", Config{Nodes: []Node{m("m1"), m("m2"), w("w1")}, Start: start}, ""},
		{"one manager", Config{Nodes: []Node{m("m1")}, Start: start}, ""},
		{"no nodes", Config{Start: start}, "no nodes"},
		{"no starter", Config{Nodes: []Node{m("m1")}}, "no starter"},
		{"worker first", Config{Nodes: []Node{w("w1"), m("m1")}, Start: start}, "after a worker"},
		{"only a worker", Config{Nodes: []Node{w("w1")}, Start: start}, "must be a manager"},
		{"twice", Config{Nodes: []Node{m("m1"), w("m1")}, Start: start}, "m1 twice"},
		{"no name", Config{Nodes: []Node{m("")}, Start: start}, "no name"},
		{"negative poll", Config{Nodes: []Node{m("m1")}, Start: start, Poll: -1}, "negative"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cfg.Validate()
			switch {
			case tc.wantErr == "" && err != nil:
				t.Errorf("Validate: %v", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Errorf("Validate = %v, want an error containing %q", err, tc.wantErr)
			}
			if tc.wantErr != "" {
				if _, err := Up(context.Background(), tc.cfg); err == nil {
					t.Error("Up of an invalid config started")
				}
			}
		})
	}
}

// TestGroupsReady: a consensus group is up only with its size of ready
// etcd voters; a ready learner does not count.
func TestGroupsReady(t *testing.T) {
	managers := &pb.GroupSpec{Name: "managers", Size: 3, Roles: []pb.Role{pb.Role_ROLE_CONSENSUS}}
	workers := &pb.GroupSpec{Name: "workers", Size: 1, Roles: []pb.Role{pb.Role_ROLE_WORKER}}
	view := func(id, group string) *pb.NodeView {
		return &pb.NodeView{Node: &pb.Node{Id: id, Group: group, Status: pb.NodeStatus_NODE_STATUS_READY}}
	}
	nodes := []*pb.NodeView{view("m1", "managers"), view("m2", "managers"), view("m3", "managers"), view("w1", "workers")}
	if err := groupsReady([]*pb.GroupSpec{managers, workers}, nodes, []string{"m1", "m2", "m3"}); err != nil {
		t.Errorf("three ready voters and a ready worker: %v", err)
	}
	err := groupsReady([]*pb.GroupSpec{managers, workers}, nodes, []string{"m1", "m2"})
	if err == nil || !strings.Contains(err.Error(), "managers 2/3") {
		t.Errorf("a manager still a learner: %v, want managers 2/3", err)
	}
}

// fakeProcess is a Process that exited (or not) and was removed on
// purpose (or not).
type fakeProcess struct {
	exited  bool
	removed bool
}

func (f *fakeProcess) Address() string { return "" }
func (f *fakeProcess) DataDir() string { return "" }
func (f *fakeProcess) LogFile() string { return "log" }
func (f *fakeProcess) Exited() error {
	if f.exited {
		return errors.New("its process is gone")
	}
	return nil
}
func (f *fakeProcess) Removed() bool { return f.removed }

// plainProcess is a Process that is not Removable (its Removed, of
// another signature, hides fakeProcess's).
type plainProcess struct{ fakeProcess }

func (plainProcess) Removed() {}

// TestRemovedNodesAreNotWaitedFor: bringing a cluster back, a node whose
// machine its group removed on purpose (a rollout under way when the
// cluster stopped went on) is neither a failure nor waited for; a node
// that exited and was not removed still fails the bring-up, and one not
// ready yet is waited for.
func TestRemovedNodesAreNotWaitedFor(t *testing.T) {
	ready := func(name string) *pb.NodeView {
		return &pb.NodeView{Node: &pb.Node{Name: name, Status: pb.NodeStatus_NODE_STATUS_READY}}
	}
	for _, tc := range []struct {
		name         string
		procs        map[string]Process
		nodes        []*pb.NodeView
		wantExited   string
		wantNotReady []string
	}{
		{"all ready", map[string]Process{"a": &fakeProcess{}, "b": &fakeProcess{}},
			[]*pb.NodeView{ready("a"), ready("b")}, "", nil},
		{"one removed by its group", map[string]Process{"a": &fakeProcess{}, "b": &fakeProcess{exited: true, removed: true}},
			[]*pb.NodeView{ready("a")}, "", nil},
		{"one exited, still recorded past the grace", map[string]Process{"a": &fakeProcess{}, "b": &fakeProcess{exited: true}},
			[]*pb.NodeView{ready("a")}, "b exited", []string{"b"}},
		{"one exited, not removable", map[string]Process{"a": &fakeProcess{}, "b": &plainProcess{fakeProcess{exited: true}}},
			[]*pb.NodeView{ready("a")}, "b exited", []string{"b"}},
		{"one not ready yet", map[string]Process{"a": &fakeProcess{}, "b": &fakeProcess{}},
			[]*pb.NodeView{ready("a"), {Node: &pb.Node{Name: "b", Status: pb.NodeStatus_NODE_STATUS_DOWN}}}, "", []string{"b"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &run{procs: tc.procs, names: []string{"a", "b"}}
			if _, ok := tc.procs["b"].(Removable); ok && tc.wantExited != "" {
				// A removable process seen exited is given removeGrace
				// for its record to go: the first look is not a failure.
				if err := r.exited(); err != nil {
					t.Errorf("exited() at the first look = %v, want nil (within the grace)", err)
				}
				r.gone["b"] = r.gone["b"].Add(-removeGrace)
			}
			err := r.exited()
			if (err == nil) != (tc.wantExited == "") || (err != nil && !strings.Contains(err.Error(), tc.wantExited)) {
				t.Errorf("exited() = %v, want %q", err, tc.wantExited)
			}
			if diff := cmp.Diff(tc.wantNotReady, r.notReady(tc.nodes)); diff != "" {
				t.Errorf("notReady (-want +got):\n%s", diff)
			}
		})
	}
}
