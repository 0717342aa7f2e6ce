package curator

import (
	"cmp"
	"context"
	"fmt"
	"math/big"
	"slices"
	"strings"
	"time"

	"go.uber.org/zap"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/curatorproject/curator/curator/spec"
	"github.com/curatorproject/curator/curator/store"
	"github.com/curatorproject/curator/pki"
	pb "github.com/curatorproject/curator/proto"
)

// DefaultAdminName is the common name of an admin certificate when the
// request names none.
const DefaultAdminName = "admin"

// RenewAdminCertificate issues an admin certificate for the key in the
// request, with the name and operator role it asks (admin when it names
// none), and records it (store.AdminCertSave) so that `cluster certs`
// lists it and `cluster revoke-cert` can revoke it. An admin may ask for
// any: it can do anything to the cluster already, so certifying a key it
// names, its own or a new one, hands out nothing it did not have. Any
// other caller may only renew its own certificate (selfRenewal): the same
// name and role, lasting no longer than the one it holds was issued for.
// `cluster admin-cert` sends the key of the config it was run with, or of
// a new config it writes.
func (m *managementAPI) RenewAdminCertificate(ctx context.Context, req *pb.RenewAdminCertificateRequest) (*pb.RenewAdminCertificateResponse, error) {
	st, err := m.s.leaderFor()
	if err != nil {
		return nil, err
	}
	if err := spec.CheckManagementRequest(req); err != nil {
		return nil, err
	}
	validity := spec.AdminCertValidity
	if req.Ttl != nil {
		validity = req.Ttl.AsDuration()
	}
	if caller := identityFrom(ctx); caller.opRole != pki.OperatorAdmin {
		if validity, err = m.selfRenewal(ctx, caller, req); err != nil {
			return nil, err
		}
	}
	pub, err := spec.ParsePublicKey(req.PublicKey)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", spec.ErrInvalid, err)
	}
	name := req.Name
	if name == "" {
		name = DefaultAdminName
	}
	role := req.Role
	if role == "" {
		role = pki.OperatorAdmin
	}
	cert, err := st.PKI.CA.Issue(pki.CertRequest{PublicKey: pub, NodeID: name, Role: pki.RoleAdmin, OperatorRole: role, Validity: validity})
	if err != nil {
		return nil, fmt.Errorf("issue admin certificate: %w", err)
	}
	rec := &pb.AdminCertificate{
		Name:     name,
		Role:     role,
		Serial:   cert.SerialNumber.Text(16),
		Issued:   timestamppb.New(time.Now()),
		Expires:  timestamppb.New(cert.NotAfter),
		IssuedBy: identityFrom(ctx).name,
	}
	if err := store.AdminCertSave(ctx, st.Lead.Fence, rec); err != nil {
		return nil, err
	}
	m.s.logger(ctx).Info("issued an admin certificate", zap.String("name", name), zap.String("role", role),
		zap.String("serial", rec.Serial), zap.Time("expires", cert.NotAfter))
	return &pb.RenewAdminCertificateResponse{Cert: pki.EncodeCert(cert), CaCert: pki.EncodeCert(st.PKI.CA.Cert)}, nil
}

// selfRenewal checks that caller, of a role below admin, asks for a
// certificate of its own name and role, and returns how long it lasts:
// what the certificate it calls with was issued for (its record), or
// less if the request asks. A certificate the cluster has no record of,
// or a revoked one, renews nothing.
func (m *managementAPI) selfRenewal(ctx context.Context, caller identity, req *pb.RenewAdminCertificateRequest) (time.Duration, error) {
	if req.Name != caller.name || req.Role != caller.opRole {
		return 0, fmt.Errorf("%w: RenewAdminCertificate for %s (role %s) needs the admin role; the certificate %q holds %s, and may only renew itself (same name and role)",
			spec.ErrDenied, spec.QuoteShort(cmp.Or(req.Name, DefaultAdminName)), cmp.Or(req.Role, pki.OperatorAdmin), caller.name, caller.opRole)
	}
	certs, err := store.AdminCertList(ctx, m.s.cfg.Etcd)
	if err != nil {
		return 0, err
	}
	i := slices.IndexFunc(certs, func(c *pb.AdminCertificate) bool { return c.Serial == caller.serial })
	if i < 0 || certs[i].Revoked {
		return 0, fmt.Errorf("%w: the certificate %q (serial %s) is not one the cluster issued and has not revoked: an admin must issue a new one", spec.ErrDenied, caller.name, caller.serial)
	}
	life := certs[i].Expires.AsTime().Sub(certs[i].Issued.AsTime()).Round(time.Second)
	if req.Ttl != nil {
		if d := req.Ttl.AsDuration(); d > life {
			return 0, fmt.Errorf("%w: ttl %v: the certificate %q was issued for %v, and may renew itself for no longer", spec.ErrDenied, d, caller.name, life)
		} else {
			life = d
		}
	}
	return max(life, spec.MinAdminCertTTL), nil
}

// ListAdminCertificates lists the admin certificates the cluster issued,
// by name then expiry.
func (m *managementAPI) ListAdminCertificates(ctx context.Context, _ *pb.ListAdminCertificatesRequest) (*pb.ListAdminCertificatesResponse, error) {
	if _, err := m.s.leaderFor(); err != nil {
		return nil, err
	}
	certs, err := store.AdminCertList(ctx, m.s.cfg.Etcd)
	if err != nil {
		return nil, err
	}
	slices.SortFunc(certs, func(a, b *pb.AdminCertificate) int {
		if c := strings.Compare(a.Name, b.Name); c != 0 {
			return c
		}
		return a.Expires.AsTime().Compare(b.Expires.AsTime())
	})
	return &pb.ListAdminCertificatesResponse{Certs: certs}, nil
}

// RevokeAdminCertificate revokes the certificate of a serial, or every
// unrevoked one of a name. A serial the cluster did not issue (the
// certificate `agent init` wrote) is revoked by a record of its serial
// alone. The caller's own certificate is refused: revoke it with another.
func (m *managementAPI) RevokeAdminCertificate(ctx context.Context, req *pb.RevokeAdminCertificateRequest) (*pb.RevokeAdminCertificateResponse, error) {
	st, err := m.s.leaderFor()
	if err != nil {
		return nil, err
	}
	if err := spec.CheckManagementRequest(req); err != nil {
		return nil, err
	}
	certs, err := store.AdminCertList(ctx, m.s.cfg.Etcd)
	if err != nil {
		return nil, err
	}
	pick := revokeTargets(certs, req.Cert)
	if len(pick) == 0 {
		if done := revokedAlready(certs, req.Cert); len(done) > 0 {
			return nil, fmt.Errorf("%w: %s: nothing to revoke", spec.ErrPrecondition, done)
		}
		serial, ok := parseSerial(req.Cert)
		if !ok {
			return nil, fmt.Errorf("%w: no admin certificate has the serial or name %s (see cluster certs)", spec.ErrNotFound, spec.QuoteShort(req.Cert))
		}
		pick = []*pb.AdminCertificate{{Serial: serial}}
	}
	caller := identityFrom(ctx)
	now := timestamppb.New(time.Now())
	for _, c := range pick {
		if c.Serial == caller.serial {
			return nil, fmt.Errorf("%w: %s is the certificate this call was made with: revoke it with another admin certificate", spec.ErrInvalid, c.Serial)
		}
	}
	for _, c := range pick {
		c.Revoked, c.RevokedAt = true, now
		if err := store.AdminCertSave(ctx, st.Lead.Fence, c); err != nil {
			return nil, err
		}
		m.s.logger(ctx).Info("revoked an admin certificate", zap.String("name", c.Name), zap.String("serial", c.Serial))
	}
	return &pb.RevokeAdminCertificateResponse{Revoked: pick}, nil
}

// revokeTargets are the unrevoked certificates q names: the one of that
// serial, or else every one of that name.
func revokeTargets(certs []*pb.AdminCertificate, q string) []*pb.AdminCertificate {
	if serial, ok := parseSerial(q); ok {
		for _, c := range certs {
			if c.Serial == serial && !c.Revoked {
				return []*pb.AdminCertificate{c}
			}
		}
	}
	var out []*pb.AdminCertificate
	for _, c := range certs {
		if c.Name == q && !c.Revoked {
			out = append(out, c)
		}
	}
	return out
}

// revokedAlready says which revoked certificates q names, by serial or
// name, as "certificate SERIAL (NAME) was revoked already (at T)"; "" when
// q names none.
func revokedAlready(certs []*pb.AdminCertificate, q string) string {
	serial, isSerial := parseSerial(q)
	var out []string
	for _, c := range certs {
		if c.Revoked && (isSerial && c.Serial == serial || c.Name == q) {
			s := "certificate " + c.Serial
			if c.Name != "" {
				s += " (" + c.Name + ")"
			}
			s += " was revoked already"
			if c.RevokedAt != nil {
				s += " at " + c.RevokedAt.AsTime().UTC().Format(time.RFC3339)
			}
			out = append(out, s)
		}
	}
	return strings.Join(out, "; ")
}

// parseSerial reads a serial as `cluster certs` prints it (lowercase hex;
// colons and upper case, as openssl prints one, are taken too).
func parseSerial(s string) (string, bool) {
	s = strings.ToLower(strings.ReplaceAll(strings.TrimSpace(s), ":", ""))
	n, ok := new(big.Int).SetString(s, 16)
	if !ok || n.Sign() <= 0 || len(s) > 40 {
		return "", false
	}
	return n.Text(16), true
}

// ListAudit lists the audit trail, oldest first.
func (m *managementAPI) ListAudit(ctx context.Context, req *pb.ListAuditRequest) (*pb.ListAuditResponse, error) {
	if _, err := m.s.leaderFor(); err != nil {
		return nil, err
	}
	entries, rev, err := store.AuditList(ctx, m.s.cfg.Etcd, int64(req.Limit), req.AfterRevision)
	if err != nil {
		return nil, err
	}
	return &pb.ListAuditResponse{Entries: entries, Revision: rev}, nil
}
