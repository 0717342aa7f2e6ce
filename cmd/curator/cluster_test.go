package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	pb "github.com/curatorproject/curator/proto"
)

func TestClusterInfo(t *testing.T) {
	healthy := newFakeManagement().info
	unhealthy := &pb.ClusterInfo{
		ClusterId: "c1", Leader: "aaaaaaaaaaaaaaaaaaaaaaaa",
		Voters:   []string{"aaaaaaaaaaaaaaaaaaaaaaaa", "bbbbbbbbbbbbbbbbbbbbbbbb"},
		Learners: []string{"cccccccccccccccccccccccc"},
		Warnings: []string{"quorum is lost: 1 of 2 voters healthy", "curator and etcd leader on one node"},
		// Nothing more: an empty etcd leader, no managers, no version.
		RequireApproval: true, MaxVoters: 5,
	}
	for _, tc := range []struct {
		name   string
		info   *pb.ClusterInfo
		format string
		want   string
	}{
		{"healthy table", healthy, "table", `Cluster ID:         c1
Version:            v0.1.0
Leader:             aaaaaaaaaaaaaaaaaaaaaaaa
etcd leader:        bbbbbbbbbbbbbbbbbbbbbbbb
Quorum healthy:     yes
Voters (2):         aaaaaaaaaaaaaaaaaaaaaaaa, bbbbbbbbbbbbbbbbbbbbbbbb
Learners (0):       (none)
Max voters:         7
Require approval:   no
Managers:           127.0.100.10:7000, 127.0.100.11:7000
`},
		{"unhealthy table", unhealthy, "table", `WARNING: quorum is lost: 1 of 2 voters healthy
WARNING: curator and etcd leader on one node

Cluster ID:         c1
Version:            (none)
Leader:             aaaaaaaaaaaaaaaaaaaaaaaa
etcd leader:        (none)
Quorum healthy:     NO
Voters (2):         aaaaaaaaaaaaaaaaaaaaaaaa, bbbbbbbbbbbbbbbbbbbbbbbb
Learners (1):       cccccccccccccccccccccccc
Max voters:         5
Require approval:   yes
Managers:           (none)
`},
		{"healthy json", healthy, "json", `{
  "cluster_id": "c1",
  "leader": "aaaaaaaaaaaaaaaaaaaaaaaa",
  "voters": [
    "aaaaaaaaaaaaaaaaaaaaaaaa",
    "bbbbbbbbbbbbbbbbbbbbbbbb"
  ],
  "learners": [],
  "etcd_leader": "bbbbbbbbbbbbbbbbbbbbbbbb",
  "quorum_healthy": true,
  "max_voters": 7,
  "require_approval": false,
  "warnings": [],
  "managers": [
    "127.0.100.10:7000",
    "127.0.100.11:7000"
  ],
  "version": "v0.1.0"
}
`},
		{"unhealthy json", unhealthy, "json", `{
  "cluster_id": "c1",
  "leader": "aaaaaaaaaaaaaaaaaaaaaaaa",
  "voters": [
    "aaaaaaaaaaaaaaaaaaaaaaaa",
    "bbbbbbbbbbbbbbbbbbbbbbbb"
  ],
  "learners": [
    "cccccccccccccccccccccccc"
  ],
  "etcd_leader": "",
  "quorum_healthy": false,
  "max_voters": 5,
  "require_approval": true,
  "warnings": [
    "quorum is lost: 1 of 2 voters healthy",
    "curator and etcd leader on one node"
  ],
  "managers": [],
  "version": ""
}
`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeManagement()
			f.info = tc.info
			path := startFakeCluster(t, f)
			got, err := runCLI(t, "--config", path, "cluster", "info", "-o", tc.format)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("cluster info -o %s (-want +got):\n%s", tc.format, diff)
			}
			if tc.format != "json" {
				return
			}
			// The contract's keys, and lists that are [] rather
			// than null.
			var m map[string]any
			if err := json.Unmarshal([]byte(got), &m); err != nil {
				t.Fatal(err)
			}
			for _, key := range []string{"cluster_id", "leader", "voters", "learners", "etcd_leader", "quorum_healthy",
				"max_voters", "require_approval", "warnings", "managers", "version"} {
				if _, ok := m[key]; !ok {
					t.Errorf("no %q in %s", key, got)
				}
			}
			for _, key := range []string{"voters", "learners", "warnings", "managers"} {
				if _, ok := m[key].([]any); !ok {
					t.Errorf("%s is %T, want an array", key, m[key])
				}
			}
			if _, ok := m["quorum_healthy"].(bool); !ok {
				t.Errorf("quorum_healthy is %T, want a boolean", m["quorum_healthy"])
			}
		})
	}
}

func TestClusterUpdateNotBuiltYet(t *testing.T) {
	path := startFakeCluster(t, newFakeManagement())
	_, err := runCLI(t, "--config", path, "cluster", "update", "--require-approval=true", "--max-voters", "5")
	if err == nil || !strings.Contains(err.Error(), "not built yet") {
		t.Errorf("cluster update: error = %v, want one saying it is not built yet", err)
	}
}
