package curator

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	pb "github.com/curatorproject/curator/proto"
)

func TestDecideLearners(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	const limit = time.Minute
	tests := []struct {
		name     string
		learners []learnerInfo
		want     *learnerAction
	}{
		{"none", nil, nil},
		{"not started yet: wait", []learnerInfo{{memberID: 1, nodeID: "a"}}, nil},
		{"started: promote", []learnerInfo{{memberID: 1, nodeID: "a", started: true, quorumAfter: true}},
			&learnerAction{promote: true, memberID: 1, nodeID: "a"}},
		{"promotion would leave no healthy majority: wait", []learnerInfo{{memberID: 1, nodeID: "a", started: true}}, nil},
		{"no node: the sync's business", []learnerInfo{{memberID: 1, started: true, quorumAfter: true}}, nil},
		{"down within the limit: wait", []learnerInfo{{memberID: 1, nodeID: "a", started: true, quorumAfter: true, downSince: now.Add(-limit / 2)}}, nil},
		{"down past the limit: remove", []learnerInfo{{memberID: 1, nodeID: "a", started: true, quorumAfter: true, downSince: now.Add(-limit)}},
			&learnerAction{memberID: 1, nodeID: "a"}},
		{"removal before promotion", []learnerInfo{
			{memberID: 1, nodeID: "a", started: true, quorumAfter: true},
			{memberID: 2, nodeID: "b", downSince: now.Add(-2 * limit)},
		}, &learnerAction{memberID: 2, nodeID: "b"}},
		{"one at a time, by member ID", []learnerInfo{
			{memberID: 5, nodeID: "b", started: true, quorumAfter: true},
			{memberID: 3, nodeID: "a", started: true, quorumAfter: true},
		}, &learnerAction{promote: true, memberID: 3, nodeID: "a"}},
	}
	opt := cmp.FilterPath(func(p cmp.Path) bool { return p.Last().String() == ".reason" }, cmp.Ignore())
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := decideLearners(tt.learners, now, limit)
			if got != nil && got.reason == "" {
				t.Error("no reason")
			}
			if diff := cmp.Diff(tt.want, got, cmp.AllowUnexported(learnerAction{}), opt); diff != "" {
				t.Errorf("decideLearners (-want +got):\n%s", diff)
			}
		})
	}
}

func TestDecideHealth(t *testing.T) {
	since := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	const downAfter = 5 * time.Second
	ready, down, unknown := pb.NodeStatus_NODE_STATUS_READY, pb.NodeStatus_NODE_STATUS_DOWN, pb.NodeStatus_NODE_STATUS_UNKNOWN
	tests := []struct {
		name  string
		nodes []healthNode
		now   time.Time
		want  *healthAction
	}{
		{"all fresh", []healthNode{{id: "a", status: ready, last: since, seen: true}}, since.Add(time.Second), nil},
		{"heartbeat makes ready", []healthNode{{id: "a", status: unknown, last: since, seen: true}}, since.Add(time.Second),
			&healthAction{nodeID: "a", to: ready}},
		{"stale heartbeat makes down", []healthNode{{id: "a", status: ready, last: since, seen: true}}, since.Add(downAfter),
			&healthAction{nodeID: "a", to: down}},
		{"new leader's grace: unseen node keeps its status", []healthNode{{id: "a", status: ready}}, since.Add(downAfter - time.Millisecond), nil},
		{"grace over: unseen node is down", []healthNode{{id: "a", status: ready}}, since.Add(downAfter),
			&healthAction{nodeID: "a", to: down}},
		{"one change per tick", []healthNode{{id: "a", status: ready}, {id: "b", status: ready}}, since.Add(downAfter),
			&healthAction{nodeID: "a", to: down}},
		{"down node that beats is ready", []healthNode{{id: "a", status: down, last: since.Add(9 * time.Second), seen: true}}, since.Add(10 * time.Second),
			&healthAction{nodeID: "a", to: ready}},
	}
	opt := cmp.FilterPath(func(p cmp.Path) bool { return p.Last().String() == ".reason" }, cmp.Ignore())
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := decideHealth(tt.nodes, since, tt.now, downAfter)
			if got != nil && got.reason == "" {
				t.Error("no reason")
			}
			if diff := cmp.Diff(tt.want, got, cmp.AllowUnexported(healthAction{}), opt); diff != "" {
				t.Errorf("decideHealth (-want +got):\n%s", diff)
			}
		})
	}
}
