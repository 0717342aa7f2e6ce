package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/curatorproject/curator/pki"

	"github.com/curatorproject/curator/internal/testenv"
)

// TestSyncRemovalKeepsQuorum: the consensus sync removes an etcd member
// whose node no longer exists, but, like any removal, only within the
// quorum guard. With voters manager-1 (leading), manager-2 (its record
// lost) and manager-3 (dead), removing manager-2's member would leave one
// healthy voter of two: the sync refuses, says why, and waits; once
// manager-3 is back it removes the member.
func TestSyncRemovalKeepsQuorum(t *testing.T) {
	parallel(t) // its own addresses and dirs
	c := newCluster(t, "127.0.207.")
	m1 := c.build(3, 0)
	nodes := c.waitReady(30*time.Second, "manager-1", "manager-2", "manager-3")
	ids := map[string]string{}
	for _, n := range nodes {
		ids[n.Name] = n.ID
	}
	info, err := clusterInfo(t, c.config)
	if err != nil {
		t.Fatal(err)
	}
	if info.Leader != ids["manager-1"] {
		t.Fatalf("leader is %s, want manager-1", info.Leader)
	}

	// manager-3 dies.
	m3 := c.nodes["manager-3"]
	if err := m3.proc.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-m3.proc.done
	testenv.Eventually(t, 20*time.Second, "manager-3 down", func() error {
		ns, err := nodeLs(t, c.config)
		if err != nil {
			return err
		}
		if n, _ := byName(ns, "manager-3"); n.Status != "down" {
			return fmt.Errorf("manager-3 is %q", n.Status)
		}
		return nil
	})

	// manager-2's record is lost, as if by a bug or a hand in etcd, while
	// its member stays.
	cred := readEtcdCredential(t, m1.dataDir)
	ca, err := pki.DecodeCert(cred.ca)
	if err != nil {
		t.Fatal(err)
	}
	etcd, err := clientv3.New(clientv3.Config{
		Endpoints: []string{"https://" + net.JoinHostPort(strings.Split(m1.listen, ":")[0], strconv.Itoa(port+2))},
		TLS:       pki.ClientTLS(cred.cert, ca), DialTimeout: 5 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer etcd.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := etcd.Delete(ctx, "/curator/nodes/"+ids["manager-2"]); err != nil {
		t.Fatal(err)
	}
	memberOf2 := func() (bool, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		resp, err := etcd.MemberList(ctx)
		if err != nil {
			return false, err
		}
		return slices.ContainsFunc(resp.Members, func(m *etcdserverpb.Member) bool { return m.Name == ids["manager-2"] }), nil
	}

	events := func() ([]mgmtEvent, error) {
		var evs []mgmtEvent
		out, _, err := cli(t, "--config", c.config, "events", "-o", "json", "--limit", "0")
		if err != nil {
			return nil, err
		}
		return evs, json.Unmarshal([]byte(out), &evs)
	}
	testenv.Eventually(t, 20*time.Second, "the sync refuses to remove manager-2's member", func() error {
		evs, err := events()
		if err != nil {
			return err
		}
		if !slices.ContainsFunc(evs, func(e mgmtEvent) bool {
			return e.Loop == "consensus-sync" && e.Action == "refuse" && strings.Contains(e.Reason, "unsafe") && strings.Contains(e.Reason, "majority")
		}) {
			return errors.New("no refusal event yet")
		}
		return nil
	})
	if in, err := memberOf2(); err != nil || !in {
		t.Fatalf("manager-2 is no longer an etcd member (%v) while manager-3 is down: the removal broke the guard", err)
	}

	// manager-3 comes back: now the member goes.
	c.agent("manager-3", "run")
	testenv.Eventually(t, 30*time.Second, "manager-2's member removed once manager-3 is back", func() error {
		in, err := memberOf2()
		if err != nil {
			return err
		}
		if in {
			return errors.New("still a member")
		}
		return nil
	})
	evs, err := events()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(evs, func(e mgmtEvent) bool {
		return e.Loop == "consensus-sync" && e.Action == "remove-member" && e.NodeID == ids["manager-2"]
	}) {
		t.Errorf("no remove-member event for manager-2: %+v", evs)
	}
}
