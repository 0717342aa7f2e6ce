package e2e

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/curatorproject/curator/internal/testenv"
)

// TestMetricsAndHealthz: every node serves Prometheus metrics and a health
// check at PORT+3; the leader's show it leads and its loops tick.
func TestMetricsAndHealthz(t *testing.T) {
	parallel(t) // its own addresses and dirs
	c := newCluster(t, "127.0.206.")
	c.init("manager-1", 10)
	// The worker serves Go's profiles too (--pprof); the manager does not.
	c.joinWith(func(name string, env map[string]string, verb string, args ...string) *node {
		return c.agentEnv(name, env, verb, append(args, "--pprof")...)
	}, "worker-1", 11, c.token("worker"), c.nodes["manager-1"])
	c.waitReady(30*time.Second, "manager-1", "worker-1")

	get := func(host int, path string) (string, error) {
		return httpGetOK(fmt.Sprintf("http://%s%d:%d%s", c.subnet, host, port+3, path))
	}

	testenv.Eventually(t, 20*time.Second, "the leader's metrics", func() error {
		body, err := get(10, "/metrics")
		if err != nil {
			return err
		}
		for _, want := range []string{
			"curator_is_leader 1",
			"curator_leader_changes_total 1",
			`curator_loop_ticks_total{loop="consensus-sync"}`,
			`curator_loop_ticks_total{loop="health"}`,
			`curator_loop_actions_total{action="mark-ready",loop="health"}`,
			`curator_nodes{status="ready"} 2`,
			// One voter: a majority of one, no failure tolerated.
			"curator_quorum_failures_tolerated 0",
			"curator_quorum_voters 1",
			"curator_ca_cert_expiry_timestamp_seconds ",
			// The worker's join kept its connection, and its agent's
			// first session ran on it: no second handshake.
			"curator_join_connections_kept_total 1",
			"curator_join_connection_sessions_total 1",
			"go_goroutines",
		} {
			if !strings.Contains(body, want) {
				return fmt.Errorf("/metrics lacks %q", want)
			}
		}
		return nil
	})
	body, err := get(11, "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(body, "curator_is_leader 0") {
		t.Errorf("a worker's metrics do not say it does not lead")
	}
	for _, want := range []string{"curator_agent_heartbeat_answer_seconds_count ", "curator_agent_cert_expiry_timestamp_seconds "} {
		if !strings.Contains(body, want) {
			t.Errorf("a worker's metrics lack %q", want)
		}
	}
	if strings.Contains(body, "curator_quorum_failures_tolerated") {
		t.Errorf("a worker's metrics show the quorum's failure tolerance: only the leader's may")
	}
	if body, err := get(11, "/debug/pprof/"); err != nil || !strings.Contains(body, "goroutine") {
		t.Errorf("/debug/pprof/ of the node started with --pprof: %v", err)
	}
	if _, err := get(10, "/debug/pprof/"); err == nil {
		t.Error("/debug/pprof/ is served by a node started without --pprof")
	}
	for host, want := range map[int]healthzJSON{10: {Consensus: "voter", CuratorLeader: true}, 11: {Consensus: "none"}} {
		body, err := get(host, "/healthz")
		if err != nil {
			t.Fatal(err)
		}
		var got healthzJSON
		if err := json.Unmarshal([]byte(body), &got); err != nil {
			t.Fatalf("/healthz of host %d: %v: %s", host, err, body)
		}
		if got.NodeID == "" || got.Consensus != want.Consensus || got.CuratorLeader != want.CuratorLeader {
			t.Errorf("/healthz of host %d = %+v, want consensus %q, leader %v", host, got, want.Consensus, want.CuratorLeader)
		}
	}
}

type healthzJSON struct {
	NodeID        string `json:"node_id"`
	Consensus     string `json:"consensus"`
	CuratorLeader bool   `json:"curator_leader"`
}
