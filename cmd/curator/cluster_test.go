package main

import (
	"time"

	"encoding/json"
	"strings"
	"testing"

	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/proto"

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
		Names: map[string]string{"aaaaaaaaaaaaaaaaaaaaaaaa": "m1"},
	}
	mixed := proto.CloneOf(healthy)
	mixed.Releases = map[string]uint32{"v0.1.0": 3, "v0.2.0": 1, "": 1, "v0.10.0": 2}
	mixed.LowestManagerRelease = "v0.1.0"
	mixed.StorageVersion = 1
	for _, tc := range []struct {
		name   string
		info   *pb.ClusterInfo
		format string
		want   string
	}{
		{"healthy table", healthy, "table", healthyTable("7", "no")},
		{"releases table", mixed, "table", strings.Replace(healthyTable("7", "no"), "Leader:", `Releases:           v0.10.0 (2 nodes), v0.2.0 (1 node), v0.1.0 (3 nodes), unreported (1 node)
Lowest manager:     v0.1.0
Storage version:    1
Leader:`, 1)},
		{"unhealthy table", unhealthy, "table", `WARNING: quorum is lost: 1 of 2 voters healthy
WARNING: curator and etcd leader on one node

Cluster ID:         c1
Version:            (none)
Leader:             m1 (aaaaaaaaaaaaaaaaaaaaaaaa)
etcd leader:        (none)
Quorum healthy:     NO
Voters (2):         m1 (aaaaaaaaaaaaaaaaaaaaaaaa), bbbbbbbbbbbbbbbbbbbbbbbb
Learners (1):       cccccccccccccccccccccccc
Max voters:         5
Require approval:   yes
Certificate TTL:    (none)
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
  "version": "v0.1.0",
  "names": {},
  "cert_ttl": "",
  "swarm": false,
  "releases": {},
  "lowest_manager_release": "",
  "storage_version": 0
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
  "version": "",
  "names": {
    "aaaaaaaaaaaaaaaaaaaaaaaa": "m1"
  },
  "cert_ttl": "",
  "swarm": false,
  "releases": {},
  "lowest_manager_release": "",
  "storage_version": 0
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
				"max_voters", "require_approval", "warnings", "managers", "version", "releases", "lowest_manager_release"} {
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

// healthyTable is cluster info's table of the fake's healthy cluster, with
// these settings.
func healthyTable(maxVoters, requireApproval string) string {
	return `Cluster ID:         c1
Version:            v0.1.0
Leader:             aaaaaaaaaaaaaaaaaaaaaaaa
etcd leader:        bbbbbbbbbbbbbbbbbbbbbbbb
Quorum healthy:     yes
Voters (2):         aaaaaaaaaaaaaaaaaaaaaaaa, bbbbbbbbbbbbbbbbbbbbbbbb
Learners (0):       (none)
Max voters:         ` + maxVoters + `
Require approval:   ` + requireApproval + `
Certificate TTL:    (none)
Managers:           127.0.100.10:7000, 127.0.100.11:7000
`
}

func TestClusterUpdate(t *testing.T) {
	u32 := func(v uint32) *uint32 { return &v }
	yes, no := true, false
	runChangeCases(t, []changeCase{{
		name:      "max voters alone",
		args:      []string{"cluster", "update", "--max-voters", "5"},
		want:      healthyTable("5", "no"),
		wantCalls: []string{"UpdateCluster"},
		wantReqs:  []proto.Message{&pb.UpdateClusterRequest{MaxVoters: u32(5)}},
	}, {
		name:      "require approval alone",
		args:      []string{"cluster", "update", "--require-approval"},
		want:      healthyTable("7", "yes"),
		wantCalls: []string{"UpdateCluster"},
		wantReqs:  []proto.Message{&pb.UpdateClusterRequest{RequireApproval: &yes}},
	}, {
		name: "false is sent, not left out",
		setup: func(f *fakeManagement) {
			f.info.RequireApproval = true
		},
		args:      []string{"cluster", "update", "--require-approval=false"},
		want:      healthyTable("7", "no"),
		wantCalls: []string{"UpdateCluster"},
		wantReqs:  []proto.Message{&pb.UpdateClusterRequest{RequireApproval: &no}},
	}, {
		name:      "both",
		args:      []string{"cluster", "update", "--require-approval=true", "--max-voters=3"},
		want:      healthyTable("3", "yes"),
		wantCalls: []string{"UpdateCluster"},
		wantReqs:  []proto.Message{&pb.UpdateClusterRequest{RequireApproval: &yes, MaxVoters: u32(3)}},
	}, {
		name:      "the server's refusal",
		args:      []string{"cluster", "update", "--max-voters", "8"},
		wantErr:   "update cluster: invalid request: max voters 8: the limit is 7 (InvalidArgument)",
		wantCalls: []string{"UpdateCluster"},
		wantReqs:  []proto.Message{&pb.UpdateClusterRequest{MaxVoters: u32(8)}},
	}, {
		name:      "cert TTL",
		args:      []string{"cluster", "update", "--cert-ttl", "720h"},
		want:      healthyTable("7", "no"),
		wantCalls: []string{"UpdateCluster"},
		wantReqs:  []proto.Message{&pb.UpdateClusterRequest{CertTtl: durationpb.New(720 * time.Hour)}},
	}, {
		name:    "cert TTL below the minimum: refused before it is sent",
		args:    []string{"cluster", "update", "--cert-ttl", "1s"},
		wantErr: "update cluster: invalid request: cert TTL 1s is shorter than the minimum, 10s: nodes renew at two thirds of it, which must leave time to reach the leader (90 days, the default, suits production)",
	}, {
		name:    "cert TTL above the maximum: refused before it is sent",
		args:    []string{"cluster", "update", "--cert-ttl", "87600h"},
		wantErr: "update cluster: invalid request: cert TTL 87600h0m0s is longer than the maximum, 43800h0m0s (5 years): certificates are renewed automatically, so a long life buys nothing but a longer use of a stolen key",
	}, {
		name:    "nothing to change",
		args:    []string{"cluster", "update"},
		wantErr: "at least one of the flags in the group [require-approval max-voters cert-ttl swarm] is required",
	}, {
		name:    "nothing to change, whatever -o says",
		args:    []string{"cluster", "update", "-o", "json"},
		wantErr: "at least one of the flags in the group [require-approval max-voters cert-ttl swarm] is required",
	}})
}

// TestClusterUpdateJSON checks that cluster update -o json prints what
// cluster info -o json prints after it.
func TestClusterUpdateJSON(t *testing.T) {
	f := newFakeManagement()
	path := startFakeCluster(t, f)
	got, err := runCLI(t, "--config", path, "cluster", "update", "--max-voters", "5", "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	info, err := runCLI(t, "--config", path, "cluster", "info", "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(info, got); diff != "" {
		t.Errorf("cluster update -o json (-cluster info +got):\n%s", diff)
	}
	if !strings.Contains(got, `"max_voters": 5,`) {
		t.Errorf("cluster update -o json does not show the new max voters:\n%s", got)
	}
}
