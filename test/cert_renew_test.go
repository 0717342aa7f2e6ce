package e2e

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/curatorproject/curator/pki"
)

// TestOperatorCertRenewsItself: an operator certificate renews itself
// with `cluster admin-cert`, as the README says every certificate does:
// the same key, name and role, lasting what it was issued for, in the
// audit trail; it may not issue another (PermissionDenied, naming the
// role). A second revoke of a certificate says it was revoked already,
// not "not found".
func TestOperatorCertRenewsItself(t *testing.T) {
	parallel(t) // its own addresses and dirs
	c := newCluster(t, "127.0.144.")
	c.build(1, 0)
	dir := filepath.Join(t.TempDir(), "alice")
	out := mgmtRun(t, c, "cluster", "admin-cert", "--role", pki.OperatorOperator, "--name", "alice", "--ttl", "1h", "--out", dir)
	if !strings.HasPrefix(out, "issued an operator certificate for alice") {
		t.Errorf("admin-cert says %q, want it to begin with \"issued an operator certificate for alice\"", out)
	}
	config := filepath.Join(dir, "config.yaml")
	before, err := pki.ReadCert(filepath.Join(dir, "admin.crt"))
	if err != nil {
		t.Fatal(err)
	}

	out = mgmtRunWith(t, config, "cluster", "admin-cert")
	if !strings.Contains(out, "renewed") {
		t.Errorf("the operator's renewal says %q", out)
	}
	after, err := pki.ReadCert(filepath.Join(dir, "admin.crt"))
	if err != nil {
		t.Fatal(err)
	}
	if after.SerialNumber.Cmp(before.SerialNumber) == 0 {
		t.Fatalf("the operator certificate was not renewed: serial %x", after.SerialNumber)
	}
	if role, err := pki.OperatorRole(after); err != nil || role != pki.OperatorOperator {
		t.Errorf("the renewed certificate's role %q (%v), want operator", role, err)
	}
	if left := time.Until(after.NotAfter); left > time.Hour+time.Minute || left < 55*time.Minute {
		t.Errorf("the renewed certificate expires in %v, want the hour it was issued for", left.Round(time.Second))
	}
	// The renewed certificate works.
	mgmtRunWith(t, config, "node", "ls")

	// It may not issue another, of its own role or above.
	for _, args := range [][]string{
		{"--role", pki.OperatorOperator, "--name", "mallory"},
		{"--role", pki.OperatorAdmin, "--name", "alice"},
	} {
		_, stderr, err := cli(t, append([]string{"--config", config, "cluster", "admin-cert", "--out", filepath.Join(t.TempDir(), "x")}, args...)...)
		if err == nil || !strings.Contains(stderr, "needs the admin role") {
			t.Errorf("the operator issuing %v: %v, %q; want a refusal naming the admin role", args, err, stderr)
		}
	}

	var trail []auditEntryJSON
	if err := json.Unmarshal([]byte(mgmtRun(t, c, "audit", "--who", "alice", "-o", "json")), &trail); err != nil {
		t.Fatal(err)
	}
	renewed := false
	for _, e := range trail {
		renewed = renewed || e.Call == "RenewAdminCertificate" && e.Outcome == "ok"
	}
	if !renewed {
		t.Errorf("the renewal is not in the audit trail: %+v", trail)
	}

	// A second revoke says the certificate was revoked already.
	serial := before.SerialNumber.Text(16)
	mgmtRun(t, c, "cluster", "revoke-cert", serial)
	for _, q := range []string{serial, "alice"} {
		if q == "alice" {
			mgmtRun(t, c, "cluster", "revoke-cert", "alice")
		}
		_, stderr, err := cli(t, "--config", c.config, "cluster", "revoke-cert", q)
		if err == nil || !strings.Contains(stderr, "was revoked already") || strings.Contains(stderr, "not found") {
			t.Errorf("revoke-cert %s a second time: %v, %q; want it to say it was revoked already", q, err, stderr)
		}
	}
}
