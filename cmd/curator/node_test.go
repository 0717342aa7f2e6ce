package main

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"

	pb "github.com/curatorproject/curator/proto"
)

func TestNodeLsTable(t *testing.T) {
	f := newFakeManagement()
	path := startFakeCluster(t, f)
	got, err := runCLI(t, "--config", path, "node", "ls")
	if err != nil {
		t.Fatal(err)
	}
	want := `ID                         NAME        ADDRESS             STATE     STATUS    AVAILABILITY   ROLES              MANAGER STATUS   VERSION
aaaaaaaaaaaaaaaaaaaaaaaa   manager-1   127.0.100.10:7000   joined    ready     active         consensus,worker   leader           v0.1.0
bbbbbbbbbbbbbbbbbbbbbbbb   manager-2   127.0.100.11:7000   joined    down      drain          consensus          unreachable      v0.1.0
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
  "domain": "",
  "config_sha": "",
  "version": "v0.1.0",
  "labels": {},
  "last_heartbeat": null,
  "status_changed": null,
  "created": null,
  "updated": null,
  "joined_as": "",
  "demoting": false,
  "cert_expires": null,
  "swarm_node_id": "",
  "swarm_join_requested": false,
  "swarm_role": "",
  "swarm_state": ""
}`

// wantNodeC is worker-1 as JSON: a node pending approval.
const wantNodeC = `{
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
  "domain": "",
  "config_sha": "",
  "version": "",
  "labels": {},
  "last_heartbeat": null,
  "status_changed": null,
  "created": "2026-01-02T03:04:05Z",
  "updated": "2026-01-02T03:04:05Z",
  "joined_as": "worker",
  "demoting": false,
  "cert_expires": null,
  "swarm_node_id": "",
  "swarm_join_requested": false,
  "swarm_role": "",
  "swarm_state": ""
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
    "domain": "",
    "config_sha": "5ha",
    "version": "v0.1.0",
    "labels": {
      "zone": "a"
    },
    "last_heartbeat": "2026-01-02T03:06:05.5Z",
    "status_changed": "2026-01-02T03:04:06Z",
    "created": "2026-01-02T03:04:05Z",
    "updated": "2026-01-02T03:05:05Z",
    "joined_as": "manager",
    "demoting": false,
    "cert_expires": null,
    "swarm_node_id": "",
    "swarm_join_requested": false,
    "swarm_role": "",
    "swarm_state": ""
  },
  ` + indent(wantNodeB, "  ") + `,
  ` + indent(wantNodeC, "  ") + `
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
			"manager_status", "group", "config_sha", "version", "labels", "last_heartbeat", "created", "updated",
			"joined_as", "demoting"} {
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

func indent(s, prefix string) string {
	return strings.ReplaceAll(s, "\n", "\n"+prefix)
}

// newFakeWithWorkers is newFakeManagement with two more nodes, ready
// workers without the consensus role, to promote. A promotion or a
// handed-over demotion finishes on the second GetNode.
func newFakeWithWorkers() *fakeManagement {
	f := newFakeManagement()
	for _, n := range []struct{ id, name string }{
		{"dddddddddddddddddddddddd", "worker-2"},
		{"eeeeeeeeeeeeeeeeeeeeeeee", "worker-3"},
	} {
		f.nodes = append(f.nodes, &pb.NodeView{Node: &pb.Node{
			Id: n.id, Name: n.name, Address: "127.0.100.20:7000",
			State: pb.NodeState_NODE_STATE_UP, Roles: []pb.Role{pb.Role_ROLE_WORKER},
			Availability: pb.Availability_AVAILABILITY_ACTIVE, Status: pb.NodeStatus_NODE_STATUS_READY,
			Version: "v0.1.0",
		}})
	}
	f.settleAfter = 2
	return f
}

// fastPolls makes --wait poll every few milliseconds for one test.
func fastPolls(t *testing.T) {
	t.Helper()
	old := pollInterval
	pollInterval = 5 * time.Millisecond
	t.Cleanup(func() { pollInterval = old })
}

// changeCase is one run of a command that changes the cluster against a
// fresh fake: what it prints, the error it ends with, and the calls and
// requests it makes.
type changeCase struct {
	name  string
	setup func(*fakeManagement)
	args  []string
	want  string
	// wantErr is the whole error; "" means none. A wantErr ending in "…"
	// is a prefix.
	wantErr   string
	wantCalls []string
	// ignoreGets leaves GetNode out of the calls compared.
	ignoreGets bool
	wantReqs   []proto.Message
}

func runChangeCases(t *testing.T, cases []changeCase) {
	t.Helper()
	fastPolls(t)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeWithWorkers()
			if tc.setup != nil {
				tc.setup(f)
			}
			path := startFakeCluster(t, f)
			got, err := runCLI(t, append([]string{"--config", path}, tc.args...)...)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Errorf("error: %v", err)
			case tc.wantErr != "" && err == nil:
				t.Errorf("no error, want %q", tc.wantErr)
			case tc.wantErr != "" && strings.HasSuffix(tc.wantErr, "…"):
				if !strings.HasPrefix(err.Error(), strings.TrimSuffix(tc.wantErr, "…")) {
					t.Errorf("error = %q, want one starting %q", err, tc.wantErr)
				}
			case tc.wantErr != "" && err.Error() != tc.wantErr:
				t.Errorf("error = %q, want %q", err, tc.wantErr)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("output (-want +got):\n%s", diff)
			}
			calls := f.Calls()
			if tc.ignoreGets {
				calls = slices.DeleteFunc(calls, func(c string) bool { return strings.HasPrefix(c, "GetNode ") })
			}
			if diff := cmp.Diff(tc.wantCalls, calls, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("calls (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantReqs, f.Requests(), protocmp.Transform(), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("requests (-want +got):\n%s", diff)
			}
		})
	}
}

func refusal(code codes.Code, msg string) func(*fakeManagement) {
	return func(f *fakeManagement) {
		f.refuse = map[string]error{"worker-3": status.Error(code, msg)}
	}
}

func TestNodePromote(t *testing.T) {
	const (
		promotedD = "promoted dddddddddddddddddddddddd (worker-2): etcd learner, voter once caught up\n"
		promotedE = "promoted eeeeeeeeeeeeeeeeeeeeeeee (worker-3): etcd learner, voter once caught up\n"
	)
	nodeReq := func(id string) proto.Message { return &pb.NodeRequest{Id: id} }
	runChangeCases(t, []changeCase{{
		name:      "two nodes, in order, without waiting",
		args:      []string{"node", "promote", "worker-2", "eee"},
		want:      promotedD + promotedE,
		wantCalls: []string{"PromoteNode worker-2", "PromoteNode eee"},
		wantReqs:  []proto.Message{nodeReq("worker-2"), nodeReq("eee")},
	}, {
		name:      "a voter already",
		args:      []string{"node", "promote", "aaa"},
		want:      "promoted aaaaaaaaaaaaaaaaaaaaaaaa (manager-1): etcd voter\n",
		wantCalls: []string{"PromoteNode aaa"},
		wantReqs:  []proto.Message{nodeReq("aaa")},
	}, {
		name: "wait for each before the next",
		args: []string{"node", "promote", "--wait", "worker-2", "worker-3"},
		want: promotedD + "dddddddddddddddddddddddd (worker-2) caught up: etcd voter\n" +
			promotedE + "eeeeeeeeeeeeeeeeeeeeeeee (worker-3) caught up: etcd voter\n",
		wantCalls: []string{
			"PromoteNode worker-2", "GetNode dddddddddddddddddddddddd", "GetNode dddddddddddddddddddddddd",
			"PromoteNode worker-3", "GetNode eeeeeeeeeeeeeeeeeeeeeeee", "GetNode eeeeeeeeeeeeeeeeeeeeeeee",
		},
		wantReqs: []proto.Message{nodeReq("worker-2"), nodeReq("worker-3")},
	}, {
		name:       "a wait that runs out",
		setup:      func(f *fakeManagement) { f.settleAfter = 0 },
		args:       []string{"node", "promote", "--wait", "--timeout", "50ms", "worker-2", "worker-3"},
		want:       promotedD,
		wantErr:    "gave up after 50ms waiting for node dddddddddddddddddddddddd (worker-2) to become an etcd voter: it is up and ready, roles consensus,worker, manager status learner; it may still get there: see `curator node inspect dddddddddddddddddddddddd` and `curator events`",
		wantCalls:  []string{"PromoteNode worker-2"},
		ignoreGets: true, // as many as fit in 50ms
		wantReqs:   []proto.Message{nodeReq("worker-2")},
	}, {
		name:      "stops at the first refusal, after the ones before it",
		setup:     refusal(codes.FailedPrecondition, "refused: node eee is not ready (down): bring it back first"),
		args:      []string{"node", "promote", "worker-2", "worker-3", "aaa"},
		want:      promotedD,
		wantErr:   "promote node worker-3: refused: node eee is not ready (down): bring it back first (FailedPrecondition)",
		wantCalls: []string{"PromoteNode worker-2", "PromoteNode worker-3"},
		wantReqs:  []proto.Message{nodeReq("worker-2"), nodeReq("worker-3")},
	}, {
		name:      "an unknown node",
		args:      []string{"node", "promote", "zzz"},
		wantErr:   `promote node zzz: no node has the ID, unique ID prefix or name "zzz" (NotFound)`,
		wantCalls: []string{"PromoteNode zzz"},
		wantReqs:  []proto.Message{nodeReq("zzz")},
	}})
}

func TestNodeDemote(t *testing.T) {
	const (
		handedOver = "node aaaaaaaaaaaaaaaaaaaaaaaa (manager-1) leads the curators: it resigned, and the next leader finishes its demotion\n"
		finished   = "demoted aaaaaaaaaaaaaaaaaaaaaaaa (manager-1): the next leader finished, no longer a consensus member\n"
		getA       = "GetNode aaaaaaaaaaaaaaaaaaaaaaaa"
	)
	nodeReq := func(id string) proto.Message { return &pb.NodeRequest{Id: id} }
	runChangeCases(t, []changeCase{{
		name: "in order; a node without the role says so",
		args: []string{"node", "demote", "manager-2", "worker-2"},
		want: "demoted bbbbbbbbbbbbbbbbbbbbbbbb (manager-2): no longer a consensus member\n" +
			"dddddddddddddddddddddddd (worker-2) holds no consensus role: nothing to demote\n",
		wantCalls: []string{"DemoteNode manager-2", "DemoteNode worker-2"},
		wantReqs:  []proto.Message{nodeReq("manager-2"), nodeReq("worker-2")},
	}, {
		name:      "the leader hands over, and the command waits for the next leader by default",
		args:      []string{"node", "demote", "aaa"},
		want:      handedOver + finished,
		wantCalls: []string{"DemoteNode aaa", getA, getA},
		wantReqs:  []proto.Message{nodeReq("aaa")},
	}, {
		name:      "the wait rides out the election",
		setup:     func(f *fakeManagement) { f.electionGets = 1 },
		args:      []string{"node", "demote", "aaa"},
		want:      handedOver + finished,
		wantCalls: []string{"DemoteNode aaa", getA, getA, getA},
		wantReqs:  []proto.Message{nodeReq("aaa")},
	}, {
		name:      "--wait=false returns after the handover",
		args:      []string{"node", "demote", "--wait=false", "aaa", "manager-2"},
		want:      handedOver + "demoted bbbbbbbbbbbbbbbbbbbbbbbb (manager-2): no longer a consensus member\n",
		wantCalls: []string{"DemoteNode aaa", "DemoteNode manager-2"},
		wantReqs:  []proto.Message{nodeReq("aaa"), nodeReq("manager-2")},
	}, {
		name:       "a wait that runs out",
		setup:      func(f *fakeManagement) { f.settleAfter = 0 },
		args:       []string{"node", "demote", "--timeout", "50ms", "aaa"},
		want:       handedOver,
		wantErr:    "gave up after 50ms waiting for the next leader to finish demoting node aaaaaaaaaaaaaaaaaaaaaaaa (manager-1): it is up and ready, roles consensus,worker, manager status leader, demoting; it may still get there: see `curator node inspect aaaaaaaaaaaaaaaaaaaaaaaa` and `curator events`",
		wantCalls:  []string{"DemoteNode aaa"},
		ignoreGets: true,
		wantReqs:   []proto.Message{nodeReq("aaa")},
	}, {
		name:      "stops at the first refusal, after the ones before it",
		setup:     refusal(codes.FailedPrecondition, "refused: removing node eee would leave 1 healthy voter of 2: bring a voter back first"),
		args:      []string{"node", "demote", "manager-2", "worker-3", "aaa"},
		want:      "demoted bbbbbbbbbbbbbbbbbbbbbbbb (manager-2): no longer a consensus member\n",
		wantErr:   "demote node worker-3: refused: removing node eee would leave 1 healthy voter of 2: bring a voter back first (FailedPrecondition)",
		wantCalls: []string{"DemoteNode manager-2", "DemoteNode worker-3"},
		wantReqs:  []proto.Message{nodeReq("manager-2"), nodeReq("worker-3")},
	}, {
		name:      "a pending node is refused: it has nothing to demote",
		args:      []string{"node", "demote", "worker-1"},
		wantErr:   "demote node worker-1: refused: node cccccccccccccccccccccccc is pending approval and holds no role: there is nothing to demote; approve it with `curator node approve cccccccccccccccccccccccc`, or refuse it with `curator node rm cccccccccccccccccccccccc` (FailedPrecondition)",
		wantCalls: []string{"DemoteNode worker-1"},
		wantReqs:  []proto.Message{nodeReq("worker-1")},
	}})
}

func TestNodeUpdate(t *testing.T) {
	runChangeCases(t, []changeCase{{
		name: "availability and labels",
		args: []string{"node", "update", "bbb", "--availability", "pause",
			"--label-add", "zone=b", "--label-add", "tier=web", "--label-add", "empty=",
			"--label-rm", "old", "--label-rm", "old"},
		want: `ID                         NAME        ADDRESS             STATE    STATUS   AVAILABILITY   ROLES       MANAGER STATUS   VERSION
bbbbbbbbbbbbbbbbbbbbbbbb   manager-2   127.0.100.11:7000   joined   down     pause          consensus   unreachable      v0.1.0
`,
		wantCalls: []string{"UpdateNode bbb"},
		wantReqs: []proto.Message{&pb.UpdateNodeRequest{
			Id: "bbb", Availability: pb.Availability_AVAILABILITY_PAUSE,
			LabelAdd: map[string]string{"zone": "b", "tier": "web", "empty": ""}, LabelRm: []string{"old"},
		}},
	}, {
		name:      "drain alone",
		args:      []string{"node", "update", "manager-2", "--availability=drain", "-o", "json"},
		want:      wantNodeB + "\n",
		wantCalls: []string{"UpdateNode manager-2"},
		wantReqs:  []proto.Message{&pb.UpdateNodeRequest{Id: "manager-2", Availability: pb.Availability_AVAILABILITY_DRAIN}},
	}, {
		name: "labels alone leave availability unset",
		args: []string{"node", "update", "manager-2", "--label-add", "k=a.b", "-o", "json"},
		want: strings.Replace(wantNodeB, `"labels": {},`, `"labels": {
    "k": "a.b"
  },`, 1) + "\n",
		wantCalls: []string{"UpdateNode manager-2"},
		wantReqs:  []proto.Message{&pb.UpdateNodeRequest{Id: "manager-2", LabelAdd: map[string]string{"k": "a.b"}}},
	}, {
		name:      "the server's refusal",
		setup:     refusal(codes.NotFound, `no node with ID, ID prefix or name "worker-3": not found (list nodes with `+"`curator node ls`"+`)`),
		args:      []string{"node", "update", "worker-3", "--label-add", "x=1"},
		wantErr:   `update node worker-3: no node with ID, ID prefix or name "worker-3": not found (list nodes with ` + "`curator node ls`" + `) (NotFound)`,
		wantCalls: []string{"UpdateNode worker-3"},
		wantReqs:  []proto.Message{&pb.UpdateNodeRequest{Id: "worker-3", LabelAdd: map[string]string{"x": "1"}}},
	}})
}

// TestNodeUpdateRefusedLocally checks that flags that cannot make a
// sensible update are refused before the command talks to the cluster.
func TestNodeUpdateRefusedLocally(t *testing.T) {
	var cases []changeCase
	for _, tc := range []struct {
		args    []string
		wantErr string
	}{
		{nil, "at least one of the flags in the group [availability label-add label-rm] is required"},
		{[]string{"--availability", "paused"}, `availability "paused" is not one of active, pause, drain`},
		{[]string{"--availability", ""}, `availability "" is not one of active, pause, drain`},
		{[]string{"--availability", "DRAIN"}, `availability "DRAIN" is not one of active, pause, drain`},
		{[]string{"--label-add", "zone"}, `--label-add: label "zone": give it as key=value`},
		{[]string{"--label-add", "=a"}, `--label-add: label "=a": give it as key=value`},
		{[]string{"--label-add", "k=1", "--label-add", "k=2"}, `--label-add: label "k" is given twice, as "1" and "2": give it once`},
		{[]string{"--label-rm", ""}, "--label-rm: the label key is empty"},
		{[]string{"--label-rm", "zone=a"}, `--label-rm: label key "zone=a": give only the key of the label to remove`},
		{[]string{"--label-add", "k=1", "--label-rm", "k"}, `label "k" is both added and removed: give one`},
		{[]string{"--label-add", "k=a=b"}, `--label-add: label k="a=b": a value is empty or up to 63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit`},
		{[]string{"--label-add", "-x=1"}, `--label-add: label key "-x": use 1 to 63 letters, digits, '-', '_', '.' or '/', starting and ending with a letter or digit`},
		{[]string{"--label-add", "k=" + strings.Repeat("v", 100<<10)}, `--label-add: label k="` + strings.Repeat("v", 64) + `"... (102400 bytes): a value is empty or up to 63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit`},
		{[]string{"--label-add", strings.Repeat("k", 100<<10)}, `--label-add: label "` + strings.Repeat("k", 64) + `"... (102400 bytes): give it as key=value`},
		{[]string{"--label-rm", "new\nline"}, `--label-rm: label key "new\nline": use 1 to 63 letters, digits, '-', '_', '.' or '/', starting and ending with a letter or digit`},
	} {
		name := strings.Join(tc.args, " ")
		if len(name) > 40 {
			name = name[:40] + "..."
		}
		cases = append(cases, changeCase{
			name:    name,
			args:    append([]string{"node", "update", "bbb"}, tc.args...),
			wantErr: tc.wantErr,
		})
	}
	runChangeCases(t, cases)
}

func TestNodeApprove(t *testing.T) {
	runChangeCases(t, []changeCase{{
		name: "table",
		args: []string{"node", "approve", "worker-1"},
		want: `ID                         NAME       ADDRESS             STATE    STATUS    AVAILABILITY   ROLES    MANAGER STATUS   VERSION
cccccccccccccccccccccccc   worker-1   127.0.100.12:7000   joined   unknown   active         worker
`,
		wantCalls: []string{"ApproveNode worker-1"},
		wantReqs:  []proto.Message{&pb.NodeRequest{Id: "worker-1"}},
	}, {
		name:      "json",
		args:      []string{"node", "approve", "ccc", "-o", "json"},
		want:      strings.Replace(wantNodeC, `"state": "pending"`, `"state": "up"`, 1) + "\n",
		wantCalls: []string{"ApproveNode ccc"},
		wantReqs:  []proto.Message{&pb.NodeRequest{Id: "ccc"}},
	}, {
		name:      "an approved node",
		args:      []string{"node", "approve", "manager-2"},
		wantErr:   "approve node manager-2: already exists: node bbbbbbbbbbbbbbbbbbbbbbbb is up, not pending: it was approved already, or never waited for approval; nothing changed (AlreadyExists)",
		wantCalls: []string{"ApproveNode manager-2"},
		wantReqs:  []proto.Message{&pb.NodeRequest{Id: "manager-2"}},
	}, {
		name:      "an unknown node",
		args:      []string{"node", "approve", "zzz"},
		wantErr:   `approve node zzz: no node has the ID, unique ID prefix or name "zzz" (NotFound)`,
		wantCalls: []string{"ApproveNode zzz"},
		wantReqs:  []proto.Message{&pb.NodeRequest{Id: "zzz"}},
	}})
}

func TestNodeRm(t *testing.T) {
	runChangeCases(t, []changeCase{{
		name:      "a node that is not ready",
		args:      []string{"node", "rm", "worker-1"},
		want:      "removed cccccccccccccccccccccccc\n",
		wantCalls: []string{"RemoveNode worker-1"},
		wantReqs:  []proto.Message{&pb.RemoveNodeRequest{Id: "worker-1"}},
	}, {
		name:      "a ready node, refused",
		args:      []string{"node", "rm", "aaa"},
		wantErr:   "remove node aaa: refused: node aaaaaaaaaaaaaaaaaaaaaaaa is ready: run `curator agent leave` on it, or stop it first; `--force` removes it anyway (FailedPrecondition)",
		wantCalls: []string{"RemoveNode aaa"},
		wantReqs:  []proto.Message{&pb.RemoveNodeRequest{Id: "aaa"}},
	}, {
		name:      "a ready node, forced",
		args:      []string{"node", "rm", "--force", "aaa"},
		want:      "removed aaaaaaaaaaaaaaaaaaaaaaaa\n",
		wantCalls: []string{"RemoveNode aaa"},
		wantReqs:  []proto.Message{&pb.RemoveNodeRequest{Id: "aaa", Force: true}},
	}})
}

// TestNodeJSONDemoting shows a demotion under way in node inspect.
func TestNodeJSONDemoting(t *testing.T) {
	f := newFakeManagement()
	f.nodes[2].Node.Demoting = true
	path := startFakeCluster(t, f)
	got, err := runCLI(t, "--config", path, "node", "inspect", "bbb")
	if err != nil {
		t.Fatal(err)
	}
	want := strings.Replace(wantNodeB, `"demoting": false`, `"demoting": true`, 1) + "\n"
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("node inspect of a node being demoted (-want +got):\n%s", diff)
	}
}
