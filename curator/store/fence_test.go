package store

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/tests/v3/framework/integration"
	"go.etcd.io/raft/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/curatorproject/curator/curator/spec"
)

// TestFenceProposesDroppedWritesAgain: an etcd leader handing its
// leadership over drops every proposal until the transfer ends (raft's
// ErrProposalDropped, which etcd's client does not retry); a fenced write
// made then lands once it is over, instead of failing the operator's
// command (CI saw `group commit` fail with "raft proposal dropped" while
// the placement loop moved etcd's leader). The transfer here goes to a
// stopped member, so it lasts until raft gives it up, an election timeout
// later; a plain write made beside the fenced one shows the drop.
func TestFenceProposesDroppedWritesAgain(t *testing.T) {
	integration.BeforeTest(t)
	clus := integration.NewCluster(t, &integration.ClusterConfig{Size: 3})
	t.Cleanup(func() { clus.Terminate(t) })
	cli := clus.Client(0) // member 0 only: it must lead
	m0, m2 := clus.Members[0].Server, clus.Members[2].Server

	put, err := cli.Put(callCtx(t), "/test/election", "leader")
	if err != nil {
		t.Fatal(err)
	}
	fence := NewFence(cli, "node-0", "/test/election", put.Header.Revision, nil)

	clus.Members[2].Stop(t)
	if lead := clus.WaitLeader(t); lead != 0 {
		if err := clus.Members[lead].Server.MoveLeader(callCtx(t), uint64(clus.Members[lead].Server.MemberID()), uint64(m0.MemberID())); err != nil {
			t.Fatalf("move etcd's leader to member 0: %v", err)
		}
	}

	for round := 1; ; round++ {
		if round > 5 {
			t.Fatal("in 5 transfers no plain write was dropped: the fault this test needs did not happen")
		}
		tctx, cancel := context.WithTimeout(context.Background(), time.Second)
		transferred := make(chan struct{})
		go func() {
			defer close(transferred)
			_ = m0.MoveLeader(tctx, uint64(m0.MemberID()), uint64(m2.MemberID()))
		}()
		time.Sleep(5 * time.Millisecond)
		plain := make(chan error, 1)
		go func() {
			_, err := cli.Put(callCtx(t), "/test/plain", "x")
			plain <- err
		}()
		key := fmt.Sprintf("/test/written-%d", round)
		_, ferr := fence.txn(callCtx(t), clientv3.OpPut(key, "yes"))
		perr := <-plain
		<-transferred
		cancel()
		if ferr != nil {
			t.Fatalf("fenced write during a leadership transfer: %v", ferr)
		}
		got, err := cli.Get(callCtx(t), key)
		if err != nil {
			t.Fatal(err)
		}
		if len(got.Kvs) != 1 || string(got.Kvs[0].Value) != "yes" {
			t.Fatalf("%s = %v, want yes", key, got.Kvs)
		}
		if dropped(perr) {
			return
		}
		t.Logf("round %d: the plain write was not dropped (%v): again", round, perr)
	}
}

func TestDropped(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{status.Error(codes.Unknown, raft.ErrProposalDropped.Error()), true},
		{raft.ErrProposalDropped, true},
		{status.Error(codes.Unavailable, "etcdserver: leader changed"), false},
		{status.Error(codes.Unknown, "etcdserver: request timed out"), false},
		{spec.ErrNotLeader, false},
		{errors.New("raft proposal dropped, and more"), false},
	} {
		if got := dropped(tc.err); got != tc.want {
			t.Errorf("dropped(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}
