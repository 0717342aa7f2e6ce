package main

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	pb "github.com/curatorproject/curator/proto"
)

// The filters of node ls, on the fake cluster's three nodes: manager-1
// (consensus and worker, ready, active, group managers, label zone=a),
// manager-2 (consensus, down, drain) and worker-1 (worker, unknown,
// active, pending).
func TestNodeLsFilters(t *testing.T) {
	const (
		m1 = "aaaaaaaaaaaaaaaaaaaaaaaa"
		m2 = "bbbbbbbbbbbbbbbbbbbbbbbb"
		w1 = "cccccccccccccccccccccccc"
	)
	f := newFakeManagement()
	path := startFakeCluster(t, f)
	for _, tc := range []struct {
		filters []string
		want    []string
	}{
		{nil, []string{m1, m2, w1}},
		{[]string{"role=consensus"}, []string{m1, m2}},
		{[]string{"role=manager"}, []string{m1, m2}},
		{[]string{"role=worker"}, []string{m1, w1}},
		{[]string{"role=consensus", "role=worker"}, []string{m1}},
		{[]string{"status=down"}, []string{m2}},
		{[]string{"status=ready"}, []string{m1}},
		{[]string{"status=unknown"}, []string{w1}},
		{[]string{"availability=drain"}, []string{m2}},
		{[]string{"availability=active", "role=worker"}, []string{m1, w1}},
		{[]string{"availability=pause"}, nil},
		{[]string{"group=managers"}, []string{m1}},
		{[]string{"group="}, []string{m2, w1}},
		{[]string{"label=zone"}, []string{m1}},
		{[]string{"label=zone=a"}, []string{m1}},
		{[]string{"label=zone=b"}, nil},
		{[]string{"name=manager"}, []string{m1, m2}},
		{[]string{"name=manager-2"}, []string{m2}},
		{[]string{"id=ccc"}, []string{w1}},
		{[]string{"name=manager", "status=down"}, []string{m2}},
		{[]string{"state=pending"}, []string{w1}},
		{[]string{"state=up"}, []string{m1, m2}},
		{[]string{"state=joined"}, []string{m1, m2}},
		{[]string{"state=refused"}, nil},
		{[]string{"address=127.0.100.12"}, []string{w1}},
		{[]string{"manager=leader"}, []string{m1}},
		{[]string{"manager=unreachable"}, []string{m2}},
		{[]string{"version=v0.1.0"}, []string{m1, m2}},
	} {
		t.Run(strings.Join(tc.filters, ","), func(t *testing.T) {
			args := []string{"--config", path, "node", "ls", "-q"}
			for _, fl := range tc.filters {
				args = append(args, "--filter", fl)
			}
			out, err := runCLI(t, args...)
			if err != nil {
				t.Fatal(err)
			}
			got := strings.Fields(out)
			if diff := cmp.Diff(tc.want, got, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("node ls -q %v (-want +got):\n%s", tc.filters, diff)
			}
		})
	}
}

// Every read command takes -o yaml: the JSON's fields, in its order.
func TestYAMLOutput(t *testing.T) {
	f := newFakeManagement()
	path := startFakeCluster(t, f)
	out, err := runCLI(t, "--config", path, "node", "ls", "-o", "yaml", "--filter", "name=manager-2")
	if err != nil {
		t.Fatal(err)
	}
	want := `- id: bbbbbbbbbbbbbbbbbbbbbbbb
  name: manager-2
  address: 127.0.100.11:7000
  state: up
  status: down
  availability: drain
  roles:
    - consensus
  manager_status: unreachable
  group: ""
  instance_id: ""
  domain: ""
  config_sha: ""
  version: v0.1.0
  labels: {}
  last_heartbeat: null
  status_changed: null
  created: null
  updated: null
  joined_as: ""
  demoting: false
  cert_expires: null
  swarm_node_id: ""
  swarm_join_requested: false
  swarm_role: ""
  swarm_state: ""
`
	if diff := cmp.Diff(want, out); diff != "" {
		t.Errorf("node ls -o yaml (-want +got):\n%s", diff)
	}
	for _, args := range [][]string{{"cluster", "info"}, {"node", "inspect", "manager-1"}} {
		out, err := runCLI(t, append(append([]string{"--config", path}, args...), "-o", "yaml")...)
		if err != nil || strings.HasPrefix(out, "{") || !strings.Contains(out, "\nleader: ") && !strings.Contains(out, "\nname: manager-1") {
			t.Errorf("%v -o yaml: %v\n%s", args, err, out)
		}
	}
	// node inspect prints JSON unless told otherwise.
	out, err = runCLI(t, "--config", path, "node", "inspect", "manager-2")
	if err != nil || !strings.HasPrefix(out, "{\n  \"id\": \"bbbbbbbbbbbbbbbbbbbbbbbb\"") {
		t.Errorf("node inspect: %v\n%s", err, out)
	}
}

// Node arguments complete to IDs and names, each shown with the other.
func TestNodeCompletion(t *testing.T) {
	f := newFakeManagement()
	path := startFakeCluster(t, f)
	out, err := runCLI(t, "--config", path, "__complete", "node", "demote", "manager-1", "")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"bbbbbbbbbbbbbbbbbbbbbbbb\tmanager-2", "manager-2\tbbbbbbbbbbbbbbbbbbbbbbbb", "worker-1\tcccccccccccccccccccccccc"} {
		if !strings.Contains(out, want+"\n") {
			t.Errorf("completion of node demote lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "manager-1\t") {
		t.Errorf("completion offers manager-1, given already:\n%s", out)
	}
	out, err = runCLI(t, "--config", path, "__complete", "node", "inspect", "work")
	if err != nil {
		t.Fatal(err)
	}
	if lines := strings.Split(strings.TrimSpace(out), "\n"); len(lines) != 2 || lines[0] != "worker-1\tcccccccccccccccccccccccc" {
		t.Errorf("completion of node inspect work: %q", out)
	}
}

// TestNodeLsSwarmColumns: the table shows SWARM ROLE and SWARM STATE where
// the Swarm flavor is (some node has a Swarm node or a join request), with
// "joining" for a request pending and "-" for what the leader did not see.
func TestNodeLsSwarmColumns(t *testing.T) {
	node := func(id, name string) *pb.Node {
		return &pb.Node{Id: id, Name: name, State: pb.NodeState_NODE_STATE_UP, Status: pb.NodeStatus_NODE_STATUS_READY}
	}
	plain := []*pb.NodeView{{Node: node("a1", "m")}, {Node: node("b2", "w")}}
	var b strings.Builder
	if err := writeNodes(&b, formatTable, plain); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(b.String(), "SWARM") {
		t.Errorf("Swarm columns without the flavor:\n%s", b.String())
	}

	m, w, j := node("a1", "m"), node("b2", "w"), node("c3", "j")
	m.SwarmNodeId, w.SwarmNodeId = "swarmm", "swarmw"
	j.SwarmJoinRequested = true
	views := []*pb.NodeView{
		{Node: m, SwarmRole: "manager", SwarmState: "ready"},
		{Node: w, SwarmRole: "worker", SwarmState: "down"},
		{Node: j},
	}
	b.Reset()
	if err := writeNodes(&b, formatTable, views); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	if !strings.HasSuffix(lines[0], "SWARM ROLE   SWARM STATE") {
		t.Errorf("header %q", lines[0])
	}
	for i, want := range []string{"-   joining", "manager   ready", "worker    down"} {
		if got := strings.Join(strings.Fields(lines[i+1])[len(strings.Fields(lines[i+1]))-2:], " "); got != strings.Join(strings.Fields(want), " ") {
			t.Errorf("row %d %q: ends %q, want %q", i+1, lines[i+1], got, want)
		}
	}
}

// A refused former manager says so in node ls: STATE refused (not joined
// beside STATUS down), its reason in the JSON, and --filter state=refused
// finds it.
func TestNodeLsRefused(t *testing.T) {
	refused := &pb.NodeView{Node: &pb.Node{Id: "r", Name: "manager-2", State: pb.NodeState_NODE_STATE_UP, Status: pb.NodeStatus_NODE_STATUS_DOWN,
		Refused: "was a manager when the cluster was recovered without it"}}
	up := &pb.NodeView{Node: &pb.Node{Id: "u", Name: "manager-1", State: pb.NodeState_NODE_STATE_UP, Status: pb.NodeStatus_NODE_STATUS_READY}}
	pending := &pb.NodeView{Node: &pb.Node{Id: "p", Name: "worker-1", State: pb.NodeState_NODE_STATE_PENDING}}
	for _, tc := range []struct {
		v    *pb.NodeView
		cell string
	}{{refused, "refused"}, {up, "joined"}, {pending, "pending"}} {
		if got := nodeToJSON(tc.v).stateCell(); got != tc.cell {
			t.Errorf("%s: STATE %q, want %q", tc.v.Node.Name, got, tc.cell)
		}
	}
	if got := nodeToJSON(refused); got.State != "up" || got.Refused == "" {
		t.Errorf("refused node as JSON: state %q, refused %q; want up and the reason", got.State, got.Refused)
	}
	for filter, want := range map[string][]string{"state=refused": {"r"}, "state=joined": {"u"}, "state=pending": {"p"}} {
		f, err := parseNodeFilters([]string{filter})
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, v := range f.apply([]*pb.NodeView{refused, up, pending}) {
			got = append(got, v.Node.Id)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("--filter %s (-want +got):\n%s", filter, diff)
		}
	}
	var b strings.Builder
	if err := writeNodes(&b, formatTable, []*pb.NodeView{refused}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), " refused ") {
		t.Errorf("table of a refused node:\n%s", b.String())
	}
}
