package main

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/types/known/timestamppb"

	pb "github.com/curatorproject/curator/proto"
)

func TestNodeHumanViews(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	ts := func(d time.Duration) *timestamppb.Timestamp { return timestamppb.New(now.Add(d)) }
	worker := &pb.NodeView{
		Node: &pb.Node{
			Id: "cccccccccccccccccccccccc", Name: "web-1", Address: "10.0.0.5:7000", State: pb.NodeState_NODE_STATE_UP,
			Status: pb.NodeStatus_NODE_STATUS_READY, Availability: pb.Availability_AVAILABILITY_ACTIVE,
			Roles: []pb.Role{pb.Role_ROLE_WORKER}, Group: "web", InstanceId: "web-1-abc", Domain: "b", ConfigSha: "0123456789abcdef0123",
			Version: "v1.2.0", Labels: map[string]string{"zone": "b", "disk": "ssd"}, JoinedAs: "worker",
			StatusChanged: ts(-90 * time.Minute), Created: ts(-72 * time.Hour), Updated: ts(-90 * time.Minute), CertExpires: ts(59 * 24 * time.Hour),
		},
		LastHeartbeat: ts(-2 * time.Second),
	}
	manager := &pb.NodeView{
		Node: &pb.Node{
			Id: "aaaaaaaaaaaaaaaaaaaaaaaa", Name: "manager-1", Address: "10.0.0.1:7000", State: pb.NodeState_NODE_STATE_UP,
			Status: pb.NodeStatus_NODE_STATUS_DOWN, Availability: pb.Availability_AVAILABILITY_DRAIN,
			Roles: []pb.Role{pb.Role_ROLE_CONSENSUS, pb.Role_ROLE_WORKER}, Version: "v1.2.0", Demoting: true,
			StatusChanged: ts(-5 * time.Minute), CertExpires: ts(-time.Hour),
		},
		ManagerStatus: pb.ManagerStatus_MANAGER_STATUS_UNREACHABLE,
	}
	for _, tc := range []struct {
		name string
		node *pb.NodeView
		want string
	}{
		{"a group's worker", worker, `ID:                   cccccccccccccccccccccccc
Name:                 web-1
Address:              10.0.0.5:7000
State:                joined
Status:               ready since 2026-03-01T10:30:00Z (1h ago)
Availability:         active
Roles:                worker
Manager status:       -
Version:              v1.2.0
Group:                web
Instance:             web-1-abc
Domain:               b
Config SHA:           0123456789abcdef0123
Labels:               disk=ssd,zone=b
Joined as:            worker
Last heartbeat:       2026-03-01T11:59:58Z (2s ago)
Created:              2026-02-26T12:00:00Z (3d ago)
Updated:              2026-03-01T10:30:00Z (1h ago)
Certificate expires:  2026-04-29T12:00:00Z (in 59d)
`},
		{"a manager going, never heard, its certificate expired", manager, `ID:                   aaaaaaaaaaaaaaaaaaaaaaaa
Name:                 manager-1
Address:              10.0.0.1:7000
State:                joined
Status:               down since 2026-03-01T11:55:00Z (5m ago)
Availability:         drain
Roles:                consensus, worker
Manager status:       unreachable
Demoting:             yes
Version:              v1.2.0
Labels:               -
Joined as:            -
Last heartbeat:       -
Created:              -
Updated:              -
Certificate expires:  2026-03-01T11:00:00Z (1h ago)
`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b strings.Builder
			if err := writePrettyNode(&b, nodeToJSON(tc.node), now); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, b.String()); diff != "" {
				t.Errorf("node inspect --pretty (-want +got):\n%s", diff)
			}
		})
	}

	var b strings.Builder
	if err := writeNodesAt(&b, formatWide, []*pb.NodeView{worker, manager}, now); err != nil {
		t.Fatal(err)
	}
	want := `ID                         NAME        ADDRESS         STATE    STATUS   AVAILABILITY   ROLES              MANAGER STATUS   VERSION   GROUP   INSTANCE    DOMAIN   CONFIG         LAST HEARTBEAT   STATUS SINCE   CERT EXPIRES     LABELS
aaaaaaaaaaaaaaaaaaaaaaaa   manager-1   10.0.0.1:7000   joined   down     drain          consensus,worker   unreachable      v1.2.0    -       -           -        -              -                5m ago         expired 1h ago   -
cccccccccccccccccccccccc   web-1       10.0.0.5:7000   joined   ready    active         worker                              v1.2.0    web     web-1-abc   b        0123456789ab   2s ago           1h ago         in 59d           disk=ssd,zone=b
`
	if diff := cmp.Diff(want, b.String()); diff != "" {
		t.Errorf("node ls -o wide (-want +got):\n%s", diff)
	}
}
