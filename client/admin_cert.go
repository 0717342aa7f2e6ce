package client

import (
	"context"
	"crypto"
	"crypto/x509"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/curatorproject/curator/internal/atomicfile"
	"github.com/curatorproject/curator/pki"
	pb "github.com/curatorproject/curator/proto"
)

// RenewAdminCert asks the cluster for a new admin certificate for the key
// of the config at configPath (cfg, as loaded from it), with the same
// name, and writes it over the config's certificate file, through a
// temporary file and a rename. The key stays. A certificate that is not
// for that key, or not from the config's CA, is refused and nothing is
// written. The certificate in use must not have expired: an expired one
// opens no connection, and only a new `agent init` credential or another
// admin can help then.
func (c *Client) RenewAdminCert(ctx context.Context, cfg *Config, configPath string) (*x509.Certificate, error) {
	cred, err := cfg.credential(configPath)
	if err != nil {
		return nil, fmt.Errorf("renew admin certificate: client config %s: %w", configPath, err)
	}
	pubDER, err := x509.MarshalPKIXPublicKey(cred.key.Public())
	if err != nil {
		return nil, fmt.Errorf("renew admin certificate: %w", err)
	}
	name, _, err := pki.Identity(cred.cert)
	if err != nil {
		return nil, fmt.Errorf("renew admin certificate: %s: %w", cred.certPath, err)
	}
	role, err := pki.OperatorRole(cred.cert)
	if err != nil {
		return nil, fmt.Errorf("renew admin certificate: %s: %w", cred.certPath, err)
	}
	resp, err := invoke(ctx, c, c.o.changeAttemptTimeout, pb.ManagementClient.RenewAdminCertificate, &pb.RenewAdminCertificateRequest{PublicKey: pubDER, Name: name, Role: role})
	if err != nil {
		return nil, err
	}
	cert, err := pki.DecodeCert(resp.GetCert())
	if err != nil {
		return nil, fmt.Errorf("renew admin certificate: the cluster's answer: %w", err)
	}
	pub, ok := cert.PublicKey.(interface{ Equal(crypto.PublicKey) bool })
	if !ok || !pub.Equal(cred.key.Public()) {
		return nil, fmt.Errorf("renew admin certificate: the cluster certified another key: keeping %s", cred.certPath)
	}
	if _, role, err := pki.Identity(cert); err != nil || role != pki.RoleAdmin {
		return nil, fmt.Errorf("renew admin certificate: the cluster's certificate is not an admin's (%q, %v): keeping %s", role, err, cred.certPath)
	}
	if err := pki.Verify(cert, cred.ca); err != nil {
		return nil, fmt.Errorf("renew admin certificate: %w: keeping %s", err, cred.certPath)
	}
	if err := atomicfile.Write(cred.certPath, pki.EncodeCert(cert), 0o644); err != nil {
		return nil, fmt.Errorf("renew admin certificate: %w", err)
	}
	return cert, nil
}

// IssueAdminCert asks the cluster for an admin certificate of a new key,
// for name with the operator role (pki.OperatorRoles), lasting ttl (0: a
// year), and writes a client config that uses it into dir (config.yaml,
// ca.crt, admin.crt, admin.key), naming the managers the cluster reports
// (those of cfg if it does not answer). It returns
// the certificate and the new config's path. dir must not hold a config
// already.
func (c *Client) IssueAdminCert(ctx context.Context, cfg *Config, name, role string, ttl time.Duration, dir string) (*x509.Certificate, string, error) {
	if _, err := pki.ParseOperatorRole(role); err != nil {
		return nil, "", fmt.Errorf("issue admin certificate: %w", err)
	}
	if _, err := os.Stat(filepath.Join(dir, ConfigFileName)); err == nil {
		return nil, "", fmt.Errorf("issue admin certificate: %s holds a client config already: name another folder", dir)
	}
	key, err := pki.NewKey()
	if err != nil {
		return nil, "", fmt.Errorf("issue admin certificate: %w", err)
	}
	pubDER, err := x509.MarshalPKIXPublicKey(key.Public())
	if err != nil {
		return nil, "", fmt.Errorf("issue admin certificate: %w", err)
	}
	req := &pb.RenewAdminCertificateRequest{PublicKey: pubDER, Name: name, Role: role}
	if ttl != 0 {
		req.Ttl = durationpb.New(ttl)
	}
	resp, err := invoke(ctx, c, c.o.changeAttemptTimeout, pb.ManagementClient.RenewAdminCertificate, req)
	if err != nil {
		return nil, "", err
	}
	cert, err := pki.DecodeCert(resp.GetCert())
	if err != nil {
		return nil, "", fmt.Errorf("issue admin certificate: the cluster's answer: %w", err)
	}
	ca, err := pki.DecodeCert(resp.GetCaCert())
	if err != nil {
		return nil, "", fmt.Errorf("issue admin certificate: the cluster's answer: %w", err)
	}
	if got, err := pki.OperatorRole(cert); err != nil || got != role {
		return nil, "", fmt.Errorf("issue admin certificate: the cluster's certificate is of role %q (%v), not %q", got, err, role)
	}
	if err := pki.Verify(cert, ca); err != nil {
		return nil, "", fmt.Errorf("issue admin certificate: %w", err)
	}
	// The managers of today, not those of the config, which may be of an
	// earlier day.
	managers := cfg.Managers
	if info, err := c.ClusterInfo(ctx); err == nil && len(info.GetManagers()) > 0 {
		managers = info.GetManagers()
	}
	path, err := WriteAdminConfig(dir, cfg.ClusterID, managers, ca, cert, key)
	if err != nil {
		return nil, "", err
	}
	return cert, path, nil
}

// AdminCerts lists the admin certificates the cluster issued.
func (c *Client) AdminCerts(ctx context.Context) ([]*pb.AdminCertificate, error) {
	resp, err := invoke(ctx, c, c.o.attemptTimeout, pb.ManagementClient.ListAdminCertificates, &pb.ListAdminCertificatesRequest{})
	return resp.GetCerts(), err
}

// RevokeAdminCert revokes the admin certificate of a serial, or every one
// of a name, and returns what it revoked.
func (c *Client) RevokeAdminCert(ctx context.Context, serialOrName string) ([]*pb.AdminCertificate, error) {
	resp, err := invoke(ctx, c, c.o.changeAttemptTimeout, pb.ManagementClient.RevokeAdminCertificate, &pb.RevokeAdminCertificateRequest{Cert: serialOrName})
	return resp.GetRevoked(), err
}

// Audit lists the audit trail: at most limit of the newest entries (0:
// all kept) recorded after revision after (0: any), oldest first, and
// the revision it read at.
func (c *Client) Audit(ctx context.Context, limit uint32, after int64) ([]*pb.AuditEntry, int64, error) {
	resp, err := invoke(ctx, c, c.o.attemptTimeout, pb.ManagementClient.ListAudit, &pb.ListAuditRequest{Limit: limit, AfterRevision: after})
	return resp.GetEntries(), resp.GetRevision(), err
}

// Operator reads the name and operator role of the certificate of the
// config at configPath (cfg, as loaded from it): who the CLI and the
// dashboard act as.
func (cfg *Config) Operator(configPath string) (name, role string, err error) {
	cred, err := cfg.credential(configPath)
	if err != nil {
		return "", "", fmt.Errorf("client config %s: %w", configPath, err)
	}
	name, _, err = pki.Identity(cred.cert)
	if err != nil {
		return "", "", err
	}
	role, err = pki.OperatorRole(cred.cert)
	return name, role, err
}
