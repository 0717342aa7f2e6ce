package curator

import (
	"crypto/x509"
	"errors"
	"slices"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/curatorproject/curator/curator/spec"
	"github.com/curatorproject/curator/pki"
	pb "github.com/curatorproject/curator/proto"
)

// FuzzAdminCertRequest: a certificate request with any name, role and
// validity is refused with ErrInvalid, or issues a certificate that says
// the name and role asked for (admin for none), which the interceptor
// reads back as such; a role name is accepted exactly when it is one of
// pki.OperatorRoles.
func FuzzAdminCertRequest(f *testing.F) {
	ca, err := pki.NewCA("fuzz")
	if err != nil {
		f.Fatal(err)
	}
	key, err := pki.NewKey()
	if err != nil {
		f.Fatal(err)
	}
	pub, err := x509.MarshalPKIXPublicKey(key.Public())
	if err != nil {
		f.Fatal(err)
	}
	for _, seed := range []struct {
		name, role string
		ttl        int64
	}{
		{"alice", "reader", int64(time.Hour)},
		{"bob", "operator", 0},
		{"admin", "", 0},
		{"wall", "admin", int64(spec.MaxAdminCertTTL)},
		{"x", "Admin", 0},
		{"x", "root", 0},
		{"x", "reader ", 0},
		{"", "reader", int64(time.Second)},
		{"a:b", "reader", 0},
		{"ok", "reader", -1},
		{"ok", "reader", int64(spec.MaxAdminCertTTL) + 1},
		{"\u00e9", "operator", 0},
	} {
		f.Add(seed.name, seed.role, seed.ttl)
	}
	f.Fuzz(func(t *testing.T, name, role string, ttl int64) {
		_, roleErr := pki.ParseOperatorRole(role)
		if (roleErr == nil) != slices.Contains(pki.OperatorRoles, role) {
			t.Fatalf("ParseOperatorRole(%q) = %v", role, roleErr)
		}
		req := &pb.RenewAdminCertificateRequest{PublicKey: pub, Name: name, Role: role}
		if ttl != 0 {
			req.Ttl = durationpb.New(time.Duration(ttl))
		}
		err := spec.CheckManagementRequest(req)
		if err != nil {
			if !errors.Is(err, spec.ErrInvalid) {
				t.Fatalf("refused with %v, not ErrInvalid", err)
			}
			return
		}
		if role != "" && roleErr != nil {
			t.Fatalf("role %q accepted", role)
		}
		want := role
		if want == "" {
			want = pki.OperatorAdmin
		}
		cn := name
		if cn == "" {
			cn = DefaultAdminName
		}
		validity := spec.AdminCertValidity
		if req.Ttl != nil {
			validity = req.Ttl.AsDuration()
		}
		cert, err := ca.Issue(pki.CertRequest{PublicKey: key.Public(), NodeID: cn, Role: pki.RoleAdmin, OperatorRole: want, Validity: validity})
		if err != nil {
			t.Fatalf("an accepted request does not issue: %v", err)
		}
		gotName, gotRole, err := pki.Identity(cert)
		if err != nil || gotName != cn || gotRole != pki.RoleAdmin {
			t.Fatalf("Identity = %q, %q, %v; want %q, admin", gotName, gotRole, err, cn)
		}
		if got, err := pki.OperatorRole(cert); err != nil || got != want {
			t.Fatalf("OperatorRole = %q, %v; want %q", got, err, want)
		}
		id := identity{role: pki.RoleAdmin, opRole: want, name: cn, serial: cert.SerialNumber.Text(16)}
		if got, err := parseIdentity(id.forwarded()); err != nil || got != id {
			t.Fatalf("forwarded %q reads back as %+v, %v", id.forwarded(), got, err)
		}
	})
}
