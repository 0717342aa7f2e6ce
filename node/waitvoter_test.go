package node

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/curatorproject/curator/consensus"
)

// TestWaitVoterSeesTheRunEnd: an etcd run that fails sets its status
// Stopped as it returns, and what follows it (a wipe of a removed member's
// data) may take a while before the error is handed on; the wait for a
// vote ends with the run, not only with a change of status, which never
// comes. (Before, the agent waited there for good, its node a learner
// forever.)
func TestWaitVoterSeesTheRunEnd(t *testing.T) {
	svc, err := consensus.New(consensus.Config{
		NodeID: "n1", DataDir: filepath.Join(t.TempDir(), "etcd"), ListenIP: "127.0.0.1", Port: 7000,
		// Not PEM: the run fails as it starts.
		CertPEM: []byte("not a certificate"), KeyPEM: []byte("not a key"), CAPEM: []byte("not a CA"),
		Mode: consensus.ModeRestart, Logger: zaptest.NewLogger(t),
	})
	if err != nil {
		t.Fatal(err)
	}
	w := svc.Watch()
	runErr := make(chan error, 1)
	ended := make(chan struct{})
	go func() {
		err := svc.Run(context.Background())
		time.Sleep(300 * time.Millisecond) // what follows the run: a wipe, say
		runErr <- err
		close(ended)
	}()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	start := time.Now()
	waited := make(chan error, 1)
	go func() { waited <- waitVoter(ctx, w, ended) }()
	select {
	case err := <-waited:
		if !errors.Is(err, errEtcdEnded) {
			t.Fatalf("waitVoter = %v after %v, want errEtcdEnded", err, time.Since(start))
		}
	case <-time.After(15 * time.Second):
		cancel()
		t.Fatalf("waitVoter still waits %v after the run began, which failed at once: %v", time.Since(start).Round(time.Millisecond), <-waited)
	}
	if err := <-runErr; err == nil {
		t.Fatal("the run with no certificate did not fail")
	} else {
		t.Logf("the run failed (%v); the wait ended %v after it began", err, time.Since(start).Round(time.Millisecond))
	}
	if got := svc.Status().State; got != consensus.Stopped {
		t.Errorf("status after the run = %v, want stopped", got)
	}

	// A wait whose ctx ends says so.
	cctx, ccancel := context.WithCancel(context.Background())
	ccancel()
	if err := waitVoter(cctx, svc.Watch(), make(chan struct{})); !errors.Is(err, context.Canceled) {
		t.Errorf("waitVoter on an ended ctx = %v, want context.Canceled", err)
	}
}
