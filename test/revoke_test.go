package e2e

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/curatorproject/curator/internal/testenv"
	"github.com/curatorproject/curator/pki"
)

// TestRevocationEndsFollow: `events --follow` run with an operator
// certificate's config, on three managers of the real binary, ends within
// a few seconds of an admin's `cluster revoke-cert` with a message that
// says the certificate was revoked, and prints no event recorded after the
// revocation (the revocation's own event, a change made after it).
func TestRevocationEndsFollow(t *testing.T) {
	parallel(t) // its own addresses and dirs
	c := newCluster(t, "127.0.130.")
	c.build(3, 0)
	dir := filepath.Join(t.TempDir(), "follower")
	mgmtRun(t, c, "cluster", "admin-cert", "--role", pki.OperatorReader, "--name", "who-follows", "--ttl", "1h", "--out", dir)
	config := filepath.Join(dir, "config.yaml")

	var out syncBuffer
	follow := start(t, "events --follow", filepath.Join(t.TempDir(), "follow.log"), &out, "--config", config, "events", "--follow", "--limit", "1")
	mgmtRun(t, c, "node", "update", "--label-add", "before=1", "manager-2")
	testenv.Eventually(t, 30*time.Second, "events --follow prints a change made while it runs", func() error {
		if follow.exited() {
			t.Fatalf("events --follow exited: %v\n%s", follow.err, out.String())
		}
		if !strings.Contains(out.String(), "UpdateNode") {
			return fmt.Errorf("events --follow printed %q", out.String())
		}
		return nil
	})

	before := len(out.String())
	mgmtRun(t, c, "cluster", "revoke-cert", "who-follows")
	revoked := time.Now()
	mgmtRun(t, c, "node", "update", "--label-add", "after=1", "manager-3")
	select {
	case <-follow.done:
	case <-time.After(5 * time.Second):
		t.Fatalf("events --follow still runs %v after its certificate was revoked:\n%s", time.Since(revoked), out.String())
	}
	var exit interface{ ExitCode() int }
	if !errors.As(follow.err, &exit) || exit.ExitCode() == 0 {
		t.Errorf("events --follow ended with %v, want a failure", follow.err)
	}
	log := readFile(t, follow.log)
	if !strings.Contains(log, "was revoked") || !strings.Contains(log, "who-follows") {
		t.Errorf("events --follow does not say its certificate was revoked:\n%s", log)
	}
	for _, after := range []string{"RevokeAdminCertificate", "UpdateNode"} {
		if strings.Contains(out.String()[before:], after) {
			t.Errorf("events --follow printed an event recorded after the revocation (%s):\n%s", after, out.String())
		}
	}
}
