package client

import (
	"context"
	"crypto"
	"crypto/x509"
	"fmt"

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
	resp, err := invoke(ctx, c, c.o.changeAttemptTimeout, pb.ManagementClient.RenewAdminCertificate, &pb.RenewAdminCertificateRequest{PublicKey: pubDER, Name: name})
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
	if err := pki.WriteFileAtomic(cred.certPath, pki.EncodeCert(cert), 0o644); err != nil {
		return nil, fmt.Errorf("renew admin certificate: %w", err)
	}
	return cert, nil
}
