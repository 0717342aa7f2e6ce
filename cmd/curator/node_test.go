package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestNodeLsTable(t *testing.T) {
	f := newFakeManagement()
	path := startFakeCluster(t, f)
	got, err := runCLI(t, "--config", path, "node", "ls")
	if err != nil {
		t.Fatal(err)
	}
	want := `ID                         NAME        ADDRESS             STATE     STATUS    AVAILABILITY   ROLES              MANAGER STATUS   VERSION
aaaaaaaaaaaaaaaaaaaaaaaa   manager-1   127.0.100.10:7000   up        ready     active         consensus,worker   leader           v0.1.0
bbbbbbbbbbbbbbbbbbbbbbbb   manager-2   127.0.100.11:7000   up        down      drain          consensus          unreachable      v0.1.0
cccccccccccccccccccccccc   worker-1    127.0.100.12:7000   pending   unknown   active         worker
`
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("node ls (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"ListNodes"}, f.Calls()); diff != "" {
		t.Errorf("calls (-want +got):\n%s", diff)
	}
}

// wantNodeB is manager-2 as JSON: a node with no labels, no group and no
// heartbeat yet, so every empty case shows.
const wantNodeB = `{
  "id": "bbbbbbbbbbbbbbbbbbbbbbbb",
  "name": "manager-2",
  "address": "127.0.100.11:7000",
  "state": "up",
  "status": "down",
  "availability": "drain",
  "roles": [
    "consensus"
  ],
  "manager_status": "unreachable",
  "group": "",
  "instance_id": "",
  "config_sha": "",
  "version": "v0.1.0",
  "labels": {},
  "last_heartbeat": null,
  "status_changed": null,
  "created": null,
  "updated": null
}`

func TestNodeLsJSON(t *testing.T) {
	path := startFakeCluster(t, newFakeManagement())
	got, err := runCLI(t, "--config", path, "node", "ls", "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	want := `[
  {
    "id": "aaaaaaaaaaaaaaaaaaaaaaaa",
    "name": "manager-1",
    "address": "127.0.100.10:7000",
    "state": "up",
    "status": "ready",
    "availability": "active",
    "roles": [
      "consensus",
      "worker"
    ],
    "manager_status": "leader",
    "group": "managers",
    "instance_id": "i-1",
    "config_sha": "5ha",
    "version": "v0.1.0",
    "labels": {
      "zone": "a"
    },
    "last_heartbeat": "2026-01-02T03:06:05.5Z",
    "status_changed": "2026-01-02T03:04:06Z",
    "created": "2026-01-02T03:04:05Z",
    "updated": "2026-01-02T03:05:05Z"
  },
  ` + indent(wantNodeB, "  ") + `,
  {
    "id": "cccccccccccccccccccccccc",
    "name": "worker-1",
    "address": "127.0.100.12:7000",
    "state": "pending",
    "status": "unknown",
    "availability": "active",
    "roles": [
      "worker"
    ],
    "manager_status": "",
    "group": "",
    "instance_id": "",
    "config_sha": "",
    "version": "",
    "labels": {},
    "last_heartbeat": null,
    "status_changed": null,
    "created": "2026-01-02T03:04:05Z",
    "updated": "2026-01-02T03:04:05Z"
  }
]
`
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("node ls -o json (-want +got):\n%s", diff)
	}

	// The contract, field by field, as a tool outside the code reads it.
	var nodes []map[string]any
	if err := json.Unmarshal([]byte(got), &nodes); err != nil {
		t.Fatal(err)
	}
	if len(nodes) != 3 {
		t.Fatalf("got %d nodes, want 3", len(nodes))
	}
	for _, n := range nodes {
		for _, key := range []string{"id", "name", "address", "state", "status", "availability", "roles",
			"manager_status", "group", "config_sha", "version", "labels", "last_heartbeat", "created", "updated"} {
			if _, ok := n[key]; !ok {
				t.Errorf("node %v has no %q", n["id"], key)
			}
		}
		if _, ok := n["roles"].([]any); !ok {
			t.Errorf("node %v: roles is %T, want an array", n["id"], n["roles"])
		}
		if _, ok := n["labels"].(map[string]any); !ok {
			t.Errorf("node %v: labels is %T, want an object", n["id"], n["labels"])
		}
	}
	leader := nodes[0]
	for key, want := range map[string]any{
		"state": "up", "status": "ready", "availability": "active", "manager_status": "leader",
		"roles": []any{"consensus", "worker"}, "last_heartbeat": "2026-01-02T03:06:05.5Z",
	} {
		if diff := cmp.Diff(want, leader[key]); diff != "" {
			t.Errorf("leader %s (-want +got):\n%s", key, diff)
		}
	}
	if got := nodes[2]["manager_status"]; got != "" {
		t.Errorf("worker manager_status = %q, want \"\"", got)
	}
	if got := nodes[1]["last_heartbeat"]; got != nil {
		t.Errorf("last_heartbeat of a node never heard = %v, want null", got)
	}
}

func TestNodeLsEmpty(t *testing.T) {
	f := newFakeManagement()
	f.nodes = nil
	path := startFakeCluster(t, f)
	for _, tc := range []struct{ format, want string }{
		{"json", "[]\n"},
		{"table", "ID   NAME   ADDRESS   STATE   STATUS   AVAILABILITY   ROLES   MANAGER STATUS   VERSION\n"},
	} {
		got, err := runCLI(t, "--config", path, "node", "ls", "-o", tc.format)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("node ls -o %s with no nodes (-want +got):\n%s", tc.format, diff)
		}
	}
}

func TestNodeInspect(t *testing.T) {
	f := newFakeManagement()
	path := startFakeCluster(t, f)
	for _, id := range []string{"bbbbbbbbbbbbbbbbbbbbbbbb", "bbb", "manager-2"} {
		got, err := runCLI(t, "--config", path, "node", "inspect", id)
		if err != nil {
			t.Fatalf("node inspect %s: %v", id, err)
		}
		if diff := cmp.Diff(wantNodeB+"\n", got); diff != "" {
			t.Errorf("node inspect %s (-want +got):\n%s", id, diff)
		}
	}

	_, err := runCLI(t, "--config", path, "node", "inspect", "zzz")
	want := `inspect node zzz: no node has the ID, unique ID prefix or name "zzz" (NotFound)`
	if err == nil || err.Error() != want {
		t.Errorf("node inspect of an unknown node: error = %v, want %q", err, want)
	}
}

func TestNodeCommandsNotBuiltYet(t *testing.T) {
	path := startFakeCluster(t, newFakeManagement())
	for _, args := range [][]string{
		{"node", "promote", "aaa", "bbb"},
		{"node", "demote", "aaa"},
		{"node", "update", "aaa", "--availability", "drain", "--label-add", "k=v", "--label-rm", "x"},
		{"node", "approve", "aaa"},
		{"node", "rm", "aaa", "--force"},
	} {
		_, err := runCLI(t, append([]string{"--config", path}, args...)...)
		if err == nil || !strings.Contains(err.Error(), "not built yet") {
			t.Errorf("%v: error = %v, want one saying it is not built yet", args, err)
		}
	}
}

func indent(s, prefix string) string {
	return strings.ReplaceAll(s, "\n", "\n"+prefix)
}
