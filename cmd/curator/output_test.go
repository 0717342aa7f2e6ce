package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/reflect/protoreflect"

	pb "github.com/curatorproject/curator/proto"
)

// Every value of every enum the CLI shows reads as the word the CLI contract
// uses; a value added to the proto fails here until it is listed.
func TestEnumWords(t *testing.T) {
	want := map[string]string{
		"NODE_STATE_UNSPECIFIED": "", "NODE_STATE_PENDING": "pending", "NODE_STATE_UP": "up",
		"NODE_STATE_DECOMMISSIONED": "decommissioned",
		"AVAILABILITY_UNSPECIFIED":  "", "AVAILABILITY_ACTIVE": "active", "AVAILABILITY_PAUSE": "pause",
		"AVAILABILITY_DRAIN":  "drain",
		"NODE_STATUS_UNKNOWN": "unknown", "NODE_STATUS_READY": "ready", "NODE_STATUS_DOWN": "down",
		"ROLE_UNSPECIFIED": "", "ROLE_CONSENSUS": "consensus", "ROLE_WORKER": "worker",
		"MANAGER_STATUS_NONE": "", "MANAGER_STATUS_LEADER": "leader", "MANAGER_STATUS_REACHABLE": "reachable",
		"MANAGER_STATUS_UNREACHABLE": "unreachable", "MANAGER_STATUS_LEARNER": "learner",
	}
	got := map[string]string{}
	for _, e := range []protoreflect.Enum{
		pb.NodeState(0), pb.Availability(0), pb.NodeStatus(0), pb.Role(0), pb.ManagerStatus(0),
	} {
		values := e.Descriptor().Values()
		for i := range values.Len() {
			v := values.Get(i)
			got[string(v.Name())] = enumWord(e.Type().New(v.Number()))
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("enum words (-want +got):\n%s", diff)
	}
	if got := enumWord(pb.NodeStatus(42)); got != "42" {
		t.Errorf("unknown enum number reads %q, want \"42\"", got)
	}
}

// Bad input is refused before anything is sent: the fake sees no call.
func TestArgumentValidation(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"node", "ls", "-o", "xml"}, `output format "xml" is not one of table, json, yaml`},
		{[]string{"node", "ls", "--output=xml"}, `output format "xml" is not one of table, json, yaml, wide`},
		{[]string{"cluster", "info", "--output=wide"}, `output format "wide" is not one of table, json, yaml`},
		{[]string{"cluster", "info", "-o", "xml"}, `output format "xml" is not one of table, json, yaml`},
		{[]string{"node", "ls", "--filter", "colour=red"}, `unknown key "colour"; the keys are id, name, address, role, state, status, availability, manager, group, version, label`},
		{[]string{"node", "ls", "--filter", "state=gone"}, `state is one of pending, up, joined, refused, decommissioned`},
		{[]string{"node", "ls", "--filter", "manager=boss"}, `manager is one of leader, reachable, unreachable, learner`},
		{[]string{"node", "ls", "--filter", "role=boss"}, `role is one of consensus, manager, worker`},
		{[]string{"node", "ls", "--filter", "status"}, `want KEY=VALUE`},
		{[]string{"node", "ls", "extra"}, `unknown command "extra" for "curator node ls"`},
		{[]string{"node", "lss"}, `unknown command "lss" for "curator node" (did you mean "ls"?)`},
		{[]string{"node", "inspect"}, "accepts 1 arg(s), received 0"},
		{[]string{"node", "inspect", ""}, "node ID is empty"},
		{[]string{"node", "inspect", "a", "b"}, "accepts 1 arg(s), received 2"},
		{[]string{"node", "promote"}, "requires at least 1 arg(s)"},
		{[]string{"token", "show"}, "accepts 1 arg(s), received 0"},
		{[]string{"token", "show", "admin"}, `token role "admin" is not one of worker, manager`},
		{[]string{"token", "rotate", "Worker"}, `token role "Worker" is not one of worker, manager`},
		{[]string{"token", "rotate", "worker", "manager"}, "accepts 1 arg(s), received 2"},
		{[]string{"token", "rotate"}, "accepts 1 arg(s), received 0"},
		{[]string{"cluster", "infos"}, `unknown command "infos" for "curator cluster" (did you mean "info"?)`},
		{[]string{"agent", "init"}, `required flag(s) "data-dir", "listen" not set`},
		{[]string{"agent", "join", "--data-dir", "d", "--listen", "127.0.0.1:1"}, `required flag(s) "manager" not set`},
		{[]string{"agent", "run"}, `required flag(s) "data-dir" not set`},
		{[]string{"agent", "leave"}, `required flag(s) "data-dir" not set`},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			f := newFakeManagement()
			path := startFakeCluster(t, f)
			out, err := runCLI(t, append([]string{"--config", path}, tc.args...)...)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error = %v, want one containing %q", err, tc.want)
			}
			if out != "" {
				t.Errorf("printed %q on bad input", out)
			}
			if calls := f.Calls(); len(calls) != 0 {
				t.Errorf("bad input reached the cluster: %v", calls)
			}
		})
	}
}

func TestNoClientConfig(t *testing.T) {
	path := filepath.Join(t.TempDir(), "nowhere.yaml")
	_, err := runCLI(t, "--config", path, "node", "ls")
	want := "no client config at " + path + ": run `curator agent init` or pass --config"
	if err == nil || err.Error() != want {
		t.Errorf("error = %v, want %q", err, want)
	}

	// Without --config, $CURATOR_CONFIG names the file.
	t.Setenv("CURATOR_CONFIG", path)
	_, err = runCLI(t, "node", "ls")
	if err == nil || err.Error() != want {
		t.Errorf("with $CURATOR_CONFIG: error = %v, want %q", err, want)
	}
}

// The client caches the managers the cluster reports beside the config.
func TestOperatorCommandsCacheManagers(t *testing.T) {
	path := startFakeCluster(t, newFakeManagement())
	if _, err := runCLI(t, "--config", path, "node", "ls"); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path + ".managers.json")
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range []string{"127.0.100.10:7000", "127.0.100.11:7000"} {
		if !strings.Contains(string(data), m) {
			t.Errorf("cache %s does not name %s", data, m)
		}
	}
}

func TestWriteTableTrimsTrailingBlanks(t *testing.T) {
	var b strings.Builder
	if err := writeTable(&b, [][]string{{"A", "BB", "C"}, {"aaaa", "", ""}, {"", "b", "c"}}); err != nil {
		t.Fatal(err)
	}
	want := "A      BB   C\naaaa\n       b    c\n"
	if diff := cmp.Diff(want, b.String()); diff != "" {
		t.Errorf("writeTable (-want +got):\n%s", diff)
	}
}

// Counts and articles read as English: "1 manager", not "1 managers";
// "an operator certificate", not "a operator certificate".
func TestCountAndArticleWords(t *testing.T) {
	for _, tc := range []struct{ got, want string }{
		{count(0, "node"), "0 nodes"},
		{count(1, "node"), "1 node"},
		{count(1, "manager"), "1 manager"},
		{count(3, "worker"), "3 workers"},
		{withArticle("operator"), "an operator"},
		{withArticle("admin"), "an admin"},
		{withArticle("reader"), "a reader"},
	} {
		if tc.got != tc.want {
			t.Errorf("%q, want %q", tc.got, tc.want)
		}
	}
}

// group ls's ROLLOUT column counts a rollout in progress; a done one's
// count is READY's, of the group as it is now (not the rollout's, which a
// scale makes stale).
func TestGroupLsRolloutColumn(t *testing.T) {
	g := &pb.Group{Spec: &pb.GroupSpec{Name: "w", Size: 5}, ConfigSha: "aaaaaaaaaaaaaaaa"}
	for _, tc := range []struct {
		state   string
		updated uint32
		want    string
	}{
		{"done", 5, "   done   "},
		{"rolling", 1, "   rolling 1/5   "},
	} {
		var b strings.Builder
		v := &pb.GroupView{Group: g, Ready: 5, Machines: 5, RolloutState: tc.state, RolloutUpdated: tc.updated, RolloutTotal: 5}
		if err := writeGroups(&b, formatTable, []*pb.GroupView{v}); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(b.String(), tc.want) {
			t.Errorf("a %s rollout: group ls shows\n%s\nwant %q", tc.state, b.String(), tc.want)
		}
	}
}
