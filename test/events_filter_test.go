package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// filteredEvent is an event as `events -o json` shows it, as far as the
// filters go.
type filteredEvent struct {
	Loop     string `json:"loop"`
	NodeID   string `json:"node_id"`
	NodeName string `json:"node_name"`
	Action   string `json:"action"`
}

// TestEventsFilters: `curator events --node`, `--kind`, `--group` and
// `--since` select events, and a removed node's events still name it
// (its name is kept with each event, not looked up among the nodes
// left).
func TestEventsFilters(t *testing.T) {
	parallel(t) // its own addresses and dirs
	c := newCluster(t, "127.0.147.")
	m1 := c.init("manager-1", 10)
	tok := c.token("worker")
	c.join("worker-1", 11, tok, m1)
	c.join("worker-2", 12, tok, m1)
	c.waitReady(30*time.Second, "manager-1", "worker-1", "worker-2")
	ids := mgmtIDs(t, c, "worker-1", "worker-2")
	p := c.nodes["worker-2"].proc
	if err := p.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-p.done
	mgmtRun(t, c, "node", "rm", "--force", "worker-2")

	events := func(args ...string) []filteredEvent {
		t.Helper()
		var evs []filteredEvent
		if err := mgmtJSON(t, c, &evs, append([]string{"events", "-o", "json", "--limit", "0"}, args...)...); err != nil {
			t.Fatal(err)
		}
		return evs
	}
	removed := events("--node", "worker-2")
	if len(removed) < 2 {
		t.Fatalf("events --node worker-2 = %+v: want its mark-ready and its removal", removed)
	}
	for _, e := range removed {
		if e.NodeID != ids["worker-2"] || e.NodeName != "worker-2" {
			t.Errorf("events --node worker-2: %+v, want node %s named worker-2", e, ids["worker-2"])
		}
	}
	if !strings.Contains(mgmtRun(t, c, "events", "--kind", "RemoveNode"), "worker-2") {
		t.Errorf("events --kind RemoveNode does not name worker-2, removed")
	}
	for _, tc := range []struct {
		name string
		args []string
		want []filteredEvent
	}{
		{"a node and an action", []string{"--node", "worker-1", "--kind", "mark-ready"}, []filteredEvent{{"health", ids["worker-1"], "worker-1", "mark-ready"}}},
		{"an operator's call on a removed node", []string{"--kind", "removenode"}, []filteredEvent{{"operator", ids["worker-2"], "worker-2", "RemoveNode"}}},
		{"a group with no event", []string{"--group", "web"}, []filteredEvent{}},
		{"since a time to come", []string{"--since", time.Now().Add(time.Hour).UTC().Format(time.RFC3339)}, []filteredEvent{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, events(tc.args...)); diff != "" {
				t.Errorf("events %s (-want +got):\n%s", strings.Join(tc.args, " "), diff)
			}
		})
	}
	if _, _, err := cli(t, "--config", c.config, "events", "--since", "yesterday"); err == nil || !strings.Contains(err.Error(), `--since "yesterday": want a time`) {
		t.Errorf("events --since yesterday: %v, want the --since refusal", err)
	}
}
