package localcluster

import (
	"context"
	"os"
	"strings"
	"testing"

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
