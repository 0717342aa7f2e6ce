package curator

import (
	"context"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/curatorproject/curator/pki"
	pb "github.com/curatorproject/curator/proto"
)

// AdminCertValidity is how long an admin certificate lasts. A person
// renews it (`curator cluster admin-cert`), not an agent, so it does not
// follow cert_ttl, which may be minutes in a test cluster.
const AdminCertValidity = 365 * 24 * time.Hour

// DefaultAdminName is the common name of an admin certificate when the
// request names none.
const DefaultAdminName = "admin"

// RenewAdminCertificate issues an admin certificate for the key in the
// request. Only an admin may call it (authorize), and an admin can do
// anything to the cluster already, so certifying a key it names, its own
// or a new one, hands out nothing it did not have; `cluster admin-cert`
// sends the key of the config it was run with.
func (m *managementAPI) RenewAdminCertificate(ctx context.Context, req *pb.RenewAdminCertificateRequest) (*pb.RenewAdminCertificateResponse, error) {
	st, err := m.s.leaderFor()
	if err != nil {
		return nil, err
	}
	pub, err := parsePublicKey(req.PublicKey)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	name := req.Name
	if name == "" {
		name = DefaultAdminName
	} else if err := ValidateNodeName(name); err != nil {
		return nil, fmt.Errorf("%w: admin name: %v", ErrInvalid, err)
	}
	cert, err := st.pki.CA.Issue(pki.CertRequest{PublicKey: pub, NodeID: name, Role: pki.RoleAdmin, Validity: AdminCertValidity})
	if err != nil {
		return nil, fmt.Errorf("issue admin certificate: %w", err)
	}
	m.s.logger(ctx).Info("issued an admin certificate", zap.String("name", name), zap.Time("expires", cert.NotAfter))
	return &pb.RenewAdminCertificateResponse{Cert: pki.EncodeCert(cert), CaCert: pki.EncodeCert(st.pki.CA.Cert)}, nil
}
